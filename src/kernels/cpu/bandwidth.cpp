#include "kernels/cpu/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/error.h"

namespace duet::cpu {

namespace {

constexpr int kRepetitions = 5;
constexpr size_t kAlignment = 64;
constexpr int64_t kChunkBytes = 1 << 20;

struct AlignedDelete {
    void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t{kAlignment}); }
};
using Buffer = std::unique_ptr<uint8_t[], AlignedDelete>;

// Sums the buffer as 64-bit integers: integer adds keep up with any memory
// system and, unlike float sums, the compiler needs no licence to reorder them.
uint64_t sum_words(const uint8_t* data, size_t bytes) {
    const size_t words = bytes / 16;
#if defined(__SSE2__)
    const __m128i* p = reinterpret_cast<const __m128i*>(data);
    __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 4 <= words; i += 4) {
        a0 = _mm_add_epi64(a0, _mm_load_si128(p + i));
        a1 = _mm_add_epi64(a1, _mm_load_si128(p + i + 1));
        a2 = _mm_add_epi64(a2, _mm_load_si128(p + i + 2));
        a3 = _mm_add_epi64(a3, _mm_load_si128(p + i + 3));
    }
    for (; i < words; ++i) a0 = _mm_add_epi64(a0, _mm_load_si128(p + i));
    alignas(16) uint64_t lanes[2];
    _mm_store_si128(reinterpret_cast<__m128i*>(lanes), _mm_add_epi64(_mm_add_epi64(a0, a1), _mm_add_epi64(a2, a3)));
    return lanes[0] + lanes[1];
#else
    uint64_t sums[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < words * 2; ++i) {
        uint64_t word;
        std::memcpy(&word, data + i * 8, 8);
        sums[i % 4] += word;
    }
    return sums[0] + sums[1] + sums[2] + sums[3];
#endif
}

template <typename Body>
double best_seconds(Body body) {
    double best = 0;
    for (int i = 0; i < kRepetitions; ++i) {
        const auto start = std::chrono::steady_clock::now();
        body();
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (i == 0 || seconds < best) best = seconds;
    }
    return std::max(best, 1e-9);
}

}  // namespace

BandwidthResult measure_memory_bandwidth(ThreadPool* pool, size_t bytes) {
    // Whole 16-byte words, and an even number of chunks' worth for the copy halves.
    bytes -= bytes % 32;
    require(bytes >= 32, "measure_memory_bandwidth: buffer of ", bytes, " bytes is too small");
    Buffer buffer(static_cast<uint8_t*>(::operator new[](bytes, std::align_val_t{kAlignment})));
    uint8_t* data = buffer.get();
    const auto total = static_cast<int64_t>(bytes);
    const int64_t chunks = (total + kChunkBytes - 1) / kChunkBytes;

    // The first touch maps the pages, from the threads that later read them.
    parallel_for(pool, chunks, 1, [&](int64_t begin, int64_t end) {
        const int64_t from = begin * kChunkBytes;
        const int64_t to = std::min(total, end * kChunkBytes);
        std::memset(data + from, static_cast<int>(begin % 251) + 1, static_cast<size_t>(to - from));
    });

    std::atomic<uint64_t> checksum{0};
    const double read_seconds = best_seconds([&] {
        parallel_for(pool, chunks, 1, [&](int64_t begin, int64_t end) {
            const int64_t from = begin * kChunkBytes;
            const int64_t to = std::min(total, end * kChunkBytes);
            checksum.fetch_add(sum_words(data + from, static_cast<size_t>(to - from)),
                               std::memory_order_relaxed);
        });
    });

    const int64_t half = total / 2;
    const int64_t half_chunks = (half + kChunkBytes - 1) / kChunkBytes;
    const double copy_seconds = best_seconds([&] {
        parallel_for(pool, half_chunks, 1, [&](int64_t begin, int64_t end) {
            const int64_t from = begin * kChunkBytes;
            const int64_t to = std::min(half, end * kChunkBytes);
            std::memcpy(data + half + from, data + from, static_cast<size_t>(to - from));
        });
    });

    // Handing the checksum to an opaque statement keeps the reads from being optimised away.
    const uint64_t sum = checksum.load(std::memory_order_relaxed);
    __asm__ volatile("" : : "r"(sum) : "memory");

    BandwidthResult result;
    result.read_gbs = static_cast<double>(total) / read_seconds / 1e9;
    result.copy_gbs = 2.0 * static_cast<double>(half) / copy_seconds / 1e9;
    return result;
}

}  // namespace duet::cpu
