#include "backend/cuda/cuda_codec_encoder.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "kernels/cuda/codec_kernels.h"
#include "kernels/cuda/cuda_check.h"

namespace duet::cuda {

namespace fc = fish_codec;

CudaCodecEncoder::CudaCodecEncoder(const fc::FishCodec& codec)
    : CudaCodecLayers(std::make_shared<const CudaCodecWeights>(codec, CudaCodecWeights::Half::encoder)),
      samples_per_frame_(codec.samples_per_frame()),
      books_(codec.codebooks()) {
    const fc::Weights& w = weights_->host();
    in_ = zero_history(w.encoder_in);
    for (const fc::EncoderBlock& b : w.encoder_blocks) {
        units_.push_back({zero_unit(b.units[0]), zero_unit(b.units[1]), zero_unit(b.units[2])});
        block_downsample_.push_back(zero_history(b.downsample));
        block_transformer_.push_back(b.has_transformer ? zero_transformer(b.transformer) : TransformerState{});
    }
    out_ = zero_history(w.encoder_out);
    for (const fc::Resample& r : w.downsample) {
        down_.push_back(zero_history(r.down));
        down_blocks_.push_back(zero_history(r.block));
    }
    pre_ = zero_transformer(w.pre_module);
    for (int64_t book = 0; book < books_; ++book)
        code_squares_.push_back(DeviceBuffer::from_vector(fc::code_squares(w.codebook(book))));
}

int64_t CudaCodecEncoder::encode_latent(int64_t steps) {
    const fc::Weights& w = weights_->host();
    auto run_conv = [&](const fc::Conv& conv, RowHistory& history) {
        causal_conv(conv, history, x_.as<float>(), steps, y_);
        std::swap(x_, y_);
        steps /= conv.stride;
    };
    run_conv(w.encoder_in, in_);
    for (size_t b = 0; b < w.encoder_blocks.size(); ++b) {
        const fc::EncoderBlock& block = w.encoder_blocks[b];
        for (size_t u = 0; u < 3; ++u) residual_unit(block.units[u], units_[b][u], steps);
        snake(block.snake, x_.as<float>(), steps);
        run_conv(block.downsample, block_downsample_[b]);
        if (block.has_transformer) transformer(block.transformer, block_transformer_[b], steps);
    }
    snake(w.encoder_snake, x_.as<float>(), steps);
    run_conv(w.encoder_out, out_);
    for (size_t i = 0; i < w.downsample.size(); ++i) {
        run_conv(w.downsample[i].down, down_[i]);
        convnext(w.downsample[i].block, down_blocks_[i], steps);
    }
    transformer(w.pre_module, pre_, steps);
    return steps;
}

void CudaCodecEncoder::quantize(const fc::Codebook& cb, int64_t book, int64_t frames) {
    const auto stream = blas_.stream();
    linear(cb.in_proj, x_.as<float>(), frames, projected_);
    int32_t* codes = reinterpret_cast<int32_t*>(codes_.data());
    codec::nearest_codes(projected_.as<float>(), frames, cb.dim, (*weights_)(cb.normalized),
                         code_squares_[static_cast<size_t>(book)].as<float>(), cb.size, codes, books_, book, stream);
    codec::add_code_projection(x_.as<float>(), codes, books_, book, frames, (*weights_)(cb.entries), cb.size, cb.dim,
                               (*weights_)(cb.out_proj.weight), (*weights_)(cb.out_proj.bias), cb.out_proj.out,
                               stream, -1.0f);
}

std::vector<int32_t> CudaCodecEncoder::encode(std::span<const float> samples, int64_t chunk_frames) {
    require(chunk_frames >= 0, "codec encode: chunks of ", chunk_frames, " frames");
    const int64_t chunk = chunk_frames > 0 ? chunk_frames : kChunkFrames;
    const auto stream = blas_.stream();
    const fc::Weights& w = weights_->host();
    const int64_t per_frame = samples_per_frame_;
    const int64_t frames = (static_cast<int64_t>(samples.size()) + per_frame - 1) / per_frame;
    if (frames == 0) return {};

    std::vector<int32_t> codes(static_cast<size_t>(books_ * frames));
    std::vector<float> chunk_samples;
    std::vector<int32_t> chunk_codes;
    for (int64_t f = 0; f < frames; f += chunk) {
        const int64_t n = std::min(chunk, frames - f);
        // The chunk's samples, the last chunk padded with zeros to whole frames.
        chunk_samples.assign(static_cast<size_t>(n * per_frame), 0.0f);
        const std::span<const float> rest = samples.subspan(static_cast<size_t>(f * per_frame));
        std::copy_n(rest.begin(), std::min(rest.size(), chunk_samples.size()), chunk_samples.begin());
        DUET_CUDA_CHECK(cudaMemcpyAsync(grown(x_, n * per_frame), chunk_samples.data(),
                                        chunk_samples.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
        const int64_t latent_frames = encode_latent(n * per_frame);
        require(latent_frames == n, "codec encode: internal frame count mismatch");
        grown(codes_, n * books_);
        for (int64_t book = 0; book < books_; ++book) quantize(w.codebook(book), book, n);
        chunk_codes.resize(static_cast<size_t>(n * books_));
        DUET_CUDA_CHECK(cudaMemcpyAsync(chunk_codes.data(), codes_.data(), chunk_codes.size() * sizeof(int32_t),
                                        cudaMemcpyDeviceToHost, stream));
        DUET_CUDA_CHECK(cudaStreamSynchronize(stream));
        for (int64_t t = 0; t < n; ++t)
            for (int64_t book = 0; book < books_; ++book)
                codes[static_cast<size_t>(book * frames + f + t)] = chunk_codes[static_cast<size_t>(t * books_ + book)];
    }
    return codes;
}

}  // namespace duet::cuda
