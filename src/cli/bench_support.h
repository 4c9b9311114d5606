// What every `duet bench` measurement shares: timing, the memory it may use, and the machine's
// own memory bandwidth as the yardstick for memory-bound decoding.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/json.h"
#include "cli/commands.h"
#include "models/device_tensor_storage.h"

namespace duet::cli {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}
double median(std::vector<double> v);

// Checks that the flags name one source of weights: `--preset NAME --random-weights` or `--model DIR`.
// Returns true for random weights.
bool random_weights_flag(const Args& args);

// Where random weights' large tensors are made: in the GPU's memory, by the GPU, with --device cuda;
// null (host memory) otherwise.
std::shared_ptr<DeviceTensorStorage> random_weight_storage(const Runtime& rt);

// Throws when `bytes` of random weights would not fit: the device's free memory when they are made
// there (`device`), else this machine's memory.
void require_fits_in_memory(double bytes, const std::string& what, const DeviceTensorStorage* device = nullptr);

// Adds the machine's measured memory read/copy bandwidth and the decode figures relative to it:
// `decode_gbs` is the bytes one step reads divided by its time.
void add_bandwidth_figures(json::Value& out, Runtime& rt, const Args& args, double decode_gbs);

// The sequence state's capacity in tokens (rows): --ctx, at least `needed` (the prompt and the
// decoded steps), which is also the default. A decode step's kernels are laid out for the capacity
// (attention's splits cover the whole cache), so --ctx 4096 times them as `duet speak` runs them.
int64_t bench_capacity(const Args& args, int64_t needed);

// A fixed pseudo-random prompt of ids below `vocab`, the same on every machine.
std::vector<int32_t> bench_prompt(int64_t length, int64_t vocab);

// The benchmarks of the architectures that are not plain causal LMs, with run_bench's flags.
int bench_drama3(const Args& args);
// The codec's decode (whole and streamed) and encode real-time factors.
int bench_fish_codec(const Args& args);
int bench_transcribe(const Args& args);
// The cost of handing one product's result to the next, several ways (needs --device cuda).
int bench_product_chain(const Args& args);

// The fields every bench line starts with. A bench of a part that has no GPU kernels (the Fish codec,
// Transcribe's audio path) names `cpu_part`: its backend is then "cpu", whatever --device says.
void add_runtime_figures(json::Value& out, Runtime& rt, const char* cpu_part = nullptr);

}  // namespace duet::cli
