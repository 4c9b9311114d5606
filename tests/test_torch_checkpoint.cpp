// PyTorch zip checkpoints: the fixture's codec.pth read without Python, and hostile or broken files
// refused with clear errors.
#include <cstring>

#include "io/torch_checkpoint.h"
#include "io/zip_archive.h"
#include "test_support.h"
#include "torch_checkpoint_builder.h"

namespace duet {
namespace {

using testing::error_of;
using testing::fixture_dir;
using testing::make_stored_zip;
using testing::PickleWriter;
using testing::TempDir;
using testing::write_bytes;

std::string floats(const std::vector<float>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::string write_checkpoint(const TempDir& dir, const std::string& pickle,
                             std::vector<std::pair<std::string, std::string>> storages, uint16_t method = 0) {
    std::vector<std::pair<std::string, std::string>> entries = {{"archive/data.pkl", pickle},
                                                                {"archive/byteorder", "little"}};
    for (auto& [key, bytes] : storages) entries.emplace_back("archive/data/" + key, bytes);
    const std::string path = dir.file("model.pth");
    write_bytes(path, make_stored_zip(entries, method));
    return path;
}

TEST(TorchCheckpoint, FixtureEqualsItsSafetensorsTwin) {
    const std::string dir = fixture_dir("fish_codec_tiny");
    const TorchCheckpoint pth = TorchCheckpoint::open(dir + "/codec.pth");
    const SafetensorsFile st = SafetensorsFile::open(dir + "/codec.safetensors");
    ASSERT_EQ(pth.tensors().size(), st.tensors().size());
    for (const TensorEntry& expected : st.tensors()) {
        const TensorEntry* got = pth.find(expected.name);
        ASSERT_NE(got, nullptr) << expected.name;
        EXPECT_EQ(got->dtype, expected.dtype) << expected.name;
        EXPECT_EQ(got->shape, expected.shape) << expected.name;
        ASSERT_EQ(got->nbytes, expected.nbytes) << expected.name;
        EXPECT_EQ(std::memcmp(got->data, expected.data, expected.nbytes), 0) << expected.name;
    }
}

TEST(TorchCheckpoint, StridedViewsAreGatheredContiguous) {
    TempDir dir("pth");
    // A [3, 2] transpose of a row-major [2, 3] storage, and a slice starting at element 2.
    PickleWriter p;
    p.op('}').op('(');
    p.tensor("t", "FloatStorage", "0", 6, 0, {3, 2}, {1, 3});
    p.tensor("s", "FloatStorage", "0", 6, 2, {3}, {1});
    p.op('u').op('.');
    const std::string path = write_checkpoint(dir, p.bytes, {{"0", floats({0, 1, 2, 3, 4, 5})}});
    const TorchCheckpoint ckpt = TorchCheckpoint::open(path);
    ASSERT_EQ(ckpt.tensors().size(), 2u);
    EXPECT_EQ(read_f32(*ckpt.find("t")), (std::vector<float>{0, 3, 1, 4, 2, 5}));
    EXPECT_EQ(read_f32(*ckpt.find("s")), (std::vector<float>{2, 3, 4}));
}

TEST(TorchCheckpoint, RefusesCallablesNamingThem) {
    TempDir dir("pth");
    for (const auto& [module, name] : {std::pair{"builtins", "eval"}, std::pair{"os", "system"},
                                       std::pair{"torch", "load"}}) {
        PickleWriter p;
        p.global(module, name).str("print(1)").op('\x85').op('R').op('.');
        const std::string path = write_checkpoint(dir, p.bytes, {});
        const std::string message = error_of([&] { TorchCheckpoint::open(path); });
        EXPECT_NE(message.find(std::string(module) + "." + name), std::string::npos) << message;
        EXPECT_NE(message.find(path), std::string::npos) << message;
    }
}

TEST(TorchCheckpoint, RefusesOtherOpcodesAndShapes) {
    TempDir dir("pth");
    // INST (old-style class instantiation) and a top-level list are not part of a state dict.
    PickleWriter inst;
    inst.op('(').bytes += "ibuiltins\nprint\n.";
    std::string message = error_of([&] { TorchCheckpoint::open(write_checkpoint(dir, inst.bytes, {})); });
    EXPECT_NE(message.find("opcode 0x69"), std::string::npos) << message;

    PickleWriter not_tensor;
    not_tensor.op('}').str("x").integer(5).op('s').op('.');
    message = error_of([&] { TorchCheckpoint::open(write_checkpoint(dir, not_tensor.bytes, {})); });
    EXPECT_NE(message.find("'x' is not a tensor"), std::string::npos) << message;

    // A string claiming 4 GB in a tiny pickle is refused without allocating it.
    PickleWriter huge;
    huge.bytes += "X\xff\xff\xff\xff";
    message = error_of([&] { TorchCheckpoint::open(write_checkpoint(dir, huge.bytes, {})); });
    EXPECT_NE(message.find("truncated pickle"), std::string::npos) << message;

    // Deeply nested tuples and a dict that holds itself are refused or read without harm.
    PickleWriter deep;
    deep.op(')');
    for (int i = 0; i < 200000; ++i) deep.op('\x85');
    deep.op('.');
    EXPECT_FALSE(error_of([&] { TorchCheckpoint::open(write_checkpoint(dir, deep.bytes, {})); }).empty());
    PickleWriter cycle;
    cycle.op('}').bytes += "q\x00\x58\x01\x00\x00\x00kh\x00s.";
    EXPECT_FALSE(error_of([&] { TorchCheckpoint::open(write_checkpoint(dir, cycle.bytes, {})); }).empty());
}

TEST(TorchCheckpoint, StorageMismatchesAreClearErrors) {
    TempDir dir("pth");
    // The view needs 10 elements; the storage has 4.
    PickleWriter over;
    over.op('}').op('(').tensor("w", "FloatStorage", "0", 4, 0, {10}, {1}).op('u').op('.');
    std::string message =
        error_of([&] { TorchCheckpoint::open(write_checkpoint(dir, over.bytes, {{"0", floats({1, 2, 3, 4})}})); });
    EXPECT_NE(message.find("tensor 'w'"), std::string::npos) << message;
    EXPECT_NE(message.find("reaches element 9"), std::string::npos) << message;

    // The pickle claims 100 elements; the entry holds 4.
    PickleWriter claim;
    claim.op('}').op('(').tensor("w", "FloatStorage", "0", 100, 0, {4}, {1}).op('u').op('.');
    message = error_of([&] { TorchCheckpoint::open(write_checkpoint(dir, claim.bytes, {{"0", floats({1, 2, 3, 4})}})); });
    EXPECT_NE(message.find("holds 16 bytes"), std::string::npos) << message;

    // The storage is missing altogether.
    message = error_of([&] { TorchCheckpoint::open(write_checkpoint(dir, claim.bytes, {})); });
    EXPECT_NE(message.find("archive/data/0"), std::string::npos) << message;
}

TEST(TorchCheckpoint, TruncatedAndCompressedZipsAreClearErrors) {
    TempDir dir("pth");
    const std::string whole = testing::read_bytes(fixture_dir("fish_codec_tiny") + "/codec.pth");
    write_bytes(dir.file("cut.pth"), whole.substr(0, whole.size() / 2));
    std::string message = error_of([&] { TorchCheckpoint::open(dir.file("cut.pth")); });
    EXPECT_NE(message.find("cut.pth"), std::string::npos) << message;
    EXPECT_NE(message.find("truncated"), std::string::npos) << message;

    // The directory intact but an entry's data cut short.
    std::string shifted = whole;
    shifted.erase(1000, 64);
    write_bytes(dir.file("hole.pth"), shifted);
    EXPECT_FALSE(error_of([&] { TorchCheckpoint::open(dir.file("hole.pth")); }).empty());

    PickleWriter p;
    p.op('}').op('.');
    message = error_of([&] { TorchCheckpoint::open(write_checkpoint(dir, p.bytes, {}, 8)); });
    EXPECT_NE(message.find("compressed"), std::string::npos) << message;

    write_bytes(dir.file("empty.pth"), "");
    EXPECT_NE(error_of([&] { TorchCheckpoint::open(dir.file("empty.pth")); }).find("not a zip"), std::string::npos);
}

}  // namespace
}  // namespace duet
