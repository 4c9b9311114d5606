#include "backend/cuda/cuda_speech_encoder.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>

#include "audio/fft.h"
#include "backend/cuda/f32_products.h"
#include "base/error.h"
#include "kernels/cuda/codec_kernels.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/log_mel_kernels.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/speech_encoder_kernels.h"

namespace duet::cuda {

namespace {

// The first bytes of a host array: with its size, what tells a reused address from the array it held.
std::array<uint8_t, 32> head_of(const void* host, size_t bytes) {
    std::array<uint8_t, 32> head{};
    std::memcpy(head.data(), host, std::min(bytes, head.size()));
    return head;
}

}  // namespace

const float* CudaPerceptionDevice::existing(const void* host, size_t bytes) {
    const auto it = weights_.find(host);
    if (it == weights_.end()) return nullptr;
    if (it->second.bytes == bytes && it->second.head == head_of(host, bytes)) return it->second.buffer.as<float>();
    weights_.erase(it);
    return nullptr;
}

const float* CudaPerceptionDevice::keep(const void* host, size_t bytes, DeviceBuffer buffer) {
    DeviceCopy& copy = weights_[host];
    copy = DeviceCopy{std::move(buffer), bytes, head_of(host, bytes)};
    return copy.buffer.as<float>();
}

const float* CudaPerceptionDevice::matrix(const MatrixView& w) {
    require(w.dtype == DType::F32 || w.dtype == DType::BF16, "speech encoder on the GPU: weights of type ",
            dtype_name(w.dtype), " (expected f32 or bf16)");
    const int64_t count = w.rows * w.cols;
    const size_t bytes = static_cast<size_t>(count) * dtype_size(w.dtype);
    if (const float* found = existing(w.data, bytes)) return found;
    DeviceBuffer widened(static_cast<size_t>(count) * sizeof(float));
    if (w.dtype == DType::F32) {
        widened.copy_from_host(w.data, bytes);
    } else {
        DeviceBuffer raw(bytes);
        raw.copy_from_host(w.data, bytes);
        widen_to_f32(raw.data(), WeightType::BF16, count, widened.as<float>(), blas_.stream());
        DUET_CUDA_CHECK(cudaStreamSynchronize(blas_.stream()));  // before `raw` is freed
    }
    return keep(w.data, bytes, std::move(widened));
}

const float* CudaPerceptionDevice::vector(const std::vector<float>& v) {
    if (v.empty()) return nullptr;
    const size_t bytes = v.size() * sizeof(float);
    if (const float* found = existing(v.data(), bytes)) return found;
    return keep(v.data(), bytes, DeviceBuffer::from_vector(v));
}

void CudaPerceptionDevice::device_linear(const transcribe::LinearWeights& l, const float* x, int64_t n, float* y,
                                         float* acc) {
    const auto stream = blas_.stream();
    const int64_t rows = l.weight.rows;
    blas_.product(matrix(l.weight), rows, l.weight.cols, x, n, y);
    if (!l.bias.empty()) codec::add_bias_rows(y, vector(l.bias), n, rows, stream);
    if (acc != nullptr) codec::add_scaled_rows(acc, nullptr, y, n, rows, stream);
}

void CudaPerceptionDevice::layer_norm(const transcribe::LayerNormWeights& norm, const float* x, int64_t n,
                                      int64_t width, float eps, float* out) {
    const auto stream = blas_.stream();
    if (out != x) {
        DUET_CUDA_CHECK(cudaMemcpyAsync(out, x, static_cast<size_t>(n * width) * sizeof(float),
                                        cudaMemcpyDeviceToDevice, stream));
    }
    codec::layer_norm_rows(out, vector(norm.weight), vector(norm.bias), n, width, eps, stream);
}

void CudaPerceptionDevice::attention(const transcribe::EncoderConfig& c, const float* qkv, int64_t n, int64_t keys,
                                     float* out) {
    const auto cublas = blas_.handle();
    const int64_t width = c.width, hd = c.head_dim(), heads = c.heads;
    if (keys == 0) {  // nothing to attend to: zeros, as the CPU's sum over no keys
        DUET_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(n * width) * sizeof(float), blas_.stream()));
        return;
    }
    float* scores = grown(scores_, heads * n * keys);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd)), one = 1.0f, zero = 0.0f;
    const int row = static_cast<int>(3 * width);
    // Head h's scores, row-major [n, keys] (column-major keys × n): S(i, j) = scale · q_i · k_j.
    check_cublas(cublasSgemmStridedBatched(cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(keys),
                                           static_cast<int>(n), static_cast<int>(hd), &scale, qkv + width, row, hd,
                                           qkv, row, hd, &zero, scores, static_cast<int>(keys), keys * n,
                                           static_cast<int>(heads)),
                 "cublasSgemmStridedBatched (scores)");
    speech::softmax_rows(scores, heads * n, keys, blas_.stream());
    // out[i, h · hd + d] = Σ_j P(i, j) · v_j[d]: column-major hd × n with leading dimension width.
    check_cublas(cublasSgemmStridedBatched(cublas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(hd),
                                           static_cast<int>(n), static_cast<int>(keys), &one, qkv + 2 * width, row,
                                           hd, scores, static_cast<int>(keys), keys * n, &zero, out,
                                           static_cast<int>(width), hd, static_cast<int>(heads)),
                 "cublasSgemmStridedBatched (values)");
}

void CudaPerceptionDevice::run(const transcribe::EncoderConfig& c, const transcribe::EncoderWeights& w,
                               std::vector<float>& host_x, int64_t n, int64_t keys) {
    require(n >= 0 && keys >= 0 && keys <= n && host_x.size() == static_cast<size_t>(n * c.width),
            "speech encoder on the GPU: ", n, " frames of width ", c.width, " attending to ", keys,
            " (expected at most n keys and n · width values)");
    if (n == 0) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto stream = blas_.stream();
    const int64_t width = c.width, hd = c.head_dim();
    float* x = grown(x_, n * width);
    float* normed = grown(normed_, n * width);
    float* qkv = grown(qkv_, n * 3 * width);
    float* attended = grown(attended_, n * width);
    float* branch = grown(branch_, n * width);
    float* hidden = grown(hidden_, n * c.ffn);
    // The rotary angles of positions 0 … n−1, as the CPU computes them.
    const transcribe::RopeTables rope(c, n);
    float* device_cos = grown(cos_, n * rope.half);
    float* device_sin = grown(sin_, n * rope.half);
    DUET_CUDA_CHECK(cudaMemcpyAsync(device_cos, rope.cos.data(), rope.cos.size() * sizeof(float),
                                    cudaMemcpyHostToDevice, stream));
    DUET_CUDA_CHECK(cudaMemcpyAsync(device_sin, rope.sin.data(), rope.sin.size() * sizeof(float),
                                    cudaMemcpyHostToDevice, stream));
    DUET_CUDA_CHECK(cudaMemcpyAsync(x, host_x.data(), host_x.size() * sizeof(float), cudaMemcpyHostToDevice, stream));

    layer_norm(w.embed_norm, x, n, width, c.norm_eps, x);
    for (const transcribe::EncoderLayerWeights& l : w.layers) {
        layer_norm(l.norm1, x, n, width, c.norm_eps, normed);
        blas_.product(matrix(l.qkv), 3 * width, width, normed, n, qkv);
        speech::HeadNormRopeRows r;
        r.qkv = qkv;
        r.n = n;
        r.width = width;
        r.heads = c.heads;
        r.head_dim = hd;
        r.rotary_dim = c.rotary_dim();
        if (c.qk_norm) {
            r.q_weight = vector(l.q_norm.weight), r.q_bias = vector(l.q_norm.bias);
            r.k_weight = vector(l.k_norm.weight), r.k_bias = vector(l.k_norm.bias);
        }
        r.eps = c.norm_eps;
        r.cos = device_cos;
        r.sin = device_sin;
        speech::head_norm_rope_rows(r, stream);
        attention(c, qkv, n, keys, attended);
        device_linear(l.out_proj, attended, n, branch, x);

        layer_norm(l.norm2, x, n, width, c.norm_eps, normed);
        device_linear(l.ffn_up, normed, n, hidden);
        codec::gelu(hidden, n * c.ffn, stream);
        device_linear(l.ffn_down, hidden, n, branch, x);
    }
    layer_norm(w.final_norm, x, n, width, c.norm_eps, x);
    DUET_CUDA_CHECK(cudaMemcpyAsync(host_x.data(), x, host_x.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
    DUET_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void CudaPerceptionDevice::linear(const transcribe::LinearWeights& w, const float* host_x, int64_t n, float* host_out) {
    require(n >= 0, "speech encoder on the GPU: a product over ", n, " rows");
    if (n == 0) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto stream = blas_.stream();
    const int64_t in = w.weight.cols, out = w.weight.rows;
    require(w.bias.empty() || static_cast<int64_t>(w.bias.size()) == out, "speech encoder on the GPU: a bias of ",
            w.bias.size(), " values for a product of ", out, " outputs");
    float* x = grown(product_in_, n * in);
    float* y = grown(product_out_, n * out);
    DUET_CUDA_CHECK(cudaMemcpyAsync(x, host_x, static_cast<size_t>(n * in) * sizeof(float), cudaMemcpyHostToDevice,
                                    stream));
    device_linear(w, x, n, y);
    DUET_CUDA_CHECK(cudaMemcpyAsync(host_out, y, static_cast<size_t>(n * out) * sizeof(float), cudaMemcpyDeviceToHost,
                                    stream));
    DUET_CUDA_CHECK(cudaStreamSynchronize(stream));
}

audio::LogMelForms CudaPerceptionDevice::log_mel(const audio::LogMelFrontEnd& front_end,
                                                 const std::vector<float>& waveform) {
    const audio::MelSettings& s = front_end.settings();
    const auto samples = static_cast<int64_t>(waveform.size());
    audio::LogMelForms forms;
    forms.raw = front_end.zero_rows(samples);
    forms.normalized = front_end.zero_rows(samples);  // sized only; both are filled from the device
    const int64_t n_mels = s.n_mels, count = forms.raw.frames * n_mels;
    // The transform's constants as the CPU's front end holds them (a few kilobytes, sent each call).
    const audio::Fft fft(s.n_fft);
    std::vector<double> twiddles;
    for (const std::complex<double>& w : fft.twiddles()) {
        twiddles.push_back(w.real());
        twiddles.push_back(w.imag());
    }
    std::vector<int32_t> ranges;
    for (int64_t m = 0; m < n_mels; ++m) {
        ranges.push_back(static_cast<int32_t>(front_end.filter_begin(m)));
        ranges.push_back(static_cast<int32_t>(front_end.filter_end(m)));
    }
    const DeviceBuffer window = DeviceBuffer::from_vector(front_end.frame_window());
    const DeviceBuffer twiddle_buffer = DeviceBuffer::from_vector(twiddles);
    const DeviceBuffer filterbank = DeviceBuffer::from_vector(front_end.filterbank());
    const DeviceBuffer range_buffer = DeviceBuffer::from_vector(ranges);

    const std::lock_guard<std::mutex> lock(mutex_);
    const auto stream = blas_.stream();
    float* device_samples = grown(samples_, samples);
    float* raw = grown(mel_raw_, count);
    float* normalized = grown(mel_normalized_, count);
    DUET_CUDA_CHECK(cudaMemcpyAsync(device_samples, waveform.data(), waveform.size() * sizeof(float),
                                    cudaMemcpyHostToDevice, stream));
    DUET_CUDA_CHECK(cudaMemsetAsync(raw, 0, static_cast<size_t>(count) * sizeof(float), stream));
    DUET_CUDA_CHECK(cudaMemsetAsync(normalized, 0, static_cast<size_t>(count) * sizeof(float), stream));
    mel::LogMelFramesArgs a;
    a.waveform = device_samples;
    a.samples = samples;
    a.preemph = s.preemph;
    a.n_fft = s.n_fft;
    a.hop = s.hop;
    a.n_mels = n_mels;
    a.frame_window = window.as<double>();
    a.twiddles = twiddle_buffer.as<double>();
    a.filterbank = filterbank.as<float>();
    a.filter_range = range_buffer.as<int32_t>();
    a.log_guard = s.log_guard;
    a.valid = forms.raw.valid;
    a.out = raw;
    mel::log_mel_frames(a, stream);
    mel::normalize_per_feature(raw, forms.raw.valid, n_mels, normalized, stream);
    DUET_CUDA_CHECK(cudaMemcpyAsync(forms.raw.values.data(), raw, static_cast<size_t>(count) * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream));
    DUET_CUDA_CHECK(cudaMemcpyAsync(forms.normalized.values.data(), normalized,
                                    static_cast<size_t>(count) * sizeof(float), cudaMemcpyDeviceToHost, stream));
    DUET_CUDA_CHECK(cudaStreamSynchronize(stream));  // before the constants' buffers are freed
    return forms;
}

std::shared_ptr<transcribe::PerceptionDevice> make_cuda_perception_device() {
    return std::make_shared<CudaPerceptionDevice>();
}

}  // namespace duet::cuda
