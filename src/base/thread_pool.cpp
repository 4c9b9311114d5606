#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>

namespace duet {

namespace {

// True on pool workers, and on a caller while it runs chunks of its own job:
// a parallel_for issued from there runs inline instead of waiting on a pool
// that is busy with the very job that issued it.
thread_local bool t_inside_pool_task = false;

// How long an idle thread polls before it sleeps. Calls come in quick
// succession while a token is computed, and a poll answers in nanoseconds
// where a sleep/wake round trip costs microseconds.
constexpr auto kSpinTime = std::chrono::microseconds(50);

// The generation word packs a job counter with how many workers take part.
constexpr int kParticipantBits = 16;
constexpr uint64_t kParticipantMask = (uint64_t{1} << kParticipantBits) - 1;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
}

// Polls `done` for kSpinTime; returns whether it became true.
template <typename Predicate>
bool spin_until(Predicate done) {
    const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
    for (int i = 0;; ++i) {
        if (done()) return true;
        if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return false;
        cpu_relax();
    }
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
    if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
    threads = std::clamp(threads, 1, static_cast<int>(kParticipantMask) + 1);
    try {
        workers_.reserve(threads - 1);
        for (int i = 0; i < threads - 1; ++i) {
            workers_.emplace_back([this, i] { worker_loop(i); });
        }
    } catch (...) {
        stop_workers();
        throw;
    }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
    {
        std::lock_guard lock(wake_mutex_);
        stopping_.store(true, std::memory_order_release);
    }
    wake_cv_.notify_all();
    for (std::thread& worker : workers_) {
        if (worker.joinable()) worker.join();
    }
    workers_.clear();
}

bool ThreadPool::wait_for_job(uint64_t& seen_generation) {
    auto has_news = [&] {
        return generation_.load(std::memory_order_acquire) != seen_generation ||
               stopping_.load(std::memory_order_acquire);
    };
    if (!spin_until(has_news)) {
        std::unique_lock lock(wake_mutex_);
        wake_cv_.wait(lock, has_news);
    }
    if (stopping_.load(std::memory_order_acquire)) return false;
    seen_generation = generation_.load(std::memory_order_acquire);
    return true;
}

void ThreadPool::worker_loop(int worker_index) {
    t_inside_pool_task = true;
    // Not generation_'s current value: a job may have been published before
    // this thread got to run, and it must still take part in it.
    uint64_t seen_generation = 0;
    while (wait_for_job(seen_generation)) {
        const int participants = static_cast<int>(seen_generation & kParticipantMask);
        if (worker_index >= participants) continue;
        run_chunks();
        if (busy_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard lock(wake_mutex_);
            done_cv_.notify_one();
        }
    }
}

void ThreadPool::run_chunks() {
    for (;;) {
        const int64_t chunk = next_chunk_.fetch_add(1, std::memory_order_relaxed);
        if (chunk >= job_chunks_) return;
        const int64_t begin = chunk * job_chunk_;
        const int64_t end = std::min(job_n_, begin + job_chunk_);
        try {
            (*job_fn_)(begin, end);
        } catch (...) {
            std::lock_guard lock(error_mutex_);
            if (!first_error_) first_error_ = std::current_exception();
        }
    }
}

void ThreadPool::wait_for_workers() {
    auto all_done = [&] { return busy_workers_.load(std::memory_order_acquire) == 0; };
    if (spin_until(all_done)) return;
    std::unique_lock lock(wake_mutex_);
    done_cv_.wait(lock, all_done);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const RangeFn& fn, int chunks_per_thread) {
    if (n <= 0) return;
    grain = std::max<int64_t>(grain, 1);
    if (n <= grain || workers_.empty() || t_inside_pool_task) {
        fn(0, n);
        return;
    }

    std::lock_guard submit_lock(submit_mutex_);
    const int64_t target_chunks = int64_t{size()} * std::max(chunks_per_thread, 1);
    const int64_t chunk = std::max(grain, (n + target_chunks - 1) / target_chunks);
    const int64_t chunks = (n + chunk - 1) / chunk;
    const int participants =
        static_cast<int>(std::min<int64_t>(static_cast<int64_t>(workers_.size()), chunks - 1));

    job_fn_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    job_chunks_ = chunks;
    first_error_ = nullptr;
    next_chunk_.store(0, std::memory_order_relaxed);
    busy_workers_.store(participants, std::memory_order_relaxed);
    {
        std::lock_guard lock(wake_mutex_);
        const uint64_t counter =
            (generation_.load(std::memory_order_relaxed) >> kParticipantBits) + 1;
        generation_.store((counter << kParticipantBits) | static_cast<uint64_t>(participants),
                          std::memory_order_release);
    }
    wake_cv_.notify_all();

    t_inside_pool_task = true;
    run_chunks();
    t_inside_pool_task = false;
    wait_for_workers();

    job_fn_ = nullptr;
    if (first_error_) {
        std::exception_ptr error = std::move(first_error_);
        first_error_ = nullptr;
        std::rethrow_exception(error);
    }
}

void parallel_for(ThreadPool* pool, int64_t n, int64_t grain, const ThreadPool::RangeFn& fn,
                  int chunks_per_thread) {
    if (pool != nullptr) {
        pool->parallel_for(n, grain, fn, chunks_per_thread);
    } else if (n > 0) {
        fn(0, n);
    }
}

}  // namespace duet
