// Bad Qwen3.5-MoE checkpoints and requests: each gets a clear one-line error naming the file,
// tensor or value and what was expected, never a crash or a wrong answer.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/error.h"
#include "base/thread_pool.h"
#include "models/qwen35_moe/model.h"
#include "models/registry.h"
#include "test_support.h"

namespace duet::qwen35_moe {
namespace {

using duet::testing::fixture_dir;
using duet::testing::TempDir;

class Qwen35MoeBadInput : public ::testing::Test {
protected:
    void SetUp() override {
        config_ = duet::testing::read_bytes(fixture_dir("qwen35_moe_tiny") + "/config.json");
        write_checkpoint([](auto&) {});
        write_config(config_);
    }

    void write_config(const std::string& text) { duet::testing::write_bytes(dir_.file("config.json"), text); }

    // The fixture's tensors, after `edit` drops or changes entries.
    void write_checkpoint(const std::function<void(std::vector<TensorToWrite>&)>& edit) {
        std::vector<TensorToWrite> tensors;
        for (const TensorEntry* t : fixture_.all()) tensors.push_back({t->name, t->dtype, t->shape, t->data, t->nbytes});
        edit(tensors);
        write_safetensors(dir_.file("model.safetensors"), tensors);
    }

    // The fixture's config with `from` replaced by `to` (which must occur).
    std::string config_with(const std::string& from, const std::string& to) const {
        std::string text = config_;
        const size_t at = text.find(from);
        EXPECT_NE(at, std::string::npos) << from;
        if (at != std::string::npos) text.replace(at, from.size(), to);
        return text;
    }

    // Loading, directly and through the registry, throws a one-line error containing every needle.
    void expect_load_error(const std::vector<std::string>& needles) {
        for (int via_registry = 0; via_registry < 2; ++via_registry) {
            try {
                if (via_registry) {
                    load_causal_lm(dir_.path());
                } else {
                    Model::load(dir_.path());
                }
                ADD_FAILURE() << "loading should have failed";
            } catch (const Error& e) {
                const std::string message = e.what();
                EXPECT_EQ(message.find('\n'), std::string::npos) << message;
                for (const std::string& needle : needles) {
                    EXPECT_NE(message.find(needle), std::string::npos) << "missing '" << needle << "' in: " << message;
                }
            }
        }
    }

    TempDir dir_{"qwen-bad-input"};
    Checkpoint fixture_ = Checkpoint::open(fixture_dir("qwen35_moe_tiny"));
    std::string config_;
};

TEST_F(Qwen35MoeBadInput, TheUnmodifiedCopyLoads) { EXPECT_NO_THROW(Model::load(dir_.path())); }

TEST_F(Qwen35MoeBadInput, AttentionHeadCountsDisagreeWithTensorShapes) {
    write_config(config_with("\"num_attention_heads\": 4", "\"num_attention_heads\": 8"));
    expect_load_error({"'model.layers.3.self_attn.q_proj.weight' has shape [256, 64], expected [512, 64]",
                       "'model.layers.3.self_attn.o_proj.weight' has shape [64, 128], expected [64, 256]",
                       "'model.layers.7.self_attn.q_proj.weight'"});
}

TEST_F(Qwen35MoeBadInput, KeyValueHeadCountDisagreesWithTensorShapes) {
    write_config(config_with("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 4"));
    expect_load_error({"'model.layers.3.self_attn.k_proj.weight' has shape [64, 64], expected [128, 64]",
                       "'model.layers.3.self_attn.v_proj.weight'"});
}

TEST_F(Qwen35MoeBadInput, LinearHeadCountsDisagreeWithTensorShapes) {
    write_config(config_with("\"linear_num_value_heads\": 4", "\"linear_num_value_heads\": 8"));
    expect_load_error({"'model.layers.0.linear_attn.in_proj_qkv.weight' has shape [128, 64], expected [192, 64]",
                       "'model.layers.0.linear_attn.in_proj_a.weight' has shape [4, 64], expected [8, 64]",
                       "'model.layers.0.linear_attn.A_log' has shape [4], expected [8]"});
}

TEST_F(Qwen35MoeBadInput, HeadCountsThatDoNotDivide) {
    write_config(config_with("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3"));
    expect_load_error({"config.json", "num_attention_heads (4) is not a multiple of num_key_value_heads (3)"});
    write_config(config_with("\"linear_num_key_heads\": 2", "\"linear_num_key_heads\": 3"));
    expect_load_error({"linear_num_value_heads (4) is not a multiple of linear_num_key_heads (3)"});
}

TEST_F(Qwen35MoeBadInput, LayerTypesLengthMismatch) {
    write_config(config_with("\"num_hidden_layers\": 8", "\"num_hidden_layers\": 9"));
    expect_load_error({"config.json", "layer_types has 8 entries but num_hidden_layers is 9"});
    write_config(config_with("\"num_hidden_layers\": 8", "\"num_hidden_layers\": 7"));
    expect_load_error({"layer_types has 8 entries but num_hidden_layers is 7"});
}

TEST_F(Qwen35MoeBadInput, UnknownLayerType) {
    write_config(config_with("\"full_attention\"\n  ],", "\"sliding_attention\"\n  ],"));
    expect_load_error({"config.json", "layer_types[7] is 'sliding_attention'"});
}

TEST_F(Qwen35MoeBadInput, MissingFieldAndTooManyExpertsPerToken) {
    write_config(config_with("\"moe_intermediate_size\": 32,", ""));
    expect_load_error({"config.json", "missing moe_intermediate_size"});
    write_config(config_with("\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 9"));
    expect_load_error({"num_experts_per_tok (9) must be in [1, num_experts = 8]"});
}

TEST_F(Qwen35MoeBadInput, MissingTensorsAreListedTogether) {
    write_checkpoint([](std::vector<TensorToWrite>& tensors) {
        std::erase_if(tensors, [](const TensorToWrite& t) {
            return t.name == "model.layers.2.linear_attn.dt_bias" ||
                   t.name == "model.layers.5.mlp.experts.3.up_proj.weight" ||
                   t.name == "model.layers.7.self_attn.k_norm.weight";
        });
    });
    expect_load_error({"3 tensor problems", "'model.layers.2.linear_attn.dt_bias' missing",
                       "'model.layers.5.mlp.experts.3.up_proj.weight' missing",
                       "'model.layers.7.self_attn.k_norm.weight' missing"});
}

TEST_F(Qwen35MoeBadInput, NoEmbeddingTable) {
    write_checkpoint([](std::vector<TensorToWrite>& tensors) {
        std::erase_if(tensors, [](const TensorToWrite& t) { return t.name == "model.embed_tokens.weight"; });
    });
    expect_load_error({"model.language_model.embed_tokens.weight", "model.embed_tokens.weight"});
}

TEST_F(Qwen35MoeBadInput, CliExitsNonZeroWithOneLine) {
    write_config(config_with("\"num_attention_heads\": 4", "\"num_attention_heads\": 8"));
    const duet::testing::CliResult result = duet::testing::run_duet("info --model " + dir_.path());
    EXPECT_NE(result.exit_code, 0);
    const std::string& err = result.err;
    EXPECT_NE(err.find("q_proj.weight' has shape [256, 64]"), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST(Qwen35MoeBadRequest, IdsOutsideTheVocabularyLeaveTheStateUntouched) {
    const Model model = Model::load(fixture_dir("qwen35_moe_tiny"));
    ThreadPool pool(1);
    auto backend = make_cpu_backend(&pool);
    State state = model.new_state(*backend, 16);
    try {
        model.forward(*backend, state, std::vector<int32_t>{1, 512}, false);
        FAIL() << "id 512 is outside a vocabulary of 512";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("token id 512 at position 1"), std::string::npos) << e.what();
    }
    EXPECT_EQ(state.position(), 0);
    EXPECT_THROW(model.forward(*backend, state, std::vector<int32_t>(17, 1), false), Error);
    EXPECT_EQ(state.position(), 0);
}

TEST(Qwen35MoeBadRequest, AStateOfAnotherArchitectureIsRefused) {
    const std::unique_ptr<CausalLM> qwen = load_causal_lm(fixture_dir("qwen35_moe_tiny"));
    const std::unique_ptr<CausalLM> nemotron = load_causal_lm(fixture_dir("nemotron_h_tiny"));
    ThreadPool pool(1);
    auto backend = make_cpu_backend(&pool);
    auto state = nemotron->create_state(*backend, 8);
    EXPECT_THROW(qwen->forward(*backend, *state, std::vector<int32_t>{1}, false), Error);
}

}  // namespace
}  // namespace duet::qwen35_moe
