// RMS norms (whole rows, groups, heads), the per-head norm + RoPE of gated attention with its cache
// stores, and the gated head norm. One block per normalised row, threads across its values.
#include <algorithm>

#include "kernels/cuda/alignment.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/norm_ahead.cuh"
#include "kernels/cuda/ops.h"

namespace duet::cuda {

namespace {

constexpr int kThreads = 128;

// 256 threads: a decode step's single row spreads over enough threads that each loads a few values.
constexpr int kRowThreads = 256;

__global__ void __launch_bounds__(kRowThreads) rmsnorm_kernel(const float* x, const float* __restrict__ weight,
                                                              int64_t dim, float eps, float* out) {
    __shared__ float shared[32];
    wait_for_inputs();
    const float* row = x + int64_t(blockIdx.x) * dim;
    const float inv = rsqrtf(block_sum(thread_sum_squares(row, dim), shared) / float(dim) + eps);
    allow_next_kernel();
    scaled_product(row, weight, inv, dim, out + int64_t(blockIdx.x) * dim);
}

__global__ void __launch_bounds__(kRowThreads) rmsnorm_prepared_kernel(NormAhead ahead, int64_t dim, float eps,
                                                                       float* out) {
    wait_for_inputs();
    const float inv = norm_ahead_inv_rms(ahead, dim, eps);
    allow_next_kernel();
    const auto* weighted = reinterpret_cast<const float4*>(ahead.weighted);
    auto* out4 = reinterpret_cast<float4*>(out);
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < dim / 4; i += blockDim.x) {
        const float4 v = weighted[i];
        out4[i] = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
    }
}

// Block (t, group): y *= silu(z), then the group normalised and scaled.
// The loops are unrolled over restrict pointers so that several loads are in flight at once.
__global__ void gated_group_rmsnorm_kernel(float* __restrict__ y, const float* __restrict__ z, int64_t z_stride,
                                           const float* __restrict__ weight, int64_t dim, int64_t groups, float eps) {
    __shared__ float shared[32];
    wait_for_inputs();
    const int64_t t = blockIdx.x / groups, g = blockIdx.x % groups;
    const int width = static_cast<int>(dim / groups);
    float* row = y + t * dim + g * width;
    const float* gate = z + t * z_stride + g * width;
    float sum = 0.0f;
#pragma unroll 4
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
        const float v = row[i] * silu(gate[i]);
        row[i] = v;
        sum += v * v;
    }
    const float inv = rsqrtf(block_sum(sum, shared) / float(width) + eps);
    allow_next_kernel();
#pragma unroll 4
    for (int i = threadIdx.x; i < width; i += blockDim.x) row[i] = weight[g * width + i] * (row[i] * inv);
}

// The cache row of a's first token: read on the device when a.position is set, so that a recorded
// launch replays at the current position.
__device__ __forceinline__ int64_t first_position(const HeadNormRopeArgs& a) {
    return a.position != nullptr ? int64_t(*a.position) : a.pos;
}

// What a thread of head `block`'s block (t · heads + head) needs beyond the head itself: the
// position, and for each of its values (i = threadIdx.x + u · kThreads) the norm's weight and, where
// rotated, the cos and sin of its angle. None of it depends on earlier kernels (the position is
// written by the host, or by a kernel finished before this launch began), so the kernels work it out
// before their wait: the angles' double-precision powers and the position's load were most of a
// head's time after it.
constexpr int kHeadValuesPerThread = 4;  // head_dim ≤ 512
struct HeadRotation {
    int64_t pos = 0;
    float weight[kHeadValuesPerThread], cos[kHeadValuesPerThread], sin[kHeadValuesPerThread];
};

__device__ void prepare_head_rotation(const HeadNormRopeArgs& a, int64_t block, HeadRotation& r) {
    const int64_t t = block / a.heads;
    r.pos = first_position(a);
    const int64_t half = a.rotary_dim / 2;
#pragma unroll
    for (int u = 0; u < kHeadValuesPerThread; ++u) {
        const int64_t i = threadIdx.x + u * kThreads;
        r.weight[u] = i < a.head_dim ? a.norm_weight[i] : 0.0f;
        r.cos[u] = 1.0f;
        r.sin[u] = 0.0f;
        if (i < a.rotary_dim) {
            const int64_t j = a.style == RopeStyle::Interleaved ? i / 2 : (i < half ? i : i - half);
            // theta^e rounded once from double, as the host's powf rounds it: at positions in the
            // thousands an ulp of inv_freq moves the angle by more than the tests allow.
            const float power = float(pow(double(a.theta), double(float(2 * j) / float(a.rotary_dim))));
            const float inv_freq = 1.0f / power;
            const float angle = float(r.pos + t) * inv_freq;
            r.cos[u] = cosf(angle);
            r.sin[u] = sinf(angle);
        }
    }
}

// Head `block` (t · heads + head) of a: normalised, then its leading rotary_dim values rotated at
// position first_position(a) + t (r, prepared before the wait), into a.out and, when `also` is
// given, into its cache row too: also[(first_position(a) + t) · also_row_stride + head · head_dim].
// `head` is shared memory of head_dim floats.
__device__ void norm_rope_head(const HeadNormRopeArgs& a, int64_t block, const HeadRotation& r, float* also,
                               int64_t also_row_stride, float* head, float* shared) {
    const int64_t t = block / a.heads, h = block % a.heads;
    const float* src = a.x + t * a.x_row_stride + h * a.x_head_stride;
    const float inv = rsqrtf(block_sum(thread_sum_squares(src, a.head_dim), shared) / float(a.head_dim) + a.eps);
    allow_next_kernel();
#pragma unroll
    for (int u = 0; u < kHeadValuesPerThread; ++u) {
        const int64_t i = threadIdx.x + u * kThreads;
        if (i < a.head_dim) head[i] = r.weight[u] * (src[i] * inv);
    }
    __syncthreads();
    float* dst = a.out + t * a.out_row_stride + h * a.head_dim;
    float* copy = also != nullptr ? also + (r.pos + t) * also_row_stride + h * a.head_dim : nullptr;
    const int64_t half = a.rotary_dim / 2;
#pragma unroll
    for (int u = 0; u < kHeadValuesPerThread; ++u) {
        const int64_t i = threadIdx.x + u * kThreads;
        if (i >= a.head_dim) break;
        float value = head[i];
        if (i < a.rotary_dim) {
            // The pair's other member, and whether this value is the pair's first.
            const bool interleaved = a.style == RopeStyle::Interleaved;
            const bool first = interleaved ? (i % 2 == 0) : (i < half);
            const int64_t partner = interleaved ? (first ? i + 1 : i - 1) : (first ? i + half : i - half);
            const float c = r.cos[u], s = r.sin[u];
            value = first ? head[i] * c - head[partner] * s : head[i] * c + head[partner] * s;
        }
        dst[i] = value;
        if (copy != nullptr) copy[i] = value;
    }
}

// Block (t, head): see norm_rope_head.
__global__ void __launch_bounds__(kThreads) head_rmsnorm_rope_kernel(HeadNormRopeArgs a) {
    extern __shared__ float head[];
    __shared__ float shared[32];
    HeadRotation r;
    prepare_head_rotation(a, blockIdx.x, r);
    wait_for_inputs();
    norm_rope_head(a, blockIdx.x, r, nullptr, 0, head, shared);
}

// AttentionRowsArgs in one launch: the blocks are the query heads of every token, then the key
// heads (also written to their cache rows), then the value heads (copied to theirs).
__global__ void __launch_bounds__(kThreads) attention_rows_kernel(AttentionRowsArgs a) {
    extern __shared__ float head[];
    __shared__ float shared[32];
    const int64_t queries = a.queries.n * a.queries.heads, keys = a.keys.n * a.keys.heads;
    const int64_t block = blockIdx.x;
    if (block < queries) {
        HeadRotation r;
        prepare_head_rotation(a.queries, block, r);
        wait_for_inputs();
        norm_rope_head(a.queries, block, r, nullptr, 0, head, shared);
    } else if (block < queries + keys) {
        HeadRotation r;
        prepare_head_rotation(a.keys, block - queries, r);
        wait_for_inputs();
        norm_rope_head(a.keys, block - queries, r, a.key_cache, a.kv_width, head, shared);
    } else {
        const int64_t pos = first_position(a.keys);
        wait_for_inputs();
        allow_next_kernel();
        const int64_t v = block - queries - keys, t = v / a.keys.heads, h = v % a.keys.heads;
        const int64_t hd = a.keys.head_dim;
        const float* src = a.values + t * a.kv_width + h * hd;
        float* dst = a.value_cache + (pos + t) * a.kv_width + h * hd;
        for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) dst[i] = src[i];
    }
}

__global__ void head_rmsnorm_silu_gate_kernel(float* __restrict__ y, const float* __restrict__ z, int64_t z_stride,
                                              const float* __restrict__ weight, int64_t heads, int64_t head_dim,
                                              float eps) {
    __shared__ float shared[32];
    wait_for_inputs();
    const int64_t t = blockIdx.x / heads, h = blockIdx.x % heads;
    float* row = y + (t * heads + h) * head_dim;
    const float* gate = z + t * z_stride + h * head_dim;
    const float inv = rsqrtf(block_sum(thread_sum_squares(row, head_dim), shared) / float(head_dim) + eps);
    allow_next_kernel();
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) row[i] = weight[i] * (row[i] * inv) * silu(gate[i]);
}

// What the kernels rotate: an even number of a head's leading values, of a head a block holds.
void require_rotation_fits(const HeadNormRopeArgs& a, const char* op) {
    require(a.rotary_dim >= 0 && a.rotary_dim <= a.head_dim && a.rotary_dim % 2 == 0, op, ": rotary_dim ",
            a.rotary_dim, " must be even and at most head_dim ", a.head_dim);
    require(a.head_dim <= kHeadValuesPerThread * kThreads, op, ": head_dim ", a.head_dim, " exceeds ",
            kHeadValuesPerThread * kThreads);
}

}  // namespace

void rmsnorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out, cudaStream_t stream) {
    if (n == 0) return;
    launch_early(rmsnorm_kernel, dim3(static_cast<unsigned>(n)), dim3(kRowThreads), 0, stream, "rmsnorm_kernel", x,
                 weight, dim, eps, out);
}

void rmsnorm_prepared(const NormAhead& ahead, int64_t dim, float eps, float* out, cudaStream_t stream) {
    require(ahead.on() && dim % 4 == 0 && aligned_16(ahead.weighted) && aligned_16(out),
            "rmsnorm_prepared: a prepared norm of whole, aligned float4 groups, got ", dim, " values");
    launch_early(rmsnorm_prepared_kernel, dim3(1), dim3(kRowThreads), 0, stream, "rmsnorm_prepared_kernel", ahead,
                 dim, eps, out);
}

void gated_group_rmsnorm(float* y, const float* z, int64_t z_stride, const float* weight, int64_t n, int64_t dim,
                         int64_t groups, float eps, cudaStream_t stream) {
    if (n == 0) return;
    // A thread a value up to 512 (Nemotron-H's groups): a decode step has only `groups` blocks, so
    // each thread's chain of dependent loads is what the kernel takes.
    const int64_t width = dim / groups;
    const auto threads = static_cast<unsigned>(std::clamp<int64_t>((width + 31) / 32 * 32, kThreads, 512));
    launch_early(gated_group_rmsnorm_kernel, dim3(static_cast<unsigned>(n * groups)), dim3(threads), 0, stream,
                 "gated_group_rmsnorm_kernel", y, z, z_stride, weight, dim, groups, eps);
}

void head_rmsnorm_rope(const HeadNormRopeArgs& args, cudaStream_t stream) {
    if (args.n * args.heads == 0) return;
    require_rotation_fits(args, "head_rmsnorm_rope");
    launch_early(head_rmsnorm_rope_kernel, dim3(static_cast<unsigned>(args.n * args.heads)), dim3(kThreads),
                 static_cast<size_t>(args.head_dim) * sizeof(float), stream, "head_rmsnorm_rope_kernel", args);
}

void prepare_attention_rows(const AttentionRowsArgs& a, cudaStream_t stream) {
    const HeadNormRopeArgs &q = a.queries, &k = a.keys;
    require_rotation_fits(q, "prepare_attention_rows");
    require_rotation_fits(k, "prepare_attention_rows");
    require(q.n == k.n && q.head_dim == k.head_dim && a.kv_width == k.heads * k.head_dim &&
                k.out_row_stride == a.kv_width,
            "prepare_attention_rows: queries of ", q.n, " rows of ", q.head_dim, "-value heads and keys of ", k.n,
            " rows of ", k.heads, " heads of ", k.head_dim, " (row stride ", k.out_row_stride,
            ") do not match the cache's rows of ", a.kv_width);
    const int64_t blocks = q.n * q.heads + 2 * k.n * k.heads;
    if (blocks == 0) return;
    launch_early(attention_rows_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
                 static_cast<size_t>(q.head_dim) * sizeof(float), stream, "attention_rows_kernel", a);
}

void head_rmsnorm_silu_gate(float* y, const float* z, int64_t z_stride, const float* weight, int64_t n,
                            int64_t heads, int64_t head_dim, float eps, cudaStream_t stream) {
    if (n * heads == 0) return;
    launch_early(head_rmsnorm_silu_gate_kernel, dim3(static_cast<unsigned>(n * heads)), dim3(kThreads), 0, stream,
                 "head_rmsnorm_silu_gate_kernel", y, z, z_stride, weight, heads, head_dim, eps);
}

}  // namespace duet::cuda
