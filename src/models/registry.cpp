#include "models/registry.h"

#include <filesystem>

#include "base/error.h"
#include "base/json.h"
#include "models/nemotron_h/model.h"
#include "models/nemotron_h/presets.h"
#include "models/nemotron_h/random_weights.h"
#include "models/qwen35_moe/model.h"
#include "models/qwen35_moe/presets.h"
#include "models/qwen35_moe/random_weights.h"

namespace duet {

namespace {

// The architecture a config.json describes, from its model_type (Transcribe checkpoints keep the
// decoder's config under llm_config).
std::string architecture_of(const std::string& config_path) {
    const json::Value root = json::parse_file(config_path);
    require(root.is_object(), config_path, ": expected a JSON object");
    const json::Value* type = root.find("model_type");
    if (const json::Value* llm = root.find("llm_config"); llm != nullptr && llm->is_object()) {
        if (const json::Value* inner = llm->find("model_type")) type = inner;
    }
    require(type != nullptr, config_path, ": no model_type (expected one of: nemotron_h, qwen3_5_moe_text, fish_omni)");
    const std::string& name = type->as_string(config_path + ": model_type");
    if (name == "nemotron_h" || name == "nemotron_transcribe_llm") return "nemotron_h";
    // qwen3_5_moe is the multimodal wrapper whose text_config holds the text model.
    if (name == "qwen3_5_moe_text" || name == "qwen3_5_moe") return "qwen35_moe";
    if (name == "fish_omni") return "drama3";
    fail(config_path, ": model_type '", name,
         "' is not supported (expected one of: nemotron_h, qwen3_5_moe_text, fish_omni)");
}

}  // namespace

std::vector<std::string> architecture_names() { return {"nemotron_h", "qwen35_moe"}; }

namespace {

[[noreturn]] void fail_unknown_architecture(const std::string& arch) {
    std::string names;
    for (const std::string& name : architecture_names()) names += (names.empty() ? "" : ", ") + name;
    fail("unknown architecture '", arch, "' (expected one of: ", names, ")");
}

}  // namespace

std::string model_architecture(const std::string& dir) {
    const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
    require(std::filesystem::exists(config_path), dir, ": no config.json (expected a model directory)");
    return architecture_of(config_path);
}

std::unique_ptr<CausalLM> load_causal_lm(const std::string& dir) {
    const std::string arch = model_architecture(dir);
    if (arch == "nemotron_h") return std::make_unique<nemotron_h::Model>(nemotron_h::Model::load(dir));
    if (arch == "qwen35_moe") return std::make_unique<qwen35_moe::Model>(qwen35_moe::Model::load(dir));
    if (arch == "drama3") fail(dir, " is a Drama 3 text-to-speech model: use duet speak");
    fail(dir, ": architecture '", arch, "' has no loader");
}

size_t random_causal_lm_bytes(const std::string& arch, const std::string& preset) {
    if (arch == "nemotron_h") {
        const nemotron_h::Config c = nemotron_h::preset_config(preset);
        return static_cast<size_t>(c.parameter_count() + c.draft_parameter_count()) * 2;
    }
    if (arch == "qwen35_moe") return static_cast<size_t>(qwen35_moe::preset_config(preset).parameter_count()) * 2;
    fail_unknown_architecture(arch);
}

std::unique_ptr<CausalLM> random_causal_lm(const std::string& arch, const std::string& preset, uint64_t seed,
                                           ThreadPool* pool, std::shared_ptr<DeviceTensorStorage> device) {
    if (arch == "nemotron_h") {
        const nemotron_h::Config config = nemotron_h::preset_config(preset);
        return std::make_unique<nemotron_h::Model>(nemotron_h::Model::from_tensors(
            config, nemotron_h::make_random_weights(config, seed, pool, true, std::move(device))));
    }
    if (arch == "qwen35_moe") {
        const qwen35_moe::Config config = qwen35_moe::preset_config(preset);
        return std::make_unique<qwen35_moe::Model>(qwen35_moe::Model::from_tensors(
            config, qwen35_moe::make_random_weights(config, seed, pool, std::move(device))));
    }
    fail_unknown_architecture(arch);
}

}  // namespace duet
