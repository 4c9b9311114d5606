// Bad input never crashes and never gives a wrong answer: each case below gets a clear one-line
// error naming the file, tensor or value and what was expected, and a non-zero exit from the CLI.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "backend/backend.h"
#include "base/error.h"
#include "base/thread_pool.h"
#include "models/generate.h"
#include "models/nemotron_h/model.h"
#include "test_support.h"

namespace duet {
namespace {

using duet::testing::fixture_dir;
using duet::testing::TempDir;

// Copies the tiny fixture's tensors into `dir`, letting `edit` drop or change entries first.
void write_modified_checkpoint(const std::string& dir, const std::function<void(std::vector<TensorToWrite>&)>& edit,
                               const Checkpoint& source) {
    std::vector<TensorToWrite> tensors;
    for (const TensorEntry* t : source.all()) tensors.push_back({t->name, t->dtype, t->shape, t->data, t->nbytes});
    edit(tensors);
    write_safetensors(dir + "/model.safetensors", tensors);
}

// Loading must throw duet::Error whose message contains every one of `needles`.
void expect_load_error(const std::string& dir, const std::vector<std::string>& needles) {
    try {
        nemotron_h::Model::load(dir);
        FAIL() << "loading " << dir << " should have failed";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
        for (const std::string& needle : needles) EXPECT_NE(message.find(needle), std::string::npos) << message;
    }
}

using duet::testing::CliResult;

CliResult run_cli(const std::string& arguments) { return duet::testing::run_duet(arguments); }

class BadInput : public ::testing::Test {
protected:
    void SetUp() override {
        duet::testing::write_bytes(dir_.file("config.json"), duet::testing::read_bytes(fixture_dir("nemotron_h_tiny") + "/config.json"));
    }
    TempDir dir_{"bad-input"};
    Checkpoint fixture_ = Checkpoint::open(fixture_dir("nemotron_h_tiny"));
};

TEST_F(BadInput, TruncatedCheckpoint) {
    const std::string bytes = duet::testing::read_bytes(fixture_dir("nemotron_h_tiny") + "/model.safetensors");
    for (size_t keep : {size_t{0}, size_t{5}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
        duet::testing::write_bytes(dir_.file("model.safetensors"), bytes.substr(0, keep));
        expect_load_error(dir_.path(), {"model.safetensors"});
    }
    const CliResult r = run_cli("info --model " + dir_.path());
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("model.safetensors"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST_F(BadInput, HeaderOffsetsOverlapOrRunPastTheEnd) {
    std::string bytes = duet::testing::read_bytes(fixture_dir("nemotron_h_tiny") + "/model.safetensors");
    uint64_t header_len;
    std::memcpy(&header_len, bytes.data(), 8);
    std::string header = bytes.substr(8, header_len);
    // Point the first tensor's data past the end of the file.
    const size_t at = header.find("\"data_offsets\":[0,");
    ASSERT_NE(at, std::string::npos) << "fixture header layout changed";
    std::string past = header;
    past.replace(at, 18, "\"data_offsets\":[9,");  // same length, shifted by 9 bytes: overlaps its neighbour
    duet::testing::write_bytes(dir_.file("model.safetensors"), bytes.substr(0, 8) + past + bytes.substr(8 + header_len));
    expect_load_error(dir_.path(), {"model.safetensors"});
    duet::testing::write_bytes(dir_.file("model.safetensors"), bytes.substr(0, bytes.size() - 64));
    expect_load_error(dir_.path(), {"model.safetensors"});
}

TEST_F(BadInput, WrongShapeAndWrongDtypeAreBothNamed) {
    std::vector<int32_t> ints(8, 1);
    write_modified_checkpoint(dir_.path(), [&](std::vector<TensorToWrite>& tensors) {
        for (TensorToWrite& t : tensors) {
            if (t.name == "lm_head.weight") t.shape = {256, 128};
            if (t.name == "backbone.layers.0.mixer.D") t = {t.name, DType::I32, {8}, ints.data(), 32};
        }
    }, fixture_);
    expect_load_error(dir_.path(), {"'lm_head.weight' has shape [256, 128], expected [512, 64]",
                                    "'backbone.layers.0.mixer.D' has dtype I32"});
}

TEST_F(BadInput, MissingTensorsAreListedTogether) {
    write_modified_checkpoint(dir_.path(), [](std::vector<TensorToWrite>& tensors) {
        std::erase_if(tensors, [](const TensorToWrite& t) {
            return t.name == "backbone.layers.2.mixer.q_proj.weight" ||
                   t.name == "backbone.layers.5.mixer.experts.3.down_proj.weight";
        });
    }, fixture_);
    expect_load_error(dir_.path(), {"2 tensor problems", "'backbone.layers.2.mixer.q_proj.weight' missing",
                                    "'backbone.layers.5.mixer.experts.3.down_proj.weight' missing"});
}

TEST_F(BadInput, MalformedConfigJson) {
    write_modified_checkpoint(dir_.path(), [](auto&) {}, fixture_);
    duet::testing::write_bytes(dir_.file("config.json"), "{\n  \"hidden_size\": 64,\n  \"vocab_size\": 512\n  \"oops\": 1\n}\n");
    expect_load_error(dir_.path(), {"config.json", "line 4"});
    const CliResult r = run_cli("generate --model " + dir_.path() + " --ids 1,2 -n 2");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_TRUE(r.out.empty());
    EXPECT_NE(r.err.find("config.json"), std::string::npos) << r.err;
}

TEST_F(BadInput, UnknownLayerKind) {
    write_modified_checkpoint(dir_.path(), [](auto&) {}, fixture_);
    std::string config = duet::testing::read_bytes(dir_.file("config.json"));
    const size_t at = config.find("\"mlp\",");
    ASSERT_NE(at, std::string::npos);
    config.replace(at, 6, "\"conv\",");
    duet::testing::write_bytes(dir_.file("config.json"), config);
    expect_load_error(dir_.path(), {"config.json", "layers_block_type[4] is 'conv'"});
}

TEST_F(BadInput, UnknownPatternSymbol) {
    EXPECT_THROW(nemotron_h::parse_layer_pattern("ME*X", "config.json"), Error);
}

TEST(BadRequest, IdsOutsideTheVocabulary) {
    const nemotron_h::Model model = nemotron_h::Model::load(fixture_dir("nemotron_h_tiny"));
    ThreadPool pool(1);
    auto backend = make_cpu_backend(&pool);
    nemotron_h::State state = model.new_state(*backend, 16);
    const std::vector<int32_t> ids = {1, 512};
    try {
        model.forward(*backend, state, ids, false);
        FAIL() << "id 512 is outside a vocabulary of 512";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("token id 512 at position 1"), std::string::npos) << e.what();
    }
    EXPECT_EQ(state.position(), 0) << "a refused request must leave the state untouched";
    const CliResult r = run_cli("generate --model " + fixture_dir("nemotron_h_tiny") + " --ids 1,99999 -n 2");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("token id 99999"), std::string::npos) << r.err;
    EXPECT_NE(run_cli("generate --model " + fixture_dir("nemotron_h_tiny") + " --ids 1,-3 -n 2").exit_code, 0);
    EXPECT_NE(run_cli("generate --model " + fixture_dir("nemotron_h_tiny") + " --ids 1,,2 -n 2").exit_code, 0);
}

TEST(BadRequest, PromptLongerThanTheStateCapacity) {
    const nemotron_h::Model model = nemotron_h::Model::load(fixture_dir("nemotron_h_tiny"));
    ThreadPool pool(1);
    auto backend = make_cpu_backend(&pool);
    nemotron_h::State state = model.new_state(*backend, 4);
    const std::vector<int32_t> ids = {1, 2, 3, 4, 5};
    EXPECT_THROW(model.forward(*backend, state, ids, false), Error);
    EXPECT_THROW(generate_greedy(model, *backend, state, std::vector<int32_t>{1, 2}, 4), Error);
    const CliResult r = run_cli("generate --model " + fixture_dir("nemotron_h_tiny") + " --ids 1,2,3,4,5 --ctx 4 -n 1");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("capacity 4"), std::string::npos) << r.err;
}

TEST(Cli, GenerateAndLogitsMatchTheLibrary) {
    const std::string dir = fixture_dir("nemotron_h_tiny");
    const CliResult r = run_cli("generate --model " + dir + " --ids 5,6,7 -n 4");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nemotron_h::Model model = nemotron_h::Model::load(dir);
    ThreadPool pool(1);
    auto backend = make_cpu_backend(&pool);
    nemotron_h::State state = model.new_state(*backend, 16);
    const auto out = generate_greedy(model, *backend, state, std::vector<int32_t>{5, 6, 7}, 4);
    std::string expected;
    for (size_t i = 0; i < out.ids.size(); ++i) expected += (i ? " " : "") + std::to_string(out.ids[i]);
    EXPECT_EQ(r.out, expected + "\n");

    TempDir tmp("logits");
    const CliResult l = run_cli("logits --model " + dir + " --ids 5,6,7 --out " + tmp.file("l.safetensors"));
    ASSERT_EQ(l.exit_code, 0) << l.err;
    const Checkpoint written = Checkpoint::open(tmp.file("l.safetensors"));
    EXPECT_EQ(written.get("logits").shape, (std::vector<int64_t>{3, 512}));
    EXPECT_EQ(written.get("logits").dtype, DType::F32);
}

TEST(Cli, UsageErrorsExitNonZero) {
    EXPECT_EQ(run_cli("").exit_code, 2);
    EXPECT_EQ(run_cli("frobnicate").exit_code, 2);
    EXPECT_EQ(run_cli("generate --ids 1").exit_code, 2);
    EXPECT_EQ(run_cli("generate --model /nonexistent --ids 1 -n 1").exit_code, 1);
    EXPECT_EQ(run_cli("bench --preset huge --random-weights").exit_code, 1);
}

}  // namespace
}  // namespace duet
