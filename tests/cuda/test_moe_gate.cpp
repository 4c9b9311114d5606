// The one-token MoE gate (cuda::moe_gate) routed by one thread block cluster against the last-block
// form, which the backend's expert tests hold to the CPU: the same inputs must give the same logits,
// choices, weights, normalised input and slot matrices. The choices are also checked against the
// top-k of the device's own logits, ranked on the host by the CPU's rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "base/half.h"
#include "cuda_test_support.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/norm_ahead.h"
#include "kernels/cuda/ops.h"

namespace duet {
namespace {

constexpr bool kNoCluster = false;
constexpr bool kAnyCluster = true;

struct GateShape {
    int64_t hidden, experts, top_k;
    bool sigmoid;
    bool gate_row;          // the shared expert's gate row after the router's (Qwen3.5-MoE)
    bool slot_matrices;     // the chosen slots' matrices written too
    int64_t distinct_rows;  // router rows repeating every this many (ties); 0: all distinct
};

// What one launch of the gate leaves behind.
struct GateResult {
    std::vector<float> logits, normed, weights;
    std::vector<int32_t> chosen;
    float gate_logit = 0.0f;
    std::vector<uintptr_t> first, second, down;
};

// The gate's inputs on the device, and a launch of either form over them.
class GateInputs {
public:
    GateInputs(const GateShape& shape, std::mt19937& rng) : shape_(shape) {
        std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
        std::vector<float> x(static_cast<size_t>(shape.hidden)), norm(x.size());
        for (float& v : x) v = 2.0f * uniform(rng);
        for (float& v : norm) v = 1.0f + 0.5f * uniform(rng);
        std::vector<uint16_t> router(static_cast<size_t>(shape.experts * shape.hidden));
        for (uint16_t& w : router) w = f32_to_bf16(0.3f * uniform(rng));
        if (shape.distinct_rows > 0) {
            for (int64_t e = shape.distinct_rows; e < shape.experts; ++e) {
                std::copy_n(router.begin() + (e % shape.distinct_rows) * shape.hidden, shape.hidden,
                            router.begin() + e * shape.hidden);
            }
        }
        std::vector<uint16_t> gate_row(static_cast<size_t>(shape.hidden));
        for (uint16_t& w : gate_row) w = f32_to_bf16(0.3f * uniform(rng));
        std::vector<float> bias(static_cast<size_t>(shape.experts));
        for (int64_t e = 0; e < shape.experts; ++e) {
            bias[e] = shape.distinct_rows > 0 && e >= shape.distinct_rows ? bias[e % shape.distinct_rows]
                                                                          : 0.1f * uniform(rng);
        }
        // The experts' tables: distinct made-up addresses, only copied by the gate.
        std::vector<uintptr_t> tables(static_cast<size_t>(3 * shape.experts));
        std::iota(tables.begin(), tables.end(), uintptr_t(0x1000));
        for (uintptr_t& t : tables) t *= 64;
        // The norm prepared ahead: x · weight, and Σ x² in the first of the partial sums.
        std::vector<float> weighted(x.size());
        double squares = 0.0;
        for (size_t i = 0; i < x.size(); ++i) {
            weighted[i] = x[i] * norm[i];
            squares += double(x[i]) * double(x[i]);
        }
        std::vector<double> sums(static_cast<size_t>(cuda::kNormAheadSums * cuda::kNormAheadSumStride));
        sums[0] = squares;

        x_ = cuda::DeviceBuffer::from_vector(x);
        norm_ = cuda::DeviceBuffer::from_vector(norm);
        router_ = cuda::DeviceBuffer::from_vector(router);
        gate_row_ = cuda::DeviceBuffer::from_vector(gate_row);
        bias_ = cuda::DeviceBuffer::from_vector(bias);
        tables_ = cuda::DeviceBuffer::from_vector(tables);
        weighted_ = cuda::DeviceBuffer::from_vector(weighted);
        sums_ = cuda::DeviceBuffer::from_vector(sums);
        counter_ = cuda::DeviceBuffer::from_vector(std::vector<unsigned>(1, 0u));
    }

    // The launch's arguments, its outputs in fresh buffers.
    cuda::MoeGateArgs args(bool ahead, bool in_cluster) {
        const GateShape& s = shape_;
        normed_ = cuda::DeviceBuffer(static_cast<size_t>(s.hidden) * sizeof(float));
        logits_ = cuda::DeviceBuffer(static_cast<size_t>(s.experts + 1) * sizeof(float));
        chosen_ = cuda::DeviceBuffer(static_cast<size_t>(s.top_k) * sizeof(int32_t));
        weights_ = cuda::DeviceBuffer(static_cast<size_t>(s.top_k) * sizeof(float));
        slots_ = cuda::DeviceBuffer::from_vector(std::vector<uintptr_t>(static_cast<size_t>(3 * s.top_k), 0));
        cuda::MoeGateArgs a;
        a.x = x_.as<float>();
        a.norm_weight = norm_.as<float>();
        a.eps = 1e-6f;
        a.normed = normed_.as<float>();
        a.router = router_.data();
        a.gate_row = s.gate_row ? gate_row_.data() : nullptr;
        a.experts = s.experts;
        a.hidden = s.hidden;
        a.sigmoid = s.sigmoid;
        a.bias = s.sigmoid ? bias_.as<float>() : nullptr;
        a.routing.top_k = s.top_k;
        a.routing.normalize = true;
        a.routing.scale = s.sigmoid ? 2.5f : 1.0f;
        a.logits = logits_.as<float>();
        a.gate_logit = logits_.as<float>() + s.experts;
        a.chosen = chosen_.as<int32_t>();
        a.weights = weights_.as<float>();
        a.blocks_done = counter_.as<unsigned>();
        if (ahead) {
            a.ahead.weight = norm_.as<float>();
            a.ahead.weighted = weighted_.as<float>();
            a.ahead.sums = sums_.as<double>();
        }
        if (s.slot_matrices) {
            const auto* tables = static_cast<const void* const*>(tables_.data());
            auto** slots = static_cast<const void**>(slots_.data());
            a.slot_matrices.first_table = tables;
            a.slot_matrices.second_table = tables + s.experts;
            a.slot_matrices.down_table = tables + 2 * s.experts;
            a.slot_matrices.first = slots;
            a.slot_matrices.second = slots + s.top_k;
            a.slot_matrices.down = slots + 2 * s.top_k;
        }
        a.route_in_cluster = in_cluster;
        return a;
    }

    GateResult run(const cuda::MoeGateArgs& a) {
        cuda::moe_gate(a, nullptr);
        const GateShape& s = shape_;
        GateResult r;
        r.logits = logits_.download<float>(static_cast<size_t>(s.experts + 1));
        if (s.gate_row) r.gate_logit = r.logits.back();
        r.logits.pop_back();
        r.normed = normed_.download<float>(static_cast<size_t>(s.hidden));
        r.chosen = chosen_.download<int32_t>(static_cast<size_t>(s.top_k));
        r.weights = weights_.download<float>(static_cast<size_t>(s.top_k));
        const std::vector<uintptr_t> slots = slots_.download<uintptr_t>(static_cast<size_t>(3 * s.top_k));
        r.first.assign(slots.begin(), slots.begin() + s.top_k);
        r.second.assign(slots.begin() + s.top_k, slots.begin() + 2 * s.top_k);
        r.down.assign(slots.begin() + 2 * s.top_k, slots.end());
        return r;
    }

    std::vector<float> bias() const { return bias_.download<float>(static_cast<size_t>(shape_.experts)); }

private:
    GateShape shape_;
    cuda::DeviceBuffer x_, norm_, router_, gate_row_, bias_, tables_, weighted_, sums_, counter_;
    cuda::DeviceBuffer normed_, logits_, chosen_, weights_, slots_;
};

// The k best experts by the CPU's rules from the logits: the score (sigmoid(l) + bias, or l),
// larger first, ties to the lower index.
std::vector<int32_t> host_top_k(const std::vector<float>& logits, const std::vector<float>& bias, int64_t k,
                                bool sigmoid) {
    std::vector<float> key(logits.size());
    for (size_t e = 0; e < logits.size(); ++e) {
        key[e] = sigmoid ? 1.0f / (1.0f + std::exp(-logits[e])) + bias[e] : logits[e];
    }
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t i, int32_t j) { return key[i] > key[j]; });
    order.resize(static_cast<size_t>(k));
    return order;
}

class MoeGate : public cuda::testing::DeviceTest {};

// Qwen3.5-MoE's router (256 rows and the shared expert's gate row, split over the last block's
// warps; top 8, softmax), Nemotron-H's (128 rows of 2688, top 6, sigmoid with a bias), routers whose
// rows repeat (ties), routers of more rows than 8 a block (250 and 200: two a warp, the last block
// short; 200 of 3072 values, a lane's most loads, so the split gate row has two loads a warp), and
// small ones where most of the cluster's blocks have fewer rows than choices or none.
TEST_F(MoeGate, ClusterRoutingMatchesTheLastBlocksRouting) {
    if (cuda::device_info(0).sm_major < 9) GTEST_SKIP() << "thread block clusters need compute capability 9.0";
    std::mt19937 rng(11);
    for (const GateShape& shape : {GateShape{2048, 256, 8, false, true, true, 0},
                                   GateShape{2688, 128, 6, true, false, true, 0},
                                   GateShape{256, 256, 8, true, true, true, 24},
                                   GateShape{256, 256, 8, false, false, true, 40},
                                   GateShape{512, 250, 8, false, true, false, 0},
                                   GateShape{3072, 200, 8, true, true, false, 0},
                                   GateShape{64, 40, 4, true, false, true, 0},
                                   GateShape{64, 8, 8, false, true, true, 0}}) {
        GateInputs inputs(shape, rng);
        for (bool ahead : {false, true}) {
            SCOPED_TRACE(testing::Message() << shape.experts << " experts of " << shape.hidden << ", top "
                                            << shape.top_k << (shape.sigmoid ? ", sigmoid" : ", softmax")
                                            << (ahead ? ", norm prepared ahead" : ""));
            const cuda::MoeGateArgs in_cluster = inputs.args(ahead, kAnyCluster);
            ASSERT_TRUE(cuda::moe_gate_routes_in_cluster(in_cluster)) << "the cluster form fits this router";
            const GateResult want = inputs.run(inputs.args(ahead, kNoCluster));
            const GateResult got = inputs.run(inputs.args(ahead, kAnyCluster));
            EXPECT_EQ(got.logits, want.logits);
            EXPECT_EQ(got.normed, want.normed);
            EXPECT_EQ(got.gate_logit, want.gate_logit);
            EXPECT_EQ(got.chosen, want.chosen);
            EXPECT_EQ(got.weights, want.weights);
            EXPECT_EQ(got.first, want.first);
            EXPECT_EQ(got.second, want.second);
            EXPECT_EQ(got.down, want.down);
            EXPECT_EQ(got.chosen, host_top_k(got.logits, inputs.bias(), shape.top_k, shape.sigmoid));
        }
    }
}

// Routers the cluster form does not take keep the last block's routing.
TEST_F(MoeGate, ClusterRoutingIsLeftToRoutersItDoesNotFit) {
    std::mt19937 rng(12);
    GateInputs wide(GateShape{64, 512, 8, false, false, false, 0}, rng);
    EXPECT_FALSE(cuda::moe_gate_routes_in_cluster(wide.args(false, kAnyCluster))) << "more rows than the cluster holds";
    GateInputs long_rows(GateShape{3200, 64, 8, false, true, false, 0}, rng);
    EXPECT_FALSE(cuda::moe_gate_routes_in_cluster(long_rows.args(false, kAnyCluster)))
        << "rows of more than one round of loads";
    GateInputs many(GateShape{64, 64, 12, false, false, false, 0}, rng);
    EXPECT_FALSE(cuda::moe_gate_routes_in_cluster(many.args(false, kAnyCluster))) << "more choices than a block sends";
    GateInputs plain(GateShape{64, 64, 4, false, false, false, 0}, rng);
    cuda::MoeGateArgs grouped = plain.args(false, kAnyCluster);
    grouped.routing.groups = 8;
    grouped.routing.groups_kept = 4;
    EXPECT_FALSE(cuda::moe_gate_routes_in_cluster(grouped)) << "expert groups";
    cuda::MoeGateArgs unnormalised = plain.args(false, kAnyCluster);
    unnormalised.routing.normalize = false;
    EXPECT_FALSE(cuda::moe_gate_routes_in_cluster(unnormalised)) << "softmax over every expert";
    EXPECT_FALSE(cuda::moe_gate_routes_in_cluster(plain.args(false, kNoCluster))) << "not asked for";
}

}  // namespace
}  // namespace duet
