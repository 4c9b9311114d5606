#include "models/fish_codec/wav_stream.h"

#include <algorithm>
#include <utility>

#include "base/error.h"

namespace duet::fish_codec {

WavStream::WavStream(const FishCodec& codec, const std::string& path, ThreadPool* pool, WavSampleFormat format,
                     Decoding decoding)
    : WavStream(codec, std::make_unique<StreamingDecoder>(codec, pool), path, format, decoding) {}

WavStream::WavStream(const FishCodec& codec, std::unique_ptr<FrameDecoder> decoder, const std::string& path,
                     WavSampleFormat format, Decoding decoding)
    : codebooks_(codec.codebooks()), decoder_(std::move(decoder)), writer_(path, codec.sample_rate(), format) {
    if (decoding == Decoding::Background) worker_ = std::thread([this] { decode_in_background(); });
}

WavStream::~WavStream() { stop_background(/*drop_pending=*/true); }

void WavStream::add(std::span<const int32_t> codes) {
    require(static_cast<int64_t>(codes.size()) == codebooks_, "audio frame of ", codes.size(),
            " codes, but the codec reads ", codebooks_, " codebooks");
    ++frames_;
    if (worker_.joinable()) {
        {
            std::lock_guard lock(mutex_);
            if (error_) std::rethrow_exception(error_);
            pending_.insert(pending_.end(), codes.begin(), codes.end());
        }
        more_.notify_one();
        return;
    }
    pending_.insert(pending_.end(), codes.begin(), codes.end());
    if (static_cast<int64_t>(pending_.size()) >= next_chunk_frames() * codebooks_) {
        decode(pending_);
        pending_.clear();
    }
}

void WavStream::decode(std::span<const int32_t> codes) {
    if (codes.empty()) return;
    const std::vector<float> samples = decoder_->push(codes);
    writer_.append(samples.data(), samples.size());
    if (first_audio_s_ == 0.0) {
        first_audio_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }
}

// Takes the chunks in the order and sizes add() would decode them in the call, then the rest at finish.
void WavStream::decode_in_background() {
    std::vector<int32_t> chunk;
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            const size_t want = static_cast<size_t>(next_chunk_frames() * codebooks_);
            more_.wait(lock, [&] { return dropping_ || finishing_ || pending_.size() >= want; });
            if (dropping_) return;
            const size_t take = std::min(pending_.size(), want);
            if (take == 0) return;
            chunk.assign(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(take));
            pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(take));
        }
        try {
            decode(chunk);
        } catch (...) {
            std::lock_guard lock(mutex_);
            error_ = std::current_exception();
            return;
        }
    }
}

void WavStream::stop_background(bool drop_pending) {
    if (!worker_.joinable()) return;
    {
        std::lock_guard lock(mutex_);
        (drop_pending ? dropping_ : finishing_) = true;
    }
    more_.notify_one();
    worker_.join();
}

void WavStream::finish() {
    if (worker_.joinable()) {
        stop_background(/*drop_pending=*/false);
        if (error_) std::rethrow_exception(error_);
    } else {
        decode(pending_);
        pending_.clear();
    }
    writer_.close();
}

}  // namespace duet::fish_codec
