#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace duet {
namespace {

struct Chunk {
    int64_t begin;
    int64_t end;
};

// Runs one parallel_for and checks that its chunks tile [0, n) exactly, each
// at least `grain` long except the one that ends at n.
void expect_exact_cover(ThreadPool& pool, int64_t n, int64_t grain) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(std::max<int64_t>(n, 0)));
    std::mutex chunks_mutex;
    std::vector<Chunk> chunks;
    pool.parallel_for(n, grain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        std::lock_guard lock(chunks_mutex);
        chunks.push_back({begin, end});
    });
    for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1)
            << "index " << i << " n=" << n << " grain=" << grain << " threads=" << pool.size();
    }
    std::sort(chunks.begin(), chunks.end(), [](Chunk a, Chunk b) { return a.begin < b.begin; });
    int64_t expected_begin = 0;
    for (const Chunk& c : chunks) {
        EXPECT_EQ(c.begin, expected_begin);
        EXPECT_LT(c.begin, c.end);
        if (c.end != n) {
            EXPECT_GE(c.end - c.begin, grain) << "n=" << n << " grain=" << grain;
        }
        expected_begin = c.end;
    }
    if (n > 0) {
        EXPECT_EQ(expected_begin, n);
    }
}

TEST(ThreadPool, SizeCountsTheCallingThread) {
    EXPECT_EQ(ThreadPool(1).size(), 1);
    EXPECT_EQ(ThreadPool(3).size(), 3);
    EXPECT_GE(ThreadPool(0).size(), 1);
    EXPECT_GE(ThreadPool().size(), 1);
}

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
    for (int threads : {1, 2, 3, 5}) {
        ThreadPool pool(threads);
        for (int64_t n : {0, 1, 2, 3, 7, 8, 64, 100, 1000, 12345}) {
            for (int64_t grain : {-1, 0, 1, 2, 7, 100, 5000}) {
                expect_exact_cover(pool, n, grain);
            }
        }
    }
}

TEST(ThreadPool, RunsInlineWhenWorkIsSmall) {
    ThreadPool pool(4);
    int calls = 0;
    std::thread::id where;
    pool.parallel_for(10, 10, [&](int64_t begin, int64_t end) {
        ++calls;
        where = std::this_thread::get_id();
        EXPECT_EQ(begin, 0);
        EXPECT_EQ(end, 10);
    });
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(where, std::this_thread::get_id());
}

TEST(ThreadPool, UsesSeveralThreads) {
    ThreadPool pool(2);
    std::mutex ids_mutex;
    std::vector<std::thread::id> ids;
    // Chunks that wait for each other can only finish if two threads run them.
    std::atomic<int> started{0};
    pool.parallel_for(2, 1, [&](int64_t, int64_t) {
        started.fetch_add(1);
        while (started.load() < 2) std::this_thread::yield();
        std::lock_guard lock(ids_mutex);
        ids.push_back(std::this_thread::get_id());
    });
    ASSERT_EQ(ids.size(), 2u);
    EXPECT_NE(ids[0], ids[1]);
}

TEST(ThreadPool, NullPoolRunsInline) {
    int calls = 0;
    parallel_for(nullptr, 1000, 1, [&](int64_t begin, int64_t end) {
        ++calls;
        EXPECT_EQ(begin, 0);
        EXPECT_EQ(end, 1000);
    });
    EXPECT_EQ(calls, 1);
    parallel_for(nullptr, 0, 1, [&](int64_t, int64_t) { ++calls; });
    EXPECT_EQ(calls, 1);
}

TEST(ThreadPool, FreeFunctionUsesThePool) {
    ThreadPool pool(3);
    std::vector<std::atomic<int>> hits(500);
    parallel_for(&pool, 500, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, NestedParallelForDoesNotDeadlock) {
    ThreadPool pool(3);
    constexpr int64_t outer = 17;
    constexpr int64_t inner = 53;
    std::vector<std::atomic<int>> hits(outer * inner);
    pool.parallel_for(outer, 1, [&](int64_t ob, int64_t oe) {
        for (int64_t o = ob; o < oe; ++o) {
            pool.parallel_for(inner, 1, [&](int64_t ib, int64_t ie) {
                for (int64_t i = ib; i < ie; ++i) {
                    hits[static_cast<size_t>(o * inner + i)].fetch_add(1);
                }
            });
        }
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, RethrowsTheFirstExceptionAfterAllChunksRan) {
    ThreadPool pool(3);
    std::vector<std::atomic<int>> hits(100);
    auto count_and_throw_at_42 = [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        if (begin <= 42 && 42 < end) throw std::runtime_error("boom");
    };
    EXPECT_THROW(pool.parallel_for(100, 1, count_and_throw_at_42), std::runtime_error);
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);

    // Every chunk throws: exactly one exception comes out, and the pool still works.
    EXPECT_THROW(pool.parallel_for(100, 1, [](int64_t, int64_t) { throw std::logic_error("all"); }),
                 std::logic_error);
    expect_exact_cover(pool, 1000, 3);
}

TEST(ThreadPool, InlineRunPropagatesExceptions) {
    ThreadPool pool(2);
    EXPECT_THROW(pool.parallel_for(5, 10, [](int64_t, int64_t) { throw std::runtime_error("x"); }),
                 std::runtime_error);
}

TEST(ThreadPool, ManySmallCallsInARow) {
    ThreadPool pool(2);
    std::vector<int64_t> values(64, 1);
    int64_t total = 0;
    for (int call = 0; call < 10000; ++call) {
        std::atomic<int64_t> sum{0};
        pool.parallel_for(64, 1, [&](int64_t begin, int64_t end) {
            int64_t s = 0;
            for (int64_t i = begin; i < end; ++i) s += values[static_cast<size_t>(i)];
            sum.fetch_add(s);
        });
        total += sum.load();
    }
    EXPECT_EQ(total, 64 * 10000);
}

TEST(ThreadPool, CallersOnSeveralThreadsShareThePool) {
    ThreadPool pool(3);
    std::atomic<int64_t> total{0};
    auto count = [&](int64_t begin, int64_t end) { total.fetch_add(end - begin); };
    std::vector<std::thread> callers;
    for (int c = 0; c < 3; ++c) {
        callers.emplace_back([&] {
            for (int call = 0; call < 300; ++call) pool.parallel_for(50, 1, count);
        });
    }
    for (std::thread& t : callers) t.join();
    EXPECT_EQ(total.load(), 3 * 300 * 50);
}

}  // namespace
}  // namespace duet
