#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/error.h"
#include "test_support.h"
#include "io/safetensors.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

using duet::testing::error_of;

using duet::testing::read_bytes;

void write_bytes(const std::string& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file from a hand-written header, for inputs the writer refuses to make.
void write_raw(const std::string& path, std::string_view header, std::string_view data) {
    std::string bytes(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(n >> (8 * i));
    bytes += header;
    bytes += data;
    write_bytes(path, bytes);
}

class SafetensorsTest : public ::testing::Test {
protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = fs::temp_directory_path() /
               (std::string("duet_safetensors_") + std::to_string(::getpid()) + "_" + info->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::string path(const std::string& name) const { return (dir_ / name).string(); }

    // Opening the file with this header and data must fail; returns the message.
    std::string open_error(std::string_view header, std::string_view data = std::string_view()) {
        std::string p = path("bad.safetensors");
        write_raw(p, header, data);
        return error_of([&] { SafetensorsFile::open(p); });
    }

    fs::path dir_;
};

struct SampleTensors {
    std::vector<float> f32 = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, 65504.0f};
    std::vector<uint16_t> bf16 = {0x3F80, 0xC000, 0x3F00, 0x4049};  // 1, -2, 0.5, 3.140625
    std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x0001, 0x7BFF};   // 1, -2, 2^-24, 65504
    std::vector<uint8_t> f8 = {0x38, 0x7E, 0x01, 0xB8, 0x00};       // 1, 448, 2^-9, -1, 0
    std::vector<int8_t> i8 = {-128, 0, 127};
    std::vector<uint8_t> u8 = {255};
    std::vector<int32_t> i32 = {-7, 1 << 30};
    std::vector<int64_t> i64 = {INT64_MIN, INT64_MAX};

    std::vector<TensorToWrite> list() const {
        return {
            {"weights.f32", DType::F32, {2, 3}, f32.data(), f32.size() * 4},
            {"weights.bf16", DType::BF16, {4}, bf16.data(), bf16.size() * 2},
            {"weights.f16", DType::F16, {2, 2}, f16.data(), f16.size() * 2},
            {"weights.f8", DType::F8_E4M3, {5}, f8.data(), f8.size()},
            {"ints.i8", DType::I8, {3}, i8.data(), i8.size()},
            {"ints.u8", DType::U8, {1, 1, 1}, u8.data(), u8.size()},
            {"ints.i32", DType::I32, {2}, i32.data(), i32.size() * 4},
            {"ints.i64", DType::I64, {2}, i64.data(), i64.size() * 8},
            {"empty", DType::F32, {0, 4}, nullptr, 0},
            {"scalar", DType::F32, {}, f32.data(), 4},
        };
    }
};

void expect_bytes(const TensorEntry& t, const void* data, size_t nbytes) {
    ASSERT_EQ(t.nbytes, nbytes) << t.name;
    if (nbytes > 0) {
        EXPECT_EQ(std::memcmp(t.data, data, nbytes), 0) << t.name;
    }
}

TEST_F(SafetensorsTest, WriteThenReadBack) {
    SampleTensors sample;
    std::string p = path("model.safetensors");
    write_safetensors(p, sample.list(), {{"format", "pt"}, {"note", "quote \" and \\ and \n"}});

    std::string bytes = read_bytes(p);
    uint64_t header_size = 0;
    for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | static_cast<uint8_t>(bytes[i]);
    EXPECT_EQ(header_size % 8, 0u);

    SafetensorsFile file = SafetensorsFile::open(p);
    EXPECT_EQ(file.path(), p);
    ASSERT_EQ(file.tensors().size(), 10u);
    for (size_t i = 1; i < file.tensors().size(); ++i) {
        EXPECT_LT(file.tensors()[i - 1].name, file.tensors()[i].name);
    }
    EXPECT_EQ(file.metadata().size(), 2u);
    EXPECT_EQ(file.metadata().at("format"), "pt");
    EXPECT_EQ(file.metadata().at("note"), "quote \" and \\ and \n");

    for (const TensorToWrite& w : sample.list()) {
        const TensorEntry* t = file.find(w.name);
        ASSERT_NE(t, nullptr) << w.name;
        EXPECT_EQ(t->dtype, w.dtype) << w.name;
        EXPECT_EQ(t->shape, w.shape) << w.name;
        EXPECT_EQ(t->file, p);
        expect_bytes(*t, w.data, w.nbytes);
    }
    EXPECT_EQ(file.find("empty")->numel(), 0);
    EXPECT_EQ(file.find("scalar")->numel(), 1);
    EXPECT_EQ(file.find("weights.f32")->numel(), 6);
    EXPECT_EQ(file.find("nope"), nullptr);
    // The first tensor written starts the data section, which the padding keeps 8-byte aligned
    // (the mapping itself starts on a page boundary).
    EXPECT_EQ(reinterpret_cast<uintptr_t>(file.find("weights.f32")->data) % 8, 0u);
}

TEST_F(SafetensorsTest, NoMetadataAndNoTensors) {
    std::string p = path("empty.safetensors");
    write_safetensors(p, {});
    SafetensorsFile file = SafetensorsFile::open(p);
    EXPECT_TRUE(file.tensors().empty());
    EXPECT_TRUE(file.metadata().empty());
}

TEST_F(SafetensorsTest, ReadF32ConvertsEveryFloatType) {
    SampleTensors sample;
    std::string p = path("model.safetensors");
    write_safetensors(p, sample.list());
    SafetensorsFile file = SafetensorsFile::open(p);

    EXPECT_EQ(read_f32(*file.find("weights.f32")), sample.f32);
    EXPECT_EQ(read_f32(*file.find("weights.bf16")), (std::vector<float>{1.0f, -2.0f, 0.5f, 3.140625f}));
    EXPECT_EQ(read_f32(*file.find("weights.f16")),
              (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24), 65504.0f}));
    EXPECT_EQ(read_f32(*file.find("weights.f8")), (std::vector<float>{1.0f, 448.0f, 0.001953125f, -1.0f, 0.0f}));
    EXPECT_TRUE(read_f32(*file.find("empty")).empty());
    EXPECT_EQ(read_f32(*file.find("scalar")), std::vector<float>{1.0f});

    EXPECT_EQ(error_of([&] { read_f32(*file.find("ints.i32")); }),
              "tensor 'ints.i32' has dtype I32, expected a floating-point type");
    EXPECT_NE(error_of([&] { read_f32(*file.find("ints.u8")); }).find("dtype U8"), std::string::npos);
}

TEST_F(SafetensorsTest, ReadF32HandlesUnalignedData) {
    std::vector<uint8_t> buffer(1 + 3 * 4);
    float values[3] = {1.5f, -0.25f, 7.0f};
    std::memcpy(buffer.data() + 1, values, sizeof values);
    TensorEntry t{"odd", DType::F32, {3}, buffer.data() + 1, 12, "memory"};
    EXPECT_EQ(read_f32(t), (std::vector<float>{1.5f, -0.25f, 7.0f}));

    uint16_t halves[2] = {0x3F80, 0xBF80};
    std::memcpy(buffer.data() + 1, halves, sizeof halves);
    TensorEntry h{"odd16", DType::BF16, {2}, buffer.data() + 1, 4, "memory"};
    EXPECT_EQ(read_f32(h), (std::vector<float>{1.0f, -1.0f}));

    TensorEntry wrong{"short", DType::F32, {4}, buffer.data(), 12, "memory"};
    EXPECT_NE(error_of([&] { read_f32(wrong); }).find("tensor 'short'"), std::string::npos);
    TensorEntry negative{"neg", DType::F32, {-1}, buffer.data(), 0, "memory"};
    EXPECT_NE(error_of([&] { read_f32(negative); }).find("negative"), std::string::npos);
}

TEST_F(SafetensorsTest, ShardedCheckpointWithIndex) {
    std::vector<float> a = {1, 2, 3, 4};
    std::vector<uint16_t> b = {0x3F80, 0x4000};
    std::vector<float> c = {5, 6};
    write_safetensors(path("model-00001-of-00002.safetensors"),
                      {{"layers.0.w", DType::F32, {2, 2}, a.data(), 16}, {"embed", DType::BF16, {2}, b.data(), 4}});
    write_safetensors(path("model-00002-of-00002.safetensors"), {{"layers.1.w", DType::F32, {2}, c.data(), 8}});
    write_bytes(path("model.safetensors.index.json"),
                R"({"metadata": {"total_size": 28}, "weight_map": {
                      "layers.0.w": "model-00001-of-00002.safetensors",
                      "embed": "model-00001-of-00002.safetensors",
                      "layers.1.w": "model-00002-of-00002.safetensors"}})");
    // A stray file that the index does not mention is ignored.
    write_safetensors(path("stray.safetensors"), {{"stray", DType::F32, {1}, c.data(), 4}});

    Checkpoint ckpt = Checkpoint::open(dir_.string());
    EXPECT_EQ(ckpt.path(), dir_.string());
    EXPECT_EQ(ckpt.size(), 3u);
    EXPECT_EQ(ckpt.total_bytes(), 28u);
    std::vector<const TensorEntry*> all = ckpt.all();
    ASSERT_EQ(all.size(), 3u);
    EXPECT_EQ(all[0]->name, "embed");
    EXPECT_EQ(all[1]->name, "layers.0.w");
    EXPECT_EQ(all[2]->name, "layers.1.w");
    EXPECT_EQ(ckpt.get("layers.1.w").file, path("model-00002-of-00002.safetensors"));
    EXPECT_EQ(read_f32(ckpt.get("layers.0.w")), a);
    EXPECT_EQ(read_f32(ckpt.get("embed")), (std::vector<float>{1.0f, 2.0f}));
    EXPECT_EQ(ckpt.find("stray"), nullptr);

    // Entries keep their address when the checkpoint moves.
    const TensorEntry* before = ckpt.find("layers.1.w");
    Checkpoint moved = std::move(ckpt);
    EXPECT_EQ(moved.find("layers.1.w"), before);
    EXPECT_EQ(read_f32(*before), c);
    std::vector<Checkpoint> many;
    many.push_back(std::move(moved));
    many.push_back(Checkpoint::open(path("stray.safetensors")));
    many.push_back(Checkpoint::open(path("stray.safetensors")));
    EXPECT_EQ(many[0].find("layers.1.w"), before);
    EXPECT_EQ(read_f32(*before), c);
}

TEST_F(SafetensorsTest, CheckpointFromFileSingleOrDirectoryOfFiles) {
    std::vector<float> x = {1, 2};
    write_safetensors(path("b.safetensors"), {{"b", DType::F32, {2}, x.data(), 8}});
    write_safetensors(path("a.safetensors"), {{"a", DType::F32, {1}, x.data(), 4}});
    write_bytes(path("notes.txt"), "not a checkpoint");

    Checkpoint files = Checkpoint::open(dir_.string());
    EXPECT_EQ(files.size(), 2u);
    EXPECT_EQ(files.get("a").file, path("a.safetensors"));
    EXPECT_EQ(files.get("b").file, path("b.safetensors"));

    Checkpoint single_file = Checkpoint::open(path("b.safetensors"));
    EXPECT_EQ(single_file.size(), 1u);
    EXPECT_NE(single_file.find("b"), nullptr);

    // model.safetensors wins over other files in the directory.
    write_safetensors(path("model.safetensors"), {{"m", DType::F32, {2}, x.data(), 8}});
    Checkpoint single = Checkpoint::open(dir_.string());
    EXPECT_EQ(single.size(), 1u);
    EXPECT_NE(single.find("m"), nullptr);
}

TEST_F(SafetensorsTest, CheckpointErrors) {
    EXPECT_EQ(error_of([&] { Checkpoint::open(dir_.string()); }),
              dir_.string() + ": no model.safetensors, model.safetensors.index.json or *.safetensors file");
    EXPECT_NE(error_of([&] { Checkpoint::open(path("nowhere")); }).find(path("nowhere")), std::string::npos);

    std::vector<float> x = {1, 2};
    write_safetensors(path("a.safetensors"), {{"same", DType::F32, {1}, x.data(), 4}});
    write_safetensors(path("b.safetensors"), {{"same", DType::F32, {1}, x.data(), 4}});
    std::string duplicate = error_of([&] { Checkpoint::open(dir_.string()); });
    EXPECT_NE(duplicate.find("'same'"), std::string::npos) << duplicate;
    EXPECT_NE(duplicate.find("b.safetensors"), std::string::npos) << duplicate;
}

TEST_F(SafetensorsTest, GetMissingTensorNamesIt) {
    std::vector<float> x = {1};
    write_safetensors(path("model.safetensors"), {{"present", DType::F32, {1}, x.data(), 4}});
    Checkpoint ckpt = Checkpoint::open(dir_.string());
    EXPECT_EQ(error_of([&] { ckpt.get("lm_head.weight"); }), dir_.string() + ": missing tensor 'lm_head.weight'");
}

TEST_F(SafetensorsTest, IndexNamingMissingShard) {
    std::vector<float> x = {1};
    write_safetensors(path("model-1.safetensors"), {{"a", DType::F32, {1}, x.data(), 4}});
    write_bytes(path("model.safetensors.index.json"),
                R"({"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}})");
    std::string message = error_of([&] { Checkpoint::open(dir_.string()); });
    EXPECT_NE(message.find("model-2.safetensors"), std::string::npos) << message;
    EXPECT_NE(message.find("'b'"), std::string::npos) << message;
}

TEST_F(SafetensorsTest, IndexNamingTensorTheShardLacks) {
    std::vector<float> x = {1};
    write_safetensors(path("model-1.safetensors"), {{"a", DType::F32, {1}, x.data(), 4}});
    write_bytes(path("model.safetensors.index.json"),
                R"({"weight_map": {"a": "model-1.safetensors", "ghost": "model-1.safetensors"}})");
    std::string message = error_of([&] { Checkpoint::open(dir_.string()); });
    EXPECT_NE(message.find("'ghost'"), std::string::npos) << message;
    EXPECT_NE(message.find("model-1.safetensors"), std::string::npos) << message;
}

TEST_F(SafetensorsTest, IndexMalformed) {
    write_bytes(path("model.safetensors.index.json"), R"({"metadata": {}})");
    EXPECT_NE(error_of([&] { Checkpoint::open(dir_.string()); }).find("weight_map"), std::string::npos);
    write_bytes(path("model.safetensors.index.json"), R"({"weight_map": {}})");
    EXPECT_NE(error_of([&] { Checkpoint::open(dir_.string()); }).find("lists no tensors"), std::string::npos);
    write_bytes(path("model.safetensors.index.json"), R"({"weight_map": {"a": 3}})");
    EXPECT_NE(error_of([&] { Checkpoint::open(dir_.string()); }).find("expected a string"), std::string::npos);
    write_bytes(path("model.safetensors.index.json"), R"({"weight_map": {"a": "../outside.safetensors"}})");
    EXPECT_NE(error_of([&] { Checkpoint::open(dir_.string()); }).find("outside"), std::string::npos);
    write_bytes(path("model.safetensors.index.json"), R"({"weight_map": )");
    EXPECT_NE(error_of([&] { Checkpoint::open(dir_.string()); }).find("line 1"), std::string::npos);
}

TEST_F(SafetensorsTest, EveryTruncationThrows) {
    SampleTensors sample;
    std::string good = path("good.safetensors");
    write_safetensors(good, sample.list(), {{"format", "pt"}});
    std::string bytes = read_bytes(good);
    ASSERT_GT(bytes.size(), 100u);
    std::string cut = path("cut.safetensors");
    for (size_t n = 0; n < bytes.size(); ++n) {
        write_bytes(cut, std::string_view(bytes).substr(0, n));
        std::string message = error_of([&] { SafetensorsFile::open(cut); });
        EXPECT_NE(message.find(cut), std::string::npos) << "cut at " << n << ": " << message;
    }
    write_bytes(cut, bytes);
    EXPECT_NO_THROW(SafetensorsFile::open(cut));
}

TEST_F(SafetensorsTest, TooShortForHeader) {
    std::string p = path("tiny.safetensors");
    write_bytes(p, "abcde");
    EXPECT_EQ(error_of([&] { SafetensorsFile::open(p); }),
              p + ": file is 5 bytes, too short for a safetensors header (expected at least 8)");
}

TEST_F(SafetensorsTest, HeaderLengthPastTheEnd) {
    std::string p = path("bad.safetensors");
    std::string bytes(8, '\0');
    bytes[0] = 100;
    bytes += "{}";
    write_bytes(p, bytes);
    std::string message = error_of([&] { SafetensorsFile::open(p); });
    EXPECT_NE(message.find("header length 100 runs past the end"), std::string::npos) << message;

    bytes.assign(8, '\xff');
    write_bytes(p, bytes);
    message = error_of([&] { SafetensorsFile::open(p); });
    EXPECT_NE(message.find("100 MB"), std::string::npos) << message;
}

TEST_F(SafetensorsTest, HeaderNotJson) {
    std::string message = open_error("{\"a\": nope}");
    EXPECT_NE(message.find("bad.safetensors: header: line 1, column 7"), std::string::npos) << message;
    EXPECT_NE(open_error("[1, 2]").find("expected a JSON object"), std::string::npos);
    EXPECT_NE(open_error(std::string_view("\0\0\0\0", 4)).find("line 1"), std::string::npos);
}

TEST_F(SafetensorsTest, UnknownDtype) {
    std::string message = open_error(R"({"x": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})",
                                     std::string(8, '\0'));
    EXPECT_NE(message.find("tensor 'x': unknown dtype 'F64'"), std::string::npos) << message;
}

TEST_F(SafetensorsTest, ShapeAndOffsetSizeMismatch) {
    std::string message = open_error(R"({"x": {"dtype": "F32", "shape": [3, 4], "data_offsets": [0, 8]}})",
                                     std::string(8, '\0'));
    EXPECT_NE(message.find("tensor 'x': data_offsets [0, 8] hold 8 bytes, but dtype F32 shape [3, 4] needs 48"),
              std::string::npos)
        << message;
}

TEST_F(SafetensorsTest, OverlappingOffsets) {
    std::string message = open_error(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                         "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
                                         "z": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})",
                                     std::string(12, '\0'));
    EXPECT_NE(message.find("'a'"), std::string::npos) << message;
    EXPECT_NE(message.find("'b'"), std::string::npos) << message;
    EXPECT_NE(message.find("overlap"), std::string::npos) << message;

    // The same bytes listed twice also overlap; an empty tensor inside another's range does not.
    EXPECT_NE(open_error(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                             "b": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]}})",
                         std::string(8, '\0'))
                  .find("overlap"),
              std::string::npos);
    std::string p = path("ok.safetensors");
    write_raw(p,
              R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                  "e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [4, 4]}})",
              std::string(8, '\0'));
    EXPECT_EQ(SafetensorsFile::open(p).tensors().size(), 2u);
}

TEST_F(SafetensorsTest, OffsetsPastTheEnd) {
    std::string p = path("model.safetensors");
    write_raw(p, R"({"lm_head.weight": {"dtype": "BF16", "shape": [2048], "data_offsets": [0, 4096]}})",
              std::string(2000, '\0'));
    EXPECT_EQ(error_of([&] { SafetensorsFile::open(p); }),
              p + ": tensor 'lm_head.weight': data_offsets [0, 4096] run past the end of the data (2000 bytes)");
}

TEST_F(SafetensorsTest, NegativeShape) {
    std::string message = open_error(R"({"x": {"dtype": "F32", "shape": [-1, 2], "data_offsets": [0, 0]}})");
    EXPECT_NE(message.find("tensor 'x': shape [-1, 2] has a negative dimension"), std::string::npos) << message;
}

TEST_F(SafetensorsTest, OtherMalformedEntries) {
    const std::string data(16, '\0');
    struct Case {
        const char* header;
        const char* expected;
    } cases[] = {
        {R"({"x": 5})", "expected an object"},
        {R"({"x": {"shape": [1], "data_offsets": [0, 4]}})", "missing 'dtype'"},
        {R"({"x": {"dtype": "F32", "data_offsets": [0, 4]}})", "missing 'shape'"},
        {R"({"x": {"dtype": "F32", "shape": [1]}})", "missing 'data_offsets'"},
        {R"({"x": {"dtype": 3, "shape": [1], "data_offsets": [0, 4]}})", "dtype: expected a string"},
        {R"({"x": {"dtype": "F32", "shape": 1, "data_offsets": [0, 4]}})", "shape: expected an array"},
        {R"({"x": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", "expected an integer"},
        {R"({"x": {"dtype": "F32", "shape": ["1"], "data_offsets": [0, 4]}})", "expected an integer"},
        {R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", "expected [begin, end]"},
        {R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})", "expected [begin, end]"},
        {R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", "end before they begin"},
        {R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", "must not be negative"},
        {R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 1e30]}})", "out of range"},
        {R"({"x": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})",
         "too many elements"},
        {R"({"x": {"dtype": "I64", "shape": [4611686018427387904], "data_offsets": [0, 4]}})", "too large"},
        {R"({"x": {"dtype": "F32", "shape": [0, 9223372036854775807, 9223372036854775807], "data_offsets": [0, 4]}})",
         "hold 4 bytes"},
        {R"({"__metadata__": {"format": 1}})", "__metadata__: 'format': expected a string"},
        {R"({"__metadata__": []})", "__metadata__: expected an object"},
        {R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
         "duplicate key"},
    };
    for (const Case& c : cases) {
        std::string message = open_error(c.header, data);
        EXPECT_NE(message.find(c.expected), std::string::npos) << c.header << " -> " << message;
        EXPECT_NE(message.find("bad.safetensors"), std::string::npos) << message;
    }
}

TEST_F(SafetensorsTest, NotARegularFile) {
    std::string message = error_of([&] { SafetensorsFile::open(dir_.string()); });
    EXPECT_NE(message.find(dir_.string()), std::string::npos) << message;
    std::string missing = path("missing.safetensors");
    message = error_of([&] { SafetensorsFile::open(missing); });
    EXPECT_NE(message.find(missing), std::string::npos) << message;
    EXPECT_NE(message.find("No such file"), std::string::npos) << message;
}

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
    std::vector<float> x = {1, 2, 3};
    std::string p = path("out.safetensors");
    std::string message = error_of([&] { write_safetensors(p, {{"x", DType::F32, {2, 2}, x.data(), 12}}); });
    EXPECT_NE(message.find(p), std::string::npos) << message;
    EXPECT_NE(message.find("'x'"), std::string::npos) << message;
    EXPECT_NE(message.find("expected 16"), std::string::npos) << message;
    EXPECT_NE(error_of([&] {
                  write_safetensors(p, {{"x", DType::F32, {1}, x.data(), 4}, {"x", DType::F32, {1}, x.data(), 4}});
              }).find("twice"),
              std::string::npos);
    EXPECT_NE(error_of([&] { write_safetensors(p, {{"x", DType::F32, {-3}, x.data(), 12}}); }).find("negative"),
              std::string::npos);
    EXPECT_NE(error_of([&] { write_safetensors(p, {{"x", DType::F32, {3}, nullptr, 12}}); }).find("null"),
              std::string::npos);
    EXPECT_NE(error_of([&] { write_safetensors(p, {{"__metadata__", DType::F32, {1}, x.data(), 4}}); })
                  .find("reserved"),
              std::string::npos);
    EXPECT_FALSE(fs::exists(p));
    std::string unwritable = path("no_such_dir/out.safetensors");
    message = error_of([&] { write_safetensors(unwritable, {{"x", DType::F32, {3}, x.data(), 12}}); });
    EXPECT_NE(message.find(unwritable), std::string::npos) << message;
}

TEST(SafetensorsFixture, NemotronTinyCheckpoint) {
    const std::string dir = DUET_FIXTURES_DIR "/nemotron_h_tiny";
    Checkpoint ckpt = Checkpoint::open(dir);
    EXPECT_EQ(ckpt.size(), 136u);
    const TensorEntry& lm_head = ckpt.get("lm_head.weight");
    EXPECT_EQ(lm_head.dtype, DType::BF16);
    EXPECT_EQ(lm_head.shape, (std::vector<int64_t>{512, 64}));
    EXPECT_EQ(lm_head.nbytes, 512u * 64u * 2u);
    EXPECT_EQ(ckpt.get("backbone.embeddings.weight").shape, (std::vector<int64_t>{512, 64}));
    EXPECT_EQ(ckpt.get("backbone.layers.0.mixer.conv1d.weight").shape, (std::vector<int64_t>{192, 1, 4}));
    EXPECT_EQ(ckpt.get("backbone.layers.0.mixer.in_proj.weight").shape, (std::vector<int64_t>{328, 64}));
    EXPECT_EQ(ckpt.get("backbone.norm_f.weight").shape, (std::vector<int64_t>{64}));

    std::vector<float> values = read_f32(lm_head);
    ASSERT_EQ(values.size(), 512u * 64u);
    bool any_nonzero = false;
    for (float v : values) {
        ASSERT_TRUE(std::isfinite(v));
        any_nonzero = any_nonzero || v != 0.0f;
    }
    EXPECT_TRUE(any_nonzero);

    size_t total = 0;
    for (const TensorEntry* t : ckpt.all()) total += t->nbytes;
    EXPECT_EQ(ckpt.total_bytes(), total);
}

}  // namespace
}  // namespace duet
