// A fixed set of worker threads that split loops over an index range.
//
// The thread that calls parallel_for works too, so a pool of size N starts
// N - 1 workers. Workers are created once and reused: a call costs a wake-up,
// not a thread start, because the engine makes hundreds of calls per token.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace duet {

class ThreadPool {
public:
    using RangeFn = std::function<void(int64_t begin, int64_t end)>;

    // threads = 0 means one per hardware thread; the pool always has at least one.
    explicit ThreadPool(int threads = 0);
    ~ThreadPool();

    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    // Number of threads that run tasks, the calling thread included.
    int size() const { return static_cast<int>(workers_.size()) + 1; }

    // Splitting into a few chunks per thread lets threads that finish early
    // take over work from threads that were descheduled.
    static constexpr int kChunksPerThread = 4;

    // Calls fn on contiguous chunks that together cover [0, n) exactly once,
    // each chunk at least `grain` long (except the last), about
    // chunks_per_thread of them a thread, and returns when all are done. Runs
    // inline when n <= grain, when size() == 1, or when called from inside a
    // task of any pool. If fn throws, the first exception is rethrown here
    // after every chunk has run.
    void parallel_for(int64_t n, int64_t grain, const RangeFn& fn, int chunks_per_thread = kChunksPerThread);

private:
    void stop_workers();
    void worker_loop(int worker_index);
    void run_chunks();
    bool wait_for_job(uint64_t& seen_generation);
    void wait_for_workers();

    std::vector<std::thread> workers_;

    // Serialises callers from different threads: one job runs at a time.
    std::mutex submit_mutex_;

    // The current job. Written only while no worker is inside a job.
    const RangeFn* job_fn_ = nullptr;
    int64_t job_n_ = 0;
    int64_t job_chunk_ = 0;
    int64_t job_chunks_ = 0;
    int job_workers_ = 0;
    std::atomic<int64_t> next_chunk_{0};
    std::atomic<int> busy_workers_{0};

    std::mutex error_mutex_;
    std::exception_ptr first_error_;

    std::mutex wake_mutex_;
    std::condition_variable wake_cv_;
    std::condition_variable done_cv_;
    std::atomic<uint64_t> generation_{0};
    std::atomic<bool> stopping_{false};
};

// Runs fn over [0, n) on the pool, or inline when pool is null.
void parallel_for(ThreadPool* pool, int64_t n, int64_t grain, const ThreadPool::RangeFn& fn,
                  int chunks_per_thread = ThreadPool::kChunksPerThread);

}  // namespace duet
