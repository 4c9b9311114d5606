// Mamba-2's selective scan over a prompt in chunks (the state space dual form): token by token the
// scan is a chain of n dependent steps, each waiting on the last, where a chunk of tokens is a few
// small dense products. Per head, with
// dt_t = clamp(softplus(dt_raw + dt_bias)), G the running sum of dt_t · A inside the chunk and S
// the state before it (head_dim × state_size):
//   y_i = e^{G_i} S·C_i + Σ_{j≤i} (C_i·B_j) e^{G_i − G_j} dt_j x_j + D x_i,
//   S ← e^{G_last} S + Σ_j e^{G_last − G_j} dt_j x_j ⊗ B_j,
// which is the recurrence S_t = e^{dt_t A} S_{t−1} + dt_t x_t ⊗ B_t, y_t = S_t·C_t + D x_t unrolled.
// Block (head h, slice of kSliceRows head-dim rows) keeps its slice of the state in shared memory for
// the whole prompt; the blocks of a group's heads each find the chunk's C·B themselves.
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

constexpr int kScanChunkWarps = 16;
constexpr int kScanChunkThreads = kScanChunkWarps * kWarpSize;
constexpr int kChunk = kChunkRows;                      // tokens a chunk
constexpr int kRowsPerWarp = kChunk / kScanChunkWarps;  // warp w takes chunk rows w, w + kScanChunkWarps, …
constexpr int kSliceRows = kChunkColumns;               // head-dim rows a block: a warp's lanes
constexpr int64_t kMaxChunkedState = 128;

// The block's shared arrays, offsets in floats, for states of ns values (a multiple of 4).
struct ScanChunkLayout {
    int64_t ns, state_row;  // state_row = ns + 4: float4 rows whose lanes meet different banks
    int64_t b, c, p, x, cs, s, g, eg, dt, dd, floats;
    __host__ __device__ explicit ScanChunkLayout(int64_t state_size) : ns(state_size), state_row(state_size + 4) {
        b = 0;                          // B [chunk][state_row]
        c = b + kChunk * state_row;     // C
        p = c + kChunk * state_row;     // (C_i·B_j) e^{G_i − G_j} dt_j, j ≤ i [chunk][chunk]
        x = p + kChunk * kChunk;        // x [chunk][rows]
        cs = x + kChunk * kSliceRows;   // e^G S·C [chunk][rows]
        s = cs + kChunk * kSliceRows;   // the state's slice, transposed: [ns][rows]
        g = s + ns * kSliceRows;        // G
        eg = g + kChunk;                // e^G
        dt = eg + kChunk;               // dt
        dd = dt + kChunk;               // e^{G_last − G} dt, zero past the chunk
        floats = dd + kChunk;
    }
};

__global__ void __launch_bounds__(kScanChunkThreads, 1) ssm_scan_chunked_kernel(SsmScanArgs a) {
    wait_for_inputs();  // launched early: nothing before this reads or writes memory
    allow_next_kernel();
    extern __shared__ float4 shared4[];
    float* shared = reinterpret_cast<float*>(shared4);
    const ScanChunkLayout at(a.state_size);
    float* Bm = shared + at.b;
    float* Cm = shared + at.c;
    float* P = shared + at.p;
    float* X = shared + at.x;
    float* CS = shared + at.cs;
    float* S = shared + at.s;
    float* G = shared + at.g;
    float* EG = shared + at.eg;
    float* DT = shared + at.dt;
    float* DD = shared + at.dd;
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, tid = threadIdx.x;
    const int64_t hd = a.head_dim, ns = a.state_size, row_stride = at.state_row;
    const int64_t slices = (hd + kSliceRows - 1) / kSliceRows;
    const int64_t h = blockIdx.x / slices, g = h / (a.heads / a.groups), inner = a.heads * hd;
    const int64_t p = (blockIdx.x % slices) * kSliceRows + lane;
    const bool owns_row = p < hd;
    float* state = a.state + (h * hd + p) * ns;
    for (int64_t k = warp; k < ns; k += kScanChunkWarps) S[k * kSliceRows + lane] = owns_row ? state[k] : 0.0f;
    const float a_h = a.a[h], d_h = a.d[h], bias_h = a.dt_bias[h];
    auto row4 = [&](const float* base, int64_t row, int64_t k) {
        return *reinterpret_cast<const float4*>(base + row * row_stride + k);
    };

    for (int64_t t0 = 0; t0 < a.n; t0 += kChunk) {
        const int len = static_cast<int>(min(int64_t(kChunk), a.n - t0));
        // The chunk's B, C and x copied in all at once; rows past len zero.
        const float* first_row = a.x + t0 * a.x_stride;
        const int64_t b_first = inner + g * ns, c_first = inner + a.groups * ns + g * ns;
        copy_chunk_rows({Bm, Cm}, row_stride, first_row, a.x_stride, {b_first, c_first}, ns, len);
        copy_chunk_column(X, first_row + h * hd + p, a.x_stride, owns_row, len, kScanChunkWarps);
        copy_async_commit();
        if (tid < kChunk) {
            float dt = 0.0f;
            if (tid < len) {
                dt = softplus(a.dt[(t0 + tid) * a.dt_stride + h] + bias_h);
                dt = fminf(fmaxf(dt, a.dt_min), a.dt_max);
            }
            DT[tid] = dt;
            G[tid] = dt * a_h;
        }
        copy_async_wait<0>();
        chunk_decays(G, EG, DD, DT, len);  // its barriers make the copies visible

        // C·B over the chunk's pairs (lane j and j + 32 the columns) and S·C (lane the head-dim
        // row), for the warp's rows at once, four states a step.
        {
            float cb[kRowsPerWarp][2] = {}, cs[kRowsPerWarp] = {};
            for (int64_t k = 0; k < ns; k += 4) {
                const float4 bj0 = row4(Bm, lane, k), bj1 = row4(Bm, lane + kWarpSize, k);
                const float4 sp = make_float4(S[k * kSliceRows + lane], S[(k + 1) * kSliceRows + lane],
                                              S[(k + 2) * kSliceRows + lane], S[(k + 3) * kSliceRows + lane]);
#pragma unroll
                for (int s = 0; s < kRowsPerWarp; ++s) {
                    const float4 ci = row4(Cm, warp + s * kScanChunkWarps, k);
                    cb[s][0] = dot4(ci, bj0, cb[s][0]);
                    if (s * kScanChunkWarps + kScanChunkWarps > kWarpSize) cb[s][1] = dot4(ci, bj1, cb[s][1]);
                    cs[s] = dot4(ci, sp, cs[s]);
                }
            }
#pragma unroll
            for (int s = 0; s < kRowsPerWarp; ++s) {
                const int i = warp + s * kScanChunkWarps;
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const int j = lane + half * kWarpSize;
                    P[i * kChunk + j] = j <= i ? cb[s][half] * expf(G[i] - G[j]) * DT[j] : 0.0f;
                }
                CS[i * kSliceRows + lane] = EG[i] * cs[s];
            }
        }
        __syncthreads();

        // The outputs (from the state before the chunk), and the state after it.
        {
            float y[kRowsPerWarp];
            chunk_product_plus<kScanChunkWarps>(CS, P, X, y);
#pragma unroll
            for (int s = 0; s < kRowsPerWarp; ++s) {
                const int i = warp + s * kScanChunkWarps;
                if (i < len && owns_row) a.y[(t0 + i) * inner + h * hd + p] = y[s] + d_h * X[i * kSliceRows + lane];
            }
        }
        update_chunk_state<kScanChunkWarps>(S, Bm, row_stride, X, DD, EG[len - 1], ns, len);
        __syncthreads();
    }
    for (int64_t k = warp; k < ns; k += kScanChunkWarps) {
        if (owns_row) state[k] = S[k * kSliceRows + lane];
    }
}

size_t scan_chunked_shared_bytes(int64_t state_size) {
    return static_cast<size_t>(ScanChunkLayout(state_size).floats) * sizeof(float);
}

}  // namespace

bool ssm_scan_chunked_fits(const SsmScanArgs& args) {
    const int64_t ns = args.state_size;
    if (args.n <= 1 || args.state_history != nullptr || ns < 4 || ns % 4 != 0 || ns > kMaxChunkedState ||
        args.groups <= 0 || args.heads % args.groups != 0 || args.x_stride % 4 != 0 ||
        (args.heads * args.head_dim) % 4 != 0 || !aligned_16(args.x)) {
        return false;
    }
    return allow_dynamic_shared_bytes(reinterpret_cast<const void*>(ssm_scan_chunked_kernel),
                                      scan_chunked_shared_bytes(ns));
}

void ssm_scan_chunked(const SsmScanArgs& args, cudaStream_t stream) {
    require(ssm_scan_chunked_fits(args), "ssm_scan_chunked: ", args.n, " tokens of ", args.state_size,
            " states do not fit the chunked kernel");
    if (args.heads == 0 || args.head_dim == 0) return;
    const size_t bytes = scan_chunked_shared_bytes(args.state_size);
    const auto blocks = static_cast<unsigned>(args.heads * ((args.head_dim + kSliceRows - 1) / kSliceRows));
    launch_early(ssm_scan_chunked_kernel, dim3(blocks), dim3(kScanChunkThreads), bytes, stream,
                 "ssm_scan_chunked_kernel", args);
}

}  // namespace duet::cuda
