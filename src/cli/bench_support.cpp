#include "cli/bench_support.h"

#include <unistd.h>

#include <algorithm>

#include "base/error.h"
#include "kernels/cpu/bandwidth.h"
#include "kernels/cpu/simd_level.h"

#ifdef DUET_HAVE_CUDA
#include "backend/cuda/cuda_tensor_storage.h"
#include "kernels/cuda/bandwidth.h"
#endif

namespace duet::cli {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

bool random_weights_flag(const Args& args) {
    const bool random = args.has("--random-weights");
    if (random == args.has("--model")) throw UsageError{"give either --preset NAME --random-weights or --model DIR"};
    if (random && !args.has("--preset")) throw UsageError{"--random-weights needs --preset NAME"};
    return random;
}

std::shared_ptr<DeviceTensorStorage> random_weight_storage(const Runtime& rt) {
#ifdef DUET_HAVE_CUDA
    if (rt.backend->name() == "cuda") return make_cuda_tensor_storage();
#endif
    (void)rt;
    return nullptr;
}

void require_fits_in_memory(double bytes, const std::string& what, const DeviceTensorStorage* device) {
    if (device != nullptr) {
        // Every weight ends up in device memory: the large ones are made there, the backend copies the rest.
        const double free = static_cast<double>(device->free_bytes());
        require(bytes < 0.9 * free, what, " needs ", bytes / 1e9, " GB of weights; the ", device->name(),
                " device has ", free / 1e9, " GB free");
        return;
    }
    const double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    require(bytes < 0.9 * have, what, " needs ", bytes / 1e9, " GB of weights; this machine has ", have / 1e9,
            " GB of memory");
}

int64_t bench_capacity(const Args& args, int64_t needed) { return args.integer_or("--ctx", needed, needed, 1 << 24); }

std::vector<int32_t> bench_prompt(int64_t length, int64_t vocab) {
    std::vector<int32_t> ids;
    uint64_t x = 0x2545F4914F6CDD1Dull;
    for (int64_t i = 0; i < length; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids.push_back(static_cast<int32_t>(x % static_cast<uint64_t>(vocab)));
    }
    return ids;
}

void add_runtime_figures(json::Value& out, Runtime& rt, const char* cpu_part) {
    if (cpu_part != nullptr) rt.note_cpu_part(cpu_part);
    out.set("backend", json::Value(std::string(cpu_part != nullptr ? "cpu" : rt.backend->name())));
    out.set("simd", json::Value(std::string(cpu::simd_level_name(cpu::active_simd_level()))));
    out.set("threads", json::Value(static_cast<int64_t>(rt.pool.size())));
}

void add_bandwidth_figures(json::Value& out, Runtime& rt, const Args& args, double decode_gbs) {
    const size_t bytes = static_cast<size_t>(args.integer_or("--bandwidth-mib", 1024, 64, 1 << 20)) << 20;
    double read_gbs = 0.0, copy_gbs = 0.0;
#ifdef DUET_HAVE_CUDA
    if (rt.backend->name() == "cuda") {
        read_gbs = cuda::measure_device_read_bandwidth_gbs(bytes);
        copy_gbs = cuda::measure_device_copy_bandwidth_gbs(bytes);
    }
#endif
    if (rt.backend->name() == "cpu") {
        const cpu::BandwidthResult memory = cpu::measure_memory_bandwidth(&rt.pool, bytes);
        read_gbs = memory.read_gbs;
        copy_gbs = memory.copy_gbs;
    }
    out.set("decode_gbs", json::Value(decode_gbs));
    out.set("memory_read_gbs", json::Value(read_gbs));
    out.set("memory_copy_gbs", json::Value(copy_gbs));
    out.set("decode_fraction_of_read", json::Value(decode_gbs / read_gbs));
    out.set("decode_fraction_of_copy", json::Value(decode_gbs / copy_gbs));
}

}  // namespace duet::cli
