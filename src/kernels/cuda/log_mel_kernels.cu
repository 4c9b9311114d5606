#include "kernels/cuda/log_mel_kernels.h"

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"

namespace duet::cuda::mel {

namespace {

constexpr int kNormalizeThreads = 128;

// (a + bi)(c + di) as the CPU's std::complex<double> computes it: (ac − bd) + (ad + bc)i, each
// product and sum rounded on its own.
__device__ __forceinline__ double2 complex_product(double2 a, double2 b) {
    return make_double2(__dsub_rn(__dmul_rn(a.x, b.x), __dmul_rn(a.y, b.y)),
                        __dadd_rn(__dmul_rn(a.x, b.y), __dmul_rn(a.y, b.x)));
}

// The pre-emphasised sample j, in float as the CPU computes it.
__device__ __forceinline__ float emphasized(const LogMelFramesArgs& a, int64_t j) {
    return j == 0 ? a.waveform[0] : __fsub_rn(a.waveform[j], __fmul_rn(a.preemph, a.waveform[j - 1]));
}

// Block t is frame t; n_fft / 2 threads, one butterfly each a stage.
__global__ void log_mel_frames_kernel(LogMelFramesArgs a) {
    __shared__ double2 data[kMaxFftSize];
    __shared__ double power[kMaxFftSize / 2 + 1];
    const int64_t t = blockIdx.x, n = a.n_fft, bins = n / 2 + 1;
    const int bits = __ffsll(static_cast<long long>(n)) - 1;
    // The frame centred on sample t · hop (zeros outside the signal), windowed, in bit-reversed order.
    const int64_t start = t * a.hop - n / 2;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const int64_t j = start + i;
        const double x = j >= 0 && j < a.samples ? static_cast<double>(emphasized(a, j)) : 0.0;
        const unsigned reversed = __brev(static_cast<unsigned>(i)) >> (32 - bits);
        data[reversed] = make_double2(__dmul_rn(x, a.frame_window[i]), 0.0);
    }
    __syncthreads();
    const auto* twiddles = reinterpret_cast<const double2*>(a.twiddles);
    for (int64_t len = 2; len <= n; len <<= 1) {
        const int64_t half = len / 2, step = n / len;
        for (int64_t b = threadIdx.x; b < n / 2; b += blockDim.x) {
            const int64_t j = b % half, first = b / half * len + j;
            const double2 u = data[first], v = complex_product(twiddles[j * step], data[first + half]);
            data[first + half] = make_double2(__dsub_rn(u.x, v.x), __dsub_rn(u.y, v.y));
            data[first] = make_double2(__dadd_rn(u.x, v.x), __dadd_rn(u.y, v.y));
        }
        __syncthreads();
    }
    for (int64_t k = threadIdx.x; k < bins; k += blockDim.x) {
        power[k] = __dadd_rn(__dmul_rn(data[k].x, data[k].x), __dmul_rn(data[k].y, data[k].y));
    }
    __syncthreads();
    for (int64_t m = threadIdx.x; m < a.n_mels; m += blockDim.x) {
        const float* filter = a.filterbank + m * bins;
        double energy = 0.0;
        for (int32_t k = a.filter_range[2 * m]; k < a.filter_range[2 * m + 1]; ++k) {
            energy = __dadd_rn(energy, __dmul_rn(static_cast<double>(filter[k]), power[k]));
        }
        a.out[t * a.n_mels + m] = static_cast<float>(log(__dadd_rn(energy, a.log_guard)));
    }
}

// Thread m is mel bin m, over the valid rows in order, as the CPU sums them.
__global__ void __launch_bounds__(kNormalizeThreads)
    normalize_per_feature_kernel(const float* mel, int64_t valid, int64_t n_mels, float* out) {
    const int64_t m = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (m >= n_mels) return;
    double sum = 0.0;
    for (int64_t t = 0; t < valid; ++t) sum = __dadd_rn(sum, static_cast<double>(mel[t * n_mels + m]));
    const double mean = __ddiv_rn(sum, static_cast<double>(valid));
    double squares = 0.0;
    for (int64_t t = 0; t < valid; ++t) {
        const double d = __dsub_rn(static_cast<double>(mel[t * n_mels + m]), mean);
        squares = __dadd_rn(squares, __dmul_rn(d, d));
    }
    const double std_dev = __dadd_rn(__dsqrt_rn(__ddiv_rn(squares, static_cast<double>(valid - 1))), 1e-5);
    for (int64_t t = 0; t < valid; ++t) {
        const double d = __dsub_rn(static_cast<double>(mel[t * n_mels + m]), mean);
        out[t * n_mels + m] = static_cast<float>(__ddiv_rn(d, std_dev));
    }
}

}  // namespace

void log_mel_frames(const LogMelFramesArgs& a, cudaStream_t stream) {
    require(a.n_fft >= 2 && a.n_fft <= kMaxFftSize && (a.n_fft & (a.n_fft - 1)) == 0 && a.hop > 0 && a.n_mels > 0,
            "log-mel on the GPU: n_fft ", a.n_fft, " (a power of two up to ", kMaxFftSize, "), hop ", a.hop, ", ",
            a.n_mels, " mel bins");
    if (a.valid == 0) return;
    log_mel_frames_kernel<<<static_cast<unsigned>(a.valid), static_cast<unsigned>(a.n_fft / 2), 0, stream>>>(a);
    DUET_CUDA_CHECK_LAUNCH("log_mel_frames_kernel");
}

void normalize_per_feature(const float* mel, int64_t valid, int64_t n_mels, float* out, cudaStream_t stream) {
    require(valid >= 2, "log-mel normalisation on the GPU: ", valid, " frames (needs at least 2)");
    const auto blocks = static_cast<unsigned>((n_mels + kNormalizeThreads - 1) / kNormalizeThreads);
    normalize_per_feature_kernel<<<blocks, kNormalizeThreads, 0, stream>>>(mel, valid, n_mels, out);
    DUET_CUDA_CHECK_LAUNCH("normalize_per_feature_kernel");
}

}  // namespace duet::cuda::mel
