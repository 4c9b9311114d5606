// duet codec decode/encode on the fish_codec_tiny fixture, through the binary.
#include <sys/wait.h>

#include <cstdlib>

#include "io/audio_file.h"
#include "test_support.h"
#include "torch_checkpoint_builder.h"

namespace duet {
namespace {

using testing::fixture_dir;
using testing::read_bytes;
using testing::TempDir;

int run_duet(const std::string& arguments, const TempDir& tmp, std::string* err = nullptr) {
    const std::string command = std::string(DUET_BINARY) + " " + arguments + " >" + tmp.file("stdout") + " 2>" +
                                tmp.file("stderr");
    const int status = std::system(command.c_str());
    if (err) *err = read_bytes(tmp.file("stderr"));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

class CodecCli : public ::testing::Test {
protected:
    std::string codec_dir = fixture_dir("fish_codec_tiny");
    SafetensorsFile expected = SafetensorsFile::open(codec_dir + "/expected.safetensors");
    TempDir tmp{"codec-cli"};

    void write_tensor(const std::string& path, const char* name) {
        const TensorEntry* t = expected.find(name);
        ASSERT_NE(t, nullptr);
        write_safetensors(path, {{t->name == "encode_input" ? "audio" : "codes", t->dtype, t->shape, t->data, t->nbytes}});
    }
};

TEST_F(CodecCli, DecodeWritesSafetensorsAndWav) {
    write_tensor(tmp.file("codes.safetensors"), "codes");
    ASSERT_EQ(run_duet("codec decode --codec " + codec_dir + " --codes " + tmp.file("codes.safetensors") + " --out " +
                           tmp.file("audio.safetensors") + " --threads 2",
                       tmp),
              0)
        << read_bytes(tmp.file("stderr"));
    const SafetensorsFile out = SafetensorsFile::open(tmp.file("audio.safetensors"));
    const std::vector<float> audio = read_f32(*out.find("audio"));
    const std::vector<float> reference = read_f32(*expected.find("audio"));
    ASSERT_EQ(audio.size(), reference.size());
    for (size_t i = 0; i < audio.size(); ++i) ASSERT_NEAR(audio[i], reference[i], 1e-3) << i;

    ASSERT_EQ(run_duet("codec decode --codec " + codec_dir + " --codes " + tmp.file("codes.safetensors") + " --out " +
                           tmp.file("audio.wav") + " --float",
                       tmp),
              0);
    const AudioClip clip = read_audio_file(tmp.file("audio.wav"));
    EXPECT_EQ(clip.sample_rate, 44100);
    EXPECT_EQ(clip.samples, audio);
}

TEST_F(CodecCli, AnUnknownCodecDeviceIsRefusedByName) {
    write_tensor(tmp.file("codes.safetensors"), "codes");
    std::string err;
    EXPECT_EQ(run_duet("codec decode --codec " + codec_dir + " --codes " + tmp.file("codes.safetensors") + " --out " +
                           tmp.file("audio.wav") + " --codec-device tpu",
                       tmp, &err),
              2);
    EXPECT_NE(err.find("--codec-device is 'tpu', expected cpu or cuda"), std::string::npos) << err;
}

TEST_F(CodecCli, EncodeFromSafetensorsAndWav) {
    write_tensor(tmp.file("input.safetensors"), "encode_input");
    const std::vector<int32_t> reference = testing::read_i32(*expected.find("encode_codes"));
    ASSERT_EQ(run_duet("codec encode --codec " + codec_dir + " --audio " + tmp.file("input.safetensors") + " --out " +
                           tmp.file("codes.safetensors"),
                       tmp),
              0)
        << read_bytes(tmp.file("stderr"));
    EXPECT_EQ(testing::read_i32(*SafetensorsFile::open(tmp.file("codes.safetensors")).find("codes")), reference);

    const std::vector<float> input = read_f32(*expected.find("encode_input"));
    write_wav(tmp.file("input.wav"), input.data(), input.size(), 44100, WavSampleFormat::Float32);
    ASSERT_EQ(run_duet("codec encode --codec " + codec_dir + " --audio " + tmp.file("input.wav") + " --out " +
                           tmp.file("codes2.safetensors"),
                       tmp),
              0);
    EXPECT_EQ(testing::read_i32(*SafetensorsFile::open(tmp.file("codes2.safetensors")).find("codes")), reference);
}

TEST_F(CodecCli, PickledCallableIsRefused) {
    testing::PickleWriter p;
    p.global("os", "system").str("touch " + tmp.file("pwned")).op('\x85').op('R').op('.');
    testing::write_bytes(tmp.file("codec.pth"), testing::make_stored_zip({{"archive/data.pkl", p.bytes}}));
    testing::write_bytes(tmp.file("codes.safetensors"), "");
    std::string err;
    EXPECT_EQ(run_duet("codec decode --codec " + tmp.path() + " --codes " + tmp.file("codes.safetensors") + " --out " +
                           tmp.file("a.wav"),
                       tmp, &err),
              1);
    EXPECT_NE(err.find("refusing global 'os.system'"), std::string::npos) << err;
    EXPECT_FALSE(std::filesystem::exists(tmp.file("pwned")));
}

}  // namespace
}  // namespace duet
