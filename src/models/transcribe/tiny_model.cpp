#include "models/transcribe/tiny_model.h"

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "io/safetensors.h"
#include "models/nemotron_h/presets.h"
#include "models/nemotron_h/random_weights.h"
#include "models/nemotron_h/weights.h"
#include "models/transcribe/config.h"
#include "text/tokenizer.h"

namespace duet::transcribe {

nemotron_h::Config tiny_llm_config(int64_t hidden, int64_t vocab) {
    nemotron_h::Config c = nemotron_h::preset_config("tiny");
    c.hidden = hidden;
    c.vocab = vocab;
    c.validate("the tiny Transcribe LLM");
    return c;
}

void write_tiny_transcribe_model(const std::string& out_dir, const std::string& perception_dir,
                                 const std::string& tokenizer_path, uint64_t seed, ThreadPool* pool) {
    const std::string perception_config_path = (std::filesystem::path(perception_dir) / "config.json").string();
    const json::Value perception_root = json::parse_file(perception_config_path);
    const PerceptionConfig perception = parse_perception_config(perception_root, perception_config_path);
    const std::unique_ptr<text::Tokenizer> tokenizer = text::Tokenizer::load(tokenizer_path);
    const nemotron_h::Config llm = tiny_llm_config(perception.output_dim, tokenizer->id_count());

    std::filesystem::create_directories(out_dir);
    json::Value config = json::Value::object();
    config.set("model_type", json::Value("nemotron_transcribe"));
    config.set("perception", *perception_root.find("perception"));
    config.set("llm_config", nemotron_h::config_to_json(llm));
    std::ofstream(std::filesystem::path(out_dir) / "config.json") << json::dump(config);

    const Checkpoint source = Checkpoint::open(perception_dir);
    std::vector<TensorToWrite> tensors;
    for (const TensorEntry* t : source.all()) {
        if (std::string_view(t->name).starts_with("perception.")) {
            tensors.push_back({t->name, t->dtype, t->shape, t->data, t->nbytes});
        }
    }
    require(!tensors.empty(), perception_dir, ": no perception.* tensors");
    const std::shared_ptr<TensorSet> weights = nemotron_h::make_random_weights(llm, seed, pool, true);
    for (const TensorEntry* t : weights->all()) {
        tensors.push_back({std::string(nemotron_h::kLlmPrefix) + t->name, t->dtype, t->shape, t->data, t->nbytes});
    }
    write_safetensors((std::filesystem::path(out_dir) / "model.safetensors").string(), tensors);
    // Copied by content, so the copy is writable even when the source is not.
    std::ifstream tokenizer_in(tokenizer_path, std::ios::binary);
    std::ofstream(std::filesystem::path(out_dir) / "tokenizer.json", std::ios::binary) << tokenizer_in.rdbuf();
}

}  // namespace duet::transcribe
