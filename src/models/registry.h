// The architectures duet runs, found by a checkpoint's config.json or by name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "models/causal_lm.h"
#include "models/device_tensor_storage.h"

namespace duet {

// The architecture of the model in `dir`: nemotron_h, qwen35_moe or drama3, from config.json's model_type.
std::string model_architecture(const std::string& dir);

// Loads `dir` (config.json + safetensors), choosing the architecture from the config's model_type.
std::unique_ptr<CausalLM> load_causal_lm(const std::string& dir);

// A model of architecture `arch` at a named preset size with deterministic random weights. With
// `device`, the large tensors are made in that device's memory (the model then runs only on that
// device's backend); the values are the same either way.
std::unique_ptr<CausalLM> random_causal_lm(const std::string& arch, const std::string& preset, uint64_t seed,
                                           ThreadPool* pool, std::shared_ptr<DeviceTensorStorage> device = nullptr);
// Bytes of weights random_causal_lm would allocate, to refuse sizes the machine cannot hold.
size_t random_causal_lm_bytes(const std::string& arch, const std::string& preset);

std::vector<std::string> architecture_names();

}  // namespace duet
