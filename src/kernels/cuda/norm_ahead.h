// A residual stream's next RMS norm, prepared by the decode-step kernel that adds to the stream last
// (Backend::norm_ahead). As that kernel writes each value x of the stream it also writes x · weight
// and adds x² into one of kNormAheadSums partial sums (zeroed before it), so that the kernel reading
// rmsnorm(x) next multiplies `weighted` by rsqrt(Σ sums / cols + eps) and needs no pass over x of its
// own: a normalised product's block then waits for nothing but its inputs (each block preparing the
// norm after its wait cost about 0.08 ms a decode step on an H200, measured with that work removed).
// Host-only header: callable from plain C++.
#pragma once

namespace duet::cuda {

// As many partial sums as a warp has lanes (a reader's warp loads them in one instruction), each in
// its own 128-byte line: the writers' atomics then queue at 32 places in L2 rather than at one or two
// lines (which cost a writer about 1.7 µs on an H200).
constexpr int kNormAheadSums = 32;
constexpr int kNormAheadSumStride = 16;  // doubles from one partial sum to the next

struct NormAhead {
    const float* weight = nullptr;  // the norm's weights [cols], device; null: nothing prepared
    float* weighted = nullptr;      // [cols]: x · weight
    double* sums = nullptr;         // [kNormAheadSums · kNormAheadSumStride]: Σ x² in parts, zero
                                    // before the writer runs
#if defined(__CUDACC__)
    __host__ __device__
#endif
    bool on() const { return weighted != nullptr; }
};

}  // namespace duet::cuda
