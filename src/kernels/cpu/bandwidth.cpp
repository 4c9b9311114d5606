#include "kernels/cpu/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/error.h"
#include "base/host_memory.h"

namespace duet::cpu {

namespace {

constexpr int kRepetitions = 5;
constexpr int64_t kChunkBytes = 1 << 20;

// Sums the buffer as 64-bit integers: integer adds keep up with any memory
// system and, unlike float sums, the compiler needs no licence to reorder
// them. The buffer is read as four streams at once, as the matmul kernels read
// four weight rows: one stream per core leaves the prefetchers idle part of
// the time and understates the bandwidth.
uint64_t sum_words(const uint8_t* data, size_t bytes) {
    constexpr size_t kStreams = 4;
    const size_t stream_words = bytes / 16 / kStreams;
    uint64_t total = 0;
#if defined(__SSE2__)
    const __m128i* p0 = reinterpret_cast<const __m128i*>(data);
    const __m128i* p1 = p0 + stream_words;
    const __m128i* p2 = p1 + stream_words;
    const __m128i* p3 = p2 + stream_words;
    __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < stream_words; ++i) {
        a0 = _mm_add_epi64(a0, _mm_load_si128(p0 + i));
        a1 = _mm_add_epi64(a1, _mm_load_si128(p1 + i));
        a2 = _mm_add_epi64(a2, _mm_load_si128(p2 + i));
        a3 = _mm_add_epi64(a3, _mm_load_si128(p3 + i));
    }
    alignas(16) uint64_t lanes[2];
    _mm_store_si128(reinterpret_cast<__m128i*>(lanes),
                    _mm_add_epi64(_mm_add_epi64(a0, a1), _mm_add_epi64(a2, a3)));
    total = lanes[0] + lanes[1];
#else
    for (size_t s = 0; s < kStreams; ++s) {
        for (size_t i = 0; i < stream_words * 2; ++i) {
            uint64_t word;
            std::memcpy(&word, data + (s * stream_words * 2 + i) * 8, 8);
            total += word;
        }
    }
#endif
    // Whatever the streams left over.
    for (size_t i = kStreams * stream_words * 16; i + 8 <= bytes; i += 8) {
        uint64_t word;
        std::memcpy(&word, data + i, 8);
        total += word;
    }
    return total;
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
    // A multiple of 32 bytes, so that both halves of the copy are whole 16-byte words.
    bytes -= bytes % 32;
    require(bytes >= 32, "measure_memory_bandwidth: buffer of ", bytes, " bytes is too small");
    // The same kind of memory as the weights whose reading this is the floor of.
    const std::shared_ptr<uint8_t> buffer = allocate_zeroed_host(bytes);
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
            // Chunk by chunk: the four streams of sum_words stay close together.
            uint64_t sum = 0;
            for (int64_t chunk = begin; chunk < end; ++chunk) {
                const int64_t from = chunk * kChunkBytes;
                const int64_t to = std::min(total, from + kChunkBytes);
                sum += sum_words(data + from, static_cast<size_t>(to - from));
            }
            checksum.fetch_add(sum, std::memory_order_relaxed);
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
