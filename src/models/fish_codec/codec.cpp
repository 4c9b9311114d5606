#include "models/fish_codec/codec.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include "base/error.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"
#include "models/fish_codec/random_weights.h"

namespace duet::fish_codec {

namespace {

void add_codebook_rows(const Codebook& cb, const std::vector<int32_t>& codes, float* z, ThreadPool* pool) {
    const int64_t steps = static_cast<int64_t>(codes.size());
    std::vector<float> embedded(static_cast<size_t>(steps * cb.dim));
    for (int64_t t = 0; t < steps; ++t)
        std::copy_n(cb.entries.data() + codes[static_cast<size_t>(t)] * cb.dim, cb.dim, embedded.data() + t * cb.dim);
    const Signal projected = linear(cb.out_proj, embedded.data(), steps, pool);
    for (size_t i = 0; i < projected.size(); ++i) z[i] += projected[i];
}

// The nearest code to each row of `latent` by cosine (the distance between L2-normalised vectors,
// computed as fish does: |e|² - 2 e·c + |c|²); subtracts the chosen code's projection from `latent`.
std::vector<int32_t> quantize(const Codebook& cb, Signal& latent, int64_t steps, ThreadPool* pool) {
    const int64_t width = cb.out_proj.out;
    const Signal projected = linear(cb.in_proj, latent.data(), steps, pool);
    const std::vector<float> code_norms = code_squares(cb);
    std::vector<int32_t> codes(static_cast<size_t>(steps));
    parallel_for(pool, steps, 1, [&](int64_t begin, int64_t end) {
        std::vector<float> e(static_cast<size_t>(cb.dim));
        for (int64_t t = begin; t < end; ++t) {
            const float* row = projected.data() + t * cb.dim;
            float squares = 0.0f;
            for (int64_t i = 0; i < cb.dim; ++i) squares += row[i] * row[i];
            const float norm = std::max(std::sqrt(squares), 1e-12f);
            float e_squares = 0.0f;
            for (int64_t i = 0; i < cb.dim; ++i) {
                e[static_cast<size_t>(i)] = row[i] / norm;
                e_squares += e[static_cast<size_t>(i)] * e[static_cast<size_t>(i)];
            }
            int32_t best = 0;
            float best_distance = INFINITY;
            for (int64_t k = 0; k < cb.size; ++k) {
                const float* code = cb.normalized.data() + k * cb.dim;
                float dot = 0.0f;
                for (int64_t i = 0; i < cb.dim; ++i) dot += e[static_cast<size_t>(i)] * code[i];
                const float distance = e_squares - 2.0f * dot + code_norms[static_cast<size_t>(k)];
                if (distance < best_distance) {
                    best_distance = distance;
                    best = static_cast<int32_t>(k);
                }
            }
            codes[static_cast<size_t>(t)] = best;
        }
    });
    std::vector<float> chosen(static_cast<size_t>(width * steps), 0.0f);
    add_codebook_rows(cb, codes, chosen.data(), pool);
    for (size_t i = 0; i < latent.size(); ++i) latent[i] -= chosen[i];
    return codes;
}

// Every causal layer's past while encoding, so that audio encoded in chunks of whole frames gives
// the codes of encoding it at once (to the bit, as for decoding).
struct EncoderStates {
    ConvState in, out;
    std::vector<std::array<ResidualUnitState, 3>> units;
    std::vector<ConvState> block_downsample;
    std::vector<TransformerState> block_transformer;
    std::vector<ConvState> down;
    std::vector<ConvNeXtState> down_blocks;
    TransformerState pre;

    explicit EncoderStates(const Weights& w)
        : in(new_state(w.encoder_in)), out(new_state(w.encoder_out)), pre(new_state(w.pre_module)) {
        for (const EncoderBlock& block : w.encoder_blocks) {
            units.push_back({new_state(block.units[0]), new_state(block.units[1]), new_state(block.units[2])});
            block_downsample.push_back(new_state(block.downsample));
            block_transformer.push_back(block.has_transformer ? new_state(block.transformer) : TransformerState{});
        }
        for (const Resample& r : w.downsample) {
            down.push_back(new_state(r.down));
            down_blocks.push_back(new_state(r.block));
        }
    }
};

// The latent ([frames, latent width], before quantisation) of samples `x`, a whole number of frames.
Signal encode_latent(const Weights& w, EncoderStates& s, Signal x, ThreadPool* pool) {
    int64_t steps = static_cast<int64_t>(x.size());
    auto run_conv = [&](const Conv& conv, ConvState& state) {
        x = causal_conv(conv, state, x.data(), steps, pool);
        steps /= conv.stride;
    };
    run_conv(w.encoder_in, s.in);
    for (size_t b = 0; b < w.encoder_blocks.size(); ++b) {
        const EncoderBlock& block = w.encoder_blocks[b];
        for (size_t u = 0; u < 3; ++u) residual_unit(block.units[u], s.units[b][u], x, steps, pool);
        snake(block.snake, x.data(), steps, pool);
        run_conv(block.downsample, s.block_downsample[b]);
        if (block.has_transformer) transformer(block.transformer, s.block_transformer[b], x, steps, pool);
    }
    snake(w.encoder_snake, x.data(), steps, pool);
    run_conv(w.encoder_out, s.out);
    for (size_t i = 0; i < w.downsample.size(); ++i) {
        run_conv(w.downsample[i].down, s.down[i]);
        convnext(w.downsample[i].block, s.down_blocks[i], x, steps, pool);
    }
    transformer(w.pre_module, s.pre, x, steps, pool);
    return x;
}

FishCodec load_file(const std::string& file, const Config& config) {
    if (file.ends_with(".pth") || file.ends_with(".pt") || file.ends_with(".ckpt")) {
        auto ckpt = std::make_shared<TorchCheckpoint>(TorchCheckpoint::open(file));
        return FishCodec::from_lookup(config, [&](std::string_view n) { return ckpt->find(n); }, file);
    }
    auto st = std::make_shared<Checkpoint>(Checkpoint::open(file));
    return FishCodec::from_lookup(config, [&](std::string_view n) { return st->find(n); }, file);
}

}  // namespace

FishCodec FishCodec::load(const std::string& path) {
    namespace fs = std::filesystem;
    require(fs::exists(path), path, ": no such codec file or directory");
    if (fs::is_directory(path)) {
        const Config config = load_config_for(path);
        for (const char* name : {"codec.pth", "codec.safetensors"}) {
            const fs::path file = fs::path(path) / name;
            if (fs::exists(file)) return load_file(file.string(), config);
        }
        fail(path, ": holds neither codec.pth nor codec.safetensors");
    }
    return load_file(path, load_config_for(fs::path(path).parent_path().string()));
}

FishCodec FishCodec::from_lookup(const Config& config, const TensorLookup& lookup, const std::string& source) {
    validate(config, source);
    FishCodec codec;
    codec.config_ = std::make_shared<const Config>(config);
    codec.weights_ = std::make_shared<const Weights>(bind_weights(config, lookup, source));
    return codec;
}

FishCodec FishCodec::random(const Config& config, uint64_t seed, ThreadPool* pool) {
    const std::shared_ptr<TensorSet> tensors = make_random_weights(config, seed, pool);
    return from_lookup(config, [&](std::string_view n) { return tensors->find(n); }, "(random codec weights)");
}

std::vector<float> FishCodec::decode(std::span<const int32_t> codes, int64_t frames, ThreadPool* pool) const {
    StreamingDecoder stream(*this, pool);
    return decode_in_chunks(stream, codes, codebooks(), frames, kDecodeChunkFrames);
}

std::vector<float> decode_in_chunks(FrameDecoder& decoder, std::span<const int32_t> codes, int64_t codebooks,
                                    int64_t frames, int64_t chunk_frames) {
    require(frames >= 0 && static_cast<int64_t>(codes.size()) == codebooks * frames, "codec decode: ", codes.size(),
            " codes for ", frames, " frames of ", codebooks, " codebooks");
    require(chunk_frames > 0, "codec decode: chunks of ", chunk_frames, " frames");
    const std::vector<int32_t> frame_major = to_frame_major(codes, codebooks, frames);
    std::vector<float> audio;
    for (int64_t f = 0; f < frames; f += chunk_frames) {
        const int64_t n = std::min(chunk_frames, frames - f);
        const std::vector<float> part = decoder.push(
            std::span(frame_major).subspan(static_cast<size_t>(f * codebooks), static_cast<size_t>(n * codebooks)));
        if (f == 0) audio.reserve(part.size() / static_cast<size_t>(n) * static_cast<size_t>(frames));
        audio.insert(audio.end(), part.begin(), part.end());
    }
    return audio;
}

void check_frame_codes(std::span<const int32_t> frame_major, int64_t codebooks, int64_t first_frame) {
    require(frame_major.size() % static_cast<size_t>(codebooks) == 0, "codec stream: ", frame_major.size(),
            " codes is not a whole number of frames of ", codebooks, " codebooks");
    for (size_t i = 0; i < frame_major.size(); ++i) {
        const int32_t code = frame_major[i];
        require(code >= 0, "codec decode: negative code ", code, " in frame ",
                first_frame + static_cast<int64_t>(i) / codebooks, ", codebook ", static_cast<int64_t>(i) % codebooks);
    }
}

std::vector<int32_t> FishCodec::encode(std::span<const float> samples, ThreadPool* pool, int64_t chunk_frames) const {
    require(chunk_frames >= 0, "codec encode: chunks of ", chunk_frames, " frames");
    const int64_t chunk = chunk_frames > 0 ? chunk_frames : kDecodeChunkFrames;
    const Weights& w = *weights_;
    const int64_t per_frame = samples_per_frame();
    const int64_t frames = (static_cast<int64_t>(samples.size()) + per_frame - 1) / per_frame;
    if (frames == 0) return {};

    EncoderStates states(w);
    std::vector<int32_t> codes(static_cast<size_t>(codebooks() * frames));
    for (int64_t f = 0; f < frames; f += chunk) {
        const int64_t n = std::min(chunk, frames - f);
        // The chunk's samples, the last chunk padded with zeros to whole frames.
        Signal chunk_samples(static_cast<size_t>(n * per_frame), 0.0f);
        const std::span<const float> rest = samples.subspan(static_cast<size_t>(f * per_frame));
        std::copy_n(rest.begin(), std::min(rest.size(), chunk_samples.size()), chunk_samples.begin());
        Signal latent = encode_latent(w, states, std::move(chunk_samples), pool);
        require(static_cast<int64_t>(latent.size()) == n * config_->latent_dim, "codec encode: internal frame count mismatch");
        // The semantic code, then residual codes of what it leaves.
        int64_t book = 0;
        for (const std::vector<Codebook>* books : {&w.semantic, &w.residual}) {
            for (const Codebook& cb : *books) {
                const std::vector<int32_t> row = quantize(cb, latent, n, pool);
                std::copy(row.begin(), row.end(), codes.begin() + book * frames + f);
                ++book;
            }
        }
    }
    return codes;
}

StreamingDecoder::StreamingDecoder(const FishCodec& codec, ThreadPool* pool)
    : config_(codec.config_), weights_(codec.weights_), pool_(pool) {
    const Weights& w = *weights_;
    post_module_ = new_state(w.post_module);
    for (const Resample& r : w.upsample) {
        upsample_.push_back(new_state(r.up));
        upsample_blocks_.push_back(new_state(r.block));
    }
    decoder_in_ = new_state(w.decoder_in);
    for (const DecoderBlock& b : w.decoder_blocks) {
        block_upsample_.push_back(new_state(b.upsample));
        block_units_.push_back({new_state(b.units[0]), new_state(b.units[1]), new_state(b.units[2])});
    }
    decoder_out_ = new_state(w.decoder_out);
}

std::vector<float> StreamingDecoder::push(std::span<const int32_t> frame_major) {
    const Config& c = *config_;
    const Weights& w = *weights_;
    const int64_t books = 1 + c.n_codebooks;
    check_frame_codes(frame_major, books, frames_);
    const int64_t frames = static_cast<int64_t>(frame_major.size()) / books;
    if (frames == 0) return {};

    // Sum of every codebook's projected entry, codes clamped to the codebook as fish-speech does.
    int64_t steps = frames;
    Signal x(static_cast<size_t>(steps * c.latent_dim), 0.0f);
    for (int64_t b = 0; b < books; ++b) {
        const Codebook& cb = w.codebook(b);
        std::vector<int32_t> column(static_cast<size_t>(frames));
        for (int64_t f = 0; f < frames; ++f)
            column[static_cast<size_t>(f)] =
                static_cast<int32_t>(std::min<int64_t>(frame_major[static_cast<size_t>(f * books + b)], cb.size - 1));
        add_codebook_rows(cb, column, x.data(), pool_);
    }

    transformer(w.post_module, post_module_, x, steps, pool_);
    for (size_t i = 0; i < w.upsample.size(); ++i) {
        x = conv_transpose(w.upsample[i].up, upsample_[i], x.data(), steps, pool_);
        steps *= w.upsample[i].up.stride;
        convnext(w.upsample[i].block, upsample_blocks_[i], x, steps, pool_);
    }
    x = causal_conv(w.decoder_in, decoder_in_, x.data(), steps, pool_);
    for (size_t b = 0; b < w.decoder_blocks.size(); ++b) {
        const DecoderBlock& block = w.decoder_blocks[b];
        snake(block.snake, x.data(), steps, pool_);
        x = conv_transpose(block.upsample, block_upsample_[b], x.data(), steps, pool_);
        steps *= block.upsample.stride;
        for (size_t u = 0; u < 3; ++u) residual_unit(block.units[u], block_units_[b][u], x, steps, pool_);
    }
    snake(w.decoder_snake, x.data(), steps, pool_);
    x = causal_conv(w.decoder_out, decoder_out_, x.data(), steps, pool_);
    std::vector<float> audio(x.size());
    parallel_for(pool_, static_cast<int64_t>(x.size()), 4096, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) audio[static_cast<size_t>(i)] = std::tanh(x[static_cast<size_t>(i)]);
    });
    frames_ += frames;
    return audio;
}

std::vector<int32_t> to_frame_major(std::span<const int32_t> codes, int64_t codebooks, int64_t frames) {
    std::vector<int32_t> out(codes.size());
    for (int64_t b = 0; b < codebooks; ++b)
        for (int64_t f = 0; f < frames; ++f)
            out[static_cast<size_t>(f * codebooks + b)] = codes[static_cast<size_t>(b * frames + f)];
    return out;
}

}  // namespace duet::fish_codec
