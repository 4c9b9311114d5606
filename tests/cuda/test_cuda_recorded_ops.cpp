// The kernels of a decode step recorded once as a CUDA graph and replayed at later positions: the
// position lives in device memory, so a replay must give what a fresh call at that position gives
// (the CPU backend's answer). A two-part step, its second part under a conditional node, replays
// with and without that part as its flag says.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "cuda_test_support.h"
#include "kernel_test_support.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/ops.h"

namespace duet {
namespace {

using cuda::DeviceBuffer;

using testing::random_values;
using testing::relative_error;

class RecordedDecodeOps : public cuda::testing::DeviceTest {};

// A query's norm and RoPE, then attention over the cache, recorded at one position and replayed at
// others, deep into the cache too.
TEST_F(RecordedDecodeOps, NormRopeAndAttentionReplayAtEveryPosition) {
    const int64_t capacity = 6000, heads = 16, kv = 2, hd = 256, rotary = 64;
    std::mt19937 rng(7);
    const std::vector<float> keys = random_values(rng, capacity * kv * hd, -1.0f, 1.0f);
    const std::vector<float> values = random_values(rng, capacity * kv * hd, -1.0f, 1.0f);
    const std::vector<float> raw_q = random_values(rng, heads * hd, -2.0f, 2.0f);
    const std::vector<float> weight = random_values(rng, hd, 0.5f, 1.5f);

    DeviceBuffer d_keys = DeviceBuffer::from_vector(keys), d_values = DeviceBuffer::from_vector(values);
    DeviceBuffer d_raw_q = DeviceBuffer::from_vector(raw_q), d_weight = DeviceBuffer::from_vector(weight);
    DeviceBuffer d_q(raw_q.size() * sizeof(float)), d_out(raw_q.size() * sizeof(float));
    DeviceBuffer d_position = DeviceBuffer::from_vector(std::vector<int32_t>{0});

    HeadNormRopeArgs r;
    r.n = 1;
    r.heads = heads;
    r.head_dim = hd;
    r.x = d_raw_q.as<float>();
    r.x_row_stride = heads * hd;
    r.x_head_stride = hd;
    r.norm_weight = d_weight.as<float>();
    r.eps = 1e-6f;
    r.position = d_position.as<int32_t>();
    r.rotary_dim = rotary;
    r.theta = 1e7f;
    r.out = d_q.as<float>();
    r.out_row_stride = heads * hd;

    AttentionArgs a;
    a.n = 1;
    a.position = d_position.as<int32_t>();
    a.capacity = capacity;
    a.heads = heads;
    a.kv_heads = kv;
    a.head_dim = hd;
    a.scale = 1.0f / std::sqrt(float(hd));
    a.q = d_q.as<float>();
    a.k_cache = d_keys.as<float>();
    a.v_cache = d_values.as<float>();
    a.out = d_out.as<float>();
    DeviceBuffer scratch(std::max<size_t>(1, cuda::attention_scratch_floats(a)) * sizeof(float));

    cudaStream_t stream = nullptr;
    DUET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    DUET_CUDA_CHECK(cudaDeviceSynchronize());  // the uploads above, made outside the stream
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    DUET_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    cuda::head_rmsnorm_rope(r, stream);
    cuda::attention(a, scratch.as<float>(), stream);
    DUET_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    DUET_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

    ThreadPool pool(2);
    std::unique_ptr<Backend> cpu = make_cpu_backend(&pool);
    for (int32_t pos : {0, 1, 63, 64, 700, 4097, int32_t(capacity - 1)}) {
        DUET_CUDA_CHECK(cudaMemcpyAsync(d_position.data(), &pos, sizeof(pos), cudaMemcpyHostToDevice, stream));
        DUET_CUDA_CHECK(cudaGraphLaunch(exec, stream));
        DUET_CUDA_CHECK(cudaStreamSynchronize(stream));
        const std::vector<float> got = d_out.download<float>(raw_q.size());

        std::vector<float> q(raw_q.size()), want(raw_q.size());
        HeadNormRopeArgs hr = r;
        hr.x = raw_q.data();
        hr.norm_weight = weight.data();
        hr.position = nullptr;
        hr.pos = pos;
        hr.out = q.data();
        cpu->head_rmsnorm_rope(hr);
        AttentionArgs ha = a;
        ha.position = nullptr;
        ha.pos = pos;
        ha.q = q.data();
        ha.k_cache = keys.data();
        ha.v_cache = values.data();
        ha.out = want.data();
        cpu->attention(ha);
        EXPECT_LE(relative_error(got, want), 1e-5) << "replayed at position " << pos;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
}

// What a run of two-part steps left behind on one backend.
struct TwoPartRun {
    std::vector<std::vector<float>> states;  // the state after each step
    std::vector<std::vector<int32_t>> counts;  // [first part runs, second part runs] after each step
    std::vector<bool> second_result;         // whether the step returned the second part's result
    int first_issued = 0, second_issued = 0;  // how often the host issued each part's ops
};

// Steps of a state s [dim]: the first part a = W1·s and copies the step's flag (put in backend memory
// by the host, as a sampler would write it); the second part, when the flag is set, s = rmsnorm(s +
// W2·a) through scratch allocated inside the part. bf16 products of one token, adds and norms are
// launched early, so the body has programmatic edges of its own; the counters are plain launches.
TwoPartRun run_two_part_steps(Backend& b, const std::vector<int32_t>& flags, const std::vector<float>& start,
                              const MatrixView& w1, const MatrixView& w2, const std::vector<float>& norm) {
    const int64_t dim = w1.cols;
    Buffer state = b.alloc(static_cast<size_t>(dim)), a = b.alloc(static_cast<size_t>(dim));
    Buffer ints = b.alloc(4);  // [flag source, flag, first part runs, second part runs]
    b.upload(state.data(), start.data(), start.size());
    int32_t* source = ints.ints();
    int32_t* flag = ints.ints() + 1;
    TwoPartRun run;
    Buffer result_of_second = state;  // what the second part returns, to tell the results apart
    const auto first = [&] {
        ++run.first_issued;
        b.matmul(w1, state.data(), 1, a.data());
        b.copy(reinterpret_cast<float*>(flag), reinterpret_cast<const float*>(source), 1);
        b.add_to_int(ints.ints() + 2, 1);
        return static_cast<const float*>(a.data());
    };
    const auto second = [&] {
        ++run.second_issued;
        Buffer product = b.alloc(static_cast<size_t>(dim)), normed = b.alloc(static_cast<size_t>(dim));
        b.matmul(w2, a.data(), 1, product.data());
        b.add(product.data(), state.data(), dim);
        b.rmsnorm(product.data(), norm.data(), 1, dim, 1e-6f, normed.data());
        b.copy(state.data(), normed.data(), static_cast<size_t>(dim));
        b.add_to_int(ints.ints() + 3, 1);
        return static_cast<const float*>(result_of_second.data());
    };
    const auto key = std::make_shared<int>(0);
    for (int32_t value : flags) {
        b.upload_ints(source, &value, 1);
        const float* result = b.run_step_then_if(key, first, flag, second);
        run.second_result.push_back(result == result_of_second.data());
        std::vector<float> s(static_cast<size_t>(dim));
        b.download(s.data(), state.data(), s.size());
        std::vector<int32_t> counts(2);
        b.download_ints(counts.data(), ints.ints() + 2, 2);
        run.states.push_back(std::move(s));
        run.counts.push_back(std::move(counts));
    }
    return run;
}

bool recording_is_off() {
    const char* graphs = std::getenv("DUET_CUDA_GRAPHS");
    return std::getenv("DUET_CUDA_OP_TIMES") != nullptr || (graphs != nullptr && std::strcmp(graphs, "0") == 0);
}

class RecordedTwoPartStep : public cuda::testing::DeviceTest {};

// The first run skips the second part (it does not count towards recording: that part's weights are
// not yet on the device), the second runs both parts plainly, the third records them, and every
// later step replays the recording with the flag set or not.
TEST_F(RecordedTwoPartStep, ReplaysGiveThePlainRunsResultsWithTheFlagOffAndOn) {
    const int64_t dim = 256;
    std::mt19937 rng(11);
    std::vector<uint16_t> w1_bits, w2_bits;
    for (float x : random_values(rng, dim * dim, -0.1f, 0.1f)) w1_bits.push_back(f32_to_bf16(x));
    for (float x : random_values(rng, dim * dim, -0.1f, 0.1f)) w2_bits.push_back(f32_to_bf16(x));
    const MatrixView w1{DType::BF16, dim, dim, w1_bits.data()}, w2{DType::BF16, dim, dim, w2_bits.data()};
    const std::vector<float> norm = random_values(rng, dim, 0.5f, 1.5f);
    const std::vector<float> start = random_values(rng, dim, -1.0f, 1.0f);
    const std::vector<int32_t> flags = {0, 1, 1, 1, 0, 0, 1, 5, 0, 1, 0, -1, 1};

    ThreadPool pool(2);
    const std::unique_ptr<Backend> cpu = make_cpu_backend(&pool);
    const std::unique_ptr<Backend> gpu = make_cuda_backend();
    const TwoPartRun want = run_two_part_steps(*cpu, flags, start, w1, w2, norm);
    const TwoPartRun got = run_two_part_steps(*gpu, flags, start, w1, w2, norm);
    for (size_t i = 0; i < flags.size(); ++i) {
        SCOPED_TRACE(::testing::Message() << "step " << i << ", flag " << flags[i]);
        EXPECT_LE(relative_error(got.states[i], want.states[i]), 1e-5);
        EXPECT_EQ(got.counts[i], want.counts[i]);
        EXPECT_EQ(got.second_result[i], flags[i] != 0);
    }
    if (recording_is_off()) GTEST_SKIP() << "steps are not recorded (DUET_CUDA_GRAPHS=0 or DUET_CUDA_OP_TIMES)";
    EXPECT_EQ(got.first_issued, 3) << "the step was not recorded after two plain runs (see the message on stderr)";
    EXPECT_EQ(got.second_issued, 2) << "the second part was not recorded";
}

// Random bf16 matrices for a test, kept alive with their views.
class Matrices {
public:
    Matrices(std::mt19937& rng, float range) : rng_(rng), range_(range) {}
    MatrixView operator()(int64_t rows, int64_t cols) {
        std::vector<uint16_t>& bits = store_.emplace_back();
        for (float x : random_values(rng_, rows * cols, -range_, range_)) bits.push_back(f32_to_bf16(x));
        return MatrixView{DType::BF16, rows, cols, bits.data()};
    }

private:
    std::mt19937& rng_;
    float range_;
    std::deque<std::vector<uint16_t>> store_;
};

// A decode step's residual stream s [dim] under the ops that prepare its next norm ahead
// (Backend::norm_ahead) and those that read it: products added to s (rows of 8 and 32 lanes) and a
// normalised pair written over it, read by a normalised group, a normalised SwiGLU and a plain norm;
// both kinds of mixture of experts read by their gates and adding to s; a product that keeps the
// norm it read; a hint whose reader names other weights and one read two ops late (both must fall
// back to the plain norm). Returns s after each step.
std::vector<std::vector<float>> run_norm_ahead_steps(Backend& b, int steps, const std::vector<float>& start,
                                                   int64_t dim, uint32_t seed) {
    std::mt19937 rng(seed);
    Matrices matrix(rng, 0.05f);
    const int64_t inter = 64, experts = 16;
    std::vector<std::vector<float>> norms;
    for (int i = 0; i < 6; ++i) norms.push_back(random_values(rng, dim, 0.5f, 1.5f));
    const MatrixView out_proj = matrix(dim, dim), read = matrix(dim, dim);
    const MatrixView gate = matrix(dim, dim), up = matrix(dim, dim);
    const MatrixView narrow = matrix(dim, 256);  // rows of 32 groups: 8 lanes a row
    MoeWeights relu;
    relu.router = matrix(experts, dim);
    const std::vector<float> bias = random_values(rng, experts, -0.1f, 0.1f);
    relu.score_bias = bias.data();
    SwigluMoeWeights swiglu;
    swiglu.router = matrix(experts, dim);
    for (int e = 0; e < experts; ++e) {
        relu.up.push_back(matrix(inter, dim));
        relu.down.push_back(matrix(dim, inter));
        swiglu.gate.push_back(matrix(inter, dim));
        swiglu.up.push_back(matrix(inter, dim));
        swiglu.down.push_back(matrix(dim, inter));
    }
    relu.shared_up = matrix(2 * inter, dim);
    relu.shared_down = matrix(dim, 2 * inter);
    swiglu.shared_gate = matrix(inter, dim);
    swiglu.shared_up = matrix(inter, dim);
    swiglu.shared_down = matrix(dim, inter);
    swiglu.shared_expert_gate = matrix(1, dim);
    MoeRouting routing;
    routing.top_k = 4;
    routing.scale = 2.0f;

    Buffer s = b.alloc(static_cast<size_t>(dim)), a = b.alloc(static_cast<size_t>(dim));
    Buffer c = b.alloc(static_cast<size_t>(dim)), u = b.alloc(static_cast<size_t>(dim));
    Buffer normed = b.alloc(static_cast<size_t>(dim)), small = b.alloc(256);
    b.upload(s.data(), start.data(), start.size());
    const std::vector<float> small_values = random_values(rng, 256, -1.0f, 1.0f);
    b.upload(small.data(), small_values.data(), small_values.size());
    const FusedProduct add{nullptr, 0.0f, true};
    const float eps = 1e-5f;
    const auto issue = [&] {
        float* x = s.data();
        b.norm_ahead(x, norms[0].data());
        b.matmul_fused(narrow, small.data(), 1, x, add);
        b.matmul_group_normed(std::vector<ProductOut>{{read, a.data()}}, x, norms[0].data(), eps, 1, normed.data());
        b.norm_ahead(x, norms[1].data());
        b.matmul_fused(out_proj, a.data(), 1, x, add);
        b.matmul_swiglu_normed(gate, up, x, norms[1].data(), eps, 1, normed.data(), u.data(), c.data());
        b.norm_ahead(x, norms[2].data());
        b.matmul_fused(out_proj, c.data(), 1, x, add);
        b.norm_ahead(x, norms[3].data());
        b.moe_relu2(MoeInput{x, norms[2].data(), eps, normed.data()}, 1, relu, routing, x);
        b.norm_ahead(x, norms[4].data());
        b.moe_swiglu(MoeInput{x, norms[3].data(), eps, normed.data()}, 1, swiglu, 4, true, x);
        b.matmul_group_normed(std::vector<ProductOut>{{read, a.data()}}, x, norms[5].data(), eps, 1, normed.data());
        b.norm_ahead(x, norms[0].data());
        b.matmul_fused(out_proj, a.data(), 1, x, add);
        b.matmul(read, x, 1, c.data());
        b.matmul_group_normed(std::vector<ProductOut>{{read, a.data()}}, x, norms[0].data(), eps, 1, normed.data());
        b.matmul_fused(out_proj, a.data(), 1, x, add);
        // A pair of normalised products written over s, then a product added to s, each read by a norm.
        // Its first input was written before the op before it, so at the wider width its half streams
        // before the kernel's wait (NormedProduct::ready_early).
        b.norm_ahead(x, norms[5].data());
        NormedProduct first{gate, a.data(), norms[2].data()};
        first.ready_early = true;
        b.matmul_normed_pair(first, NormedProduct{up, c.data(), norms[3].data()}, 1, eps, x, false);
        b.matmul_group_normed(std::vector<ProductOut>{{read, a.data()}}, x, norms[5].data(), eps, 1, normed.data());
        b.norm_ahead(x, norms[1].data());
        b.matmul_fused(out_proj, a.data(), 1, x, add);
        b.rmsnorm(x, norms[1].data(), 1, dim, eps, normed.data());
        b.matmul_fused(read, normed.data(), 1, x, add);
        // A product of a prepared norm that keeps the norm, both of its outputs then read.
        b.norm_ahead(x, norms[4].data());
        b.matmul_fused(out_proj, a.data(), 1, x, add);
        b.matmul_normed_keeping(ProductOut{read, c.data()}, x, norms[4].data(), eps, 1, normed.data());
        b.matmul_fused(read, normed.data(), 1, x, add);
        b.matmul_fused(out_proj, c.data(), 1, x, add);
        return static_cast<const float*>(x);
    };
    const auto key = std::make_shared<int>(0);
    std::vector<std::vector<float>> after;
    for (int i = 0; i < steps; ++i) {
        b.run_step(key, issue);
        std::vector<float>& state = after.emplace_back(static_cast<size_t>(dim));
        b.download(state.data(), s.data(), state.size());
    }
    return after;
}

class NormsAheadInSteps : public cuda::testing::DeviceTest {};

// Plain runs, the recording and its replays (whose partial sums must start from zero every time)
// agree with the CPU backend, which ignores the hints, at Nemotron-H's width and a narrow one.
TEST_F(NormsAheadInSteps, GiveThePlainNormsResultsOnEveryReplay) {
    for (int64_t dim : {512, 2688}) {
        SCOPED_TRACE(::testing::Message() << "width " << dim);
        std::mt19937 rng(static_cast<uint32_t>(dim));
        const std::vector<float> start = random_values(rng, dim, -2.0f, 2.0f);
        ThreadPool pool(2);
        const std::unique_ptr<Backend> cpu = make_cpu_backend(&pool);
        const std::unique_ptr<Backend> gpu = make_cuda_backend();
        const auto want = run_norm_ahead_steps(*cpu, 6, start, dim, 3);
        const auto got = run_norm_ahead_steps(*gpu, 6, start, dim, 3);
        for (size_t i = 0; i < want.size(); ++i) EXPECT_LE(relative_error(got[i], want[i]), 1e-4) << "step " << i;
    }
}

}  // namespace
}  // namespace duet
