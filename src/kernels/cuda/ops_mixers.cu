// The sequence mixers: Mamba-2's causal convolution and selective scan, Gated DeltaNet's delta
// rule, and causal attention over a key/value cache. Each walks its tokens in order, as the
// recurrences require; parallelism comes from channels, heads and head dimensions.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/ops.h"

namespace duet::cuda {

namespace {

constexpr int kMaxConvKernel = 8;
constexpr int kMaxDeltaKeyDim = 256;

// One thread per channel: a window of the last `kernel` inputs slides over the tokens.
__global__ void conv1d_silu_kernel(const float* x, int64_t x_stride, int64_t n, int64_t channels, const float* taps,
                                   const float* bias, int kernel, float* ring, float* out, float* ring_history) {
    const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= channels) return;
    const int history = kernel - 1;
    float window[kMaxConvKernel];
    for (int j = 0; j < history; ++j) window[j] = ring[j * channels + c];
    const float* w = taps + c * kernel;
    for (int64_t t = 0; t < n; ++t) {
        window[history] = x[t * x_stride + c];
        float acc = bias != nullptr ? bias[c] : 0.0f;
        for (int j = 0; j < kernel; ++j) acc += w[j] * window[j];
        out[t * channels + c] = silu(acc);
        for (int j = 0; j < history; ++j) window[j] = window[j + 1];
        if (ring_history != nullptr) {
            for (int j = 0; j < history; ++j) ring_history[(t * history + j) * channels + c] = window[j];
        }
    }
    for (int j = 0; j < history; ++j) ring[j * channels + c] = window[j];
}

// One warp per (head, head-dim row): the row's state is spread over the lanes.
__global__ void ssm_scan_kernel(SsmScanArgs a) {
    const int64_t pair = int64_t(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
    if (pair >= a.heads * a.head_dim) return;
    const int lane = threadIdx.x % kWarpSize;
    const int64_t h = pair / a.head_dim, p = pair % a.head_dim;
    const int64_t g = h / (a.heads / a.groups), inner = a.heads * a.head_dim, ns = a.state_size;
    float* state = a.state + (h * a.head_dim + p) * ns;
    for (int64_t t = 0; t < a.n; ++t) {
        float dt = softplus(a.dt[t * a.dt_stride + h] + a.dt_bias[h]);
        dt = fminf(fmaxf(dt, a.dt_min), a.dt_max);
        const float decay = expf(dt * a.a[h]);
        const float* row = a.x + t * a.x_stride;
        const float xp = row[h * a.head_dim + p];
        const float* b = row + inner + g * ns;
        const float* c = row + inner + a.groups * ns + g * ns;
        const float dx = dt * xp;
        float partial = 0.0f;
        for (int64_t k = lane; k < ns; k += kWarpSize) {
            const float s = state[k] * decay + dx * b[k];
            state[k] = s;
            partial += s * c[k];
            if (a.state_history != nullptr) a.state_history[((t * a.heads + h) * a.head_dim + p) * ns + k] = s;
        }
        const float y = warp_sum(partial);
        if (lane == 0) a.y[t * inner + h * a.head_dim + p] = y + a.d[h] * xp;
    }
}

// One block per v-head, one thread per value column of the state, which it keeps in registers.
__global__ void gated_delta_rule_kernel(GatedDeltaArgs a) {
    __shared__ float shared[32];
    extern __shared__ float qk[];  // q [k_dim] then k [k_dim]
    const int64_t h = blockIdx.x, kh = h / (a.v_heads / a.k_heads), dk = a.k_dim, j = threadIdx.x;
    const bool owns_column = j < a.v_dim;
    float* state = a.state + h * dk * a.v_dim;
    float column[kMaxDeltaKeyDim];
    for (int64_t i = 0; i < dk; ++i) column[i] = owns_column ? state[i * a.v_dim + j] : 0.0f;
    const float q_scale = rsqrtf(float(dk));
    for (int64_t t = 0; t < a.n; ++t) {
        const float* row = a.qkv + t * a.qkv_stride;
        const float* q_raw = row + kh * dk;
        const float* k_raw = row + a.k_heads * dk + kh * dk;
        float q_sum = 0.0f, k_sum = 0.0f;
        for (int64_t i = threadIdx.x; i < dk; i += blockDim.x) {
            q_sum += q_raw[i] * q_raw[i];
            k_sum += k_raw[i] * k_raw[i];
        }
        const float q_inv = 1.0f / sqrtf(block_sum(q_sum, shared) + 1e-6f);
        const float k_inv = 1.0f / sqrtf(block_sum(k_sum, shared) + 1e-6f);
        for (int64_t i = threadIdx.x; i < dk; i += blockDim.x) {
            qk[i] = q_raw[i] * q_inv * q_scale;
            qk[dk + i] = k_raw[i] * k_inv;
        }
        __syncthreads();
        const float g = a.neg_exp_a_log[h] * softplus(a.a[t * a.a_stride + h] + a.dt_bias[h]);
        const float beta = sigmoid(a.b[t * a.b_stride + h]);
        const float decay = expf(g);
        if (owns_column) {
            const float v = row[2 * a.k_heads * dk + h * a.v_dim + j];
            float kv = 0.0f;
            for (int64_t i = 0; i < dk; ++i) {
                column[i] *= decay;
                kv += column[i] * qk[dk + i];
            }
            const float delta = beta * (v - kv);
            float o = 0.0f;
            for (int64_t i = 0; i < dk; ++i) {
                column[i] += qk[dk + i] * delta;
                o += column[i] * qk[i];
            }
            a.out[t * a.v_heads * a.v_dim + h * a.v_dim + j] = o;
        }
        __syncthreads();  // q and k of the next token overwrite these
    }
    if (owns_column) {
        for (int64_t i = 0; i < dk; ++i) state[i * a.v_dim + j] = column[i];
    }
}

// One block per (token, head): scores over the visible keys, their softmax, the weighted values.
__global__ void attention_kernel(AttentionArgs a, float* scores) {
    __shared__ float shared[32];
    const int64_t t = blockIdx.x / a.heads, h = blockIdx.x % a.heads;
    const int64_t kv_h = h / (a.heads / a.kv_heads), hd = a.head_dim, kv_width = a.kv_heads * hd;
    const int64_t visible = a.pos + t + 1;
    const float* q = a.q + (t * a.heads + h) * hd;
    float* s = scores + int64_t(blockIdx.x) * (a.pos + a.n);
    float best = -INFINITY;
    for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) {
        const float* k = a.k_cache + j * kv_width + kv_h * hd;
        float dot = 0.0f;
        for (int64_t d = 0; d < hd; ++d) dot += q[d] * k[d];
        s[j] = dot * a.scale;
        best = fmaxf(best, s[j]);
    }
    best = block_max(best, shared);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) {
        s[j] = expf(s[j] - best);
        sum += s[j];
    }
    const float total = block_sum(sum, shared);  // its barriers also publish s[] to every thread
    for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (int64_t j = 0; j < visible; ++j) acc += s[j] * a.v_cache[j * kv_width + kv_h * hd + d];
        a.out[(t * a.heads + h) * hd + d] = acc / total;
    }
}

}  // namespace

void causal_conv1d_silu(const float* x, int64_t x_stride, int64_t n, int64_t channels, const float* taps,
                        const float* bias, int64_t kernel, float* ring, float* out, float* ring_history,
                        cudaStream_t stream) {
    require(kernel >= 1 && kernel <= kMaxConvKernel, "causal_conv1d_silu: kernel ", kernel, " is outside 1..",
            kMaxConvKernel);
    if (channels == 0) return;
    conv1d_silu_kernel<<<static_cast<unsigned>((channels + 127) / 128), 128, 0, stream>>>(
        x, x_stride, n, channels, taps, bias, static_cast<int>(kernel), ring, out, ring_history);
    DUET_CUDA_CHECK_LAUNCH("conv1d_silu_kernel");
}

void ssm_scan(const SsmScanArgs& args, cudaStream_t stream) {
    const int64_t pairs = args.heads * args.head_dim;
    if (pairs == 0 || args.n == 0) return;
    constexpr int kWarps = 4;
    ssm_scan_kernel<<<static_cast<unsigned>((pairs + kWarps - 1) / kWarps), kWarps * kWarpSize, 0, stream>>>(args);
    DUET_CUDA_CHECK_LAUNCH("ssm_scan_kernel");
}

void gated_delta_rule(const GatedDeltaArgs& args, cudaStream_t stream) {
    require(args.k_dim <= kMaxDeltaKeyDim, "gated_delta_rule: key head dim ", args.k_dim, " exceeds ",
            kMaxDeltaKeyDim);
    if (args.n == 0 || args.v_heads == 0) return;
    const int threads = static_cast<int>(((args.v_dim + kWarpSize - 1) / kWarpSize) * kWarpSize);
    gated_delta_rule_kernel<<<static_cast<unsigned>(args.v_heads), threads,
                              static_cast<size_t>(2 * args.k_dim) * sizeof(float), stream>>>(args);
    DUET_CUDA_CHECK_LAUNCH("gated_delta_rule_kernel");
}

void attention(const AttentionArgs& args, float* scores, cudaStream_t stream) {
    if (args.n * args.heads == 0) return;
    attention_kernel<<<static_cast<unsigned>(args.n * args.heads), 128, 0, stream>>>(args, scores);
    DUET_CUDA_CHECK_LAUNCH("attention_kernel");
}

}  // namespace duet::cuda
