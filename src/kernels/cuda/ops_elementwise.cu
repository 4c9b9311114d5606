// Element-wise kernels and embedding sums: one thread per element (or per row and column).
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/ops.h"

namespace duet::cuda {

namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t count) { return static_cast<int>((count + kThreads - 1) / kThreads); }

__device__ __forceinline__ float load_weight(const void* w, WeightType type, int64_t i) {
    return type == WeightType::BF16 ? bf16_bits_to_float(static_cast<const uint16_t*>(w)[i])
                                    : static_cast<const float*>(w)[i];
}

__global__ void add_kernel(float* acc, const float* x, int64_t count) {
    wait_for_inputs();
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < count) acc[i] += x[i];
}

__global__ void relu2_kernel(float* x, int64_t count) {
    wait_for_inputs();
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < count) {
        const float r = x[i] > 0.0f ? x[i] : 0.0f;
        x[i] = r * r;
    }
}

__global__ void scale_kernel(float* x, float factor, int64_t count) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < count) x[i] *= factor;
}

__global__ void silu_mul_kernel(float* gate, const float* up, int64_t count) {
    wait_for_inputs();
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < count) gate[i] = silu(gate[i]) * up[i];
}

__global__ void gather_embeddings_kernel(const void* table, WeightType type, int64_t cols, EmbeddingGather g,
                                         const float* row_scale, int64_t n, float* out) {
    wait_for_inputs();
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n * cols) return;
    const int64_t t = i / cols, c = i % cols;
    float sum = g.accumulate ? out[i] : 0.0f;
    for (int64_t j = 0; j < g.per_row; ++j) {
        const int32_t id = g.ids[t * g.per_row + j];
        if (id >= 0) sum += load_weight(table, type, (g.first_row + j * g.row_step + id) * cols + c);
    }
    out[i] = sum * (row_scale != nullptr ? row_scale[t] : g.scale);
}

// `count` values of `rows` into `table` from row *first_at (or `first`) on; with a second table, the
// threads past the first count store `second_rows` into it the same way (a cache's keys and values
// in one launch).
__global__ void store_rows_kernel(float* table, float* second, int64_t width, int64_t first, const int32_t* first_at,
                                  const float* rows, const float* second_rows, int64_t count) {
    wait_for_inputs();
    const int64_t row0 = first_at != nullptr ? *first_at : first;
    int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= count) {
        i -= count;
        if (second == nullptr || i >= count) return;
        table = second;
        rows = second_rows;
    }
    table[row0 * width + i] = rows[i];
}

__global__ void add_to_int_kernel(int32_t* x, int32_t by) { *x += by; }

__global__ void record_time_kernel(uint64_t* slot) {
    allow_next_kernel();  // the next kernel may load its weights meanwhile, as it would without the mark
    wait_for_inputs();
    uint64_t now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    *slot = now;
}

__global__ void start_frame_kernel(const int32_t* choice, FrameStart start, int64_t width, int32_t* frame,
                                   int32_t* go_on, const int32_t* live) {
    wait_for_inputs();
    if (live != nullptr && *live == 0) return;  // every thread reads the same flag before any writes it
    const int32_t c = *choice;
    const bool ends = c == start.end_choice;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
        int32_t value = 0;
        if (i == 0) value = ends ? start.end_token : start.first_token + c;
        if (i == 1 && !ends) value = c;
        frame[i] = value;
    }
    __syncthreads();  // `live` may be `go_on`: every thread has read it
    if (threadIdx.x == 0) *go_on = ends ? 0 : 1;
}

__global__ void end_frame_kernel(const int32_t* frame, int64_t width, int32_t* previous, int32_t* counters,
                                 int64_t count) {
    wait_for_inputs();
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) previous[i] = frame[i];
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) ++counters[i];
}

__global__ void set_condition_kernel(cudaGraphConditionalHandle condition, const int32_t* flag) {
    cudaGraphSetConditional(condition, *flag != 0 ? 1u : 0u);
}

__global__ void widen_kernel(const void* w, WeightType type, int64_t count, float* out) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < count) out[i] = load_weight(w, type, i);
}

__global__ void combine_experts_kernel(const float* expert_out, const float* weights, int64_t n, int64_t k,
                                       int64_t width, const float* shared, const float* shared_gate,
                                       const int32_t* row_of_slot, float* out) {
    wait_for_inputs();
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n * width) return;
    const int64_t t = i / width, c = i % width;
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
        const int64_t slot = t * k + j;
        const int64_t row = row_of_slot != nullptr ? row_of_slot[slot] : slot;
        sum += weights[slot] * expert_out[row * width + c];
    }
    if (shared != nullptr) sum += shared_gate != nullptr ? sigmoid(shared_gate[t]) * shared[i] : shared[i];
    out[i] += sum;
}

}  // namespace

void add(float* acc, const float* x, int64_t count, cudaStream_t stream) {
    if (count == 0) return;
    launch_early(add_kernel, dim3(blocks_for(count)), dim3(kThreads), 0, stream, "add_kernel", acc, x, count);
}

void relu2(float* x, int64_t count, cudaStream_t stream) {
    if (count == 0) return;
    launch_early(relu2_kernel, dim3(blocks_for(count)), dim3(kThreads), 0, stream, "relu2_kernel", x, count);
}

void scale(float* x, float factor, int64_t count, cudaStream_t stream) {
    if (count == 0) return;
    scale_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, factor, count);
    DUET_CUDA_CHECK_LAUNCH("scale_kernel");
}

void silu_mul(float* gate, const float* up, int64_t count, cudaStream_t stream) {
    if (count == 0) return;
    launch_early(silu_mul_kernel, dim3(blocks_for(count)), dim3(kThreads), 0, stream, "silu_mul_kernel", gate, up,
                 count);
}

void sum_embeddings(const void* table, WeightType type, int64_t cols, const int32_t* ids, int64_t per_row,
                    int64_t n, bool accumulate, const float* row_scale, float* out, cudaStream_t stream) {
    EmbeddingGather g;
    g.ids = ids;
    g.per_row = per_row;
    g.accumulate = accumulate;
    gather_embeddings(table, type, cols, g, row_scale, n, out, stream);
}

void gather_embeddings(const void* table, WeightType type, int64_t cols, const EmbeddingGather& gather,
                       const float* row_scale, int64_t n, float* out, cudaStream_t stream) {
    if (n * cols == 0) return;
    launch_early(gather_embeddings_kernel, dim3(blocks_for(n * cols)), dim3(kThreads), 0, stream,
                 "gather_embeddings_kernel", table, type, cols, gather, row_scale, n, out);
}

void store_rows(float* table, int64_t width, int64_t first, const int32_t* first_at, const float* rows, int64_t n,
                cudaStream_t stream) {
    if (n * width == 0) return;
    launch_early(store_rows_kernel, dim3(blocks_for(n * width)), dim3(kThreads), 0, stream, "store_rows_kernel", table,
                 nullptr, width, first, first_at, rows, nullptr, n * width);
}

void store_key_value_rows(float* key_cache, float* value_cache, int64_t width, int64_t first, const int32_t* first_at,
                          const float* keys, const float* values, int64_t n, cudaStream_t stream) {
    if (n * width == 0) return;
    launch_early(store_rows_kernel, dim3(blocks_for(2 * n * width)), dim3(kThreads), 0, stream, "store_rows_kernel",
                 key_cache, value_cache, width, first, first_at, keys, values, n * width);
}

void add_to_int(int32_t* x, int32_t by, cudaStream_t stream) {
    add_to_int_kernel<<<1, 1, 0, stream>>>(x, by);
    DUET_CUDA_CHECK_LAUNCH("add_to_int_kernel");
}

void record_time(uint64_t* slot, cudaStream_t stream) {
    launch_early(record_time_kernel, dim3(1), dim3(1), 0, stream, "record_time_kernel", slot);
}

void start_frame(const int32_t* choice, const FrameStart& start, int64_t width, int32_t* frame, int32_t* go_on,
                 const int32_t* live, cudaStream_t stream) {
    launch_early(start_frame_kernel, dim3(1), dim3(32), 0, stream, "start_frame_kernel", choice, start, width, frame,
                 go_on, live);
}

void end_frame(const int32_t* frame, int64_t width, int32_t* previous, int32_t* counters, int64_t count,
               cudaStream_t stream) {
    launch_early(end_frame_kernel, dim3(1), dim3(32), 0, stream, "end_frame_kernel", frame, width, previous, counters,
                 count);
}

void set_condition(cudaGraphConditionalHandle condition, const int32_t* flag, cudaStream_t stream) {
    // Launched plainly: the conditional node after it then follows a full dependency, the only kind
    // an edge into a node other than a kernel may be.
    set_condition_kernel<<<1, 1, 0, stream>>>(condition, flag);
    DUET_CUDA_CHECK_LAUNCH("set_condition_kernel");
}

void widen_to_f32(const void* w, WeightType type, int64_t count, float* out, cudaStream_t stream) {
    if (count == 0) return;
    widen_kernel<<<blocks_for(count), kThreads, 0, stream>>>(w, type, count, out);
    DUET_CUDA_CHECK_LAUNCH("widen_kernel");
}

void combine_experts(const float* expert_out, const float* weights, int64_t n, int64_t k, int64_t width,
                     const float* shared, const float* shared_gate, const int32_t* row_of_slot, float* out,
                     cudaStream_t stream) {
    if (n * width == 0) return;
    launch_early(combine_experts_kernel, dim3(blocks_for(n * width)), dim3(kThreads), 0, stream,
                 "combine_experts_kernel", expert_out, weights, n, k, width, shared, shared_gate, row_of_slot, out);
}

}  // namespace duet::cuda
