// Gated DeltaNet's delta rule over a prompt in the chunked (WY/UT) form of the CPU's ChunkSolver
// (kernels/cpu/gated_delta_rule.cpp). Token by token the recurrence is a chain of n dependent steps
// (about 0.9 µs each on an H100: 0.47 ms a Qwen3.5 layer for 512 tokens); a chunk of tokens is
// instead a few small dense products (0.28 ms a layer for the same prompt). With G the running sum of the decays inside the chunk,
//   A[i][j] = −β_i (k_i·k_j) e^{G_i − G_j} (j < i),   T = A + A·T (forward substitution),
//   v' = (T + I)·(βv − β e^G (k·S)),
//   o_i = e^{G_i} q_i·S + Σ_{j≤i} (q_i·k_j) e^{G_i − G_j} v'_j,
//   S ← e^{G_last} S + Σ_j e^{G_last − G_j} k_j ⊗ v'_j,
// the CPU's U − W·S taken as (T + I)·(βv − β e^G k·S), which needs k·S (a chunk × columns product)
// rather than W (a chunk × keys one). Block (v-head h, slice of kSliceColumns value columns) keeps
// its slice of the state in shared memory for the whole prompt; the blocks of a head each find the
// chunk's A, T and q·k themselves (they do not depend on the values).
#include <algorithm>
#include <cstdint>

#include "base/error.h"
#include "kernels/cuda/alignment.h"
#include "kernels/cuda/chunk_math.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/early_launch.cuh"
#include "kernels/cuda/occupancy.h"
#include "kernels/cuda/ops.h"

namespace duet::cuda {

namespace {

constexpr int kChunkWarps = 16;  // 128 registers a thread at most: four warps a scheduler (two left it idle half the time)
constexpr int kChunkThreads = kChunkWarps * kWarpSize;
constexpr int kChunk = kChunkRows;                  // rows of a chunk's arrays: T's columns are threads
constexpr int kRowsPerWarp = kChunk / kChunkWarps;  // warp w takes chunk rows w, w + kChunkWarps, …
constexpr int kSliceColumns = kChunkColumns;        // value columns a block
constexpr int64_t kMaxChunkedKeyDim = 128;

// The block's shared arrays, offsets in floats, for keys of dk values (a multiple of 4).
struct ChunkLayout {
    int64_t dk, key_row;  // key_row = dk + 4: float4 rows whose lanes meet different banks
    int64_t k, q, a, t, p, r, vp, qs, s, g, eg, beta, d, floats;
    __host__ __device__ explicit ChunkLayout(int64_t key_dim) : dk(key_dim), key_row(key_dim + 4) {
        k = 0;                             // normalised k [chunk][key_row]
        q = k + kChunk * key_row;          // normalised, scaled q [chunk][key_row]
        a = q + kChunk * key_row;          // A [chunk][chunk]
        t = a + kChunk * kChunk;           // T
        p = t + kChunk * kChunk;           // (q_i·k_j) e^{G_i − G_j}, j ≤ i
        r = p + kChunk * kChunk;           // βv, then βv − β e^G (k·S) [chunk][columns]
        vp = r + kChunk * kSliceColumns;   // v'
        qs = vp + kChunk * kSliceColumns;  // e^G (q·S)
        s = qs + kChunk * kSliceColumns;   // the state's slice [dk][columns]
        g = s + dk * kSliceColumns;        // G
        eg = g + kChunk;                   // e^G
        beta = eg + kChunk;                // β
        d = beta + kChunk;                 // e^{G_last − G}, zero past the chunk
        floats = d + kChunk;
    }
};

__global__ void __launch_bounds__(kChunkThreads, 1) delta_rule_chunked_kernel(GatedDeltaArgs a, int chunk) {
    wait_for_inputs();  // launched early: nothing before this reads or writes memory
    allow_next_kernel();
    extern __shared__ float4 shared4[];
    float* shared = reinterpret_cast<float*>(shared4);
    const ChunkLayout at(a.k_dim);
    float* K = shared + at.k;
    float* Q = shared + at.q;
    float* A = shared + at.a;
    float* T = shared + at.t;
    float* P = shared + at.p;
    float* R = shared + at.r;
    float* VP = shared + at.vp;
    float* QS = shared + at.qs;
    float* S = shared + at.s;
    float* G = shared + at.g;
    float* EG = shared + at.eg;
    float* B = shared + at.beta;
    float* D = shared + at.d;
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, tid = threadIdx.x;
    const int64_t dk = a.k_dim, dv = a.v_dim, key_row = at.key_row;
    const int64_t slices = (dv + kSliceColumns - 1) / kSliceColumns;
    const int64_t h = blockIdx.x / slices, kh = h / (a.v_heads / a.k_heads);
    const int64_t column = (blockIdx.x % slices) * kSliceColumns + lane;
    const bool owns_column = column < dv;
    float* state = a.state + h * dk * dv;
    for (int64_t m = warp; m < dk; m += kChunkWarps) {
        S[m * kSliceColumns + lane] = owns_column ? state[m * dv + column] : 0.0f;
    }
    const float q_scale = rsqrtf(float(dk));
    const float neg_exp_a_log = a.neg_exp_a_log[h], dt_bias = a.dt_bias[h];
    auto row4 = [&](const float* base, int64_t row, int64_t m) {
        return *reinterpret_cast<const float4*>(base + row * key_row + m);
    };

    for (int64_t t0 = 0; t0 < a.n; t0 += chunk) {
        const int len = static_cast<int>(min(int64_t(chunk), a.n - t0));
        // The chunk's raw q, k and v copied in all at once (token by token, each load waited on,
        // this took longer than the rest of the chunk), then a warp a token normalises q and k and
        // scales v by β; rows past len are zero.
        const float* first_row = a.qkv + t0 * a.qkv_stride;
        copy_chunk_rows({Q, K}, key_row, first_row, a.qkv_stride, {kh * dk, a.k_heads * dk + kh * dk}, dk, len);
        copy_chunk_column(R, first_row + 2 * a.k_heads * dk + h * dv + column, a.qkv_stride, owns_column, len,
                          kChunkWarps);
        copy_async_commit();
        if (tid < kChunk) {
            const bool real = tid < len;
            G[tid] = real ? neg_exp_a_log * softplus(a.a[(t0 + tid) * a.a_stride + h] + dt_bias) : 0.0f;
            B[tid] = real ? sigmoid(a.b[(t0 + tid) * a.b_stride + h]) : 0.0f;
        }
        copy_async_wait<0>();
        __syncthreads();
        for (int i = warp; i < kChunk; i += kChunkWarps) {
            float qq = 0.0f, kk = 0.0f;
            for (int64_t m = lane; m < dk; m += kWarpSize) {
                const float q = Q[i * key_row + m], k = K[i * key_row + m];
                qq += q * q;
                kk += k * k;
            }
            const float q_norm = 1.0f / sqrtf(warp_sum(qq) + 1e-6f) * q_scale;
            const float k_norm = 1.0f / sqrtf(warp_sum(kk) + 1e-6f);
            for (int64_t m = lane; m < dk; m += kWarpSize) {
                Q[i * key_row + m] *= q_norm;
                K[i * key_row + m] *= k_norm;
            }
            R[i * kSliceColumns + lane] *= B[i];
        }
        chunk_decays(G, EG, D, nullptr, len);

        // k·k and q·k over the chunk's pairs (lane j and j + 32 the columns), k·S and q·S (lane the
        // value column), for the warp's rows at once, four keys a step.
        {
            float kk[kRowsPerWarp][2] = {}, qk[kRowsPerWarp][2] = {}, ks[kRowsPerWarp] = {}, qs[kRowsPerWarp] = {};
            for (int64_t m = 0; m < dk; m += 4) {
                const float4 kj0 = row4(K, lane, m), kj1 = row4(K, lane + kWarpSize, m);
                const float4 sc = make_float4(S[m * kSliceColumns + lane], S[(m + 1) * kSliceColumns + lane],
                                              S[(m + 2) * kSliceColumns + lane], S[(m + 3) * kSliceColumns + lane]);
#pragma unroll
                for (int s = 0; s < kRowsPerWarp; ++s) {
                    const int i = warp + s * kChunkWarps;
                    const float4 ki = row4(K, i, m), qi = row4(Q, i, m);
                    kk[s][0] = dot4(ki, kj0, kk[s][0]);
                    qk[s][0] = dot4(qi, kj0, qk[s][0]);
                    if (s * kChunkWarps + kChunkWarps > kWarpSize) {  // rows that reach the upper columns
                        kk[s][1] = dot4(ki, kj1, kk[s][1]);
                        qk[s][1] = dot4(qi, kj1, qk[s][1]);
                    }
                    ks[s] = dot4(ki, sc, ks[s]);
                    qs[s] = dot4(qi, sc, qs[s]);
                }
            }
#pragma unroll
            for (int s = 0; s < kRowsPerWarp; ++s) {
                const int i = warp + s * kChunkWarps;
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const int j = lane + half * kWarpSize;
                    const float decay = j <= i ? expf(G[i] - G[j]) : 0.0f;
                    A[i * kChunk + j] = j < i ? -B[i] * kk[s][half] * decay : 0.0f;
                    P[i * kChunk + j] = qk[s][half] * decay;
                }
                R[i * kSliceColumns + lane] -= B[i] * EG[i] * ks[s];
                QS[i * kSliceColumns + lane] = EG[i] * qs[s];
            }
        }
        __syncthreads();

        // T = A + A·T by columns: column j's rows need only the rows above them in the same column,
        // so thread j holds its column in registers and walks down it (A's rows are read by every
        // thread at once). T_mj = 0 for m ≤ j, so every thread runs the same loops.
        if (tid < kChunk) {
            const int j = tid;
            float column_of_t[kChunk];
#pragma unroll
            for (int i = 0; i < kChunk; ++i) {
                float acc[4] = {i > j ? A[i * kChunk + j] : 0.0f, 0.0f, 0.0f, 0.0f};  // four chains, not one
#pragma unroll
                for (int m = 0; m < i; ++m) acc[m % 4] = fmaf(A[i * kChunk + m], column_of_t[m], acc[m % 4]);
                column_of_t[i] = i > j ? (acc[0] + acc[1]) + (acc[2] + acc[3]) : 0.0f;
                T[i * kChunk + j] = column_of_t[i];
            }
        }
        __syncthreads();

        // v' = (T + I)·R.
        {
            float vp[kRowsPerWarp];
            chunk_product_plus<kChunkWarps>(R, T, R, vp);
#pragma unroll
            for (int s = 0; s < kRowsPerWarp; ++s) VP[(warp + s * kChunkWarps) * kSliceColumns + lane] = vp[s];
        }
        __syncthreads();

        // The outputs (from the state before the chunk), and the state after it.
        {
            float o[kRowsPerWarp];
            chunk_product_plus<kChunkWarps>(QS, P, VP, o);
#pragma unroll
            for (int s = 0; s < kRowsPerWarp; ++s) {
                const int i = warp + s * kChunkWarps;
                if (i < len && owns_column) a.out[((t0 + i) * a.v_heads + h) * dv + column] = o[s];
            }
        }
        update_chunk_state<kChunkWarps>(S, K, key_row, VP, D, EG[len - 1], dk, len);
        __syncthreads();
    }
    for (int64_t m = warp; m < dk; m += kChunkWarps) {
        if (owns_column) state[m * dv + column] = S[m * kSliceColumns + lane];
    }
}

size_t chunked_shared_bytes(int64_t k_dim) { return static_cast<size_t>(ChunkLayout(k_dim).floats) * sizeof(float); }

}  // namespace

bool delta_rule_chunked_fits(const GatedDeltaArgs& args) {
    if (args.chunk <= 0 || args.n <= 1 || args.k_dim < 4 || args.k_dim % 4 != 0 || args.k_dim > kMaxChunkedKeyDim ||
        args.qkv_stride % 4 != 0 || !aligned_16(args.qkv)) {
        return false;
    }
    return allow_dynamic_shared_bytes(reinterpret_cast<const void*>(delta_rule_chunked_kernel),
                                      chunked_shared_bytes(args.k_dim));
}

void delta_rule_chunked(const GatedDeltaArgs& args, cudaStream_t stream) {
    require(delta_rule_chunked_fits(args), "delta_rule_chunked: ", args.n, " tokens in chunks of ", args.chunk,
            " with keys of ", args.k_dim, " do not fit the chunked kernel");
    if (args.v_heads == 0 || args.v_dim == 0) return;
    const size_t bytes = chunked_shared_bytes(args.k_dim);
    const auto blocks = static_cast<unsigned>(args.v_heads * ((args.v_dim + kSliceColumns - 1) / kSliceColumns));
    const int chunk = static_cast<int>(std::min<int64_t>(args.chunk, kChunk));
    launch_early(delta_rule_chunked_kernel, dim3(blocks), dim3(kChunkThreads), bytes, stream,
                 "delta_rule_chunked_kernel", args, chunk);
}

}  // namespace duet::cuda
