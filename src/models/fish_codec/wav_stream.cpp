#include "models/fish_codec/wav_stream.h"

#include "base/error.h"

namespace duet::fish_codec {

WavStream::WavStream(const FishCodec& codec, const std::string& path, ThreadPool* pool, WavSampleFormat format)
    : codebooks_(codec.codebooks()), decoder_(codec, pool), writer_(path, codec.sample_rate(), format) {}

void WavStream::add(std::span<const int32_t> codes) {
    require(static_cast<int64_t>(codes.size()) == codebooks_, "audio frame of ", codes.size(),
            " codes, but the codec reads ", codebooks_, " codebooks");
    pending_.insert(pending_.end(), codes.begin(), codes.end());
    ++frames_;
    const int64_t chunk = decoder_.frames_decoded() == 0 ? kFirstChunk : kChunk;
    if (static_cast<int64_t>(pending_.size()) >= chunk * codebooks_) flush();
}

void WavStream::flush() {
    if (pending_.empty()) return;
    const std::vector<float> samples = decoder_.push(pending_);
    pending_.clear();
    writer_.append(samples.data(), samples.size());
    if (first_audio_s_ == 0.0) {
        first_audio_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }
}

void WavStream::finish() {
    flush();
    writer_.close();
}

}  // namespace duet::fish_codec
