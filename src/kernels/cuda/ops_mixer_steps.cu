// A decode token's mixer between its two products in one launch: the causal convolution, the
// recurrence and the gated norm (Backend::mamba_conv_scan_norm, Backend::delta_conv_rule_norm),
// which are otherwise three dependent launches of a few microseconds each for very little work.
//
// The blocks that share inputs form a thread block cluster: a Mamba-2 group's heads share its B
// and C, a Gated DeltaNet key head's value heads share its q and k. Each block convolves the
// shared channels itself (a few hundred channels of four taps) rather than wait for another's,
// and one block of the cluster advances their ring once every block has read it: at the kernel's
// end, after the cluster barrier it needs anyway (a barrier of its own after the convolution cost
// a microsecond, most of it waiting for the slowest block's input). The gated norm's
// sum of squares, over a group or a head that spans several blocks, is read from the other blocks'
// shared memory.
#include <cooperative_groups.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/early_launch.cuh"
#include "kernels/cuda/ops.h"

namespace duet::cuda {

namespace {

namespace cg = cooperative_groups;

constexpr int kStepWarps = 8;
constexpr int kStepThreads = kStepWarps * kWarpSize;
constexpr int64_t kMaxClusterBlocks = 8;  // the portable cluster size
constexpr int kMaxKernel = 8;
constexpr int kChannelsPerThread = 2;  // channels a block convolves: at most 2 · kStepThreads

// One channel of the convolution for the token at conv.x: its taps, bias and ring (the kernel - 1
// previous inputs) are loaded by load(), which needs nothing from earlier kernels, and the token's
// input by finish() after the wait. advance() then moves the ring on by the token: at once where
// the block alone convolves the channel, after a cluster barrier (by one block) where others read
// the same ring.
struct ConvChannel {
    int64_t c = 0;
    float taps[kMaxKernel], window[kMaxKernel], bias = 0.0f, input = 0.0f;

    __device__ void load(const CausalConvArgs& conv, int64_t channel) {
        c = channel;
        const int kernel = static_cast<int>(conv.kernel);
#pragma unroll
        for (int j = 0; j < kMaxKernel; ++j) {
            if (j < kernel) taps[j] = conv.taps[c * kernel + j];
            if (j < kernel - 1) window[j] = conv.ring[j * conv.channels + c];
        }
        if (conv.bias != nullptr) bias = conv.bias[c];
    }
    __device__ float finish(const CausalConvArgs& conv) {
        const int kernel = static_cast<int>(conv.kernel), history = kernel - 1;
        input = conv.x[c];
        float acc = bias;
#pragma unroll
        for (int j = 0; j < kMaxKernel; ++j) {
            if (j < kernel) acc += taps[j] * (j < history ? window[j] : input);
        }
        return silu(acc);
    }
    __device__ void advance(const CausalConvArgs& conv) const {
        const int history = static_cast<int>(conv.kernel) - 1;
#pragma unroll
        for (int j = 0; j < kMaxKernel; ++j) {
            if (j < history) conv.ring[j * conv.channels + c] = j + 1 < history ? window[j + 1] : input;
        }
    }
};

// Σ of `value` over the blocks [first, first + count) of the cluster, each of which has stored its
// own in `mine` (shared memory) before the cluster barrier this follows.
__device__ float cluster_sum(const cg::cluster_group& cluster, float* mine, unsigned first, unsigned count) {
    float total = 0.0f;
    for (unsigned r = first; r < first + count; ++r) total += *cluster.map_shared_rank(mine, r);
    return total;
}

// --- Mamba-2: block h is head h, a cluster a group's heads ----------------------------------------
constexpr int kScanRowsPerWarp = 8;
constexpr int64_t kMaxMambaHeadDim = kStepWarps * kScanRowsPerWarp;
constexpr int64_t kMaxMambaState = 4 * kWarpSize;  // a lane holds one float4 of each state row

__global__ void __launch_bounds__(kStepThreads) mamba_step_kernel(MambaMiddleArgs m) {
    __shared__ float x_conv[kMaxMambaHeadDim], y_head[kMaxMambaHeadDim];
    __shared__ __align__(16) float b_conv[kMaxMambaState];
    __shared__ __align__(16) float c_conv[kMaxMambaState];
    __shared__ float reduce[32];
    __shared__ float head_squares;
    const cg::cluster_group cluster = cg::this_cluster();
    const SsmScanArgs& s = m.scan;
    const int64_t h = blockIdx.x, hd = s.head_dim, ns = s.state_size, heads_per_group = s.heads / s.groups;
    const int64_t g = h / heads_per_group, inner = s.heads * hd;
    const int64_t b_first = inner + g * ns, c_first = inner + s.groups * ns + g * ns;
    // Channel i of the block: the head's x channels (their rings this block's alone), then the
    // group's B and C channels; at most kChannelsPerThread a thread.
    auto channel_of = [&](int64_t i) {
        return i < hd ? h * hd + i : i < hd + ns ? b_first + (i - hd) : c_first + (i - hd - ns);
    };
    ConvChannel channels[kChannelsPerThread];
#pragma unroll
    for (int u = 0; u < kChannelsPerThread; ++u) {
        const int64_t i = threadIdx.x + u * kStepThreads;
        if (i < hd + 2 * ns) channels[u].load(m.conv, channel_of(i));
    }
    // The head's state and constants: nothing before this launch writes them.
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int64_t pieces = ns / 4;
    const bool has_piece = lane < pieces;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float4* state = reinterpret_cast<float4*>(s.state + h * hd * ns);
    float4 rows[kScanRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kScanRowsPerWarp; ++r) {
        const int64_t p = warp + r * kStepWarps;
        rows[r] = p < hd && has_piece ? state[p * pieces + lane] : zero;
    }
    const float dt_bias = s.dt_bias[h], a_h = s.a[h], d_h = s.d[h];
    const float norm_weight = threadIdx.x < hd ? m.norm_weight[h * hd + threadIdx.x] : 0.0f;
    wait_for_inputs();  // launched early: nothing before this reads activations or writes anything
    allow_next_kernel();
    const float dt_raw = s.dt[h], z = threadIdx.x < hd ? m.z[h * hd + threadIdx.x] : 0.0f;

#pragma unroll
    for (int u = 0; u < kChannelsPerThread; ++u) {
        const int64_t i = threadIdx.x + u * kStepThreads;
        if (i >= hd + 2 * ns) continue;
        const float out = channels[u].finish(m.conv);
        if (i < hd) {
            x_conv[i] = out;
            channels[u].advance(m.conv);
        } else if (i < hd + ns) {
            b_conv[i - hd] = out;
        } else {
            c_conv[i - hd - ns] = out;
        }
    }
    __syncthreads();

    // The scan, as ssm_scan_registers_kernel: warp w takes rows w, w + kStepWarps, … of the head,
    // a lane one float4 of each row's state. The rows' outputs (C · state, summed over the lanes)
    // are reduced together: halving exchanges leave each lane with one row's sum (`owned`), 9
    // shuffles where a warp sum a row took 40 in turn.
    float dt = softplus(dt_raw + dt_bias);
    dt = fminf(fmaxf(dt, s.dt_min), s.dt_max);
    const float decay = expf(dt * a_h);
    const float4 bv = has_piece ? reinterpret_cast<const float4*>(b_conv)[lane] : zero;
    const float4 cv = has_piece ? reinterpret_cast<const float4*>(c_conv)[lane] : zero;
    float part[kScanRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kScanRowsPerWarp; ++r) {
        const int64_t p = warp + r * kStepWarps;
        part[r] = 0.0f;
        if (p < hd) {
            const float dx = dt * x_conv[p];
            float4& v = rows[r];
            v.x = v.x * decay + dx * bv.x;
            v.y = v.y * decay + dx * bv.y;
            v.z = v.z * decay + dx * bv.z;
            v.w = v.w * decay + dx * bv.w;
            part[r] = v.x * cv.x + v.y * cv.y + v.z * cv.z + v.w * cv.w;
            if (has_piece) state[p * pieces + lane] = v;
        }
    }
    static_assert(kScanRowsPerWarp == 8, "three halving exchanges reduce the rows");
#pragma unroll
    for (int half = kScanRowsPerWarp / 2, offset = 16; half >= 1; half /= 2, offset /= 2) {
        const bool upper = (lane & offset) != 0;  // keeps the upper half of its rows
#pragma unroll
        for (int k = 0; k < half; ++k) {
            const float keep = upper ? part[k + half] : part[k];
            const float give = upper ? part[k] : part[k + half];
            part[k] = keep + __shfl_xor_sync(0xFFFFFFFFu, give, offset);
        }
    }
    part[0] += __shfl_xor_sync(0xFFFFFFFFu, part[0], 2);
    part[0] += __shfl_xor_sync(0xFFFFFFFFu, part[0], 1);
    const int owned = ((lane >> 4) & 1) * 4 + ((lane >> 3) & 1) * 2 + ((lane >> 2) & 1);  // its row r
    const int64_t owned_row = warp + owned * kStepWarps;
    if ((lane & 3) == 0 && owned_row < hd) y_head[owned_row] = part[0] + d_h * x_conv[owned_row];
    __syncthreads();

    // The gated norm: y · silu(z), normalised over the group's heads.
    const int64_t i = threadIdx.x;
    const float gated = i < hd ? y_head[i] * silu(z) : 0.0f;
    const float squares = block_sum(gated * gated, reduce);
    if (threadIdx.x == 0) head_squares = squares;
    cluster.sync();
    const float total = cluster_sum(cluster, &head_squares, 0, cluster.num_blocks());
    const float inv = rsqrtf(total / float(heads_per_group * hd) + m.eps);
    if (i < hd) s.y[h * hd + i] = norm_weight * (gated * inv);
    cluster.sync();  // no block leaves while another still reads its sum; every block has read the rings
    if (cluster.block_rank() == 0) {
#pragma unroll
        for (int u = 0; u < kChannelsPerThread; ++u) {
            const int64_t c = threadIdx.x + u * kStepThreads;
            if (c >= hd && c < hd + 2 * ns) channels[u].advance(m.conv);
        }
    }
}

// --- Gated DeltaNet: block (value head h, slice of kWarpSize value columns), as
// gated_delta_rule_kernel; a cluster a key head's value heads, every slice of each ---------------
constexpr int kDeltaRowsPerWarp = 16;
constexpr int64_t kMaxDeltaKeyDim = kStepWarps * kDeltaRowsPerWarp;

__global__ void __launch_bounds__(kStepThreads) delta_step_kernel(DeltaMiddleArgs m) {
    __shared__ float q_conv[kMaxDeltaKeyDim], k_conv[kMaxDeltaKeyDim], v_conv[kWarpSize];
    __shared__ float3 norms[kStepWarps];                // per warp: Σq², Σk², Σq·k of the raw vectors
    __shared__ float2 reduced[kStepWarps][kWarpSize];  // per warp and column: its rows' Sᵀk, Sᵀq
    __shared__ float slice_squares;
    const cg::cluster_group cluster = cg::this_cluster();
    const GatedDeltaArgs& a = m.rule;
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, tid = threadIdx.x;
    const int64_t dk = a.k_dim, dv = a.v_dim, slices = (dv + kWarpSize - 1) / kWarpSize;
    const int64_t h = blockIdx.x / slices, slice = blockIdx.x % slices, column = slice * kWarpSize + lane;
    const int64_t kh = h / (a.v_heads / a.k_heads);
    const int64_t q_first = kh * dk, k_first = a.k_heads * dk + kh * dk, v_first = 2 * a.k_heads * dk + h * dv;
    const bool owns_column = column < dv;
    // The block's channels: the key head's q and k, then the slice's v (their rings this block's
    // alone); the state and constants. Nothing before this launch writes them.
    const int64_t slice_columns = dv - slice * kWarpSize < kWarpSize ? dv - slice * kWarpSize : kWarpSize;
    const int64_t block_channels = 2 * dk + slice_columns;
    auto channel_of = [&](int64_t i) {
        return i < dk ? q_first + i : i < 2 * dk ? k_first + (i - dk) : v_first + slice * kWarpSize + (i - 2 * dk);
    };
    ConvChannel channels[kChannelsPerThread];
#pragma unroll
    for (int u = 0; u < kChannelsPerThread; ++u) {
        const int64_t i = tid + u * kStepThreads;
        if (i < block_channels) channels[u].load(m.conv, channel_of(i));
    }
    float* state = a.state + h * dk * dv + column;
    float s[kDeltaRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kDeltaRowsPerWarp; ++r) {
        const int64_t i = warp + r * kStepWarps;
        s[r] = owns_column && i < dk ? state[i * dv] : 0.0f;
    }
    const float neg_exp_a_log = a.neg_exp_a_log[h], dt_bias = a.dt_bias[h];
    const float norm_weight = owns_column ? m.norm_weight[column] : 0.0f;
    wait_for_inputs();  // launched early: nothing before this reads activations or writes anything
    allow_next_kernel();
    const float a_in = a.a[h], b_in = a.b[h], z = owns_column ? m.z[h * dv + column] : 0.0f;

#pragma unroll
    for (int u = 0; u < kChannelsPerThread; ++u) {
        const int64_t i = tid + u * kStepThreads;
        if (i >= block_channels) continue;
        const float out = channels[u].finish(m.conv);
        if (i < dk) {
            q_conv[i] = out;
        } else if (i < 2 * dk) {
            k_conv[i - dk] = out;
        } else {
            v_conv[i - 2 * dk] = out;
            channels[u].advance(m.conv);
        }
    }
    for (int64_t i = dk + tid; i < kMaxDeltaKeyDim; i += blockDim.x) q_conv[i] = k_conv[i] = 0.0f;  // rows past k_dim
    __syncthreads();

    // The token, as gated_delta_rule_kernel's.
    const float q_in = tid < dk ? q_conv[tid] : 0.0f, k_in = tid < dk ? k_conv[tid] : 0.0f;
    const float qq = warp_sum(q_in * q_in), kk = warp_sum(k_in * k_in), qk = warp_sum(q_in * k_in);
    if (lane == 0) norms[warp] = make_float3(qq, kk, qk);
    __syncthreads();
    float3 total = make_float3(0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < kStepWarps; ++w) {
        total.x += norms[w].x;
        total.y += norms[w].y;
        total.z += norms[w].z;
    }
    const float q_norm = 1.0f / sqrtf(total.x + 1e-6f) * rsqrtf(float(dk));
    const float k_norm = 1.0f / sqrtf(total.y + 1e-6f);
    const float kq = total.z * q_norm * k_norm;
    const float decay = expf(neg_exp_a_log * softplus(a_in + dt_bias));
    const float beta = sigmoid(b_in);
    float sk = 0.0f, sq = 0.0f;
#pragma unroll
    for (int r = 0; r < kDeltaRowsPerWarp; ++r) {
        const int i = warp + r * kStepWarps;
        sk = fmaf(s[r], k_conv[i], sk);
        sq = fmaf(s[r], q_conv[i], sq);
    }
    reduced[warp][lane] = make_float2(sk, sq);
    __syncthreads();
    float2 sum = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < kStepWarps; ++w) {
        sum.x += reduced[w][lane].x;
        sum.y += reduced[w][lane].y;
    }
    const float v = owns_column ? v_conv[lane] : 0.0f;
    const float delta = beta * (v - decay * (sum.x * k_norm));
    const float out = owns_column ? decay * (sum.y * q_norm) + delta * kq : 0.0f;
#pragma unroll
    for (int r = 0; r < kDeltaRowsPerWarp; ++r) {
        const int64_t i = warp + r * kStepWarps;
        s[r] = fmaf(k_conv[i] * k_norm, delta, s[r] * decay);
        if (owns_column && i < dk) state[i * dv] = s[r];
    }

    // The gated norm over the value head, whose slices are consecutive blocks of the cluster.
    const float squares = warp_sum(out * out);
    if (tid == 0) slice_squares = squares;
    cluster.sync();
    const unsigned head_first = cluster.block_rank() / unsigned(slices) * unsigned(slices);
    const float inv = rsqrtf(cluster_sum(cluster, &slice_squares, head_first, unsigned(slices)) / float(dv) + m.eps);
    if (warp == 0 && owns_column) {
        a.out[h * dv + column] = norm_weight * (out * inv) * silu(z);
    }
    cluster.sync();  // no block leaves while another still reads its sum; every block has read the rings
    if (cluster.block_rank() == 0) {
#pragma unroll
        for (int u = 0; u < kChannelsPerThread; ++u) {
            const int64_t i = tid + u * kStepThreads;
            if (i < 2 * dk) channels[u].advance(m.conv);
        }
    }
}

bool conv_step_fits(const CausalConvArgs& conv) {
    return conv.ring_history == nullptr && conv.kernel >= 1 && conv.kernel <= kMaxKernel &&
           thread_block_clusters_available();
}

}  // namespace

bool mamba_step_fits(const MambaMiddleArgs& m) {
    const SsmScanArgs& s = m.scan;
    if (s.n != 1 || s.state_history != nullptr || !conv_step_fits(m.conv)) return false;
    if (s.groups <= 0 || s.heads % s.groups != 0 || s.heads / s.groups > kMaxClusterBlocks) return false;
    return m.norm_groups == s.groups && s.head_dim >= 1 && s.head_dim <= kMaxMambaHeadDim && s.state_size % 4 == 0 &&
           s.state_size >= 4 && s.state_size <= kMaxMambaState &&
           m.conv.channels == s.heads * s.head_dim + 2 * s.groups * s.state_size;
}

void mamba_step(const MambaMiddleArgs& m, cudaStream_t stream) {
    require(mamba_step_fits(m), "mamba_step: ", m.scan.n, " tokens of ", m.scan.heads, " heads of ", m.scan.head_dim,
            " in ", m.scan.groups, " groups, ", m.scan.state_size, " states, do not fit the one-launch step");
    launch_early_in_clusters(static_cast<unsigned>(m.scan.heads / m.scan.groups), mamba_step_kernel,
                             dim3(static_cast<unsigned>(m.scan.heads)), dim3(kStepThreads), 0, stream,
                             "mamba_step_kernel", m);
}

bool delta_step_fits(const DeltaMiddleArgs& m) {
    const GatedDeltaArgs& a = m.rule;
    if (a.n != 1 || !conv_step_fits(m.conv)) return false;
    if (a.k_heads <= 0 || a.v_heads % a.k_heads != 0 || a.k_dim < 1 || a.k_dim > kMaxDeltaKeyDim || a.v_dim < 1) {
        return false;
    }
    const int64_t slices = (a.v_dim + kWarpSize - 1) / kWarpSize;
    return a.v_heads / a.k_heads * slices <= kMaxClusterBlocks &&
           m.conv.channels == 2 * a.k_heads * a.k_dim + a.v_heads * a.v_dim;
}

void delta_step(const DeltaMiddleArgs& m, cudaStream_t stream) {
    const GatedDeltaArgs& a = m.rule;
    require(delta_step_fits(m), "delta_step: ", a.n, " tokens of ", a.v_heads, " value heads of ", a.v_dim, " over ",
            a.k_heads, " key heads of ", a.k_dim, " do not fit the one-launch step");
    const int64_t slices = (a.v_dim + kWarpSize - 1) / kWarpSize;
    launch_early_in_clusters(static_cast<unsigned>(a.v_heads / a.k_heads * slices), delta_step_kernel,
                             dim3(static_cast<unsigned>(a.v_heads * slices)), dim3(kStepThreads), 0, stream,
                             "delta_step_kernel", m);
}

}  // namespace duet::cuda
