// The kernels of a decode step recorded once as a CUDA graph and replayed at later positions: the
// position lives in device memory, so a replay must give what a fresh call at that position gives
// (the CPU backend's answer).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "base/thread_pool.h"
#include "cuda_test_support.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/ops.h"

namespace duet {
namespace {

using cuda::DeviceBuffer;

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return INFINITY;
    double diff = 0.0, ref = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
        diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
        ref = std::max(ref, std::fabs(double(b[i])));
    }
    return ref > 0 ? diff / ref : diff;
}

std::vector<float> random_values(std::mt19937& rng, size_t count, float lo, float hi) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(count);
    for (float& x : v) x = dist(rng);
    return v;
}

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

}  // namespace
}  // namespace duet
