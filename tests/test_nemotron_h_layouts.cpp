// The other forms a Nemotron-H checkpoint comes in: the legacy `hybrid_override_pattern`, experts
// stacked into rank-3 tensors, shards with an index, a bare `Infinity` in config.json. Each is made
// from the tiny fixture and must give exactly the fixture's logits.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "backend/backend.h"
#include "base/json.h"
#include "base/thread_pool.h"
#include "models/nemotron_h/model.h"
#include "models/nemotron_h/weights.h"
#include "test_support.h"

namespace duet::nemotron_h {
namespace {

using duet::testing::fixture_dir;
using duet::testing::TempDir;

class NemotronHLayouts : public ::testing::Test {
protected:
    std::vector<float> logits_of(const std::string& dir) {
        const Model model = Model::load(dir);
        State state = model.new_state(*backend_, 32);
        return model.forward(*backend_, state, prompt_, true);
    }
    std::vector<TensorToWrite> fixture_tensors() const {
        std::vector<TensorToWrite> out;
        for (const TensorEntry* t : fixture_.all()) out.push_back({t->name, t->dtype, t->shape, t->data, t->nbytes});
        return out;
    }
    void write_config(const std::string& text) { std::ofstream(dir_.file("config.json")) << text; }

    const std::string source_ = fixture_dir("nemotron_h_tiny");
    Checkpoint fixture_ = Checkpoint::open(source_);
    std::string config_ = duet::testing::read_bytes(source_ + "/config.json");
    std::vector<int32_t> prompt_ = {3, 141, 59, 265, 358, 97, 93, 238, 462, 64, 33};
    ThreadPool pool_{2};
    std::unique_ptr<Backend> backend_ = make_cpu_backend(&pool_);
    TempDir dir_{"layouts"};
};

TEST_F(NemotronHLayouts, LegacyHybridOverridePatternAndBareInfinity) {
    json::Value config = json::parse(config_, "config.json");
    json::Value legacy = json::Value::object();
    for (const auto& [key, value] : config.members()) {
        if (key != "layers_block_type") legacy.set(key, value);
    }
    legacy.set("hybrid_override_pattern", json::Value("ME*M-EM*E"));
    // Python's json writes a bare Infinity; transformers writes {"__float__": "Infinity"}.
    std::string text = json::dump(legacy);
    const std::string wrapped = "{\"__float__\":\"Infinity\"}";
    ASSERT_NE(text.find(wrapped), std::string::npos);
    text.replace(text.find(wrapped), wrapped.size(), "Infinity");
    write_config(text);
    write_safetensors(dir_.file("model.safetensors"), fixture_tensors());
    EXPECT_EQ(Model::load(dir_.path()).config().pattern(), "ME*M-EM*E");
    EXPECT_EQ(logits_of(dir_.path()), logits_of(source_));
}

TEST_F(NemotronHLayouts, RankThreeExpertTensors) {
    write_config(config_);
    // Stack each MoE layer's per-expert matrices into [experts, rows, cols].
    std::vector<TensorToWrite> tensors;
    std::map<std::string, std::vector<uint8_t>> stacked;
    std::map<std::string, std::vector<int64_t>> shapes;
    const std::regex expert(R"((.*)\.experts\.(\d+)\.(up|down)_proj\.weight)");
    for (const TensorToWrite& t : fixture_tensors()) {
        std::smatch m;
        if (!std::regex_match(t.name, m, expert)) {
            tensors.push_back(t);
            continue;
        }
        const std::string stack_name =
            m[3] == "up" ? fused_experts_up_name(m[1]) : fused_experts_down_name(m[1]);
        auto& bytes = stacked[stack_name];
        const size_t index = std::stoul(m[2]);
        bytes.resize(std::max(bytes.size(), (index + 1) * t.nbytes));
        std::memcpy(bytes.data() + index * t.nbytes, t.data, t.nbytes);
        shapes[stack_name] = t.shape;
    }
    for (auto& [name, bytes] : stacked) {
        const auto& s = shapes[name];
        tensors.push_back({name, DType::BF16, {8, s[0], s[1]}, bytes.data(), bytes.size()});
    }
    write_safetensors(dir_.file("model.safetensors"), tensors);
    EXPECT_EQ(logits_of(dir_.path()), logits_of(source_));
}

TEST_F(NemotronHLayouts, ShardedWithIndex) {
    write_config(config_);
    std::vector<TensorToWrite> all = fixture_tensors();
    const size_t half = all.size() / 2;
    std::vector<TensorToWrite> first(all.begin(), all.begin() + half), second(all.begin() + half, all.end());
    write_safetensors(dir_.file("model-00001-of-00002.safetensors"), first);
    write_safetensors(dir_.file("model-00002-of-00002.safetensors"), second);
    json::Value map = json::Value::object();
    for (size_t i = 0; i < all.size(); ++i) {
        map.set(all[i].name, json::Value(i < half ? "model-00001-of-00002.safetensors"
                                                  : "model-00002-of-00002.safetensors"));
    }
    json::Value index = json::Value::object();
    index.set("metadata", json::Value::object());
    index.set("weight_map", map);
    std::ofstream(dir_.file("model.safetensors.index.json")) << json::dump(index);
    EXPECT_EQ(logits_of(dir_.path()), logits_of(source_));
}

TEST_F(NemotronHLayouts, LlmPrefixBesideOtherTensors) {
    // A Transcribe checkpoint: the LLM under `llm.` (draft module included), the audio path beside it.
    write_config(config_);
    std::vector<TensorToWrite> tensors;
    for (TensorToWrite t : fixture_tensors()) {
        t.name = std::string(kLlmPrefix) + t.name;
        tensors.push_back(t);
    }
    const float bias = 0.5f;
    tensors.push_back({"perception.proj.bias", DType::F32, {1}, &bias, sizeof bias});
    write_safetensors(dir_.file("model.safetensors"), tensors);
    const Model model = Model::load(dir_.path());
    EXPECT_EQ(model.layout(), "hub under llm.");
    EXPECT_EQ(model.has_draft(), Model::load(source_).has_draft());
    EXPECT_EQ(logits_of(dir_.path()), logits_of(source_));
}

}  // namespace
}  // namespace duet::nemotron_h
