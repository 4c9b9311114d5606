// The sequence mixers: Mamba-2's causal convolution and selective scan, Gated DeltaNet's delta
// rule, and causal attention over a key/value cache. Each walks its tokens in order, as the
// recurrences require; parallelism comes from channels, heads and head dimensions.
#include <algorithm>
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

// One thread per channel: a window of the last `kernel` inputs slides over the tokens.
__global__ void conv1d_silu_kernel(const float* x, int64_t x_stride, int64_t n, int64_t channels, const float* taps,
                                   const float* bias, int kernel, float* ring, float* out, float* ring_history) {
    wait_for_inputs();  // launched early: nothing before this reads or writes memory
    allow_next_kernel();
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

// Causal attention over the cache as split-context work ("flash decoding"): block (token t, kv head,
// up to GMAX of the query heads it serves, split s) runs an online softmax over split s's keys and
// leaves the unnormalised sum of values with its running max and sum in a partial record, which
// attention_combine_kernel merges; where one split covers the context the block writes the output
// itself. The splits are laid at run time over the keys the position makes visible, so a launch
// recorded once serves every position up to the cache's capacity.
//
// The split's keys and values stream through shared memory in tiles of kAttentionWarps · KU rows
// (each padded to 32 · DPL floats), kAttentionStages - 1 tiles ahead of the one being worked
// (cp.async), each warp taking KU rows of a tile. A warp's lanes hold the dims lane, lane + 32, …
// (DPL of them) of the group's queries and of its running output, so each key and value row is
// read once for the whole group.
constexpr int kAttentionWarps = 4;
constexpr int kAttentionThreads = kAttentionWarps * kWarpSize;
constexpr int kAttentionStages = 4;
constexpr int64_t kSplitBytes = 32 * 1024;  // the least cache (keys and values) a split is given
constexpr int64_t kAttentionBlocks = 264;  // blocks to aim for: two per SM of an H100 / H200
constexpr int64_t kMaxSplits = 512;

// The fewest keys a split is given: a split's block streams its keys and values through one SM, so
// a split of too many bytes waits on that SM's share of the memory (64 KiB splits of 256-wide
// heads were slower than 32 KiB), while more splits than that cost more in the combine than they
// save.
__host__ __device__ constexpr int64_t fewest_keys_per_split(int64_t head_dim) {
    const int64_t keys = kSplitBytes / (2 * head_dim * int64_t(sizeof(float)));
    return keys > 8 ? keys : 8;
}

// How the visible keys fall into splits when the kernels run. A position read on the device is
// read before the kernel's wait (its latency was a tenth of a split's time after it): it is written
// by the host or by a kernel that finished before this launch began, never by the one before.
struct AttentionSpan {
    int64_t pos = 0;     // cache rows before the new tokens
    int64_t total = 0;   // keys the last token sees
    int64_t chunk = 0;   // keys per split
    int64_t active = 0;  // splits that hold keys
};

__device__ __forceinline__ AttentionSpan attention_span(const AttentionArgs& a, int64_t bound, int64_t splits) {
    AttentionSpan span;
    span.pos = a.position != nullptr ? int64_t(*a.position) : a.pos;
    span.total = min(span.pos + a.n, bound);
    span.chunk = max(fewest_keys_per_split(a.head_dim), (span.total + splits - 1) / splits);
    span.active = (span.total + span.chunk - 1) / span.chunk;
    return span;
}

// Asynchronous global-to-shared copies: 16 bytes (both addresses 16-byte aligned) or 4, in commit
// groups a thread waits for. Before sm_80 they are plain copies, done when issued.
__device__ __forceinline__ void copy_async_16(float* shared, const float* global) {
#if __CUDA_ARCH__ >= 800
    const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(shared));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(global) : "memory");
#else
    *reinterpret_cast<float4*>(shared) = *reinterpret_cast<const float4*>(global);
#endif
}
__device__ __forceinline__ void copy_async_4(float* shared, const float* global) {
#if __CUDA_ARCH__ >= 800
    const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(shared));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(to), "l"(global) : "memory");
#else
    *shared = *global;
#endif
}
__device__ __forceinline__ void copy_async_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int Pending>
__device__ __forceinline__ void copy_async_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}

// A tile's rows copied 4 bytes at a time, for head sizes or caches the 16-byte copies cannot take;
// kept out of line so the common path stays small.
__device__ __noinline__ void fetch_rows_narrow(float* stage, int row_floats, const float* keys, const float* values,
                                               int64_t j0, int64_t limit, int64_t kv_width, int hd, int tile_rows,
                                               int warp, int lane) {
    for (int rr = warp; rr < 2 * tile_rows; rr += kAttentionWarps) {
        const int r = rr % tile_rows;
        if (j0 + r >= limit) continue;
        const float* src = (rr < tile_rows ? keys : values) + (j0 + r) * kv_width;
        float* dst = stage + rr * row_floats;
        for (int c = lane; c < hd; c += kWarpSize) copy_async_4(dst + c, src + c);
    }
}

template <int KU>
__host__ __device__ constexpr int attention_tile() {
    return kAttentionWarps * KU;
}

// Shared memory of the stages, in floats: keys then values of every tile row, a row 32 · DPL floats
// (head_dim of them copied, the rest staying zero).
__host__ __device__ constexpr int attention_stage_floats(int tile, int dims_per_lane) {
    return kAttentionStages * 2 * tile * dims_per_lane * 32;
}

// Where head h of token t finds its output gate (null: no gate), and the gated value of its dim d.
__device__ __forceinline__ const float* output_gate_of(const AttentionArgs& a, int64_t t, int64_t h) {
    return a.output_gate != nullptr ? a.output_gate + t * a.gate_row_stride + h * a.gate_head_stride : nullptr;
}
__device__ __forceinline__ float gated(float value, const float* gate, int64_t d) {
    return gate != nullptr ? value * sigmoid(gate[d]) : value;
}

template <int DPL, int GMAX, int KU>
__global__ void __launch_bounds__(kAttentionThreads, 2)
    attention_split_kernel(AttentionArgs a, int64_t bound, int64_t splits, int64_t group_chunks, bool wide_copies,
                           float* partial) {
    constexpr int kTile = attention_tile<KU>();
    constexpr int kRow = DPL * kWarpSize;  // floats a row takes in shared memory
    constexpr int kStageFloats = 2 * kTile * kRow;
    extern __shared__ float4 stage_memory[];
    float* stages = reinterpret_cast<float*>(stage_memory);
    __shared__ float warp_best[kAttentionWarps][GMAX], warp_total[kAttentionWarps][GMAX];
    __shared__ float row_best[GMAX], row_total[GMAX];  // base-2 maximum and sum of each row
    unsigned block = blockIdx.x;
    const int64_t split = block % unsigned(splits);
    block /= unsigned(splits);
    const int64_t group_chunk = block % unsigned(group_chunks);
    block /= unsigned(group_chunks);
    const int64_t kvh = block % unsigned(a.kv_heads), t = block / unsigned(a.kv_heads);
    const AttentionSpan span = attention_span(a, bound, splits);
    if (split >= span.active) return;
    wait_for_inputs();  // launched early: before this only the position is read
    allow_next_kernel();
    const int64_t first = split * span.chunk;
    const int64_t limit = min(min(first + span.chunk, span.total), span.pos + t + 1);
    const int64_t group = a.heads / a.kv_heads, h0 = kvh * group + group_chunk * GMAX;
    const int rows = int(min(int64_t(GMAX), group - group_chunk * GMAX));
    const int hd = int(a.head_dim);
    const int64_t kv_width = a.kv_heads * hd;
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const float* keys = a.k_cache + kvh * hd;
    const float* values = a.v_cache + kvh * hd;
    const int64_t tiles = limit > first ? (limit - first + kTile - 1) / kTile : 0;

    // Rows of a stage that are never copied (past the visible keys) and dims past head_dim must read
    // finite values: they meet a zero weight or a zero query dim. Whole rows of head_dim are copied
    // by the wide path, so there only the value rows past the visible keys are zeroed as the last
    // tile is fetched; otherwise the stages are zeroed first.
    const bool zero_stages = !wide_copies || hd != kRow;

    // Tile `tile` of the split into its stage, each warp taking 2·KU of its key and value rows; key
    // rows past the visible keys are left as they are (never weighed). Every call commits a group,
    // empty or not.
    auto fetch = [&](int64_t tile) {
        if (tile < tiles) {
            float* stage = stages + int(tile % kAttentionStages) * kStageFloats;
            const int64_t j0 = first + tile * kTile;
            if (wide_copies) {
#pragma unroll
                for (int m = 0; m < 2 * KU; ++m) {
                    const int rr = warp + m * kAttentionWarps, r = rr % kTile;
                    if (j0 + r < limit) {
                        const float* src = (rr < kTile ? keys : values) + (j0 + r) * kv_width;
                        float* dst = stage + rr * kRow;
#pragma unroll
                        for (int x = 0; x < (DPL + 3) / 4; ++x) {
                            const int c = 4 * lane + x * 4 * kWarpSize;
                            if (c < hd) copy_async_16(dst + c, src + c);
                        }
                    } else if (rr >= kTile && !zero_stages) {
                        float* dst = stage + rr * kRow;
#pragma unroll
                        for (int x = 0; x < (DPL + 3) / 4; ++x) {
                            const int c = 4 * lane + x * 4 * kWarpSize;
                            if (c < hd) *reinterpret_cast<float4*>(dst + c) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                        }
                    }
                }
            } else {
                fetch_rows_narrow(stage, kRow, keys, values, j0, limit, kv_width, hd, kTile, warp, lane);
            }
        }
        copy_async_commit();
    };
    // Zeroing all the stages (64 KiB) took a microsecond, a tenth of the kernel, hence only when
    // the copies leave more than rows to zero.
    if (zero_stages) {
        for (int e = threadIdx.x; e < kAttentionStages * kStageFloats / 4; e += kAttentionThreads) {
            stage_memory[e] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        __syncthreads();
    }
#pragma unroll
    for (int s = 0; s < kAttentionStages - 1; ++s) fetch(s);

    // Lane L owns query row g = L >> kOwnerShift of the group for the softmax bookkeeping: the dot
    // products are reduced so that each lane ends with its own row's (a transposing reduction:
    // log2(GMAX) halving exchanges, then an ordinary one over the lanes left), the row's running
    // max and sum live in its lanes, and the lanes of row g hand the others its weights. Scores are
    // kept in base 2 (scale · log2 e) so each weight is one exp2.
    constexpr int kOwnerShift = GMAX == 1 ? 5 : GMAX == 2 ? 4 : GMAX == 4 ? 3 : 2;
    const int own = lane >> kOwnerShift;
    const float scale = a.scale * 1.44269504088896341f;
    float q[GMAX][DPL], acc[GMAX][DPL];
#pragma unroll
    for (int g = 0; g < GMAX; ++g) {
#pragma unroll
        for (int i = 0; i < DPL; ++i) {
            const int d = lane + i * kWarpSize;
            q[g][i] = g < rows && d < hd ? a.q[(t * a.heads + h0 + g) * hd + d] : 0.0f;
            acc[g][i] = 0.0f;
        }
    }
    float best = -INFINITY, sum = 0.0f;  // of row `own`, over this warp's keys

    for (int64_t tile = 0; tile < tiles; ++tile) {
        copy_async_wait<kAttentionStages - 2>();
        __syncthreads();  // the tile is in for every thread, and every warp is done with the last one
        fetch(tile + kAttentionStages - 1);
        const float* k_tile = stages + int(tile % kAttentionStages) * kStageFloats + warp * KU * kRow;
        const float* v_tile = k_tile + kTile * kRow;
        const int64_t j0 = first + tile * kTile + warp * KU;
        if (j0 >= limit) continue;  // this warp's rows of the last tile are past the visible keys

        float score[KU];  // of row `own`
#pragma unroll
        for (int u = 0; u < KU; ++u) {
            const bool visible = j0 + u < limit;
            float k_row[DPL];
#pragma unroll
            for (int i = 0; i < DPL; ++i) k_row[i] = k_tile[u * kRow + lane + i * kWarpSize];
            float dot[GMAX];
#pragma unroll
            for (int g = 0; g < GMAX; ++g) {
                dot[g] = 0.0f;
#pragma unroll
                for (int i = 0; i < DPL; ++i) dot[g] = fmaf(q[g][i], k_row[i], dot[g]);
            }
            // Halving exchanges: at offset 16 >> step a lane keeps the half of its rows its lane bit
            // picks and adds the partner's values of that half.
#pragma unroll
            for (int step = 0; (GMAX >> step) > 1; ++step) {
                const int half = (GMAX >> step) / 2, offset = 16 >> step;
                const bool upper = (lane & offset) != 0;
#pragma unroll
                for (int k = 0; k < half; ++k) {
                    const float keep = upper ? dot[k + half] : dot[k];
                    const float give = upper ? dot[k] : dot[k + half];
                    dot[k] = keep + __shfl_xor_sync(0xFFFFFFFFu, give, offset);
                }
            }
#pragma unroll
            for (int offset = 16 >> (5 - kOwnerShift); offset > 0; offset /= 2) {
                dot[0] += __shfl_xor_sync(0xFFFFFFFFu, dot[0], offset);
            }
            score[u] = visible ? dot[0] * scale : -INFINITY;
        }
        // Key j0 is visible, so the new maximum is finite; the first time best is -inf and the
        // correction 0.
        float top = best;
#pragma unroll
        for (int u = 0; u < KU; ++u) top = fmaxf(top, score[u]);
        const float correction = exp2f(best - top);
        float p_sum = 0.0f;
#pragma unroll
        for (int u = 0; u < KU; ++u) {
            score[u] = exp2f(score[u] - top);
            p_sum += score[u];
        }
        sum = sum * correction + p_sum;
        best = top;
#pragma unroll
        for (int g = 0; g < GMAX; ++g) {
            const float c = __shfl_sync(0xFFFFFFFFu, correction, g << kOwnerShift);
            if (c != 1.0f) {  // the same in every lane: the row's maximum moved
#pragma unroll
                for (int i = 0; i < DPL; ++i) acc[g][i] *= c;
            }
        }
#pragma unroll
        for (int u = 0; u < KU; ++u) {
            float v_row[DPL];  // rows past the visible keys get weight 0
#pragma unroll
            for (int i = 0; i < DPL; ++i) v_row[i] = v_tile[u * kRow + lane + i * kWarpSize];
#pragma unroll
            for (int g = 0; g < GMAX; ++g) {
                const float p = __shfl_sync(0xFFFFFFFFu, score[u], g << kOwnerShift);
#pragma unroll
                for (int i = 0; i < DPL; ++i) acc[g][i] = fmaf(p, v_row[i], acc[g][i]);
            }
        }
    }
    copy_async_wait<0>();  // the trailing groups are empty; leave none behind

    // The warps' softmax states merged: maxima and sums first, then each warp's rescaled value sums
    // into the stages (free once every warp is past the loop) and added up in warp order, so the
    // result does not depend on timing. Two barriers: one a warp in turn cost a microsecond.
    if ((lane & ((1 << kOwnerShift) - 1)) == 0) {
        warp_best[warp][own] = best;
        warp_total[warp][own] = sum;
    }
    __syncthreads();
    if (threadIdx.x < rows) {
        const int g = threadIdx.x;
        float top = -INFINITY, total = 0.0f;
        for (int w = 0; w < kAttentionWarps; ++w) top = fmaxf(top, warp_best[w][g]);
        for (int w = 0; w < kAttentionWarps; ++w) {
            if (warp_best[w][g] != -INFINITY) total += warp_total[w][g] * exp2f(warp_best[w][g] - top);
        }
        row_best[g] = top;
        row_total[g] = total;
    }
    static_assert(kAttentionWarps * GMAX * kRow <= kAttentionStages * kStageFloats, "the merge fits the stages");
    float* scaled = stages;  // [warp][row][32 · DPL]
#pragma unroll
    for (int g = 0; g < GMAX; ++g) {
        if (g >= rows) break;
        float top = -INFINITY;
#pragma unroll
        for (int w = 0; w < kAttentionWarps; ++w) top = fmaxf(top, warp_best[w][g]);
        const float mine = warp_best[warp][g];
        const float weight = mine == -INFINITY ? 0.0f : exp2f(mine - top);
#pragma unroll
        for (int i = 0; i < DPL; ++i) scaled[(warp * GMAX + g) * kRow + lane + i * kWarpSize] = acc[g][i] * weight;
    }
    __syncthreads();
    auto merged = [&](int g, int d) {
        float value = 0.0f;
#pragma unroll
        for (int w = 0; w < kAttentionWarps; ++w) value += scaled[(w * GMAX + g) * kRow + d];
        return value;
    };

    if (splits == 1) {
        for (int e = threadIdx.x; e < rows * hd; e += kAttentionThreads) {
            const int g = e / hd, d = e % hd;
            a.out[(t * a.heads + h0 + g) * hd + d] = gated(merged(g, d) / row_total[g], output_gate_of(a, t, h0 + g), d);
        }
        return;
    }
    const int64_t record = hd + 2;
    for (int e = threadIdx.x; e < rows * hd; e += kAttentionThreads) {
        const int g = e / hd, d = e % hd;
        partial[((t * a.heads + h0 + g) * splits + split) * record + d] = merged(g, d);
    }
    if (threadIdx.x < rows) {
        const int g = threadIdx.x;
        float* stats = partial + ((t * a.heads + h0 + g) * splits + split) * record + hd;
        stats[0] = row_best[g];
        stats[1] = row_total[g];
    }
}

// Block (token and head, 32 output dims): the splits' partial records merged into the output,
// warp w taking splits w, w + kCombineWarps, … and the warps adding up in order. Each thread loads
// its first splits' values before the weights are known, so the records are read in about one
// round trip. Maxima are base 2.
constexpr int kCombineWarps = 8;
constexpr int kCombineInFlight = 8;  // splits a thread loads at once

__global__ void __launch_bounds__(kCombineWarps* kWarpSize)
    attention_combine_kernel(AttentionArgs a, int64_t bound, int64_t splits, const float* partial) {
    const AttentionSpan span = attention_span(a, bound, splits);
    wait_for_inputs();  // launched early: before this only the position is read
    allow_next_kernel();
    __shared__ float best[kMaxSplits], total[kMaxSplits];
    __shared__ float shared[32];
    __shared__ float sums[kCombineWarps][kWarpSize];
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int64_t pieces = (a.head_dim + kWarpSize - 1) / kWarpSize;
    const int64_t row = blockIdx.x / pieces;  // t * heads + h
    const int64_t d = (blockIdx.x % pieces) * kWarpSize + lane;
    const int64_t hd = a.head_dim, record = hd + 2, active = span.active;
    const float* records = partial + row * splits * record;
    const bool owns_dim = d < hd;

    float value[kCombineInFlight];
#pragma unroll
    for (int u = 0; u < kCombineInFlight; ++u) {
        const int64_t s = warp + u * kCombineWarps;
        value[u] = owns_dim && s < active ? records[s * record + d] : 0.0f;
    }
    float top = -INFINITY;
    for (int64_t s = threadIdx.x; s < active; s += blockDim.x) {
        best[s] = records[s * record + hd];
        total[s] = records[s * record + hd + 1];
        top = fmaxf(top, best[s]);
    }
    top = block_max(top, shared);  // its barriers also publish best[] and total[]
    float sum = 0.0f;
    for (int64_t s = threadIdx.x; s < active; s += blockDim.x) {
        const float w = best[s] == -INFINITY ? 0.0f : exp2f(best[s] - top);
        sum += w * total[s];
    }
    const float all = block_sum(sum, shared);
    auto weight = [&](int64_t s) { return best[s] == -INFINITY ? 0.0f : exp2f(best[s] - top); };
    float acc = 0.0f;
#pragma unroll
    for (int u = 0; u < kCombineInFlight; ++u) {
        const int64_t s = warp + u * kCombineWarps;
        if (s < active) acc = fmaf(weight(s), value[u], acc);
    }
    for (int64_t s0 = warp + kCombineInFlight * kCombineWarps; s0 < active; s0 += kCombineInFlight * kCombineWarps) {
#pragma unroll
        for (int u = 0; u < kCombineInFlight; ++u) {
            const int64_t s = s0 + u * kCombineWarps;
            value[u] = owns_dim && s < active ? records[s * record + d] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < kCombineInFlight; ++u) {
            const int64_t s = s0 + u * kCombineWarps;
            if (s < active) acc = fmaf(weight(s), value[u], acc);
        }
    }
    sums[warp][lane] = acc;
    __syncthreads();
    if (warp == 0 && owns_dim) {
        float out = 0.0f;
#pragma unroll
        for (int w = 0; w < kCombineWarps; ++w) out += sums[w][lane];
        a.out[row * hd + d] = gated(out / all, output_gate_of(a, row / a.heads, row % a.heads), d);
    }
}

// The launch shape of an attention call: fixed by the arguments and, when the position is read on
// the device, by the capacity rather than the position.
struct AttentionPlan {
    int dims_per_lane = 1;  // DPL: head_dim ≤ 32 · DPL
    int group_rows = 1;     // GMAX: query heads per block
    int64_t group_chunks = 1;
    int64_t bound = 0;  // the most keys a token can see
    int64_t splits = 1;
};

AttentionPlan plan_attention(const AttentionArgs& a) {
    require(a.kv_heads > 0 && a.heads % a.kv_heads == 0, "attention: ", a.heads, " heads do not share ",
            a.kv_heads, " kv heads evenly");
    require(a.head_dim >= 1 && a.head_dim <= 16 * kWarpSize, "attention: head_dim ", a.head_dim, " is outside 1..",
            16 * kWarpSize);
    require(a.position == nullptr || a.capacity > 0, "attention: a position read on the device needs the capacity");
    AttentionPlan p;
    while (p.dims_per_lane * kWarpSize < a.head_dim) p.dims_per_lane *= 2;
    const int64_t group = a.heads / a.kv_heads;
    const int most_rows = p.dims_per_lane >= 16 ? 4 : 8;
    while (p.group_rows < group && p.group_rows < most_rows) p.group_rows *= 2;
    p.group_chunks = (group + p.group_rows - 1) / p.group_rows;
    p.bound = a.position != nullptr ? a.capacity : a.pos + a.n;
    const int64_t units = a.n * a.kv_heads * p.group_chunks;
    const int64_t fewest_keys = fewest_keys_per_split(a.head_dim);
    const int64_t by_keys = (p.bound + fewest_keys - 1) / fewest_keys;
    const int64_t by_blocks = std::max<int64_t>(1, kAttentionBlocks / units);
    p.splits = std::clamp<int64_t>(std::min(by_keys, by_blocks), 1, kMaxSplits);
    return p;
}

template <int DPL, int GMAX>
void launch_attention_splits(const AttentionArgs& a, const AttentionPlan& p, float* partial, cudaStream_t stream) {
    constexpr int KU = DPL >= 16 ? 1 : DPL >= 8 ? 2 : 4;
    const auto kernel = attention_split_kernel<DPL, GMAX, KU>;
    constexpr size_t stage_bytes = attention_stage_floats(attention_tile<KU>(), DPL) * sizeof(float);
    // Over 48 KiB of dynamic shared memory must be asked for, once per kernel.
    static const bool opted_in = [&] {
        DUET_CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(stage_bytes)));
        return true;
    }();
    (void)opted_in;
    const bool wide_copies = a.head_dim % 4 == 0 && aligned_16(a.k_cache) && aligned_16(a.v_cache);
    const int64_t blocks = p.splits * p.group_chunks * a.kv_heads * a.n;
    launch_early(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kAttentionThreads), stage_bytes, stream,
                 "attention_split_kernel", a, p.bound, p.splits, p.group_chunks, wide_copies, partial);
}

template <int DPL>
void launch_attention_rows(const AttentionArgs& a, const AttentionPlan& p, float* partial, cudaStream_t stream) {
    switch (p.group_rows) {
        case 1: return launch_attention_splits<DPL, 1>(a, p, partial, stream);
        case 2: return launch_attention_splits<DPL, 2>(a, p, partial, stream);
        case 4: return launch_attention_splits<DPL, 4>(a, p, partial, stream);
        default:
            if constexpr (DPL < 16) return launch_attention_splits<DPL, 8>(a, p, partial, stream);
    }
    fail("attention: no kernel for ", p.group_rows, " heads per block at ", DPL, " dims per lane");
}

}  // namespace

void causal_conv1d_silu(const float* x, int64_t x_stride, int64_t n, int64_t channels, const float* taps,
                        const float* bias, int64_t kernel, float* ring, float* out, float* ring_history,
                        cudaStream_t stream) {
    require(kernel >= 1 && kernel <= kMaxConvKernel, "causal_conv1d_silu: kernel ", kernel, " is outside 1..",
            kMaxConvKernel);
    if (channels == 0) return;
    launch_early(conv1d_silu_kernel, dim3(static_cast<unsigned>((channels + 127) / 128)), dim3(128), 0, stream,
                 "conv1d_silu_kernel", x, x_stride, n, channels, taps, bias, static_cast<int>(kernel), ring, out,
                 ring_history);
}

void ssm_scan(const SsmScanArgs& args, cudaStream_t stream) {
    const int64_t pairs = args.heads * args.head_dim;
    if (pairs == 0 || args.n == 0) return;
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

size_t attention_scratch_floats(const AttentionArgs& args) {
    if (args.n * args.heads == 0) return 0;
    const AttentionPlan p = plan_attention(args);
    return p.splits > 1 ? static_cast<size_t>(args.n * args.heads * p.splits * (args.head_dim + 2)) : 0;
}

void attention(const AttentionArgs& args, float* scratch, cudaStream_t stream) {
    if (args.n * args.heads == 0) return;
    const AttentionPlan p = plan_attention(args);
    require(p.splits == 1 || scratch != nullptr, "attention: ", p.splits, " splits need scratch");
    switch (p.dims_per_lane) {
        case 1: launch_attention_rows<1>(args, p, scratch, stream); break;
        case 2: launch_attention_rows<2>(args, p, scratch, stream); break;
        case 4: launch_attention_rows<4>(args, p, scratch, stream); break;
        case 8: launch_attention_rows<8>(args, p, scratch, stream); break;
        default: launch_attention_rows<16>(args, p, scratch, stream); break;
    }
    if (p.splits > 1) {
        const int64_t pieces = (args.head_dim + kWarpSize - 1) / kWarpSize;
        launch_early(attention_combine_kernel, dim3(static_cast<unsigned>(args.n * args.heads * pieces)),
                     dim3(kCombineWarps * kWarpSize), 0, stream, "attention_combine_kernel", args, p.bound, p.splits,
                     scratch);
    }
}

}  // namespace duet::cuda
