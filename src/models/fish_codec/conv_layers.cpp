// Causal convolutions as matmuls: a conv gathers each output step's input window (im2col) and
// multiplies by the [out, kernel · in] weight; a transposed conv multiplies each input step by all
// of its taps at once and overlap-adds. The matmul's summation order does not depend on how many
// rows it is given, so chunked (streaming) and whole runs agree to the bit.
#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "kernels/cpu/matmul.h"
#include "models/fish_codec/layers.h"

namespace duet::fish_codec {

namespace {

// Gathered windows per matmul call: bounds the im2col buffer at about 4 MB.
constexpr int64_t kGatherFloats = int64_t{1} << 20;

void add_bias_rows(float* out, int64_t rows, const std::vector<float>& bias, ThreadPool* pool) {
    if (bias.empty()) return;
    const int64_t width = static_cast<int64_t>(bias.size());
    parallel_for(pool, rows, std::max<int64_t>(1, 4096 / width), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
            float* row = out + t * width;
            for (int64_t o = 0; o < width; ++o) row[o] += bias[static_cast<size_t>(o)];
        }
    });
}

}  // namespace

void keep_last_rows(std::vector<float>& history, int64_t context, const float* x, int64_t steps, int64_t width) {
    if (context == 0) return;
    float* h = history.data();
    if (steps >= context) {
        std::memcpy(h, x + (steps - context) * width, static_cast<size_t>(context * width) * sizeof(float));
    } else {
        // The history's last context - steps rows move to the front, then x's rows follow them.
        std::memmove(h, h + steps * width, static_cast<size_t>((context - steps) * width) * sizeof(float));
        std::memcpy(h + (context - steps) * width, x, static_cast<size_t>(steps * width) * sizeof(float));
    }
}

ConvState new_state(const Conv& conv) {
    return {std::vector<float>(static_cast<size_t>(conv.context() * conv.in), 0.0f)};
}

ConvTransposeState new_state(const ConvTranspose& conv) {
    return {std::vector<float>(static_cast<size_t>((conv.kernel - conv.stride) * conv.out), 0.0f)};
}

ResidualUnitState new_state(const ResidualUnit& unit) { return {new_state(unit.conv1), new_state(unit.conv2)}; }

Signal linear(const Linear& l, const float* x, int64_t steps, ThreadPool* pool) {
    Signal out(static_cast<size_t>(steps * l.out));
    if (steps == 0) return out;
    cpu::matmul(l.matrix(), x, steps, out.data(), pool);
    add_bias_rows(out.data(), steps, l.bias, pool);
    return out;
}

Signal causal_conv(const Conv& conv, ConvState& state, const float* x, int64_t steps, ThreadPool* pool) {
    require(steps % conv.stride == 0, "causal conv: ", steps, " steps is not a multiple of the stride ", conv.stride);
    const int64_t in = conv.in, context = conv.context(), out_steps = steps / conv.stride;
    Signal out(static_cast<size_t>(out_steps * conv.out));
    if (steps == 0) return out;

    if (conv.kernel == 1 && conv.stride == 1) {
        cpu::matmul(conv.matrix(), x, steps, out.data(), pool);
    } else {
        // Windows are gathered straight from the history and x (padded row r is the history's row r
        // below `context`, else input step r - context): a padded copy of the input would be one
        // thread's memcpy of every conv's whole input.
        const auto padded_row = [&](int64_t r) {
            return r < context ? state.history.data() + r * in : x + (r - context) * in;
        };
        const int64_t window = conv.kernel * in;
        const int64_t tile = std::max<int64_t>(16, kGatherFloats / window);
        // On a cache line, so that the product's loads of a window do not straddle two where the
        // window is a whole number of lines.
        CacheAlignedVector<float> gathered(static_cast<size_t>(std::min(tile, out_steps) * window));
        for (int64_t t0 = 0; t0 < out_steps; t0 += tile) {
            const int64_t rows = std::min(tile, out_steps - t0);
            parallel_for(pool, rows, std::max<int64_t>(1, 8192 / window), [&](int64_t begin, int64_t end) {
                for (int64_t t = begin; t < end; ++t) {
                    float* dst = gathered.data() + t * window;
                    const int64_t first = (t0 + t) * conv.stride;
                    for (int64_t k = 0; k < conv.kernel; ++k)
                        std::memcpy(dst + k * in, padded_row(first + k * conv.dilation),
                                    static_cast<size_t>(in) * sizeof(float));
                }
            });
            cpu::matmul(conv.matrix(), gathered.data(), rows, out.data() + t0 * conv.out, pool);
        }
        keep_last_rows(state.history, context, x, steps, in);
    }
    add_bias_rows(out.data(), out_steps, conv.bias, pool);
    return out;
}

Signal conv_transpose(const ConvTranspose& conv, ConvTransposeState& state, const float* x, int64_t steps,
                                  ThreadPool* pool) {
    const int64_t s = conv.stride, o_dim = conv.out, taps = conv.kernel * o_dim;
    const bool overlaps = conv.kernel == 2 * s;
    Signal out(static_cast<size_t>(steps * s * o_dim));
    if (steps == 0) return out;
    // products[q] holds input step q times every tap: tap j lands on output step q·s + j.
    Signal products(static_cast<size_t>(steps * taps));
    cpu::matmul(conv.matrix(), x, steps, products.data(), pool);
    parallel_for(pool, steps, std::max<int64_t>(1, 4096 / (s * o_dim)), [&](int64_t begin, int64_t end) {
        for (int64_t q = begin; q < end; ++q) {
            const float* current = products.data() + q * taps;
            // Taps s..2s-1 of the step before reach this step's outputs.
            const float* previous = !overlaps ? nullptr
                                    : q > 0   ? products.data() + (q - 1) * taps + s * o_dim
                                              : state.overlap.data();
            float* dst = out.data() + q * s * o_dim;
            for (int64_t r = 0; r < s; ++r) {
                const int64_t at = r * o_dim;
                for (int64_t o = 0; o < o_dim; ++o) dst[at + o] = conv.bias[static_cast<size_t>(o)] + current[at + o];
                if (previous)
                    for (int64_t o = 0; o < o_dim; ++o) dst[at + o] += previous[at + o];
            }
        }
    });
    if (overlaps) {
        const float* last = products.data() + (steps - 1) * taps + s * o_dim;
        std::copy(last, last + s * o_dim, state.overlap.begin());
    }
    return out;
}

void residual_unit(const ResidualUnit& unit, ResidualUnitState& state, Signal& x, int64_t steps,
                   ThreadPool* pool) {
    const int64_t width = unit.conv1.in;
    Signal y(x.size());
    // The copy and the sum below are spread over the pool: on one thread they were a fixed share of
    // every unit that more threads did not shorten.
    parallel_for(pool, steps, std::max<int64_t>(1, 16384 / width), [&](int64_t begin, int64_t end) {
        std::memcpy(y.data() + begin * width, x.data() + begin * width, static_cast<size_t>((end - begin) * width) * sizeof(float));
    });
    snake(unit.snake1, y.data(), steps, pool);
    y = causal_conv(unit.conv1, state.conv1, y.data(), steps, pool);
    snake(unit.snake2, y.data(), steps, pool);
    y = causal_conv(unit.conv2, state.conv2, y.data(), steps, pool);
    add_rows(x.data(), y.data(), steps, width, pool);
}

void add_rows(float* x, const float* y, int64_t steps, int64_t width, ThreadPool* pool) {
    parallel_for(pool, steps, std::max<int64_t>(1, 16384 / width), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin * width; i < end * width; ++i) x[i] += y[i];
    });
}

}  // namespace duet::fish_codec
