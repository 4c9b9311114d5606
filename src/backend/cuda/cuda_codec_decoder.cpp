#include "backend/cuda/cuda_codec_decoder.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "base/error.h"
#include "kernels/cuda/codec_kernels.h"
#include "kernels/cuda/cuda_check.h"

namespace duet::cuda {

namespace fc = fish_codec;

// ---- Decoder ----

CudaCodecDecoder::CudaCodecDecoder(std::shared_ptr<const CudaCodecWeights> weights)
    : CudaCodecLayers(std::move(weights)) {
    const fc::Weights& w = weights_->host();
    post_module_ = zero_transformer(w.post_module);
    for (const fc::Resample& r : w.upsample) {
        upsample_.push_back(zero_overlap(r.up));
        upsample_blocks_.push_back(zero_history(r.block));
    }
    decoder_in_ = zero_history(w.decoder_in);
    for (const fc::DecoderBlock& b : w.decoder_blocks) {
        block_upsample_.push_back(zero_overlap(b.upsample));
        block_units_.push_back({zero_unit(b.units[0]), zero_unit(b.units[1]), zero_unit(b.units[2])});
    }
    decoder_out_ = zero_history(w.decoder_out);
}

CudaCodecDecoder::~CudaCodecDecoder() = default;

std::vector<float> CudaCodecDecoder::push(std::span<const int32_t> frame_major) {
    const fc::Config& c = weights_->config();
    const fc::Weights& w = weights_->host();
    const auto stream = blas_.stream();
    const int64_t books = 1 + c.n_codebooks;
    fc::check_frame_codes(frame_major, books, frames_);
    const int64_t frames = static_cast<int64_t>(frame_major.size()) / books;
    if (frames == 0) return {};

    // Sum of every codebook's projected entry, codes clamped to the codebook as fish-speech does.
    int32_t* codes = reinterpret_cast<int32_t*>(grown(codes_, static_cast<int64_t>(frame_major.size())));
    DUET_CUDA_CHECK(cudaMemcpyAsync(codes, frame_major.data(), frame_major.size_bytes(), cudaMemcpyHostToDevice, stream));
    int64_t steps = frames;
    float* x = grown(x_, steps * c.latent_dim);
    DUET_CUDA_CHECK(cudaMemsetAsync(x, 0, static_cast<size_t>(steps * c.latent_dim) * sizeof(float), stream));
    for (int64_t b = 0; b < books; ++b) {
        const fc::Codebook& cb = w.codebook(b);
        codec::add_code_projection(x, codes, books, b, steps, (*weights_)(cb.entries), cb.size, cb.dim,
                                   (*weights_)(cb.out_proj.weight), (*weights_)(cb.out_proj.bias), cb.out_proj.out,
                                   stream);
    }

    transformer(w.post_module, post_module_, steps);
    for (size_t i = 0; i < w.upsample.size(); ++i) {
        conv_transpose(w.upsample[i].up, upsample_[i], x_.as<float>(), steps, y_);
        std::swap(x_, y_);
        steps *= w.upsample[i].up.stride;
        convnext(w.upsample[i].block, upsample_blocks_[i], steps);
    }
    causal_conv(w.decoder_in, decoder_in_, x_.as<float>(), steps, y_);
    std::swap(x_, y_);
    for (size_t b = 0; b < w.decoder_blocks.size(); ++b) {
        const fc::DecoderBlock& block = w.decoder_blocks[b];
        snake(block.snake, x_.as<float>(), steps);
        conv_transpose(block.upsample, block_upsample_[b], x_.as<float>(), steps, y_);
        std::swap(x_, y_);
        steps *= block.upsample.stride;
        for (size_t u = 0; u < 3; ++u) residual_unit(block.units[u], block_units_[b][u], steps);
    }
    snake(w.decoder_snake, x_.as<float>(), steps);
    causal_conv(w.decoder_out, decoder_out_, x_.as<float>(), steps, y_);
    const int64_t samples = steps * w.decoder_out.out;
    codec::tanh_all(y_.as<float>(), samples, stream);

    std::vector<float> audio(static_cast<size_t>(samples));
    DUET_CUDA_CHECK(cudaMemcpyAsync(audio.data(), y_.data(), audio.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
    DUET_CUDA_CHECK(cudaStreamSynchronize(stream));
    frames_ += frames;
    return audio;
}

std::unique_ptr<fc::FrameDecoder> make_cuda_codec_decoder(const fc::FishCodec& codec) {
    return std::make_unique<CudaCodecDecoder>(std::make_shared<const CudaCodecWeights>(codec));
}

}  // namespace duet::cuda
