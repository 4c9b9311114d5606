// Launchers of the CUDA kernels behind the CUDA backend: one per backend op family, each the GPU
// counterpart of a CPU kernel with the same meaning (see backend/backend.h). Host-only header;
// every pointer is device memory unless its comment says host, every launch is asynchronous on
// `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/backend.h"
#include "kernels/cuda/norm_ahead.h"

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
// Backend::store_key_value_rows: both caches' rows in one launch.
void store_key_value_rows(float* key_cache, float* value_cache, int64_t width, int64_t first, const int32_t* first_at,
                          const float* keys, const float* values, int64_t n, cudaStream_t stream);
// *x += by on the device.
void add_to_int(int32_t* x, int32_t by, cudaStream_t stream);
// *slot = the device's nanosecond clock, once the work before it on `stream` has finished.
void record_time(uint64_t* slot, cudaStream_t stream);
// Backend::start_frame.
void start_frame(const int32_t* choice, const FrameStart& start, int64_t width, int32_t* frame, int32_t* go_on,
                 const int32_t* live, cudaStream_t stream);
// Backend::end_frame.
void end_frame(const int32_t* frame, int64_t width, int32_t* previous, int32_t* counters, int64_t count,
               cudaStream_t stream);
// Only while a graph is recorded on `stream`: sets `condition`, the handle of a conditional node
// that follows in that graph, to *flag != 0 when the graph runs.
void set_condition(cudaGraphConditionalHandle condition, const int32_t* flag, cudaStream_t stream);
// out[i] = bf16 or f32 weights widened to f32.
void widen_to_f32(const void* w, WeightType type, int64_t count, float* out, cudaStream_t stream);

// --- norms and gates -------------------------------------------------------------------------
void rmsnorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out, cudaStream_t stream);
// One row's rmsnorm whose norm the kernel that wrote the row prepared (norm_ahead.h): out [dim] =
// ahead.weighted / rms, one pass with no sum of its own.
void rmsnorm_prepared(const NormAhead& ahead, int64_t dim, float eps, float* out, cudaStream_t stream);
void gated_group_rmsnorm(float* y, const float* z, int64_t z_stride, const float* weight, int64_t n, int64_t dim,
                         int64_t groups, float eps, cudaStream_t stream);
// args.norm_weight device memory.
void head_rmsnorm_rope(const HeadNormRopeArgs& args, cudaStream_t stream);
// Backend::prepare_attention_rows; norm weights device memory.
void prepare_attention_rows(const AttentionRowsArgs& args, cudaStream_t stream);
void head_rmsnorm_silu_gate(float* y, const float* z, int64_t z_stride, const float* weight, int64_t n,
                            int64_t heads, int64_t head_dim, float eps, cudaStream_t stream);

// --- products --------------------------------------------------------------------------------
// out[n, rows] = x[n, cols] · wᵀ for small n (weights read once per 8 tokens).
void gemv_rows(const void* w, WeightType type, int64_t rows, int64_t cols, const float* x, int64_t n, float* out,
               cudaStream_t stream);
// Mixture-of-experts products in one launch: slot s multiplies experts[expert_of[s]] ([rows, cols],
// a device array of device pointers; experts[0] for every slot without expert_of) with input row
// x[s / slots_per_input] into out[s, rows]; `relu2_out` squares the positive part of each output.
void expert_gemv(const void* const* experts, WeightType type, int64_t rows, int64_t cols, const int32_t* expert_of,
                 const float* x, int64_t slots_per_input, int64_t slots, float* out, cudaStream_t stream,
                 bool relu2_out = false);
// out[s] = silu(gates[e] · x) · (ups[e] · x), e as expert_gemv, both products in one pass. Returns
// false (nothing launched) where the bf16 vector path does not apply; the caller then runs the
// products one by one.
bool expert_swiglu(const void* const* gates, const void* const* ups, WeightType type, int64_t rows, int64_t cols,
                   const int32_t* expert_of, const float* x, int64_t slots_per_input, int64_t slots, float* out,
                   cudaStream_t stream);

// --- a mixture-of-experts layer of few tokens in two launches (ops_moe_decode.cu) --------------
// Expert tables list the routed experts' device matrices, then the shared expert's at shared_index
// (-1: none). All bf16, rows of whole 16-byte groups, inputs 16-byte aligned (expert_layer_fits).
struct ExpertFirstArgs {
    const void* const* first = nullptr;   // [inter, hidden] each: relu² experts' up, or SwiGLU's gate
    const void* const* second = nullptr;  // SwiGLU's up; null for relu² experts
    const int32_t* expert_of = nullptr;   // [routed_slots]: the expert of each token's chosen slots
    // Or, where the gate wrote them (one token), each slot's matrices themselves: no look-up in `first`.
    const void* const* slot_first = nullptr;
    const void* const* slot_second = nullptr;
    int64_t routed_slots = 0, slots_per_token = 0;
    int64_t routed_rows = 0, shared_rows = 0;
    int64_t chunks = 0;  // hidden / 8
    int32_t shared_index = -1;
    const float* x = nullptr;      // [tokens, hidden]
    float* routed_out = nullptr;   // [routed_slots, routed_rows]
    float* shared_out = nullptr;   // [tokens, shared_rows]
};
struct ExpertDownArgs {
    const void* const* down = nullptr;  // [hidden, inter] each
    const int32_t* expert_of = nullptr; // [tokens, k]
    const void* const* slot_down = nullptr;  // or, where the gate wrote them (one token), each slot's matrix
    const void* shared_down = nullptr;       // down[shared_index], where the caller knows it
    const float* weights = nullptr;     // [tokens, k]: the routing weights
    int64_t k = 0, rows = 0;            // rows: hidden
    int64_t routed_chunks = 0, shared_chunks = 0;  // inter / 8 of each kind
    int32_t shared_index = -1;
    const float* routed_mid = nullptr;         // [tokens · k, routed inter]
    const float* shared_mid = nullptr;         // [tokens, shared inter]
    const float* shared_gate_logit = nullptr;  // [tokens]: the shared output is scaled by its sigmoid; null: by 1
    float* out = nullptr;                      // [tokens, hidden], added to
    NormAhead ahead;  // on (one token): the stream's next norm prepared as out is written (norm_ahead.h)
};
// Whether a layer of these widths and token · expert slots runs through the two launches.
bool expert_layer_fits(int64_t hidden, int64_t routed_inter, int64_t shared_inter, int64_t slots);
// The first products: routed_out[s] = act(first[e_s] · x[s / slots_per_token]) and shared_out[t] the
// same with the shared expert, act relu² (second null) or silu(first · x) · (second · x).
void expert_first(const ExpertFirstArgs& args, int64_t tokens, cudaStream_t stream);
// out[t] += Σ_j weights[t, j] · down[e_tj] · routed_mid[t·k + j] + gate_t · down[shared] · shared_mid[t].
void expert_down(const ExpertDownArgs& args, int64_t tokens, cudaStream_t stream);

// --- long prompts: f32 activations as bf16 pairs for tensor-core products ------------------------
// Row r of x [.., cols] (row row_of[r], or r without row_of) split into hi + lo, both bf16 [rows, cols].
void split_rows_bf16(const float* x, int64_t cols, const int32_t* row_of, int64_t rows, uint16_t* hi, uint16_t* lo,
                     cudaStream_t stream);
// max(x, 0)², split.
void relu2_split_bf16(const float* x, int64_t count, uint16_t* hi, uint16_t* lo, cudaStream_t stream);
// silu(gate) · up, split.
void silu_mul_split_bf16(const float* gate, const float* up, int64_t count, uint16_t* hi, uint16_t* lo,
                         cudaStream_t stream);
// A run of at most kExpertTileRows rows of the split activations, all for one expert:
// rows [first_row, first_row + count).
struct ExpertRowTile {
    int32_t expert = 0, first_row = 0, count = 0;
};
constexpr int kExpertTileRows = 32;
// The slots of a long prompt's tokens × k chosen experts, ordered by expert (device memory): slot s
// (token s / k) lands on row row_of_slot[s] and row r holds token token_of_row[r], an expert's rows
// together, the experts in order and each expert's rows in the order of its slots; tiles[0..*tile_count)
// cut each expert's rows into runs of at most kExpertTileRows, in row order.
struct ExpertGroupsOnDevice {
    int32_t* row_of_slot = nullptr;   // [slots]
    int32_t* token_of_row = nullptr;  // [slots]
    ExpertRowTile* tiles = nullptr;   // [max_expert_row_tiles(slots, experts)]
    int32_t* tile_count = nullptr;    // [1]
};
// The most tiles `slots` may need.
int64_t max_expert_row_tiles(int64_t slots, int64_t experts);
// Groups the slots of `chosen` [slots] (device; every entry an expert below `experts`) into `out`, on
// the device (expert_grouping.cu).
void group_slots_by_expert(const int32_t* chosen, int64_t slots, int64_t k, int64_t experts,
                           const ExpertGroupsOnDevice& out, cudaStream_t stream);
// Every routed expert's product of a long prompt in one launch (grouped_products.cu):
// out[r, :rows] = (hi[r] + lo[r]) · experts[e]ᵀ for each row r of each tile, e the tile's expert,
// accumulated in f32 on tensor cores. experts: a device array of device pointers to bf16 [rows, cols];
// hi, lo: bf16 [.., cols]; tiles: device, [*tile_count], the count (device) at most max_tiles.
// `vectors`: cols is a multiple of 8 and every matrix, hi and lo start on 16-byte boundaries (rows read
// in 16-byte loads).
void grouped_split_products(const void* const* experts, int64_t rows, int64_t cols, bool vectors,
                            const ExpertRowTile* tiles, const int32_t* tile_count, int64_t max_tiles,
                            const uint16_t* hi, const uint16_t* lo, float* out, cudaStream_t stream);

// --- sequence mixers -------------------------------------------------------------------------
// taps, bias: device. Semantics of Backend::causal_conv1d_silu.
void causal_conv1d_silu(const float* x, int64_t x_stride, int64_t n, int64_t channels, const float* taps,
                        const float* bias, int64_t kernel, float* ring, float* out, float* ring_history,
                        cudaStream_t stream);
// dt_bias, a, d: device. The chunked form (ssm_scan_chunked) where it fits, else token by token
// (equal up to rounding).
void ssm_scan(const SsmScanArgs& args, cudaStream_t stream);
// Whether ssm_scan_chunked takes these arguments: more than one token, no state history (a
// speculative step's states after each token), state_size a multiple of 4 up to 128, x in 16-byte
// groups (aligned, x_stride and heads · head_dim multiples of 4), and room in shared memory for a
// chunk's B and C (about 115 KB at 128 states), which a yes also lets the kernel take.
bool ssm_scan_chunked_fits(const SsmScanArgs& args);
// The selective scan over a prompt in chunks of 64 tokens (the state space dual form).
void ssm_scan_chunked(const SsmScanArgs& args, cudaStream_t stream);
// Whether mamba_step takes these arguments: one token without histories, at most 8 heads a group
// (a thread block cluster), the norm's groups the scan's, head_dim ≤ 64, state_size ≤ 128 and a
// multiple of 4, on a device with clusters.
bool mamba_step_fits(const MambaMiddleArgs& args);
// Backend::mamba_conv_scan_norm for one token in one launch; every pointer device memory.
// args.conv.out is not written.
void mamba_step(const MambaMiddleArgs& args, cudaStream_t stream);
// Whether delta_step takes these arguments: one token without a ring history, k_dim ≤ 128, and a
// key head's value heads in at most 8 blocks of 32 value columns (a cluster), on a device with
// clusters.
bool delta_step_fits(const DeltaMiddleArgs& args);
// Backend::delta_conv_rule_norm for one token in one launch; every pointer device memory.
// args.conv.out is not written.
void delta_step(const DeltaMiddleArgs& args, cudaStream_t stream);
// neg_exp_a_log, dt_bias: device. The chunked form (delta_rule_chunked) where args.chunk asks for it
// and it fits, else the recurrence token by token (equal up to rounding); k_dim at most 256.
void gated_delta_rule(const GatedDeltaArgs& args, cudaStream_t stream);
// Whether delta_rule_chunked takes these arguments: more than one token, a chunk asked for
// (chunks of more than 64 tokens run as 64), k_dim a multiple of 4 up to 128, q and k rows in
// 16-byte groups (qkv aligned, qkv_stride a multiple of 4), and the device's
// shared memory a block may take holds the chunk's arrays (about 155 KB at k_dim 128), which a yes
// also lets the kernel take.
bool delta_rule_chunked_fits(const GatedDeltaArgs& args);
// The delta rule over a prompt in the chunked (WY/UT) form, as the CPU's; pointers as gated_delta_rule.
void delta_rule_chunked(const GatedDeltaArgs& args, cudaStream_t stream);
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
// Where a one-token gate also writes each chosen slot's matrices (from the experts' tables), so
// that the experts' launches find them in one trip to memory instead of two. Off: `first` null.
struct SlotMatrices {
    const void* const* first_table = nullptr;   // [experts]
    const void* const* second_table = nullptr;  // [experts] or null
    const void* const* down_table = nullptr;    // [experts] or null
    const void** first = nullptr;               // [top_k]
    const void** second = nullptr;              // [top_k] (with second_table)
    const void** down = nullptr;                // [top_k] (with down_table)
};
// The most experts whose matrices the one-launch gate writes for the chosen slots (one a thread).
constexpr int64_t kGateSlotMatricesMaxExperts = 256;
// A decode token's gate in one launch: normed = rmsnorm(x) · norm_weight (stored for the experts),
// logits = router · normed, gate_logit = gate_row · normed when gate_row is given (the shared
// expert's gate), then the routing of route_sigmoid_topk (sigmoid) or route_softmax_topk (top_k and
// normalize of `routing`) into chosen and weights, and the chosen slots' matrices where slot_matrices
// is on. The routing is done by the last block to finish, which counts itself in blocks_done: a
// device counter that is zero before the launch (the launch leaves it zero); or, where
// route_in_cluster asks for it and moe_gate_routes_in_cluster says so (Hopper; a router without
// expert groups, weighed over the chosen: sigmoid, or softmax normalised; at most 256 experts and
// top 8; rows of at most 3072 values), by one thread block cluster that holds every router row.
struct MoeGateArgs {
    const float* x = nullptr;
    const float* norm_weight = nullptr;
    float eps = 0.0f;
    float* normed = nullptr;
    const void* router = nullptr;    // bf16 [experts, hidden]
    const void* gate_row = nullptr;  // bf16 [hidden] or null
    int64_t experts = 0, hidden = 0;
    bool sigmoid = true;
    const float* bias = nullptr;  // sigmoid routing's choice bias, device, or null
    MoeRouting routing;
    float* logits = nullptr;      // [experts]
    float* gate_logit = nullptr;  // [1]
    int32_t* chosen = nullptr;    // [top_k]
    float* weights = nullptr;     // [top_k]
    unsigned* blocks_done = nullptr;
    NormAhead ahead;  // on: rmsnorm(x) was prepared by the kernel that wrote x (norm_ahead.h)
    SlotMatrices slot_matrices;  // experts at most kGateSlotMatricesMaxExperts
    bool route_in_cluster = false;
};
bool moe_gate_fits(int64_t hidden, int64_t experts, int64_t top_k);
bool moe_gate_routes_in_cluster(const MoeGateArgs& args);
void moe_gate(const MoeGateArgs& args, cudaStream_t stream);
// out[t] += Σ_j weights[t·k + j] · expert_out[row(t·k + j)] over width, plus shared[t] when given,
// scaled by sigmoid(shared_gate[t]) when that is given too; row(s) = row_of_slot[s], or s without it.
void combine_experts(const float* expert_out, const float* weights, int64_t n, int64_t k, int64_t width,
                     const float* shared, const float* shared_gate, const int32_t* row_of_slot, float* out,
                     cudaStream_t stream);


// --- sampling ----------------------------------------------------------------------------------
// Backend::sample and Backend::sample_with_ras, by sample_index's rules and draws: one block of
// 1024 threads per row and the step counter read on the device, so nothing waits for the host and
// the launches can be recorded in a graph. Any row size up to INT32_MAX logits is exact; when more
// than 4096 candidates are kept (top_k 0 or above 4096 over a longer row) they are sorted 4096 at a
// time, each piece costing a few passes over the row. NaN logits give an unspecified index. A greedy
// draw (temperature 0) over one long row spreads it over many blocks instead (one block read the
// 131072 logits of a Nemotron-H token in 20 µs), which takes `argmax_scratch`: device memory of
// argmax_scratch_bytes(), zeroed once, which every launch leaves zeroed.
size_t argmax_scratch_bytes();
void sample(const float* logits, int64_t rows, int64_t count, const SamplingParams& params, const DrawCounter& draws,
            int32_t* out, void* argmax_scratch, cudaStream_t stream);
void sample_with_ras(const float* logits, int64_t count, const SamplingParams& params, const RasParams& ras,
                     int32_t* recent, const DrawCounter& draws, int32_t exempt, int32_t* out, const int32_t* live,
                     cudaStream_t stream);
// The device side of sample/philox.h, for checking it against the host: out[i] =
// uniform_draw(seeds[i], steps[i], slots[i]), and out[4i…4i+3] = philox4x32 of counters[4i…4i+3]
// with keys[2i], keys[2i+1].
void uniform_draws(const uint64_t* seeds, const uint64_t* steps, const uint32_t* slots, int64_t n, float* out,
                   cudaStream_t stream);
void philox_blocks(const uint32_t* counters, const uint32_t* keys, int64_t n, uint32_t* out, cudaStream_t stream);

}  // namespace duet::cuda
