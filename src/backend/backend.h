// The operations a model's forward pass is written against. A model is written once as calls to
// these ops; the CPU backend runs each call as it comes, an accelerator backend enqueues it. Fused
// operations (a whole mixture-of-experts block, a causal attention over a cache) are single ops so
// each backend can implement them its own best way. Pointers passed to an op point into memory
// allocated by the same backend; weights are views of the loaded checkpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "backend/buffer.h"
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
};

struct AttentionArgs {
    int64_t n = 0;       // new tokens; their keys and values are already in the cache
    int64_t pos = 0;     // cache rows before the new tokens; token t attends to rows [0, pos + t]
    int64_t heads = 0, kv_heads = 0, head_dim = 0;
    float scale = 0.0f;
    const float* q = nullptr;        // [n, heads * head_dim]
    const float* k_cache = nullptr;  // [capacity, kv_heads * head_dim]
    const float* v_cache = nullptr;
    float* out = nullptr;  // [n, heads * head_dim]
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

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string_view name() const = 0;

    // A zero-filled buffer of `count` floats.
    virtual Buffer alloc(size_t count) = 0;
    virtual void upload(float* dst, const float* host, size_t count) = 0;
    virtual void download(float* host, const float* src, size_t count) = 0;

    // out[n, w.rows] = x[n, w.cols] · wᵀ
    virtual void matmul(const MatrixView& w, const float* x, int64_t n, float* out) = 0;
    // out[t] = table[ids[t]]
    virtual void embed(const MatrixView& table, const int32_t* ids, int64_t n, float* out) = 0;
    // out[t] = x[t] / rms(x[t]) * weight over rows of width dim
    virtual void rmsnorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out) = 0;
    // acc += x
    virtual void add(float* acc, const float* x, int64_t count) = 0;
    // x = max(x, 0)²
    virtual void relu2(float* x, int64_t count) = 0;

    // Depthwise causal convolution with bias, then SiLU, over `channels` channels of n tokens.
    // Token t's input is x[t * x_stride + c]; `ring` holds the kernel-1 previous inputs
    // [kernel - 1, channels] (oldest first) and is advanced. taps: [channels, kernel], the last tap
    // multiplies the current token.
    virtual void causal_conv1d_silu(const float* x, int64_t x_stride, int64_t n, int64_t channels,
                                    const float* taps, const float* bias, int64_t kernel, float* ring,
                                    float* out) = 0;
    virtual void ssm_scan(const SsmScanArgs& args) = 0;
    // y[t] *= silu(z[t]); then RMS-normalise each of `groups` contiguous groups of y[t] and scale by
    // weight. z[t] at z + t * z_stride.
    virtual void gated_group_rmsnorm(float* y, const float* z, int64_t z_stride, const float* weight,
                                     int64_t n, int64_t dim, int64_t groups, float eps) = 0;

    virtual void attention(const AttentionArgs& args) = 0;

    // out[n, hidden] = Σ_chosen w_e · down_e(relu²(up_e x)) + shared_down(relu²(shared_up x)).
    virtual void moe_relu2(const float* x, int64_t n, const MoeWeights& weights, const MoeRouting& routing,
                           float* out) = 0;
};

std::unique_ptr<Backend> make_cpu_backend(ThreadPool* pool);

}  // namespace duet
