// Launchers of the CUDA kernels behind the CUDA backend: one per backend op family, each the GPU
// counterpart of a CPU kernel with the same meaning (see backend/backend.h). Host-only header;
// every pointer is device memory unless its comment says host, every launch is asynchronous on
// `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/backend.h"

namespace duet::cuda {

// Weight element types the kernels read.
enum class WeightType { F32, BF16 };

// --- element-wise ---------------------------------------------------------------------------
void add(float* acc, const float* x, int64_t count, cudaStream_t stream);
void relu2(float* x, int64_t count, cudaStream_t stream);
void scale(float* x, float factor, int64_t count, cudaStream_t stream);
void silu_mul(float* gate, const float* up, int64_t count, cudaStream_t stream);
// out[t] = (accumulate ? out[t] : 0) + Σ_j table[ids[t·per_row + j]] (ids < 0 skipped), × row_scale[t] when given.
void sum_embeddings(const void* table, WeightType type, int64_t cols, const int32_t* ids, int64_t per_row,
                    int64_t n, bool accumulate, const float* row_scale, float* out, cudaStream_t stream);
// Backend::gather_embeddings; row_scale (device, [n]), when given, replaces gather.scale and, as in
// sum_embeddings, multiplies the whole row (what it held included) after the sum.
void gather_embeddings(const void* table, WeightType type, int64_t cols, const EmbeddingGather& gather,
                       const float* row_scale, int64_t n, float* out, cudaStream_t stream);
// Backend::store_rows.
void store_rows(float* table, int64_t width, int64_t first, const int32_t* first_at, const float* rows, int64_t n,
                cudaStream_t stream);
// *x += by on the device.
void add_to_int(int32_t* x, int32_t by, cudaStream_t stream);
// out[i] = bf16 or f32 weights widened to f32.
void widen_to_f32(const void* w, WeightType type, int64_t count, float* out, cudaStream_t stream);

// --- norms and gates -------------------------------------------------------------------------
void rmsnorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out, cudaStream_t stream);
void gated_group_rmsnorm(float* y, const float* z, int64_t z_stride, const float* weight, int64_t n, int64_t dim,
                         int64_t groups, float eps, cudaStream_t stream);
// args.norm_weight device memory.
void head_rmsnorm_rope(const HeadNormRopeArgs& args, cudaStream_t stream);
void head_rmsnorm_silu_gate(float* y, const float* z, int64_t z_stride, const float* weight, int64_t n,
                            int64_t heads, int64_t head_dim, float eps, cudaStream_t stream);
void sigmoid_gate_heads(float* y, const float* gate, int64_t gate_row_stride, int64_t gate_head_stride, int64_t n,
                        int64_t heads, int64_t head_dim, cudaStream_t stream);

// --- products --------------------------------------------------------------------------------
// out[n, rows] = x[n, cols] · wᵀ for small n (weights read once per 8 tokens).
void gemv_rows(const void* w, WeightType type, int64_t rows, int64_t cols, const float* x, int64_t n, float* out,
               cudaStream_t stream);
// Mixture-of-experts products in one launch: slot s multiplies experts[expert_of[s]] ([rows, cols],
// a device array of device pointers) with input row x[s / slots_per_input] into out[s, rows].
void expert_gemv(const void* const* experts, WeightType type, int64_t rows, int64_t cols, const int32_t* expert_of,
                 const float* x, int64_t slots_per_input, int64_t slots, float* out, cudaStream_t stream);

// --- sequence mixers -------------------------------------------------------------------------
// taps, bias: device. Semantics of Backend::causal_conv1d_silu.
void causal_conv1d_silu(const float* x, int64_t x_stride, int64_t n, int64_t channels, const float* taps,
                        const float* bias, int64_t kernel, float* ring, float* out, float* ring_history,
                        cudaStream_t stream);
// dt_bias, a, d: device.
void ssm_scan(const SsmScanArgs& args, cudaStream_t stream);
// neg_exp_a_log, dt_bias: device. Always the recurrence (equal to the chunked form up to rounding);
// k_dim at most 256.
void gated_delta_rule(const GatedDeltaArgs& args, cudaStream_t stream);
// The scratch floats attention(args, …) needs (0: none). With args.position set it depends on
// args.capacity, never on the position, so one buffer serves a recorded step at every position.
size_t attention_scratch_floats(const AttentionArgs& args);
// scratch: attention_scratch_floats(args) floats. head_dim at most 512. With args.position set the
// position is read on the device and the launch is the same at every position.
void attention(const AttentionArgs& args, float* scratch, cudaStream_t stream);

// --- expert routing ----------------------------------------------------------------------------
// Per token: the top_k experts and their weights, as the CPU's route_sigmoid_topk / route_softmax_topk.
void route_sigmoid_topk(const float* logits, const float* bias, int64_t n, int64_t experts, const MoeRouting& routing,
                        int32_t* chosen, float* weights, cudaStream_t stream);
void route_softmax_topk(const float* logits, int64_t n, int64_t experts, int64_t top_k, bool normalize,
                        int32_t* chosen, float* weights, cudaStream_t stream);
// out[t] (+)= Σ_j weights[t·k + j] · expert_out[t·k + j] over width; `accumulate` adds to out.
void combine_experts(const float* expert_out, const float* weights, int64_t n, int64_t k, int64_t width,
                     bool accumulate, float* out, cudaStream_t stream);
// x[t, :] *= sigmoid(gate[t]) for gate [n].
void scale_rows_by_sigmoid(float* x, const float* gate, int64_t n, int64_t width, cudaStream_t stream);

}  // namespace duet::cuda
