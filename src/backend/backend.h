// The operations a model's forward pass is written against. A model is written once as calls to
// these ops; the CPU backend runs each call as it comes, an accelerator backend enqueues it. Fused
// operations (a whole mixture-of-experts block, a causal attention over a cache) are single ops so
// each backend can implement them its own best way. Pointers passed to an op point into memory
// allocated by the same backend; weights are views of the loaded checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "backend/buffer.h"
#include "base/error.h"
#include "sample/sampler.h"
#include "tensor/matrix.h"

namespace duet {

class ThreadPool;

// Mamba-2 selective scan over n tokens: for each head h (group g = h / (heads / groups)),
//   dt = clamp(softplus(dt_raw + dt_bias[h]), dt_min, dt_max)
//   S[h] = S[h] * exp(dt * A[h]) + dt * x[h] ⊗ B[g];   y[h] = S[h] · C[g] + D[h] * x[h]
struct SsmScanArgs {
    int64_t n = 0;
    int64_t heads = 0, head_dim = 0, groups = 0, state_size = 0;
    const float* x = nullptr;   // x[t] at x + t * x_stride: heads * head_dim values, then B, then C
    int64_t x_stride = 0;       // B = x + heads*head_dim, C = B + groups*state_size
    const float* dt = nullptr;  // dt[t * dt_stride + h], before the bias and softplus
    int64_t dt_stride = 0;
    const float* dt_bias = nullptr;
    const float* a = nullptr;  // A = -exp(A_log), per head
    const float* d = nullptr;  // skip connection, per head
    float dt_min = 0.0f, dt_max = 0.0f;
    float* state = nullptr;  // [heads, head_dim, state_size], updated in place
    float* y = nullptr;      // [n, heads * head_dim]
    // Optional [n, heads, head_dim, state_size]: the state after each token, so a speculative
    // step can be rolled back to any of its tokens exactly.
    float* state_history = nullptr;
};

struct AttentionArgs {
    int64_t n = 0;       // new tokens; their keys and values are already in the cache
    int64_t pos = 0;     // cache rows before the new tokens; token t attends to rows [0, pos + t]
    // When set (this backend's memory), the position is read from here when the op runs instead of
    // taken from pos, so a recorded decode step replays at the sequence's current position; the
    // cache then bounds the context at `capacity` rows.
    const int32_t* position = nullptr;
    int64_t capacity = 0;
    int64_t heads = 0, kv_heads = 0, head_dim = 0;
    float scale = 0.0f;
    const float* q = nullptr;        // [n, heads * head_dim]
    const float* k_cache = nullptr;  // [capacity, kv_heads * head_dim]
    const float* v_cache = nullptr;
    float* out = nullptr;  // [n, heads * head_dim]
    // When set, gated attention's output gate: out[t, h, d] *= sigmoid(output_gate[t · gate_row_stride
    // + h · gate_head_stride + d]).
    const float* output_gate = nullptr;
    int64_t gate_row_stride = 0, gate_head_stride = 0;
};

// The input of a mixture-of-experts layer: the residual stream x [n, hidden], RMS-normalised with
// norm_weight (and eps) into `normed` ([n, hidden], kept by the caller) for the router and experts.
struct MoeInput {
    const float* x = nullptr;
    const float* norm_weight = nullptr;
    float eps = 0.0f;
    float* normed = nullptr;
};

// The weights of a sigmoid-routed mixture of relu² experts with one shared expert.
struct MoeWeights {
    MatrixView router;                // [experts, hidden]
    const float* score_bias = nullptr;  // [experts], for choosing only
    std::vector<MatrixView> up;       // per expert [inter, hidden]
    std::vector<MatrixView> down;     // per expert [hidden, inter]
    MatrixView shared_up;             // [shared_inter, hidden]
    MatrixView shared_down;           // [hidden, shared_inter]
};

struct MoeRouting {
    int64_t top_k = 0;
    int64_t groups = 1;       // experts form `groups` contiguous groups ...
    int64_t groups_kept = 1;  // ... of which the best `groups_kept` may be chosen from
    bool normalize = true;    // divide the chosen weights by their sum
    float scale = 1.0f;       // then multiply by this
};

// Gated DeltaNet (Qwen3-Next / Qwen3.5 linear attention) over n tokens. Per token, k-head j serves
// v-heads j·r … j·r+r−1 (r = v_heads / k_heads); q and k are L2-normalised (x·rsqrt(Σx² + 1e-6)),
// q is scaled by k_dim^−½, and for each v-head h:
//   g = neg_exp_a_log[h] · softplus(a + dt_bias[h]);  β = sigmoid(b)
//   S ← exp(g)·S;  δ = β(v − Sᵀk);  S ← S + k ⊗ δ;  o = Sᵀq
// chunk == 0 runs that recurrence token by token; chunk > 0 runs the equivalent chunked (WY/UT)
// form over chunks of that many tokens.
struct GatedDeltaArgs {
    int64_t n = 0;
    int64_t k_heads = 0, v_heads = 0, k_dim = 0, v_dim = 0;
    const float* qkv = nullptr;  // token t at qkv + t * qkv_stride: q [k_heads·k_dim] | k | v [v_heads·v_dim]
    int64_t qkv_stride = 0;
    const float* a = nullptr;  // a[t * a_stride + h], before dt_bias and softplus
    int64_t a_stride = 0;
    const float* b = nullptr;  // b[t * b_stride + h], before the sigmoid
    int64_t b_stride = 0;
    const float* neg_exp_a_log = nullptr;  // −exp(A_log), per v-head
    const float* dt_bias = nullptr;        // per v-head
    float* state = nullptr;                // [v_heads, k_dim, v_dim] in f32, updated in place
    float* out = nullptr;                  // [n, v_heads · v_dim]
    int64_t chunk = 0;
};

// Backend::causal_conv1d_silu's arguments, for the fused ops that start with it.
struct CausalConvArgs {
    const float* x = nullptr;  // token t's inputs at x + t * x_stride
    int64_t x_stride = 0, channels = 0, kernel = 0;
    const float* taps = nullptr;  // [channels, kernel]
    const float* bias = nullptr;  // [channels] or null
    float* ring = nullptr;        // [kernel - 1, channels], advanced
    float* out = nullptr;         // [n, channels]
    float* ring_history = nullptr;
};

// The part of a Mamba-2 mixer between its two products (Backend::mamba_conv_scan_norm), for
// scan.n tokens: the convolution into conv.out, ssm_scan over it (scan.x == conv.out, scan.x_stride
// == conv.channels) into scan.y, then gated_group_rmsnorm of scan.y by z. A backend that runs
// the three as one need not write conv.out.
struct MambaMiddleArgs {
    CausalConvArgs conv;
    SsmScanArgs scan;
    const float* z = nullptr;  // token t's gate at z + t * z_stride
    int64_t z_stride = 0;
    const float* norm_weight = nullptr;  // [heads · head_dim]
    int64_t norm_groups = 0;
    float eps = 0.0f;
};

// The part of a Gated DeltaNet mixer between its products (Backend::delta_conv_rule_norm), for
// rule.n tokens: the convolution of q, k and v into conv.out, the delta rule over it (rule.qkv ==
// conv.out, rule.qkv_stride == conv.channels) into rule.out, then head_rmsnorm_silu_gate of
// rule.out by z. As with MambaMiddleArgs, conv.out may go unwritten.
struct DeltaMiddleArgs {
    CausalConvArgs conv;
    GatedDeltaArgs rule;
    const float* z = nullptr;  // token t's gate at z + t * z_stride
    int64_t z_stride = 0;
    const float* norm_weight = nullptr;  // [v_dim]
    float eps = 0.0f;
};

// How RoPE pairs a head's values: rotate-half (NeoX: i with i + d/2) or interleaved (GPT-J: 2i with 2i + 1).
enum class RopeStyle { RotateHalf, Interleaved };

// Per-head RMSNorm followed by RoPE (rotate-half or interleaved) on each head's leading rotary_dim values,
// token t at position pos + t. Head h of token t is read at x + t * x_row_stride + h * x_head_stride
// and written to out + t * out_row_stride + h * head_dim (out may equal x when the layouts agree).
struct HeadNormRopeArgs {
    int64_t n = 0, heads = 0, head_dim = 0;
    const float* x = nullptr;
    int64_t x_row_stride = 0, x_head_stride = 0;
    const float* norm_weight = nullptr;  // [head_dim], multiplies the normalised values
    float eps = 0.0f;
    int64_t pos = 0;
    const int32_t* position = nullptr;  // as AttentionArgs::position: read when the op runs, instead of pos
    int64_t rotary_dim = 0;  // even, at most head_dim; 0 skips the rotation
    float theta = 0.0f;      // inv_freq[i] = 1 / theta^(2i / rotary_dim)
    RopeStyle style = RopeStyle::RotateHalf;
    float* out = nullptr;
    int64_t out_row_stride = 0;
};

// A gated attention step's new rows made ready for the cache (Backend::prepare_attention_rows):
// the query and key heads normed and rotated (each as head_rmsnorm_rope; keys.out may be keys.x,
// rows of kv_width values), then rows [pos, pos + n) of the key cache take the rotated keys and
// the same rows of the value cache take `values` [n, kv_width]. The position is keys.pos, or
// *keys.position when given (as store_rows).
struct AttentionRowsArgs {
    HeadNormRopeArgs queries, keys;
    const float* values = nullptr;
    float* key_cache = nullptr;
    float* value_cache = nullptr;
    int64_t kv_width = 0;  // keys.heads · keys.head_dim
};

// The weights of a softmax-routed mixture of SwiGLU experts with a sigmoid-gated shared expert.
struct SwigluMoeWeights {
    MatrixView router;                         // [experts, hidden]
    std::vector<MatrixView> gate, up, down;    // per expert [inter, hidden], [inter, hidden], [hidden, inter]
    MatrixView shared_gate, shared_up, shared_down;
    MatrixView shared_expert_gate;             // [1, hidden]: the shared expert's sigmoid gate
};

// Embedding rows picked by ids that live in the backend's memory (written by earlier ops, e.g. a
// sampler): out[t] = scale · ((accumulate ? out[t] : 0) + Σ_j table[first_row + j · row_step + ids[t · per_row + j]])
// over the non-negative ids. The ids are not checked: whoever wrote them keeps them in range.
struct EmbeddingGather {
    const int32_t* ids = nullptr;
    int64_t per_row = 1;
    int64_t first_row = 0, row_step = 0;
    float scale = 1.0f;
    bool accumulate = false;
};

// What a fused product does around the product (Backend::matmul_fused).
struct FusedProduct {
    const float* norm_weight = nullptr;  // RMS-normalise the input with these weights first
    float eps = 0.0f;
    bool add = false;  // add the product to the output instead of writing it
};

// One of the two products Backend::matmul_normed_pair sums: w · rmsnorm(x) with the norm's weights.
// For one token x may instead be an embedding: row *row_id of `table` ([.., w.cols]; a negative id
// is a zero row), which a backend may read in place and otherwise gathers into row_scratch [w.cols].
struct NormedProduct {
    MatrixView w;
    const float* x = nullptr;
    const float* norm_weight = nullptr;
    const MatrixView* table = nullptr;
    const int32_t* row_id = nullptr;
    float* row_scratch = nullptr;
    // The input (x, or the row id) was written by work that finished before the op before this
    // product began, so a backend whose ops overlap their predecessors may read it early.
    bool ready_early = false;
};

// One product of a group that shares its input (Backend::matmul_group): out = x · wᵀ.
struct ProductOut {
    MatrixView w;
    float* out = nullptr;
};

// Where sampling ops find their random numbers: draw r of a call uses uniform_draw(seed, *step,
// slot + r) (sample/philox.h), `step` in the backend's memory so recorded steps replay with the
// current one.
struct DrawCounter {
    uint64_t seed = 0;
    const int32_t* step = nullptr;
    uint32_t slot = 0;
};

// How a speech frame [width] starts from its main choice, *choice in the backend's memory (written
// by a sampler): frame = [first_token + choice, choice, 0, ...], the zeros left for the codes drawn
// after it; or, when choice == end_choice, the end frame [end_token, 0, ...]. *go_on becomes
// choice != end_choice: whether the rest of the frame is to be drawn.
struct FrameStart {
    int32_t first_token = 0;
    int32_t end_choice = 0;
    int32_t end_token = 0;
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string_view name() const = 0;

    // A zero-filled buffer of `count` floats.
    virtual Buffer alloc(size_t count) = 0;
    virtual void upload(float* dst, const float* host, size_t count) = 0;
    virtual void download(float* host, const float* src, size_t count) = 0;
    // dst = src, both in this backend's memory.
    virtual void copy(float* dst, const float* src, size_t count) = 0;
    // The same for int32 values (ids, positions, counters) kept in buffers of this backend.
    virtual void upload_ints(int32_t* dst, const int32_t* host, size_t count) = 0;
    virtual void download_ints(int32_t* host, const int32_t* src, size_t count) = 0;
    // x += by, one int32 in this backend's memory (a step counter or position a recorded step advances).
    virtual void add_to_int(int32_t* x, int32_t by) = 0;
    // download_ints without waiting: the copy is queued behind the ops issued so far, and `host`
    // holds the values once await_reads() has returned (the host must not touch it before). Ops
    // issued in between may overwrite `src` without changing what is read. The CPU backend copies
    // at once.
    virtual void read_ints_later(int32_t* host, const int32_t* src, size_t count) { download_ints(host, src, count); }
    virtual void await_reads() {}
    // Waits until every op issued so far has run, for timing them: an accelerator's queue drained. The
    // CPU backend runs ops as they are issued.
    virtual void finish() {}
    // Whether ops are queued to run later (an accelerator's stream) rather than run as issued: then a
    // step issued before the last one's result is read hides the host's turn between the two.
    virtual bool queues_ops() const { return false; }

    // Runs `issue`, which issues this backend's ops for one decode step and returns where the step's
    // result lies. An accelerator backend may record the ops the first times a `key` comes and
    // replay the recording afterwards without running `issue`: so everything a step depends on that
    // changes between steps must be read from this backend's memory (ids, positions, counters), and
    // the buffers it uses must stay alive and in place while `key` (a token held by the caller)
    // lives. The CPU backend just runs `issue`.
    virtual const float* run_step(const std::shared_ptr<const void>& key, const std::function<const float*()>& issue) {
        (void)key;
        return issue();
    }
    // A decode step in two parts, as run_step: `first` issues its ops, which leave an int32 at
    // `go_on` (this backend's memory); `second` runs only when that flag is non-zero once `first`'s
    // ops have run, so a step can end early (a speech frame that is the end of the speech) without
    // the host deciding in between. Returns what `second` returned when it ran, else what `first`
    // returned. An accelerator backend may record both parts as one recording that tests the flag
    // on the device; it may then have to wait for the step to learn which result to return, which
    // parts returning the same pointer spare it. By default: `first`, the flag read back, `second`.
    virtual const float* run_step_then_if(const std::shared_ptr<const void>& key,
                                          const std::function<const float*()>& first, const int32_t* go_on,
                                          const std::function<const float*()>& second) {
        (void)key;
        const float* first_result = first();
        int32_t flag = 0;
        download_ints(&flag, go_on, 1);
        return flag != 0 ? second() : first_result;
    }

    // Names the point a decode step's ops have reached, for a backend that can time the spans between
    // such points inside a recorded step (CUDA: DUET_CUDA_MARKS=1 for layers, =ops for ops too). Only
    // for measuring: it changes no result.
    enum class MarkLevel { Layer, Op };
    virtual void mark(std::string_view label, MarkLevel level = MarkLevel::Layer) {
        (void)label;
        (void)level;
    }

    // Says that the next op writing or adding to the residual stream `x` (a product's or a mixture of
    // experts' `out`) is followed by an op reading rmsnorm(x) with `weight`, the same host pointer it
    // will pass. A hint inside a decode step (run_step): a backend may then have the writing op
    // prepare the norm on the way, so that the reader needs no pass over x of its own; results do not
    // change. The CPU backend ignores it.
    virtual void norm_ahead(const float* x, const float* weight) {
        (void)x;
        (void)weight;
    }

    // out[n, w.rows] = x[n, w.cols] · wᵀ
    virtual void matmul(const MatrixView& w, const float* x, int64_t n, float* out) = 0;
    // A product with its neighbours in a layer: x RMS-normalised first (x / rms(x) · fused.norm_weight,
    // when given) and the product added to `out` (a residual stream) when fused.add. A backend may run
    // it as one kernel; the result equals rmsnorm, matmul and add run one after another (up to rounding).
    virtual void matmul_fused(const MatrixView& w, const float* x, int64_t n, float* out,
                              const FusedProduct& fused) = 0;
    // out (+ out when add) = a.w · rmsnorm(a.x) + b.w · rmsnorm(b.x), both norms with `eps`: a product
    // of two normalised inputs side by side (Drama 3's eh_proj over [enorm(e) ; hnorm(h)]), a.w and
    // b.w of the same rows. A backend may run it as one kernel; the result equals two fused products.
    virtual void matmul_normed_pair(const NormedProduct& a, const NormedProduct& b, int64_t n, float eps, float* out,
                                    bool add) {
        matmul_fused(a.w, normed_pair_input(a, n), n, out, FusedProduct{a.norm_weight, eps, add});
        matmul_fused(b.w, normed_pair_input(b, n), n, out, FusedProduct{b.norm_weight, eps, true});
    }
    // A normed pair's product's input: p.x, or its embedding row gathered into p.row_scratch.
    const float* normed_pair_input(const NormedProduct& p, int64_t n) {
        if (p.table == nullptr) return p.x;
        require(n == 1 && p.row_id != nullptr && p.row_scratch != nullptr && p.table->cols == p.w.cols,
                "matmul_normed_pair: an embedding input is one token's row, with scratch, as wide as its matrix");
        EmbeddingGather row;
        row.ids = p.row_id;
        gather_embeddings(*p.table, row, 1, p.row_scratch);
        return p.row_scratch;
    }
    // Several products of the same x [n, cols] (a layer's projections of one normalised input), each
    // into its own output. A backend may run them as one kernel; the results equal matmul's.
    virtual void matmul_group(std::span<const ProductOut> products, const float* x, int64_t n) {
        for (const ProductOut& p : products) matmul(p.w, x, n, p.out);
    }
    // The same products of x RMS-normalised first (x / rms(x) · norm_weight, rms with `eps`): each
    // out = w · rmsnorm(x). `normed` [n, cols] is the caller's scratch, which a backend may fill with
    // rmsnorm(x) on the way or leave alone; a backend may run the norm and the products as one kernel.
    // The results equal rmsnorm then matmul_group (up to rounding).
    virtual void matmul_group_normed(std::span<const ProductOut> products, const float* x, const float* norm_weight,
                                     float eps, int64_t n, float* normed) {
        if (products.empty()) return;
        rmsnorm(x, norm_weight, n, products[0].w.cols, eps, normed);
        matmul_group(products, normed, n);
    }
    // One product of x RMS-normalised first, out = w · rmsnorm(x), with rmsnorm(x) [n, cols] kept in
    // `normed` for later readers (a layer's output norm read by its head here and by the next layer);
    // a backend may run both as one kernel. The results equal rmsnorm then matmul.
    virtual void matmul_normed_keeping(const ProductOut& product, const float* x, const float* norm_weight, float eps,
                                       int64_t n, float* normed) {
        rmsnorm(x, norm_weight, n, product.w.cols, eps, normed);
        matmul(product.w, normed, n, product.out);
    }
    // A SwiGLU's first half of x RMS-normalised first: out = silu(gate · rmsnorm(x)) ⊙ (up · rmsnorm(x)),
    // out [n, gate.rows]. `normed` [n, cols] and `up_out` [n, gate.rows] are the caller's scratch, which
    // a backend may use or leave alone (it may run it all as one kernel). The result equals
    // matmul_group_normed then silu_mul.
    virtual void matmul_swiglu_normed(const MatrixView& gate, const MatrixView& up, const float* x,
                                      const float* norm_weight, float eps, int64_t n, float* normed, float* up_out,
                                      float* out) {
        const ProductOut products[2] = {{gate, out}, {up, up_out}};
        matmul_group_normed(products, x, norm_weight, eps, n, normed);
        silu_mul(out, up_out, n * gate.rows);
    }
    // out[t] = table[ids[t]]
    virtual void embed(const MatrixView& table, const int32_t* ids, int64_t n, float* out) = 0;
    // Sums of embedding rows, as speech models embed a frame's codes: out[t] = (accumulate ? out[t] : 0)
    // + Σ_j table[ids[t * per_row + j]] over the non-negative ids, then × row_scale[t] when row_scale
    // (host, [n]) is given.
    virtual void sum_embeddings(const MatrixView& table, const int32_t* ids, int64_t per_row, int64_t n,
                                bool accumulate, const float* row_scale, float* out) = 0;
    // Embedding rows by ids in this backend's memory (see EmbeddingGather).
    virtual void gather_embeddings(const MatrixView& table, const EmbeddingGather& gather, int64_t n, float* out) = 0;
    // table rows [first, first + n) of `width` values = rows; first read from `first_at` (this
    // backend's memory) when the op runs, when given: how a recorded step appends to a cache.
    virtual void store_rows(float* table, int64_t width, int64_t first, const int32_t* first_at, const float* rows,
                            int64_t n) = 0;
    // An attention step's new keys and values [n, width] into rows [first, first + n) of their caches,
    // as two store_rows: one op, so that a backend may store both in one launch.
    virtual void store_key_value_rows(float* key_cache, float* value_cache, int64_t width, int64_t first,
                                      const int32_t* first_at, const float* keys, const float* values, int64_t n) {
        store_rows(key_cache, width, first, first_at, keys, n);
        store_rows(value_cache, width, first, first_at, values, n);
    }
    // out[r] = sample_index(logits row r of `count`, params, draw r) for r < rows (sample/sampler.h).
    virtual void sample(const float* logits, int64_t rows, int64_t count, const SamplingParams& params,
                        const DrawCounter& draws, int32_t* out) = 0;
    // One choice as sample_with_ras, with draws `slot` and `slot + 1`. `recent` holds the RAS window:
    // recent[0] how many choices it holds (at most ras.window), then those choices oldest first; the
    // choice is appended (dropping the oldest when full) unless it is `exempt`. Where `live` is given
    // and *live is 0 when the op runs, it does nothing (a step queued behind the end of a speech).
    virtual void sample_with_ras(const float* logits, int64_t count, const SamplingParams& params,
                                 const RasParams& ras, int32_t* recent, const DrawCounter& draws, int32_t exempt,
                                 int32_t* out, const int32_t* live) = 0;
    // A speech frame [width] begun from the main token drawn for it (see FrameStart); `live` as for
    // sample_with_ras (it may be `go_on` itself: then a frame that ends the speech stops the frames
    // queued behind it until the host sets the flag again).
    virtual void start_frame(const int32_t* choice, const FrameStart& start, int64_t width, int32_t* frame,
                             int32_t* go_on, const int32_t* live) = 0;
    // What a speech frame's step does last, once the frame is fed: previous = frame (width values)
    // and counters[0..count) += 1, so that the next step finds its draws' counter and positions
    // advanced without the host.
    virtual void end_frame(const int32_t* frame, int64_t width, int32_t* previous, int32_t* counters,
                           int64_t count) = 0;

    // out[t] = x[t] / rms(x[t]) * weight over rows of width dim
    virtual void rmsnorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out) = 0;
    // acc += x
    virtual void add(float* acc, const float* x, int64_t count) = 0;
    // x = max(x, 0)²
    virtual void relu2(float* x, int64_t count) = 0;
    // x *= factor
    virtual void scale(float* x, float factor, int64_t count) = 0;
    // gate = silu(gate) · up: the SwiGLU product, written over the gate
    virtual void silu_mul(float* gate, const float* up, int64_t count) = 0;

    // Depthwise causal convolution with bias, then SiLU, over `channels` channels of n tokens.
    // Token t's input is x[t * x_stride + c]; `ring` holds the kernel-1 previous inputs
    // [kernel - 1, channels] (oldest first) and is advanced. taps: [channels, kernel], the last tap
    // multiplies the current token. `ring_history` (optional, [n, kernel - 1, channels]) receives
    // the ring after each token.
    virtual void causal_conv1d_silu(const float* x, int64_t x_stride, int64_t n, int64_t channels,
                                    const float* taps, const float* bias, int64_t kernel, float* ring,
                                    float* out, float* ring_history = nullptr) = 0;
    virtual void ssm_scan(const SsmScanArgs& args) = 0;
    // y[t] *= silu(z[t]); then RMS-normalise each of `groups` contiguous groups of y[t] and scale by
    // weight. z[t] at z + t * z_stride.
    virtual void gated_group_rmsnorm(float* y, const float* z, int64_t z_stride, const float* weight,
                                     int64_t n, int64_t dim, int64_t groups, float eps) = 0;

    // MambaMiddleArgs: three ops that a backend may run as one for a decode token.
    virtual void mamba_conv_scan_norm(const MambaMiddleArgs& a) {
        run_conv(a.conv, a.scan.n);
        mark("mamba middle: conv", MarkLevel::Op);
        ssm_scan(a.scan);
        mark("mamba middle: scan", MarkLevel::Op);
        gated_group_rmsnorm(a.scan.y, a.z, a.z_stride, a.norm_weight, a.scan.n, a.scan.heads * a.scan.head_dim,
                            a.norm_groups, a.eps);
    }
    // DeltaMiddleArgs: three ops that a backend may run as one for a decode token.
    virtual void delta_conv_rule_norm(const DeltaMiddleArgs& a) {
        run_conv(a.conv, a.rule.n);
        mark("delta middle: conv", MarkLevel::Op);
        gated_delta_rule(a.rule);
        mark("delta middle: rule", MarkLevel::Op);
        head_rmsnorm_silu_gate(a.rule.out, a.z, a.z_stride, a.norm_weight, a.rule.n, a.rule.v_heads, a.rule.v_dim,
                               a.eps);
    }

    virtual void attention(const AttentionArgs& args) = 0;

    // out[n, hidden] += Σ_chosen w_e · down_e(relu²(up_e x̂)) + shared_down(relu²(shared_up x̂)), x̂ =
    // rmsnorm(in.x) (left in in.normed): the whole layer, its norm before and its add to `out` (the
    // residual stream, which may be in.x itself) after, so a backend may run it as few kernels.
    virtual void moe_relu2(const MoeInput& in, int64_t n, const MoeWeights& weights, const MoeRouting& routing,
                           float* out) = 0;
    // Gated DeltaNet core (see GatedDeltaArgs).
    virtual void gated_delta_rule(const GatedDeltaArgs& args) = 0;
    // Zero-centred or plain per-head norm, then partial rotate-half RoPE (see HeadNormRopeArgs).
    virtual void head_rmsnorm_rope(const HeadNormRopeArgs& args) = 0;
    // AttentionRowsArgs: four ops that a backend may run as one.
    virtual void prepare_attention_rows(const AttentionRowsArgs& a) {
        head_rmsnorm_rope(a.queries);
        head_rmsnorm_rope(a.keys);
        store_key_value_rows(a.key_cache, a.value_cache, a.kv_width, a.keys.pos, a.keys.position, a.keys.out,
                             a.values, a.keys.n);
    }
    // Each of the `heads` contiguous heads of y[t] RMS-normalised and scaled by weight [head_dim],
    // then multiplied by silu(z[t]); z[t] at z + t * z_stride. (Norm before gate, unlike
    // gated_group_rmsnorm.)
    virtual void head_rmsnorm_silu_gate(float* y, const float* z, int64_t z_stride, const float* weight, int64_t n,
                                        int64_t heads, int64_t head_dim, float eps) = 0;
    // out[n, hidden] += Σ_chosen w_e · down_e(silu(gate_e x) · up_e x)
    //                 + sigmoid(shared_expert_gate · x) · shared_down(silu(shared_gate x) · shared_up x),
    // w = softmax(router · x) over all experts, the top_k kept (divided by their sum when normalize);
    // x = rmsnorm(in.x), the norm and the add as moe_relu2's.
    virtual void moe_swiglu(const MoeInput& in, int64_t n, const SwigluMoeWeights& weights, int64_t top_k,
                            bool normalize, float* out) = 0;

private:
    void run_conv(const CausalConvArgs& c, int64_t n) {
        causal_conv1d_silu(c.x, c.x_stride, n, c.channels, c.taps, c.bias, c.kernel, c.ring, c.out, c.ring_history);
    }
};

std::unique_ptr<Backend> make_cpu_backend(ThreadPool* pool);

}  // namespace duet
