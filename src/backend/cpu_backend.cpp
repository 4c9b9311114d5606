// The CPU backend: every op runs at once on the calling thread and the thread pool.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "base/error.h"
#include "base/host_memory.h"
#include "base/thread_pool.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/gated_attention.h"
#include "kernels/cpu/gated_delta_rule.h"
#include "kernels/cpu/mamba2.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe.h"
#include "kernels/cpu/moe_swiglu.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/activations.h"
#include "sample/philox.h"
#include "sample/sampler.h"

namespace duet {

namespace {

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(ThreadPool* pool) : pool_(pool) {}

    std::string_view name() const override { return "cpu"; }

    // Zeroed, on a cache line (and on huge pages when large): base/host_memory.h.
    Buffer alloc(size_t count) override {
        const std::shared_ptr<uint8_t> bytes = allocate_zeroed_host(count * sizeof(float));
        return Buffer(std::shared_ptr<float[]>(bytes, reinterpret_cast<float*>(bytes.get())), count);
    }
    void upload(float* dst, const float* host, size_t count) override { std::memcpy(dst, host, count * sizeof(float)); }
    void download(float* host, const float* src, size_t count) override { std::memcpy(host, src, count * sizeof(float)); }
    void copy(float* dst, const float* src, size_t count) override { std::memcpy(dst, src, count * sizeof(float)); }
    void upload_ints(int32_t* dst, const int32_t* host, size_t count) override {
        std::memcpy(dst, host, count * sizeof(int32_t));
    }
    void download_ints(int32_t* host, const int32_t* src, size_t count) override {
        std::memcpy(host, src, count * sizeof(int32_t));
    }
    void add_to_int(int32_t* x, int32_t by) override { *x += by; }

    void matmul(const MatrixView& w, const float* x, int64_t n, float* out) override {
        cpu::matmul(w, x, n, out, pool_);
    }

    void matmul_fused(const MatrixView& w, const float* x, int64_t n, float* out, const FusedProduct& f) override {
        std::vector<float> normed;
        x = normed_input(x, f.norm_weight, n, w.cols, f.eps, normed);
        if (!f.add) {
            cpu::matmul(w, x, n, out, pool_);
            return;
        }
        std::vector<float> product(static_cast<size_t>(n * w.rows));
        cpu::matmul(w, x, n, product.data(), pool_);
        for (size_t i = 0; i < product.size(); ++i) out[i] += product[i];
    }

    // Both products in one job; then out (+ out) + a + b, the order the two fused products add in.
    void matmul_normed_pair(const NormedProduct& a, const NormedProduct& b, int64_t n, float eps, float* out,
                            bool add) override {
        std::vector<float> normed_a, normed_b;
        const float* x_a = normed_input(normed_pair_input(a, n), a.norm_weight, n, a.w.cols, eps, normed_a);
        const float* x_b = normed_input(normed_pair_input(b, n), b.norm_weight, n, b.w.cols, eps, normed_b);
        const size_t count = static_cast<size_t>(n * a.w.rows);
        std::vector<float> product_a(count), product_b(count);
        const cpu::Product products[2] = {{a.w, x_a, n, product_a.data()}, {b.w, x_b, n, product_b.data()}};
        cpu::matmul_many(products, pool_);
        for (size_t i = 0; i < count; ++i) out[i] = (add ? out[i] + product_a[i] : product_a[i]) + product_b[i];
    }

    void matmul_group(std::span<const ProductOut> products, const float* x, int64_t n) override {
        std::vector<cpu::Product> together;
        together.reserve(products.size());
        for (const ProductOut& p : products) together.push_back({p.w, x, n, p.out});
        cpu::matmul_many(together, pool_);
    }

    void embed(const MatrixView& table, const int32_t* ids, int64_t n, float* out) override {
        for (int64_t t = 0; t < n; ++t) {
            require(ids[t] >= 0 && ids[t] < table.rows, "token id ", ids[t], " is outside the vocabulary [0, ",
                    table.rows, ")");
            matrix_row_to_f32(table, ids[t], out + t * table.cols);
        }
    }

    void sum_embeddings(const MatrixView& table, const int32_t* ids, int64_t per_row, int64_t n, bool accumulate,
                        const float* row_scale, float* out) override {
        std::vector<float> row(static_cast<size_t>(table.cols));
        for (int64_t t = 0; t < n; ++t) {
            float* dst = out + t * table.cols;
            if (!accumulate) std::fill(dst, dst + table.cols, 0.0f);
            for (int64_t j = 0; j < per_row; ++j) {
                const int32_t id = ids[t * per_row + j];
                if (id < 0) continue;
                require(id < table.rows, "embedding id ", id, " is outside the table's ", table.rows, " rows");
                matrix_row_to_f32(table, id, row.data());
                for (int64_t i = 0; i < table.cols; ++i) dst[i] += row[i];
            }
            if (row_scale != nullptr) {
                for (int64_t i = 0; i < table.cols; ++i) dst[i] *= row_scale[t];
            }
        }
    }

    void gather_embeddings(const MatrixView& table, const EmbeddingGather& g, int64_t n, float* out) override {
        std::vector<float> row(static_cast<size_t>(table.cols));
        for (int64_t t = 0; t < n; ++t) {
            float* dst = out + t * table.cols;
            if (!g.accumulate) std::fill(dst, dst + table.cols, 0.0f);
            for (int64_t j = 0; j < g.per_row; ++j) {
                const int32_t id = g.ids[t * g.per_row + j];
                if (id < 0) continue;
                const int64_t r = g.first_row + j * g.row_step + id;
                require(r < table.rows, "embedding row ", r, " is outside the table's ", table.rows, " rows");
                matrix_row_to_f32(table, r, row.data());
                for (int64_t i = 0; i < table.cols; ++i) dst[i] += row[i];
            }
            if (g.scale != 1.0f) {
                for (int64_t i = 0; i < table.cols; ++i) dst[i] *= g.scale;
            }
        }
    }

    void store_rows(float* table, int64_t width, int64_t first, const int32_t* first_at, const float* rows,
                    int64_t n) override {
        if (first_at != nullptr) first = *first_at;
        std::memcpy(table + first * width, rows, static_cast<size_t>(n * width) * sizeof(float));
    }

    void sample(const float* logits, int64_t rows, int64_t count, const SamplingParams& params,
                const DrawCounter& draws, int32_t* out) override {
        for (int64_t r = 0; r < rows; ++r) {
            const float u = uniform_draw(draws.seed, static_cast<uint32_t>(*draws.step),
                                         draws.slot + static_cast<uint32_t>(r));
            out[r] = sample_index({logits + r * count, static_cast<size_t>(count)}, params, u);
        }
    }

    void sample_with_ras(const float* logits, int64_t count, const SamplingParams& params, const RasParams& ras,
                         int32_t* recent, const DrawCounter& draws, int32_t exempt, int32_t* out,
                         const int32_t* live) override {
        if (live != nullptr && *live == 0) return;
        const uint32_t step = static_cast<uint32_t>(*draws.step);
        const int32_t held = recent[0];
        const int32_t choice = duet::sample_with_ras(
            {logits, static_cast<size_t>(count)}, params, ras, {recent + 1, static_cast<size_t>(held)},
            uniform_draw(draws.seed, step, draws.slot), uniform_draw(draws.seed, step, draws.slot + 1), exempt);
        *out = choice;
        if (choice == exempt || ras.window <= 0) return;
        if (held == ras.window) {
            std::memmove(recent + 1, recent + 2, static_cast<size_t>(held - 1) * sizeof(int32_t));
            recent[held] = choice;
        } else {
            recent[1 + held] = choice;
            recent[0] = held + 1;
        }
    }
    void start_frame(const int32_t* choice, const FrameStart& start, int64_t width, int32_t* frame, int32_t* go_on,
                     const int32_t* live) override {
        if (live != nullptr && *live == 0) return;
        const int32_t c = *choice;
        const bool ends = c == start.end_choice;
        std::fill(frame, frame + width, 0);
        frame[0] = ends ? start.end_token : start.first_token + c;
        if (!ends && width > 1) frame[1] = c;
        *go_on = ends ? 0 : 1;
    }
    void end_frame(const int32_t* frame, int64_t width, int32_t* previous, int32_t* counters,
                   int64_t count) override {
        std::copy(frame, frame + width, previous);
        for (int64_t i = 0; i < count; ++i) ++counters[i];
    }

    void rmsnorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out) override {
        cpu::rmsnorm(x, weight, n, dim, eps, out, pool_);
    }

    void add(float* acc, const float* x, int64_t count) override {
        for (int64_t i = 0; i < count; ++i) acc[i] += x[i];
    }

    void scale(float* x, float factor, int64_t count) override {
        for (int64_t i = 0; i < count; ++i) x[i] *= factor;
    }
    void silu_mul(float* gate, const float* up, int64_t count) override {
        for (int64_t i = 0; i < count; ++i) gate[i] = cpu::silu(gate[i]) * up[i];
    }
    void relu2(float* x, int64_t count) override {
        for (int64_t i = 0; i < count; ++i) x[i] = cpu::relu2(x[i]);
    }

    void causal_conv1d_silu(const float* x, int64_t x_stride, int64_t n, int64_t channels, const float* taps,
                            const float* bias, int64_t kernel, float* ring, float* out,
                            float* ring_history) override {
        cpu::causal_conv1d_silu(x, x_stride, n, channels, taps, bias, kernel, ring, out, pool_, ring_history);
    }

    void ssm_scan(const SsmScanArgs& args) override { cpu::ssm_scan(args, pool_); }

    void gated_group_rmsnorm(float* y, const float* z, int64_t z_stride, const float* weight, int64_t n,
                             int64_t dim, int64_t groups, float eps) override {
        cpu::gated_group_rmsnorm(y, z, z_stride, weight, n, dim, groups, eps, pool_);
    }

    void attention(const AttentionArgs& args) override {
        AttentionArgs a = args;
        if (a.position != nullptr) a.pos = *a.position;
        cpu::attention(a, pool_);
        if (a.output_gate != nullptr) {
            cpu::sigmoid_gate_heads(a.out, a.output_gate, a.gate_row_stride, a.gate_head_stride, a.n, a.heads,
                                    a.head_dim, pool_);
        }
    }

    void moe_relu2(const MoeInput& in, int64_t n, const MoeWeights& weights, const MoeRouting& routing,
                   float* out) override {
        const float* x = normalise(in, n, weights.router.cols);
        add_layer_output(n * weights.router.cols, out, [&](float* mixed) {
            cpu::moe_relu2(x, n, weights, routing, mixed, pool_);
        });
    }

    void gated_delta_rule(const GatedDeltaArgs& args) override { cpu::gated_delta_rule(args, pool_); }

    void head_rmsnorm_rope(const HeadNormRopeArgs& args) override {
        HeadNormRopeArgs a = args;
        if (a.position != nullptr) a.pos = *a.position;
        cpu::head_rmsnorm_rope(a, pool_);
    }

    void head_rmsnorm_silu_gate(float* y, const float* z, int64_t z_stride, const float* weight, int64_t n,
                                int64_t heads, int64_t head_dim, float eps) override {
        cpu::head_rmsnorm_silu_gate(y, z, z_stride, weight, n, heads, head_dim, eps, pool_);
    }

    void moe_swiglu(const MoeInput& in, int64_t n, const SwigluMoeWeights& weights, int64_t top_k, bool normalize,
                    float* out) override {
        const float* x = normalise(in, n, weights.router.cols);
        add_layer_output(n * weights.router.cols, out, [&](float* mixed) {
            cpu::moe_swiglu(x, n, weights, top_k, normalize, mixed, pool_);
        });
    }

private:
    // A product's input: x [n, cols] RMS-normalised with norm_weight into `buffer`, or x itself
    // without a norm.
    const float* normed_input(const float* x, const float* norm_weight, int64_t n, int64_t cols, float eps,
                              std::vector<float>& buffer) {
        if (norm_weight == nullptr) return x;
        buffer.resize(static_cast<size_t>(n * cols));
        cpu::rmsnorm(x, norm_weight, n, cols, eps, buffer.data(), pool_);
        return buffer.data();
    }

    // The layer's input normalised into in.normed.
    const float* normalise(const MoeInput& in, int64_t n, int64_t hidden) {
        rmsnorm(in.x, in.norm_weight, n, hidden, in.eps, in.normed);
        return in.normed;
    }
    // out[0..count) += what `layer` writes into a buffer of that size (a layer's output added to the
    // residual stream only once it is whole, as the separate add it replaces did).
    template <typename Layer>
    static void add_layer_output(int64_t count, float* out, Layer&& layer) {
        std::vector<float> mixed(static_cast<size_t>(count));
        layer(mixed.data());
        for (int64_t i = 0; i < count; ++i) out[i] += mixed[i];
    }

    ThreadPool* pool_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(ThreadPool* pool) { return std::make_unique<CpuBackend>(pool); }

}  // namespace duet
