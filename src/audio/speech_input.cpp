#include "audio/speech_input.h"

#include "audio/resample.h"
#include "base/error.h"
#include "io/audio_file.h"
#include "io/safetensors.h"

namespace duet::audio {

std::vector<float> read_speech_input(const std::string& path, int sample_rate) {
    if (path.ends_with(".safetensors")) {
        const SafetensorsFile file = SafetensorsFile::open(path);
        const TensorEntry* wave = file.find("waveform");
        require(wave != nullptr, path, ": no tensor 'waveform' (expected [N] f32 samples at ", sample_rate, " Hz)");
        require(wave->shape.size() == 1 && wave->dtype == DType::F32, path, ": 'waveform' has dtype ",
                dtype_name(wave->dtype), " and ", wave->shape.size(), " dimensions, expected [N] F32");
        std::vector<float> samples = read_f32(*wave);
        require_finite_samples(path + ": 'waveform'", samples.data(), samples.size());
        return samples;
    }
    const AudioClip clip = read_audio_file(path);
    return resample(downmix_to_mono(clip), clip.sample_rate, sample_rate);
}

}  // namespace duet::audio
