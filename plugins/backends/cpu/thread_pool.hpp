// A small persistent thread pool for data-parallel kernels.
//
// The calling thread takes part in every parallel_for, so a pool of size 1
// has no worker threads at all. Work is split into contiguous static ranges,
// one per participating thread, which keeps results independent of timing.
//
// Thread-safety: one thread at a time may call parallel_for (a backend
// context is used by one thread at a time). parallel_for must not be called
// from inside a job.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dwell::cpu {

class ThreadPool {
public:
    using RangeFn = std::function<void(int64_t begin, int64_t end)>;

    // nthreads counts the calling thread; 0 is treated as 1.
    explicit ThreadPool(unsigned nthreads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

    // Calls fn(begin, end) over disjoint ranges covering [0, n). Ranges hold
    // at least min_chunk items (except when n is smaller), so tiny jobs run
    // inline without waking anyone. Rethrows the first exception a range
    // threw, after every range has finished.
    void parallel_for(int64_t n, const RangeFn& fn, int64_t min_chunk = 1);

    // The default size: one thread per hardware thread, at least one.
    static unsigned default_threads();

private:
    void worker_loop(unsigned index);
    void run_range(unsigned index);

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable start_cv_;
    std::condition_variable done_cv_;
    // Bumped once per job; workers compare it with the last job they saw.
    std::atomic<uint64_t> generation_{0};
    std::atomic<unsigned> pending_{0};
    bool stop_ = false;

    // The current job; written before generation_ is bumped.
    const RangeFn* job_ = nullptr;
    int64_t job_n_ = 0;
    unsigned job_parts_ = 0;
    std::exception_ptr job_error_;
};

}  // namespace dwell::cpu
