// The recurrent sequence mixers over several tokens: Mamba-2's causal convolution and selective
// scan, and Gated DeltaNet's delta rule token by token (attention over a cache is in
// ops_attention.cu; the chunked forms of both recurrences, for prompts, in delta_rule_chunked.cu and
// ssm_scan_chunked.cu). The recurrences walk their tokens in order, their parallelism coming from
// channels, heads and head dimensions; the convolution's tokens are independent.
#include <cstdint>

#include "kernels/cuda/alignment.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/early_launch.cuh"
#include "kernels/cuda/ops.h"

namespace duet::cuda {

namespace {

constexpr int kMaxConvKernel = 8;
constexpr int kMaxDeltaKeyDim = 256;

// Thread (channel, block of kConvTokens tokens): each output needs only the `kernel` inputs up to
// its token, so the tokens need not be walked in order (one thread walking a channel's 512 prompt
// tokens, each load waiting on memory, took a few hundred µs a layer). Input −history … −1 is the
// ring's; the token block that holds token 0 also moves the ring on, having read the old one first.
constexpr int kConvTokens = 16;
static_assert(kConvTokens > kMaxConvKernel, "a token block's window reaches back into the ring only for block 0");

__global__ void conv1d_silu_kernel(const float* x, int64_t x_stride, int64_t n, int64_t channels, const float* taps,
                                   const float* bias, int kernel, float* ring, float* out, float* ring_history) {
    wait_for_inputs();  // launched early: nothing before this reads or writes memory
    allow_next_kernel();
    const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= channels) return;
    const int history = kernel - 1;
    const int64_t t0 = int64_t(blockIdx.y) * kConvTokens;
    // Inputs t0 − history … t0 + kConvTokens − 1, those past n unused.
    auto input = [&](int64_t t) { return t >= 0 ? x[t * x_stride + c] : ring[(history + t) * channels + c]; };
    float window[kConvTokens + kMaxConvKernel];
#pragma unroll
    for (int i = 0; i < kConvTokens + kMaxConvKernel; ++i) {
        const int64_t t = t0 - history + i;
        window[i] = i < history + kConvTokens && t < n ? input(t) : 0.0f;
    }
    float w[kMaxConvKernel];
#pragma unroll
    for (int j = 0; j < kMaxConvKernel; ++j) w[j] = j < kernel ? taps[c * kernel + j] : 0.0f;
    const float b = bias != nullptr ? bias[c] : 0.0f;
#pragma unroll
    for (int i = 0; i < kConvTokens; ++i) {
        const int64_t t = t0 + i;
        if (t >= n) break;
        float acc = b;
#pragma unroll
        for (int j = 0; j < kMaxConvKernel; ++j) {
            if (j < kernel) acc += w[j] * window[i + j];
        }
        out[t * channels + c] = silu(acc);
        if (ring_history != nullptr) {  // the ring after token t: inputs t + 1 − history …  t
#pragma unroll
            for (int j = 0; j < kMaxConvKernel - 1; ++j) {
                if (j < history) ring_history[(t * history + j) * channels + c] = window[i + 1 + j];
            }
        }
    }
    if (blockIdx.y == 0) {  // the ring after the last token: inputs n − history … n − 1 (the old ring in window)
#pragma unroll
        for (int j = 0; j < kMaxConvKernel - 1; ++j) {
            const int64_t t = n - history + j;
            if (j < history) ring[j * channels + c] = t >= 0 ? x[t * x_stride + c] : window[history + t];
        }
    }
}

// One warp per (head, head-dim row): the row's state is spread over the lanes. The general path,
// for state sizes the vector kernel below does not take.
__global__ void ssm_scan_kernel(SsmScanArgs a) {
    wait_for_inputs();  // launched early: nothing before this reads or writes memory
    allow_next_kernel();
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

// The selective scan with the state in registers: one warp per kScanRows consecutive rows of a
// head, each lane holding CH float4 pieces of every row (state_size ≤ 128·CH, a multiple of 4), so
// the state is read once and written once per call in 16-byte pieces, whatever n, and B and C are
// read once per warp for its rows.
constexpr int kScanWarps = 4;
constexpr int kScanRows = 4;

template <int CH>
__global__ void __launch_bounds__(kScanWarps* kWarpSize) ssm_scan_registers_kernel(SsmScanArgs a) {
    wait_for_inputs();  // launched early: nothing before this reads or writes memory
    allow_next_kernel();
    const int lane = threadIdx.x % kWarpSize;
    const int64_t row_groups = (a.head_dim + kScanRows - 1) / kScanRows;
    const int64_t unit = int64_t(blockIdx.x) * kScanWarps + threadIdx.x / kWarpSize;
    if (unit >= a.heads * row_groups) return;
    const int64_t h = unit / row_groups, p0 = (unit % row_groups) * kScanRows;
    const int64_t g = h / (a.heads / a.groups), inner = a.heads * a.head_dim, ns = a.state_size, pieces = ns / 4;
    float4* state = reinterpret_cast<float4*>(a.state + (h * a.head_dim + p0) * ns);
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float4 s[kScanRows][CH];
#pragma unroll
    for (int r = 0; r < kScanRows; ++r) {
#pragma unroll
        for (int c = 0; c < CH; ++c) {
            const int64_t piece = lane + c * kWarpSize;
            s[r][c] = p0 + r < a.head_dim && piece < pieces ? state[r * pieces + piece] : zero;
        }
    }
    const float a_h = a.a[h], d_h = a.d[h], bias_h = a.dt_bias[h];
    for (int64_t t = 0; t < a.n; ++t) {
        float dt = softplus(a.dt[t * a.dt_stride + h] + bias_h);
        dt = fminf(fmaxf(dt, a.dt_min), a.dt_max);
        const float decay = expf(dt * a_h);
        const float* row = a.x + t * a.x_stride;
        const float* b = row + inner + g * ns;
        const float* c_row = row + inner + a.groups * ns + g * ns;
        float4 bv[CH], cv[CH];
#pragma unroll
        for (int c = 0; c < CH; ++c) {
            const int64_t piece = lane + c * kWarpSize;
            bv[c] = zero;
            cv[c] = zero;
            if (piece < pieces) {
                const int64_t k = 4 * piece;
                bv[c] = make_float4(b[k], b[k + 1], b[k + 2], b[k + 3]);
                cv[c] = make_float4(c_row[k], c_row[k + 1], c_row[k + 2], c_row[k + 3]);
            }
        }
#pragma unroll
        for (int r = 0; r < kScanRows; ++r) {
            if (p0 + r >= a.head_dim) break;
            const float xp = row[h * a.head_dim + p0 + r];
            const float dx = dt * xp;
            float partial = 0.0f;
#pragma unroll
            for (int c = 0; c < CH; ++c) {
                float4& v = s[r][c];
                v.x = v.x * decay + dx * bv[c].x;
                v.y = v.y * decay + dx * bv[c].y;
                v.z = v.z * decay + dx * bv[c].z;
                v.w = v.w * decay + dx * bv[c].w;
                partial += v.x * cv[c].x + v.y * cv[c].y + v.z * cv[c].z + v.w * cv[c].w;
            }
            const float y = warp_sum(partial);
            if (lane == 0) a.y[t * inner + h * a.head_dim + p0 + r] = y + d_h * xp;
            if (a.state_history != nullptr) {
                float4* history =
                    reinterpret_cast<float4*>(a.state_history + ((t * a.heads + h) * a.head_dim + p0 + r) * ns);
#pragma unroll
                for (int c = 0; c < CH; ++c) {
                    const int64_t piece = lane + c * kWarpSize;
                    if (piece < pieces) history[piece] = s[r][c];
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < kScanRows; ++r) {
#pragma unroll
        for (int c = 0; c < CH; ++c) {
            const int64_t piece = lane + c * kWarpSize;
            if (p0 + r < a.head_dim && piece < pieces) state[r * pieces + piece] = s[r][c];
        }
    }
}

// Gated delta rule: block (v-head h, slice of kDeltaColumns value columns), lane = column, warp w
// holding key rows w, w + kDeltaWarps, … of the slice in registers (ROWS of them), so the state is
// read once and written once per call in coalesced 128-byte rows and stays on chip between tokens.
// Per token both Sᵀk and Sᵀq come from the state before the token, in one cross-warp reduction
// through shared memory: with S' = e^g·S + k ⊗ δ,
//   Sᵀk after the decay = e^g·(Sᵀk),   δ = β(v − e^g·Sᵀk),   o = S'ᵀq = e^g·(Sᵀq) + δ·(k·q).
// The token's q and k (and their norms) go through shared memory, double-buffered by token parity
// so two barriers per token suffice; the next token's inputs are loaded while this one is worked.
constexpr int kDeltaWarps = 8;
constexpr int kDeltaThreads = kDeltaWarps * kWarpSize;
constexpr int kDeltaColumns = kWarpSize;

struct DeltaInputs {
    float q = 0.0f, k = 0.0f, v = 0.0f, a = 0.0f, b = 0.0f;
};

template <int ROWS>
__global__ void __launch_bounds__(kDeltaThreads) gated_delta_rule_kernel(GatedDeltaArgs a) {
    wait_for_inputs();  // launched early: nothing before this reads or writes memory
    allow_next_kernel();
    constexpr int kKeys = kDeltaWarps * ROWS;  // at least k_dim; the rows beyond it stay zero
    __shared__ float q_shared[2][kKeys], k_shared[2][kKeys];
    __shared__ float3 norms[2][kDeltaWarps];  // per warp: Σq², Σk², Σq·k of the raw vectors
    __shared__ float2 reduced[2][kDeltaWarps][kWarpSize];  // per warp and column: its rows' Sᵀk, Sᵀq
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, tid = threadIdx.x;
    const int64_t slices = (a.v_dim + kDeltaColumns - 1) / kDeltaColumns;
    const int64_t h = blockIdx.x / slices, column = (blockIdx.x % slices) * kDeltaColumns + lane;
    const int64_t dk = a.k_dim, dv = a.v_dim, kh = h / (a.v_heads / a.k_heads);
    const bool owns_column = column < dv;
    float* state = a.state + h * dk * dv + column;

    float s[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const int64_t i = warp + r * kDeltaWarps;
        s[r] = owns_column && i < dk ? state[i * dv] : 0.0f;
    }

    // Thread tid reads element tid of the token's q and k, and its column's v; all read a and b.
    auto load = [&](int64_t t) {
        DeltaInputs in;
        const float* row = a.qkv + t * a.qkv_stride;
        if (tid < dk) {
            in.q = row[kh * dk + tid];
            in.k = row[a.k_heads * dk + kh * dk + tid];
        }
        if (owns_column) in.v = row[2 * a.k_heads * dk + h * dv + column];
        in.a = a.a[t * a.a_stride + h];
        in.b = a.b[t * a.b_stride + h];
        return in;
    };
    const float q_scale = rsqrtf(float(dk));
    const float neg_exp_a_log = a.neg_exp_a_log[h], dt_bias = a.dt_bias[h];
    DeltaInputs next = load(0);
    for (int64_t t = 0; t < a.n; ++t) {
        const int buf = int(t & 1);
        const DeltaInputs in = next;
        if (t + 1 < a.n) next = load(t + 1);

        if (tid < kKeys) {
            q_shared[buf][tid] = in.q;
            k_shared[buf][tid] = in.k;
        }
        const float qq = warp_sum(in.q * in.q), kk = warp_sum(in.k * in.k), qk = warp_sum(in.q * in.k);
        if (lane == 0) norms[buf][warp] = make_float3(qq, kk, qk);
        __syncthreads();

        float3 total = make_float3(0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int w = 0; w < kDeltaWarps; ++w) {
            const float3 part = norms[buf][w];
            total.x += part.x;
            total.y += part.y;
            total.z += part.z;
        }
        const float q_norm = 1.0f / sqrtf(total.x + 1e-6f) * q_scale;  // q = raw q · q_norm
        const float k_norm = 1.0f / sqrtf(total.y + 1e-6f);            // k = raw k · k_norm
        const float kq = total.z * q_norm * k_norm;
        const float decay = expf(neg_exp_a_log * softplus(in.a + dt_bias));
        const float beta = sigmoid(in.b);

        float sk = 0.0f, sq = 0.0f;  // over this thread's rows, with the raw k and q
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            const int i = warp + r * kDeltaWarps;
            sk = fmaf(s[r], k_shared[buf][i], sk);
            sq = fmaf(s[r], q_shared[buf][i], sq);
        }
        reduced[buf][warp][lane] = make_float2(sk, sq);
        __syncthreads();

        float2 sum = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int w = 0; w < kDeltaWarps; ++w) {
            const float2 part = reduced[buf][w][lane];
            sum.x += part.x;
            sum.y += part.y;
        }
        const float delta = beta * (in.v - decay * (sum.x * k_norm));
        if (warp == 0 && owns_column) a.out[(t * a.v_heads + h) * dv + column] = decay * (sum.y * q_norm) + delta * kq;
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            const int i = warp + r * kDeltaWarps;
            s[r] = fmaf(k_shared[buf][i] * k_norm, delta, s[r] * decay);
        }
    }

#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const int64_t i = warp + r * kDeltaWarps;
        if (owns_column && i < dk) state[i * dv] = s[r];
    }
}

}  // namespace

void causal_conv1d_silu(const float* x, int64_t x_stride, int64_t n, int64_t channels, const float* taps,
                        const float* bias, int64_t kernel, float* ring, float* out, float* ring_history,
                        cudaStream_t stream) {
    require(kernel >= 1 && kernel <= kMaxConvKernel, "causal_conv1d_silu: kernel ", kernel, " is outside 1..",
            kMaxConvKernel);
    if (channels == 0 || n == 0) return;
    const dim3 grid(static_cast<unsigned>((channels + 127) / 128),
                    static_cast<unsigned>((n + kConvTokens - 1) / kConvTokens));
    launch_early(conv1d_silu_kernel, grid, dim3(128), 0, stream, "conv1d_silu_kernel", x, x_stride, n, channels, taps,
                 bias, static_cast<int>(kernel), ring, out, ring_history);
}

void ssm_scan(const SsmScanArgs& args, cudaStream_t stream) {
    const int64_t pairs = args.heads * args.head_dim;
    if (pairs == 0 || args.n == 0) return;
    if (ssm_scan_chunked_fits(args)) {
        ssm_scan_chunked(args, stream);
        return;
    }
    const int64_t ns = args.state_size;
    if (ns > 0 && ns % 4 == 0 && ns <= 8 * kWarpSize && aligned_16(args.state) &&
        (args.state_history == nullptr || aligned_16(args.state_history))) {
        const int64_t units = args.heads * ((args.head_dim + kScanRows - 1) / kScanRows);
        const auto blocks = static_cast<unsigned>((units + kScanWarps - 1) / kScanWarps);
        launch_early(ns <= 4 * kWarpSize ? ssm_scan_registers_kernel<1> : ssm_scan_registers_kernel<2>, dim3(blocks),
                     dim3(kScanWarps * kWarpSize), 0, stream, "ssm_scan_registers_kernel", args);
        return;
    }
    constexpr int kWarps = 4;
    launch_early(ssm_scan_kernel, dim3(static_cast<unsigned>((pairs + kWarps - 1) / kWarps)), dim3(kWarps * kWarpSize),
                 0, stream, "ssm_scan_kernel", args);
}

void gated_delta_rule(const GatedDeltaArgs& args, cudaStream_t stream) {
    require(args.k_dim >= 1 && args.k_dim <= kMaxDeltaKeyDim, "gated_delta_rule: key head dim ", args.k_dim,
            " is outside 1..", kMaxDeltaKeyDim);
    if (args.n == 0 || args.v_heads == 0 || args.v_dim == 0) return;
    if (delta_rule_chunked_fits(args)) {
        delta_rule_chunked(args, stream);
        return;
    }
    const auto blocks =
        static_cast<unsigned>(args.v_heads * ((args.v_dim + kDeltaColumns - 1) / kDeltaColumns));
    const int64_t rows = (args.k_dim + kDeltaWarps - 1) / kDeltaWarps;
    auto* kernel = rows <= 2    ? gated_delta_rule_kernel<2>
                   : rows <= 4  ? gated_delta_rule_kernel<4>
                   : rows <= 8  ? gated_delta_rule_kernel<8>
                   : rows <= 16 ? gated_delta_rule_kernel<16>
                                : gated_delta_rule_kernel<32>;
    launch_early(kernel, dim3(blocks), dim3(kDeltaThreads), 0, stream, "gated_delta_rule_kernel", args);
}

}  // namespace duet::cuda
