#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/norms_ahead.h"
#include "backend/cuda/pinned_reads.h"
#include "backend/cuda/pinned_staging.h"
#include "backend/cuda/step_graphs.h"
#include "backend/cuda/step_marks.h"
#include "backend/cuda/tensor_core_products.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/cuda/alignment.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/matvec_bf16.h"
#include "kernels/cuda/ops.h"

namespace duet {

namespace {

using cuda::DeviceBuffer;
using cuda::ExpertDownArgs;
using cuda::ExpertFirstArgs;
using cuda::WeightType;

void check_cublas(cublasStatus_t status, const char* call) {
    require(status == CUBLAS_STATUS_SUCCESS, "cuBLAS call ", call, " failed with status ", static_cast<int>(status));
}

WeightType weight_type(const MatrixView& m) {
    require_matmul_dtype(m);
    return m.dtype == DType::BF16 ? WeightType::BF16 : WeightType::F32;
}

// Up to this many tokens a product reads each weight once per 8 tokens; beyond, cuBLAS runs it.
constexpr int64_t kGemvTokens = 32;
// Weights widened to f32 for cuBLAS in pieces of at most this many values.
constexpr int64_t kWidenChunk = int64_t(1) << 25;

// A device copy of host weights, and enough of the host bytes to notice if the address is reused.
struct DeviceWeight {
    DeviceBuffer buffer;
    size_t bytes = 0;
    std::array<uint8_t, 32> head{};
    bool in_place = false;  // already in device memory (weights made on the GPU): used as they are
};

// Whether MoE gates route in one thread block cluster where their routing fits that form
// (cuda::MoeGateArgs::route_in_cluster): unless DUET_CUDA_GATE_CLUSTER=0.
bool gate_cluster_from_environment() {
    const char* setting = std::getenv("DUET_CUDA_GATE_CLUSTER");
    return setting == nullptr || std::strcmp(setting, "0") != 0;
}

// Whether `p` points into device memory (cudaMalloc'd), where the host must not read.
bool is_device_memory(const void* p) {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
        cudaGetLastError();  // a pointer the runtime does not know: host memory; clear the error
        return false;
    }
    return attributes.type == cudaMemoryTypeDevice;
}

// Freed activation blocks, kept by size for the next allocation of that size: a decode step
// allocates the same scratch every time, and cudaMalloc / cudaFree would synchronise the device.
// Every op runs on the backend's one stream, so a block reused there is only touched after the
// work that last used it.
class BlockCache {
public:
    ~BlockCache() {
        for (auto& [count, blocks] : free_) {
            for (float* p : blocks) cudaFree(p);
        }
    }
    float* take(size_t count) {
        std::lock_guard<std::mutex> lock(mutex_);
        std::vector<float*>& blocks = free_[count];
        if (blocks.empty()) return nullptr;
        float* p = blocks.back();
        blocks.pop_back();
        return p;
    }
    void give_back(size_t count, float* p) {
        std::lock_guard<std::mutex> lock(mutex_);
        free_[count].push_back(p);
    }

private:
    std::mutex mutex_;
    std::unordered_map<size_t, std::vector<float*>> free_;
};

// With DUET_CUDA_OP_TIMES=1 each op waits for its kernels and its wall time is summed by op name;
// the totals are printed when the backend goes away. Inclusive: an op that calls another counts both.
// DUET_CUDA_OP_TIMES=step counts only the ops of decode steps (run_step).
class OpTimes {
public:
    OpTimes()
        : enabled_(std::getenv("DUET_CUDA_OP_TIMES") != nullptr),
          steps_only_(enabled_ && std::strcmp(std::getenv("DUET_CUDA_OP_TIMES"), "step") == 0) {}
    // Inside a decode step or not (what `steps only` counts).
    void set_in_step(bool in_step) { in_step_ = in_step; }
    // Prints the totals once and stops timing (the stream is about to go away).
    void report_and_stop() {
        if (!enabled_) return;
        enabled_ = false;
        if (totals_.empty()) return;
        std::vector<std::pair<double, std::string>> rows;
        for (const auto& [name, t] : totals_) rows.emplace_back(t.seconds, name);
        std::sort(rows.rbegin(), rows.rend());
        std::fprintf(stderr, "%-24s %10s %8s\n", "cuda op", "ms", "calls");
        for (const auto& [seconds, name] : rows) {
            std::fprintf(stderr, "%-24s %10.3f %8ld\n", name.c_str(), seconds * 1e3, totals_.at(name).calls);
        }
    }
    bool enabled() const { return enabled_; }
    void add(const char* name, double seconds) {
        if (steps_only_ && !in_step_) return;
        Total& t = totals_[name];
        t.seconds += seconds;
        ++t.calls;
    }

private:
    struct Total {
        double seconds = 0.0;
        long calls = 0;
    };
    bool enabled_;
    bool steps_only_;
    bool in_step_ = false;
    std::map<std::string, Total> totals_;
};

class CudaBackend final : public Backend {
    // Counts the op it lives in (what NormsAhead goes by) and times it, when timing is on.
    class Timed {
    public:
        Timed(CudaBackend& b, const char* name) : b_(b), name_(name) {
            ++b_.ops_;
            if (b_.times_.enabled()) start_ = std::chrono::steady_clock::now();
        }
        ~Timed() {
            if (!b_.times_.enabled()) return;
            cudaStreamSynchronize(b_.stream_);
            b_.times_.add(name_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
        }

    private:
        CudaBackend& b_;
        const char* name_;
        std::chrono::steady_clock::time_point start_;
    };

public:
    CudaBackend() {
        require(cuda::device_count() > 0, "no CUDA device is available");
        DUET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        staging_ = std::make_unique<PinnedStaging>(stream_);
        reads_ = std::make_unique<PinnedReads>(stream_);
        check_cublas(cublasCreate(&cublas_), "cublasCreate");
        check_cublas(cublasSetStream(cublas_, stream_), "cublasSetStream");
        // Exact f32 products, as the CPU computes them: no TF32 shortcuts.
        check_cublas(cublasSetMathMode(cublas_, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
        // Op times need every op to run on its own, so they turn recording off.
        const char* graphs = std::getenv("DUET_CUDA_GRAPHS");
        const bool record = !times_.enabled() && (graphs == nullptr || std::strcmp(graphs, "0") != 0);
        graphs_ = std::make_unique<StepGraphs>(stream_, record);
        gate_cluster_ = gate_cluster_from_environment();
        marks_ = std::make_unique<StepMarks>(stream_);
    }
    ~CudaBackend() override {
        times_.report_and_stop();
        cudaStreamSynchronize(stream_);
        marks_->report();
        graphs_.reset();
        cublasDestroy(cublas_);
        staging_.reset();
        reads_.reset();
        cudaStreamDestroy(stream_);
    }

    std::string_view name() const override { return "cuda"; }

    Buffer alloc(size_t count) override {
        if (count == 0) return Buffer(std::shared_ptr<float[]>(), 0);
        float* data = blocks_->take(count);
        if (data == nullptr) DUET_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data), count * sizeof(float)));
        DUET_CUDA_CHECK(cudaMemsetAsync(data, 0, count * sizeof(float), stream_));
        std::shared_ptr<BlockCache> cache = blocks_;
        Buffer buffer(std::shared_ptr<float[]>(data, [cache, count](float* p) { cache->give_back(count, p); }), count);
        graphs_->keep(buffer);
        return buffer;
    }
    void upload(float* dst, const float* host, size_t count) override {
        Timed timed(*this, "upload");
        staging_->upload(dst, host, count * sizeof(float));
    }
    void download(float* host, const float* src, size_t count) override {
        Timed timed(*this, "download");
        if (count > 0) DUET_CUDA_CHECK(cudaMemcpyAsync(host, src, count * 4, cudaMemcpyDeviceToHost, stream_));
        DUET_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    void copy(float* dst, const float* src, size_t count) override {
        Timed timed(*this, "copy");
        if (count > 0) DUET_CUDA_CHECK(cudaMemcpyAsync(dst, src, count * 4, cudaMemcpyDeviceToDevice, stream_));
    }

    void upload_ints(int32_t* dst, const int32_t* host, size_t count) override {
        Timed timed(*this, "upload");
        staging_->upload(dst, host, count * sizeof(int32_t));
    }
    void download_ints(int32_t* host, const int32_t* src, size_t count) override {
        Timed timed(*this, "download");
        if (count > 0) DUET_CUDA_CHECK(cudaMemcpyAsync(host, src, count * 4, cudaMemcpyDeviceToHost, stream_));
        DUET_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    void add_to_int(int32_t* x, int32_t by) override {
        Timed timed(*this, "add_to_int");
        cuda::add_to_int(x, by, stream_);
    }
    void finish() override { DUET_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
    void read_ints_later(int32_t* host, const int32_t* src, size_t count) override {
        reads_->read_later(host, src, count * sizeof(int32_t));
    }
    void await_reads() override {
        Timed timed(*this, "await_reads");
        reads_->await();
    }
    bool queues_ops() const override { return true; }

    void gather_embeddings(const MatrixView& table, const EmbeddingGather& gather, int64_t n, float* out) override {
        Timed timed(*this, "gather_embeddings");
        cuda::gather_embeddings(device_weight(table.data, matrix_bytes(table)), weight_type(table), table.cols, gather,
                                nullptr, n, out, stream_);
    }
    void store_rows(float* table, int64_t width, int64_t first, const int32_t* first_at, const float* rows,
                    int64_t n) override {
        Timed timed(*this, "store_rows");
        cuda::store_rows(table, width, first, first_at, rows, n, stream_);
    }
    void store_key_value_rows(float* key_cache, float* value_cache, int64_t width, int64_t first,
                              const int32_t* first_at, const float* keys, const float* values, int64_t n) override {
        Timed timed(*this, "store_key_value_rows");
        cuda::store_key_value_rows(key_cache, value_cache, width, first, first_at, keys, values, n, stream_);
    }
    void sample(const float* logits, int64_t rows, int64_t count, const SamplingParams& params,
                const DrawCounter& draws, int32_t* out) override {
        Timed timed(*this, "sample");
        cuda::sample(logits, rows, count, params, draws, out, argmax_scratch(), stream_);
    }
    void sample_with_ras(const float* logits, int64_t count, const SamplingParams& params, const RasParams& ras,
                         int32_t* recent, const DrawCounter& draws, int32_t exempt, int32_t* out,
                         const int32_t* live) override {
        Timed timed(*this, "sample_with_ras");
        cuda::sample_with_ras(logits, count, params, ras, recent, draws, exempt, out, live, stream_);
    }

    void start_frame(const int32_t* choice, const FrameStart& start, int64_t width, int32_t* frame, int32_t* go_on,
                     const int32_t* live) override {
        Timed timed(*this, "start_frame");
        cuda::start_frame(choice, start, width, frame, go_on, live, stream_);
    }
    void end_frame(const int32_t* frame, int64_t width, int32_t* previous, int32_t* counters,
                   int64_t count) override {
        Timed timed(*this, "end_frame");
        cuda::end_frame(frame, width, previous, counters, count, stream_);
    }

    const float* run_step(const std::shared_ptr<const void>& key, const std::function<const float*()>& issue) override {
        times_.set_in_step(true);
        const auto step = in_step(issue);
        const float* result = graphs_->run(key, marked(step, true, true));
        norms_ahead_.end_step();
        times_.set_in_step(false);
        return result;
    }
    const float* run_step_then_if(const std::shared_ptr<const void>& key, const std::function<const float*()>& first,
                                  const int32_t* go_on, const std::function<const float*()>& second) override {
        times_.set_in_step(true);
        const auto step = in_step(first);
        const float* result = graphs_->run_then_if(key, marked(step, true, false), go_on, marked(second, false, true));
        norms_ahead_.end_step();
        times_.set_in_step(false);
        return result;
    }
    void norm_ahead(const float* x, const float* weight) override { norms_ahead_.expect(x, weight); }
    void mark(std::string_view label, MarkLevel level) override {
        marks_->mark(label, level == MarkLevel::Op);
    }

    void matmul(const MatrixView& w, const float* x, int64_t n, float* out) override {
        Timed timed(*this, "matmul");
        if (n == 0 || w.rows == 0) return;
        const void* dw = device_weight(w.data, matrix_bytes(w));
        if (n == 1 && w.dtype == DType::BF16) {
            cuda::matvec_bf16(static_cast<const uint16_t*>(dw), x, out, w.rows, w.cols, stream_);
            return;
        }
        if (n <= kGemvTokens) {
            cuda::gemv_rows(dw, weight_type(w), w.rows, w.cols, x, n, out, stream_);
            return;
        }
        if (w.dtype == DType::BF16) {
            uint16_t* hi = half_scratch(act_hi_, static_cast<size_t>(n * w.cols));
            uint16_t* lo = half_scratch(act_lo_, static_cast<size_t>(n * w.cols));
            cuda::split_rows_bf16(x, w.cols, nullptr, n, hi, lo, stream_);
            split_bf16_gemm(cublas_, dw, w.rows, w.cols, hi, lo, n, out, w.rows);
            return;
        }
        // f32 weights: out (column-major [rows, n], ld rows) = Wᵀ-as-stored · x, a piece of rows at a time.
        const int64_t piece_rows = std::max<int64_t>(1, kWidenChunk / std::max<int64_t>(w.cols, 1));
        float* widened = scratch(widen_, static_cast<size_t>(std::min(piece_rows, w.rows) * w.cols));
        const size_t element = dtype_size(w.dtype);
        const float one = 1.0f, zero = 0.0f;
        for (int64_t r0 = 0; r0 < w.rows; r0 += piece_rows) {
            const int64_t rows = std::min(piece_rows, w.rows - r0);
            cuda::widen_to_f32(static_cast<const uint8_t*>(dw) + static_cast<size_t>(r0 * w.cols) * element,
                               weight_type(w), rows * w.cols, widened, stream_);
            check_cublas(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n),
                                     static_cast<int>(w.cols), &one, widened, static_cast<int>(w.cols), x,
                                     static_cast<int>(w.cols), &zero, out + r0, static_cast<int>(w.rows)),
                         "cublasSgemm");
        }
    }

    // The group as one kernel's MatvecGroup when it can run as one (a token, bf16 matrices of one width,
    // every one on the vector path); std::nullopt otherwise.
    std::optional<cuda::MatvecGroup> one_launch_group(std::span<const ProductOut> products, const float* x,
                                                      const float* norm_weight, int64_t n) {
        const bool fits = n == 1 && !products.empty() &&
                          products.size() <= static_cast<size_t>(cuda::kMatvecGroupMax) &&
                          std::all_of(products.begin(), products.end(), [&](const ProductOut& p) {
                              return p.w.dtype == DType::BF16 && p.w.cols == products[0].w.cols && p.w.rows > 0;
                          });
        if (!fits) return std::nullopt;
        cuda::MatvecGroup group;
        for (const ProductOut& p : products) {
            group.w[group.count] = static_cast<const uint16_t*>(device_weight(p.w.data, matrix_bytes(p.w)));
            group.y[group.count] = p.out;
            group.rows[group.count] = p.w.rows;
            if (!cuda::matvec_bf16_fusable(group.w[group.count], x, norm_weight, p.w.cols)) return std::nullopt;
            ++group.count;
        }
        return group;
    }

    void matmul_group(std::span<const ProductOut> products, const float* x, int64_t n) override {
        Timed timed(*this, "matmul_group");
        if (const auto group = one_launch_group(products, x, nullptr, n)) {
            cuda::matvec_bf16_group(*group, x, products[0].w.cols, stream_);
            return;
        }
        for (const ProductOut& p : products) matmul(p.w, x, n, p.out);
    }

    void matmul_group_normed(std::span<const ProductOut> products, const float* x, const float* norm_weight,
                             float eps, int64_t n, float* normed) override {
        Timed timed(*this, "matmul_group_normed");
        if (products.empty()) return;
        const int64_t cols = products[0].w.cols;
        if (cuda::matvec_bf16_group_normable(cols)) {
            const float* norm = device_vector(norm_weight, cols);
            if (const auto group = one_launch_group(products, x, norm, n)) {
                cuda::matvec_bf16_group_normed(*group, x, norm, eps, cols, stream_,
                                               ahead_for_reader(x, n, cols, norm_weight));
                return;
            }
        }
        Backend::matmul_group_normed(products, x, norm_weight, eps, n, normed);
    }

    void matmul_normed_keeping(const ProductOut& product, const float* x, const float* norm_weight, float eps,
                               int64_t n, float* normed) override {
        Timed timed(*this, "matmul_normed_keeping");
        const int64_t cols = product.w.cols;
        if (cuda::matvec_bf16_group_normable(cols) && cuda::aligned_16(normed)) {
            const float* norm = device_vector(norm_weight, cols);
            if (const auto group = one_launch_group(std::span(&product, 1), x, norm, n)) {
                cuda::matvec_bf16_group_normed(*group, x, norm, eps, cols, stream_,
                                               ahead_for_reader(x, n, cols, norm_weight), normed);
                return;
            }
        }
        Backend::matmul_normed_keeping(product, x, norm_weight, eps, n, normed);
    }

    void matmul_swiglu_normed(const MatrixView& gate, const MatrixView& up, const float* x, const float* norm_weight,
                              float eps, int64_t n, float* normed, float* up_out, float* out) override {
        Timed timed(*this, "matmul_swiglu_normed");
        const bool one_launch = n == 1 && gate.dtype == DType::BF16 && up.dtype == DType::BF16 &&
                                gate.rows == up.rows && gate.cols == up.cols && gate.rows > 0 &&
                                cuda::matvec_bf16_group_normable(gate.cols);
        if (one_launch) {
            const auto* dg = static_cast<const uint16_t*>(device_weight(gate.data, matrix_bytes(gate)));
            const auto* du = static_cast<const uint16_t*>(device_weight(up.data, matrix_bytes(up)));
            const float* norm = device_vector(norm_weight, gate.cols);
            if (cuda::matvec_bf16_fusable(dg, x, norm, gate.cols) && cuda::matvec_bf16_fusable(du, x, nullptr, up.cols)) {
                cuda::matvec_bf16_swiglu(dg, du, x, norm, eps, out, gate.rows, gate.cols, stream_,
                                         ahead_for_reader(x, n, gate.cols, norm_weight));
                return;
            }
        }
        Backend::matmul_swiglu_normed(gate, up, x, norm_weight, eps, n, normed, up_out, out);
    }

    void matmul_fused(const MatrixView& w, const float* x, int64_t n, float* out, const FusedProduct& f) override {
        Timed timed(*this, "matmul_fused");
        if (n == 0 || w.rows == 0) return;
        const float* norm = f.norm_weight != nullptr ? device_vector(f.norm_weight, w.cols) : nullptr;
        if (n == 1 && w.dtype == DType::BF16) {
            const auto* dw = static_cast<const uint16_t*>(device_weight(w.data, matrix_bytes(w)));
            if (cuda::matvec_bf16_fusable(dw, x, norm, w.cols)) {
                const cuda::NormAhead ahead = f.add ? ahead_for_writer(out, n, w.rows) : cuda::NormAhead{};
                cuda::matvec_bf16_fused(dw, x, norm, f.eps, f.add, out, w.rows, w.cols, stream_, ahead);
                return;
            }
        }
        // The unfused sequence, through scratch.
        if (norm != nullptr) {
            float* normed = scratch(fused_in_, static_cast<size_t>(n * w.cols));
            cuda::rmsnorm(x, norm, n, w.cols, f.eps, normed, stream_);
            x = normed;
        }
        if (!f.add) {
            matmul(w, x, n, out);
            return;
        }
        float* product = scratch(fused_out_, static_cast<size_t>(n * w.rows));
        matmul(w, x, n, product);
        cuda::add(out, product, n * w.rows, stream_);
    }

    void matmul_normed_pair(const NormedProduct& a, const NormedProduct& b, int64_t n, float eps, float* out,
                            bool add) override {
        Timed timed(*this, "matmul_normed_pair");
        const bool one_launch = n == 1 && a.w.dtype == DType::BF16 && b.w.dtype == DType::BF16 &&
                                a.w.rows == b.w.rows && a.w.cols == b.w.cols && a.norm_weight != nullptr &&
                                b.norm_weight != nullptr && cuda::matvec_bf16_pair_normable(a.w.cols);
        if (one_launch) {
            cuda::NormedPair pair;
            const NormedProduct* products[2] = {&a, &b};
            bool fusable = true;
            for (int i = 0; i < 2; ++i) {
                const NormedProduct& p = *products[i];
                pair.w[i] = static_cast<const uint16_t*>(device_weight(p.w.data, matrix_bytes(p.w)));
                pair.x[i] = p.x;
                pair.norm_weight[i] = device_vector(p.norm_weight, p.w.cols);
                if (p.table != nullptr) {  // an embedding row, read in place where the kernel can
                    pair.x[i] = nullptr;
                    pair.table[i] = static_cast<const uint16_t*>(device_weight(p.table->data, matrix_bytes(*p.table)));
                    pair.row_id[i] = p.row_id;
                    fusable = fusable && p.table->dtype == DType::BF16 && p.table->cols == p.w.cols &&
                              p.row_id != nullptr && cuda::aligned_16(pair.table[i]);
                }
                fusable = fusable && cuda::matvec_bf16_fusable(pair.w[i], pair.x[i], pair.norm_weight[i], p.w.cols);
            }
            if (fusable) {
                pair.early = a.ready_early ? 0 : b.ready_early ? 1 : -1;
                cuda::matvec_bf16_normed_pair(pair, eps, add, out, a.w.rows, a.w.cols, stream_,
                                              ahead_for_writer(out, n, a.w.rows));
                return;
            }
        }
        Backend::matmul_normed_pair(a, b, n, eps, out, add);
    }

    void embed(const MatrixView& table, const int32_t* ids, int64_t n, float* out) override {
        Timed timed(*this, "embed");
        for (int64_t t = 0; t < n; ++t) {
            require(ids[t] >= 0 && ids[t] < table.rows, "token id ", ids[t], " is outside the vocabulary [0, ",
                    table.rows, ")");
        }
        sum_embeddings(table, ids, 1, n, false, nullptr, out);
    }

    void sum_embeddings(const MatrixView& table, const int32_t* ids, int64_t per_row, int64_t n, bool accumulate,
                        const float* row_scale, float* out) override {
        Timed timed(*this, "sum_embeddings");
        for (int64_t i = 0; i < n * per_row; ++i) {
            require(ids[i] < table.rows, "embedding id ", ids[i], " is outside the table's ", table.rows, " rows");
        }
        const int32_t* device_ids = upload_ids(ids, static_cast<size_t>(n * per_row));
        const float* device_scale = row_scale != nullptr ? upload_floats(row_scale, static_cast<size_t>(n)) : nullptr;
        cuda::sum_embeddings(device_weight(table.data, matrix_bytes(table)), weight_type(table), table.cols,
                             device_ids, per_row, n, accumulate, device_scale, out, stream_);
    }

    void rmsnorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out) override {
        Timed timed(*this, "rmsnorm");
        const cuda::NormAhead ahead = ahead_for_reader(x, n, dim, weight);
        if (ahead.on() && cuda::aligned_16(out)) {
            cuda::rmsnorm_prepared(ahead, dim, eps, out, stream_);
            return;
        }
        cuda::rmsnorm(x, device_vector(weight, dim), n, dim, eps, out, stream_);
    }
    void add(float* acc, const float* x, int64_t count) override {
        Timed timed(*this, "add");
        cuda::add(acc, x, count, stream_);
    }
    void relu2(float* x, int64_t count) override {
        Timed timed(*this, "relu2");
        cuda::relu2(x, count, stream_);
    }
    void scale(float* x, float factor, int64_t count) override {
        Timed timed(*this, "scale");
        cuda::scale(x, factor, count, stream_);
    }
    void silu_mul(float* gate, const float* up, int64_t count) override {
        Timed timed(*this, "silu_mul");
        cuda::silu_mul(gate, up, count, stream_);
    }

    void causal_conv1d_silu(const float* x, int64_t x_stride, int64_t n, int64_t channels, const float* taps,
                            const float* bias, int64_t kernel, float* ring, float* out, float* ring_history) override {
        Timed timed(*this, "causal_conv1d_silu");
        cuda::causal_conv1d_silu(x, x_stride, n, channels, device_vector(taps, channels * kernel),
                                 bias != nullptr ? device_vector(bias, channels) : nullptr, kernel, ring, out,
                                 ring_history, stream_);
    }
    void ssm_scan(const SsmScanArgs& args) override {
        Timed timed(*this, "ssm_scan");
        cuda::ssm_scan(device_scan_weights(args), stream_);
    }
    void gated_group_rmsnorm(float* y, const float* z, int64_t z_stride, const float* weight, int64_t n, int64_t dim,
                             int64_t groups, float eps) override {
        Timed timed(*this, "gated_group_rmsnorm");
        cuda::gated_group_rmsnorm(y, z, z_stride, device_vector(weight, dim), n, dim, groups, eps, stream_);
    }
    void mamba_conv_scan_norm(const MambaMiddleArgs& args) override {
        if (!cuda::mamba_step_fits(args)) {
            Backend::mamba_conv_scan_norm(args);
            return;
        }
        Timed timed(*this, "mamba_conv_scan_norm");
        MambaMiddleArgs a = args;
        a.conv = device_conv_weights(args.conv);
        a.scan = device_scan_weights(args.scan);
        a.norm_weight = device_vector(args.norm_weight, args.scan.heads * args.scan.head_dim);
        cuda::mamba_step(a, stream_);
    }
    void delta_conv_rule_norm(const DeltaMiddleArgs& args) override {
        if (!cuda::delta_step_fits(args)) {
            Backend::delta_conv_rule_norm(args);
            return;
        }
        Timed timed(*this, "delta_conv_rule_norm");
        DeltaMiddleArgs a = args;
        a.conv = device_conv_weights(args.conv);
        a.rule = device_rule_weights(args.rule);
        a.norm_weight = device_vector(args.norm_weight, args.rule.v_dim);
        cuda::delta_step(a, stream_);
    }
    void attention(const AttentionArgs& args) override {
        Timed timed(*this, "attention");
        // Sized by the capacity when the position is read on the device: the same at every step.
        float* partial = scratch(scores_, cuda::attention_scratch_floats(args));
        cuda::attention(args, partial, stream_);
    }
    void gated_delta_rule(const GatedDeltaArgs& args) override {
        Timed timed(*this, "gated_delta_rule");
        cuda::gated_delta_rule(device_rule_weights(args), stream_);
    }
    void head_rmsnorm_rope(const HeadNormRopeArgs& args) override {
        Timed timed(*this, "head_rmsnorm_rope");
        HeadNormRopeArgs a = args;
        a.norm_weight = device_vector(args.norm_weight, args.head_dim);
        cuda::head_rmsnorm_rope(a, stream_);
    }
    void prepare_attention_rows(const AttentionRowsArgs& args) override {
        Timed timed(*this, "prepare_attention_rows");
        AttentionRowsArgs a = args;
        a.queries.norm_weight = device_vector(args.queries.norm_weight, args.queries.head_dim);
        a.keys.norm_weight = device_vector(args.keys.norm_weight, args.keys.head_dim);
        cuda::prepare_attention_rows(a, stream_);
    }
    void head_rmsnorm_silu_gate(float* y, const float* z, int64_t z_stride, const float* weight, int64_t n,
                                int64_t heads, int64_t head_dim, float eps) override {
        Timed timed(*this, "head_rmsnorm_silu_gate");
        cuda::head_rmsnorm_silu_gate(y, z, z_stride, device_vector(weight, head_dim), n, heads, head_dim, eps, stream_);
    }

    void moe_relu2(const MoeInput& in, int64_t n, const MoeWeights& w, const MoeRouting& routing, float* out) override {
        Timed timed(*this, "moe_relu2");
        const int64_t experts = w.router.rows, hidden = w.router.cols, k = routing.top_k, slots = n * k;
        const int64_t inter = w.up.empty() ? 0 : w.up[0].rows;
        const float* x = in.normed;
        float* logits = scratch(router_logits_, static_cast<size_t>(n * experts));
        int32_t* chosen = int_scratch(chosen_, static_cast<size_t>(slots));
        float* weights = scratch(choice_weights_, static_cast<size_t>(slots));
        const float* bias = w.score_bias != nullptr ? device_vector(w.score_bias, experts) : nullptr;
        const bool has_shared = w.shared_up.rows > 0;
        std::optional<ExpertFirstArgs> first;
        if (!grouped(n, w.up[0]) && two_launch_layer(x, n, k, w.up[0], has_shared ? &w.shared_up : nullptr)) {
            first = first_args(x, n, k, chosen, with_shared(w.up, w.shared_up), nullptr, inter, w.shared_up.rows);
        }
        const std::vector<MatrixView> down = with_shared(w.down, w.shared_down);
        Gate gate{in, w.router, nullptr, true, bias, routing, logits, nullptr, chosen, weights};
        gate.slots = slot_matrices_for(first, down, n, experts, k);
        const bool one_launch_gate = gate_in_one_launch(gate, n);  // which writes the slots' matrices
        if (!one_launch_gate) {
            rmsnorm(in.x, in.norm_weight, n, hidden, in.eps, in.normed);
            matmul(w.router, x, n, logits);
            cuda::route_sigmoid_topk(logits, bias, n, experts, routing, chosen, weights, stream_);
            marks_->mark("moe prompt: gate", true);
        }
        if (first) {
            const cuda::SlotMatrices slots = one_launch_gate ? gate.slots : cuda::SlotMatrices{};
            experts_in_two_launches(*first, down, weights, nullptr, out, n, slots);
            return;
        }
        float* shared_out = nullptr;
        if (has_shared) {
            float* shared_mid = scratch(shared_mid_, static_cast<size_t>(n * w.shared_up.rows));
            shared_out = scratch(shared_out_, static_cast<size_t>(n * hidden));
            if (n > kGemvTokens) {
                matmul(w.shared_up, x, n, shared_mid);
                cuda::relu2(shared_mid, n * w.shared_up.rows, stream_);
            } else {
                cuda::expert_gemv(expert_table({w.shared_up}), weight_type(w.shared_up), w.shared_up.rows, hidden,
                                  nullptr, x, 1, n, shared_mid, stream_, /*relu2_out=*/true);
            }
            matmul(w.shared_down, shared_mid, n, shared_out);
            marks_->mark("moe prompt: shared expert", true);
        }
        float* result = scratch(expert_out_, static_cast<size_t>(slots * hidden));
        const int32_t* row_of_slot = nullptr;
        if (grouped(n, w.up[0])) {
            row_of_slot = grouped_experts(x, n, k, experts, chosen, w.up, nullptr, w.down, result);
        } else {
            float* mid = scratch(expert_mid_, static_cast<size_t>(slots * inter));
            cuda::expert_gemv(expert_table(w.up), weight_type(w.up[0]), inter, hidden, chosen, x, k, slots, mid,
                              stream_, /*relu2_out=*/true);
            cuda::expert_gemv(expert_table(w.down), weight_type(w.down[0]), hidden, inter, chosen, mid, 1, slots,
                              result, stream_);
        }
        cuda::combine_experts(result, weights, n, k, hidden, shared_out, nullptr, row_of_slot, out, stream_);
    }

    void moe_swiglu(const MoeInput& in, int64_t n, const SwigluMoeWeights& w, int64_t top_k, bool normalize,
                    float* out) override {
        Timed timed(*this, "moe_swiglu");
        const int64_t experts = w.router.rows, hidden = w.router.cols, slots = n * top_k;
        const int64_t inter = w.gate.empty() ? 0 : w.gate[0].rows;
        const int64_t shared_inter = w.shared_gate.rows;
        const float* x = in.normed;
        float* logits = scratch(router_logits_, static_cast<size_t>(n * experts));
        float* gate_logit = scratch(shared_gate_logit_, static_cast<size_t>(n));
        int32_t* chosen = int_scratch(chosen_, static_cast<size_t>(slots));
        float* weights = scratch(choice_weights_, static_cast<size_t>(slots));
        MoeRouting routing;
        routing.top_k = top_k;
        routing.normalize = normalize;
        std::optional<ExpertFirstArgs> first;
        if (!grouped(n, w.gate[0]) && two_launch_layer(x, n, top_k, w.gate[0], &w.shared_gate)) {
            const std::vector<MatrixView> ups = with_shared(w.up, w.shared_up);
            first = first_args(x, n, top_k, chosen, with_shared(w.gate, w.shared_gate), &ups, inter, shared_inter);
        }
        const std::vector<MatrixView> down = with_shared(w.down, w.shared_down);
        Gate gate{in, w.router, &w.shared_expert_gate, false, nullptr, routing, logits, gate_logit, chosen, weights};
        gate.slots = slot_matrices_for(first, down, n, experts, top_k);
        const bool one_launch_gate = gate_in_one_launch(gate, n);  // which writes the slots' matrices
        if (!one_launch_gate) {
            rmsnorm(in.x, in.norm_weight, n, hidden, in.eps, in.normed);
            const std::array<ProductOut, 2> gating{ProductOut{w.router, logits},
                                                   ProductOut{w.shared_expert_gate, gate_logit}};
            matmul_group(gating, x, n);
            cuda::route_softmax_topk(logits, n, experts, top_k, normalize, chosen, weights, stream_);
            marks_->mark("moe prompt: gate", true);
        }
        if (first) {
            const cuda::SlotMatrices slots = one_launch_gate ? gate.slots : cuda::SlotMatrices{};
            experts_in_two_launches(*first, down, weights, gate_logit, out, n, slots);
            return;
        }
        float* shared_mid = scratch(shared_mid_, static_cast<size_t>(n * shared_inter));
        float* shared_up = scratch(shared_up_, static_cast<size_t>(n * shared_inter));
        float* shared_out = scratch(shared_out_, static_cast<size_t>(n * hidden));
        if (n > kGemvTokens) {
            matmul(w.shared_gate, x, n, shared_mid);
            matmul(w.shared_up, x, n, shared_up);
            cuda::silu_mul(shared_mid, shared_up, n * shared_inter, stream_);
        } else {
            swiglu(expert_table({w.shared_gate}), expert_table({w.shared_up}), weight_type(w.shared_gate),
                   shared_inter, hidden, nullptr, x, 1, n, shared_mid, shared_up);
        }
        matmul(w.shared_down, shared_mid, n, shared_out);
        marks_->mark("moe prompt: shared expert", true);
        float* result = scratch(expert_out_, static_cast<size_t>(slots * hidden));
        const int32_t* row_of_slot = nullptr;
        if (grouped(n, w.gate[0])) {
            row_of_slot = grouped_experts(x, n, top_k, experts, chosen, w.gate, &w.up, w.down, result);
        } else {
            float* mid = scratch(expert_mid_, static_cast<size_t>(slots * inter));
            float* up = scratch(expert_up_, static_cast<size_t>(slots * inter));
            swiglu(expert_table(w.gate), expert_table(w.up), weight_type(w.gate[0]), inter, hidden, chosen, x, top_k,
                   slots, mid, up);
            cuda::expert_gemv(expert_table(w.down), weight_type(w.down[0]), hidden, inter, chosen, mid, 1, slots,
                              result, stream_);
        }

        cuda::combine_experts(result, weights, n, top_k, hidden, shared_out, gate_logit, row_of_slot, out, stream_);
    }

private:
    // The device copy of `bytes` of host weights at `host`, made on first use. Weights already in
    // device memory are used in place, neither copied nor read from the host.
    const void* device_weight(const void* host, size_t bytes) {
        DeviceWeight& w = weights_[host];
        if (w.in_place) return host;
        if (w.buffer.data() == nullptr && is_device_memory(host)) {
            w.in_place = true;
            return host;
        }
        std::array<uint8_t, 32> head{};
        std::memcpy(head.data(), host, std::min(bytes, head.size()));
        if (w.buffer.data() == nullptr || w.bytes != bytes || w.head != head) {
            // The host address now holds other weights. Expert tables that list the old copy are
            // made again when next used (expert_table compares their pointers); clearing them here
            // would free a table the op under way has already been given.
            if (w.buffer.data() != nullptr) retire(std::move(w.buffer));
            w.buffer = DeviceBuffer(bytes);
            DUET_CUDA_CHECK(cudaMemcpyAsync(w.buffer.data(), host, bytes, cudaMemcpyHostToDevice, stream_));
            w.bytes = bytes;
            w.head = head;
        }
        return w.buffer.data();
    }
    const float* device_vector(const float* host, int64_t count) {
        return static_cast<const float*>(device_weight(host, static_cast<size_t>(count) * sizeof(float)));
    }
    // The scan's and the delta rule's arguments with their per-head constants in device memory.
    SsmScanArgs device_scan_weights(const SsmScanArgs& scan) {
        SsmScanArgs a = scan;
        a.dt_bias = device_vector(scan.dt_bias, scan.heads);
        a.a = device_vector(scan.a, scan.heads);
        a.d = device_vector(scan.d, scan.heads);
        return a;
    }
    GatedDeltaArgs device_rule_weights(const GatedDeltaArgs& rule) {
        GatedDeltaArgs a = rule;
        a.neg_exp_a_log = device_vector(rule.neg_exp_a_log, rule.v_heads);
        a.dt_bias = device_vector(rule.dt_bias, rule.v_heads);
        return a;
    }
    // The convolution's arguments with its taps and bias in device memory.
    CausalConvArgs device_conv_weights(const CausalConvArgs& conv) {
        CausalConvArgs c = conv;
        c.taps = device_vector(conv.taps, conv.channels * conv.kernel);
        c.bias = conv.bias != nullptr ? device_vector(conv.bias, conv.channels) : nullptr;
        return c;
    }

    // Long prompts run their experts grouped on tensor cores (bf16 experts only).
    static bool grouped(int64_t n, const MatrixView& expert) { return n > kGemvTokens && expert.dtype == DType::BF16; }

    // The routed experts of n tokens grouped by expert (see tensor_core_products.h): `first` (relu²)
    // or `first` and `second` (silu(first)·second) then `down`, every expert's rows in one launch per
    // matrix. Writes the grouped results [n·k, hidden] and returns the device map slot → result row.
    const int32_t* grouped_experts(const float* x, int64_t n, int64_t k, int64_t experts, const int32_t* chosen,
                                   const std::vector<MatrixView>& first, const std::vector<MatrixView>* second,
                                   const std::vector<MatrixView>& down, float* result) {
        const int64_t slots = n * k, hidden = first[0].cols, inter = first[0].rows;
        marks_->mark("moe prompt: before grouping", true);
        // One int buffer: the two maps, the tile count, then the tiles.
        const int64_t max_tiles = cuda::max_expert_row_tiles(slots, experts);
        static_assert(sizeof(cuda::ExpertRowTile) == 3 * sizeof(int32_t));
        int32_t* maps = int_scratch(group_maps_, static_cast<size_t>(2 * slots + 1 + 3 * max_tiles));
        const cuda::ExpertGroupsOnDevice groups{
            .row_of_slot = maps,
            .token_of_row = maps + slots,
            .tiles = reinterpret_cast<cuda::ExpertRowTile*>(maps + 2 * slots + 1),
            .tile_count = maps + 2 * slots,
        };
        cuda::group_slots_by_expert(chosen, slots, k, experts, groups, stream_);

        uint16_t* x_hi = half_scratch(group_hi_, static_cast<size_t>(slots * std::max(hidden, inter)));
        uint16_t* x_lo = half_scratch(group_lo_, static_cast<size_t>(slots * std::max(hidden, inter)));
        cuda::split_rows_bf16(x, hidden, groups.token_of_row, slots, x_hi, x_lo, stream_);
        float* mid = scratch(expert_mid_, static_cast<size_t>(slots * inter));
        float* mid2 = second != nullptr ? scratch(expert_up_, static_cast<size_t>(slots * inter)) : nullptr;
        marks_->mark("moe prompt: grouping", true);
        // Every expert's rows, in one launch per matrix kind.
        auto products = [&](const std::vector<MatrixView>& matrices, const uint16_t* hi, const uint16_t* lo,
                            float* out) {
            const ExpertTable& table = current_expert_table(matrices);
            const MatrixView& m = matrices[0];
            const bool vectors = m.cols % 8 == 0 && cuda::aligned_16(hi) && cuda::aligned_16(lo) &&
                                 std::all_of(table.pointers.begin(), table.pointers.end(), cuda::aligned_16);
            cuda::grouped_split_products(static_cast<const void* const*>(table.buffer.data()), m.rows, m.cols, vectors,
                                         groups.tiles, groups.tile_count, max_tiles, hi, lo, out, stream_);
        };
        products(first, x_hi, x_lo, mid);
        if (second != nullptr) products(*second, x_hi, x_lo, mid2);
        marks_->mark("moe prompt: experts' first products", true);
        // The activations, split again for the down products (the input halves are no longer needed).
        if (second != nullptr) {
            cuda::silu_mul_split_bf16(mid, mid2, slots * inter, x_hi, x_lo, stream_);
        } else {
            cuda::relu2_split_bf16(mid, slots * inter, x_hi, x_lo, stream_);
        }
        products(down, x_hi, x_lo, result);
        marks_->mark("moe prompt: experts' down products", true);
        return maps;
    }

    // mid[s] = silu(gate_e · x) · (up_e · x) for the slots' experts (see cuda::expert_gemv); `up_scratch`
    // holds the up products where the one-pass kernel does not apply.
    void swiglu(const void* const* gates, const void* const* ups, WeightType type, int64_t rows, int64_t cols,
                const int32_t* chosen, const float* x, int64_t slots_per_input, int64_t slots, float* mid,
                float* up_scratch) {
        if (cuda::expert_swiglu(gates, ups, type, rows, cols, chosen, x, slots_per_input, slots, mid, stream_)) return;
        cuda::expert_gemv(gates, type, rows, cols, chosen, x, slots_per_input, slots, mid, stream_);
        cuda::expert_gemv(ups, type, rows, cols, chosen, x, slots_per_input, slots, up_scratch, stream_);
        cuda::silu_mul(mid, up_scratch, slots * rows, stream_);
    }

    // A mixture-of-experts layer's gate: its input norm, router (and shared expert gate row) and routing.
    struct Gate {
        const MoeInput& in;
        const MatrixView& router;
        const MatrixView* gate_row;  // [1, hidden] or null
        bool sigmoid;
        const float* bias;  // device
        const MoeRouting& routing;
        float* logits;
        float* gate_logit;
        int32_t* chosen;
        float* weights;
        cuda::SlotMatrices slots{};  // off unless set (slot_matrices_for)
    };
    // Runs the gate of one token as one launch (cuda::moe_gate) where it fits; false: nothing ran.
    bool gate_in_one_launch(const Gate& g, int64_t n) {
        const int64_t hidden = g.router.cols;
        const bool bf16 = g.router.dtype == DType::BF16 &&
                          (g.gate_row == nullptr || (g.gate_row->dtype == DType::BF16 && g.gate_row->cols == hidden &&
                                                     g.gate_row->rows == 1));
        if (n != 1 || !bf16 || !cuda::moe_gate_fits(hidden, g.router.rows, g.routing.top_k)) return false;
        cuda::MoeGateArgs a;
        a.x = g.in.x;
        a.norm_weight = device_vector(g.in.norm_weight, hidden);
        a.eps = g.in.eps;
        a.normed = g.in.normed;
        a.router = device_weight(g.router.data, matrix_bytes(g.router));
        a.gate_row = g.gate_row != nullptr ? device_weight(g.gate_row->data, matrix_bytes(*g.gate_row)) : nullptr;
        using cuda::aligned_16;
        if (!aligned_16(a.x) || !aligned_16(a.norm_weight) || !aligned_16(a.normed) || !aligned_16(a.router) ||
            (a.gate_row != nullptr && !aligned_16(a.gate_row))) {
            return false;
        }
        a.experts = g.router.rows;
        a.hidden = hidden;
        a.sigmoid = g.sigmoid;
        a.bias = g.bias;
        a.routing = g.routing;
        a.logits = g.logits;
        a.gate_logit = g.gate_logit;
        a.chosen = g.chosen;
        a.weights = g.weights;
        a.blocks_done = gate_blocks_done();
        a.ahead = ahead_for_reader(a.x, n, hidden, g.in.norm_weight);
        a.slot_matrices = g.slots;
        a.route_in_cluster = gate_cluster_;
        cuda::moe_gate(a, stream_);
        return true;
    }
    // `buffer`, made and zeroed on first use: counters and scratch that the kernels using them leave
    // zeroed after every launch.
    void* zeroed_once(DeviceBuffer& buffer, size_t bytes) {
        if (buffer.data() == nullptr) {
            buffer = DeviceBuffer(bytes);
            DUET_CUDA_CHECK(cudaMemsetAsync(buffer.data(), 0, bytes, stream_));
        }
        return buffer.data();
    }
    // cuda::sample's scratch for a greedy draw over a long row.
    void* argmax_scratch() { return zeroed_once(argmax_scratch_, cuda::argmax_scratch_bytes()); }
    // Where the one-launch gate of one token writes the chosen slots' matrices for the experts'
    // launches (`first`, and the down matrices `down`; off where there is no `first`). Measured on an
    // H100: a Drama 3 frame 3.377-3.381 ms against 3.393-3.399 looking each expert up in the table, a
    // Nemotron-H token 2.753-2.761 against 2.767-2.770 with the first matrices alone; the down
    // matrices too, 2.742-2.743 against 2.754-2.759 (Drama 3, whose down launch looks up before its
    // wait, 3.378-3.383 against 3.373-3.376).
    cuda::SlotMatrices slot_matrices_for(const std::optional<ExpertFirstArgs>& first,
                                         const std::vector<MatrixView>& down, int64_t n, int64_t experts,
                                         int64_t top_k) {
        if (!first || n != 1 || experts > cuda::kGateSlotMatricesMaxExperts || top_k > kMaxSlotMatrices) return {};
        auto** slots = static_cast<const void**>(zeroed_once(slot_matrices_, 3 * kMaxSlotMatrices * sizeof(void*)));
        cuda::SlotMatrices m;
        m.first_table = first->first;
        m.first = slots;
        if (first->second != nullptr) {
            m.second_table = first->second;
            m.second = slots + kMaxSlotMatrices;
        }
        m.down_table = expert_table(down);
        m.down = slots + 2 * kMaxSlotMatrices;
        return m;
    }
    static constexpr int64_t kMaxSlotMatrices = 64;
    // The counter cuda::moe_gate's blocks count themselves in.
    unsigned* gate_blocks_done() { return static_cast<unsigned*>(zeroed_once(gate_counter_, sizeof(unsigned))); }

    // Whether a layer of few tokens runs as two launches (cuda::expert_first / expert_down): bf16
    // experts (and shared expert, when given) of whole 16-byte rows.
    static bool two_launch_layer(const float* x, int64_t n, int64_t k, const MatrixView& expert,
                                 const MatrixView* shared) {
        const bool bf16 = expert.dtype == DType::BF16 && (shared == nullptr || shared->dtype == DType::BF16);
        return bf16 && cuda::aligned_16(x) &&
               cuda::expert_layer_fits(expert.cols, expert.rows, shared != nullptr ? shared->rows : 0, n * k + n);
    }
    // The routed experts' matrices followed by the shared expert's, where there is one.
    static std::vector<MatrixView> with_shared(const std::vector<MatrixView>& routed, const MatrixView& shared) {
        std::vector<MatrixView> all = routed;
        if (shared.rows > 0) all.push_back(shared);
        return all;
    }
    ExpertFirstArgs first_args(const float* x, int64_t n, int64_t k, const int32_t* chosen,
                               const std::vector<MatrixView>& first, const std::vector<MatrixView>* second,
                               int64_t inter, int64_t shared_inter) {
        const int64_t routed = static_cast<int64_t>(first.size()) - (shared_inter > 0 ? 1 : 0);
        ExpertFirstArgs a;
        a.first = expert_table(first);
        a.second = second != nullptr ? expert_table(*second) : nullptr;
        a.expert_of = chosen;
        a.routed_slots = n * k;
        a.slots_per_token = k;
        a.routed_rows = inter;
        a.shared_rows = shared_inter;
        a.chunks = first[0].cols / 8;
        a.shared_index = shared_inter > 0 ? static_cast<int32_t>(routed) : -1;
        a.x = x;
        a.routed_out = scratch(expert_mid_, static_cast<size_t>(n * k * inter));
        a.shared_out = shared_inter > 0 ? scratch(shared_mid_, static_cast<size_t>(n * shared_inter)) : nullptr;
        return a;
    }
    // A layer's experts after its gate, as two launches: every first product (cuda::expert_first), then
    // every down product with the routing weights, the shared expert's gate and the residual add into
    // `out` (cuda::expert_down), which prepares the stream's next norm when one is expected. `slots`:
    // the chosen slots' matrices, where the gate wrote them.
    void experts_in_two_launches(ExpertFirstArgs first, const std::vector<MatrixView>& down, const float* weights,
                                 const float* shared_gate_logit, float* out, int64_t n,
                                 const cuda::SlotMatrices& slots) {
        marks_->mark("moe: gate", true);
        first.slot_first = slots.first;
        first.slot_second = slots.second;
        cuda::expert_first(first, n, stream_);
        marks_->mark("moe: first", true);
        ExpertDownArgs d = down_args(first, down, weights, shared_gate_logit, out);
        d.slot_down = slots.down;
        d.ahead = ahead_for_writer(out, n, d.rows);
        cuda::expert_down(d, n, stream_);
    }
    ExpertDownArgs down_args(const ExpertFirstArgs& first, const std::vector<MatrixView>& down, const float* weights,
                             const float* shared_gate_logit, float* out) {
        ExpertDownArgs d;
        d.down = expert_table(down);
        d.expert_of = first.expert_of;
        d.weights = weights;
        d.k = first.slots_per_token;
        d.rows = down[0].rows;
        d.routed_chunks = first.routed_rows / 8;
        d.shared_chunks = first.shared_rows / 8;
        d.shared_index = first.shared_index;
        if (d.shared_index >= 0) d.shared_down = device_weight(down.back().data, matrix_bytes(down.back()));
        d.routed_mid = first.routed_out;
        d.shared_mid = first.shared_out;
        d.shared_gate_logit = shared_gate_logit;
        d.out = out;
        return d;
    }

    // A device array of the experts' device pointers, made again whenever they change: memory freed
    // by one model and given to the next can put another expert list at the same first address.
    struct ExpertTable {
        std::vector<const void*> pointers;  // what `buffer` holds
        DeviceBuffer buffer;
    };
    const void* const* expert_table(const std::vector<MatrixView>& experts) {
        return static_cast<const void* const*>(current_expert_table(experts).buffer.data());
    }
    // The table itself, its pointers also on the host.
    const ExpertTable& current_expert_table(const std::vector<MatrixView>& experts) {
        std::vector<const void*> pointers;
        pointers.reserve(experts.size());
        for (const MatrixView& m : experts) pointers.push_back(device_weight(m.data, matrix_bytes(m)));
        ExpertTable& table = expert_tables_[{experts.front().data, experts.size()}];
        if (table.pointers != pointers) {
            if (table.buffer.data() != nullptr) retire(std::move(table.buffer));
            table.buffer = DeviceBuffer::from_vector(pointers);
            table.pointers = std::move(pointers);
        }
        return table;
    }

    // Frees `buffer` once nothing can read it: a recording under way is spoiled (it read the buffer);
    // otherwise the stream is drained and recordings that may hold it are dropped.
    void retire(DeviceBuffer buffer) {
        if (graphs_->recording()) {
            graphs_->spoil();
            retired_.push_back(std::move(buffer));
            return;
        }
        DUET_CUDA_CHECK(cudaStreamSynchronize(stream_));
        retired_.clear();
        graphs_->forget_all();
    }

    // Scratch that grows to the largest request; ops on one stream run in order, so reuse is safe.
    // Growing it while a step is recorded spoils the recording (its earlier ops read the old buffer,
    // which is kept until the next growth outside a recording).
    float* scratch(DeviceBuffer& buffer, size_t count) {
        if (buffer.size_bytes() < count * sizeof(float)) {
            retire(std::move(buffer));  // the old buffer may still be in use
            buffer = DeviceBuffer(count * sizeof(float));
        }
        return buffer.as<float>();
    }
    int32_t* int_scratch(DeviceBuffer& buffer, size_t count) {
        return reinterpret_cast<int32_t*>(scratch(buffer, count));
    }
    uint16_t* half_scratch(DeviceBuffer& buffer, size_t count) {
        return reinterpret_cast<uint16_t*>(scratch(buffer, (count + 1) / 2));
    }
    const int32_t* upload_ids(const int32_t* host, size_t count) {
        int32_t* ids = int_scratch(ids_, count);
        staging_->upload(ids, host, count * sizeof(int32_t));
        return ids;
    }
    const float* upload_floats(const float* host, size_t count) {
        float* values = scratch(row_scales_, count);
        staging_->upload(values, host, count * sizeof(float));
        return values;
    }

    cudaStream_t stream_ = nullptr;
    std::unique_ptr<PinnedStaging> staging_;  // host uploads, queued without waiting for the stream
    std::unique_ptr<PinnedReads> reads_;      // host reads, queued without waiting for them
    cublasHandle_t cublas_ = nullptr;
    std::shared_ptr<BlockCache> blocks_ = std::make_shared<BlockCache>();
    std::unique_ptr<StepGraphs> graphs_;
    bool gate_cluster_ = true;  // DUET_CUDA_GATE_CLUSTER
    std::vector<DeviceBuffer> retired_;
    // `issue` as the start of a decode step: the norms prepared ahead begin there (see NormsAhead).
    std::function<const float*()> in_step(const std::function<const float*()>& issue) {
        return [this, &issue] {
            norms_ahead_.begin_step(stream_);
            return issue();
        };
    }
    // The norm an op of n tokens writing or adding `cols` values to the stream `out` is to prepare
    // (off unless the model said one is read next; off for more than one token).
    cuda::NormAhead ahead_for_writer(const float* out, int64_t n, int64_t cols) {
        const float* weight = norms_ahead_.expected_for(out);
        if (weight == nullptr || n != 1) return {};
        return norms_ahead_.start(out, cols, weight, device_vector(weight, cols), ops_);
    }
    // The norm prepared ahead for this op (counted already), reading rmsnorm(x) of n tokens of `cols`
    // values with `weight` (host): off unless the op before wrote it.
    cuda::NormAhead ahead_for_reader(const float* x, int64_t n, int64_t cols, const float* weight) const {
        return n == 1 ? norms_ahead_.for_reader(x, cols, weight, ops_) : cuda::NormAhead{};
    }

    // `issue` with the step's marks begun before it and ended after it, as asked.
    std::function<const float*()> marked(const std::function<const float*()>& issue, bool begins, bool ends) {
        if (!marks_->enabled()) return issue;
        return [this, &issue, begins, ends] {
            if (begins) marks_->begin_step();
            const float* result = issue();
            if (ends) marks_->end_step();
            return result;
        };
    }

    OpTimes times_;
    uint64_t ops_ = 0;  // ops issued so far (Timed counts them)
    NormsAhead norms_ahead_;
    std::unique_ptr<StepMarks> marks_;
    std::unordered_map<const void*, DeviceWeight> weights_;
    std::map<std::pair<const void*, size_t>, ExpertTable> expert_tables_;  // by first matrix and count
    DeviceBuffer widen_, scores_, ids_, row_scales_, router_logits_, chosen_, choice_weights_, expert_mid_, expert_up_,
        expert_out_, shared_mid_, shared_up_, shared_out_, shared_gate_logit_, act_hi_, act_lo_, group_maps_,
        group_hi_, group_lo_, fused_in_, fused_out_, gate_counter_, argmax_scratch_, slot_matrices_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace duet
