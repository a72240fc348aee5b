#include "thread_pool.hpp"

#include <algorithm>

namespace dwell::cpu {

namespace {

// Spinning a little before blocking saves a futex round trip when jobs come
// back to back (as kernels of one graph do), without burning a core when
// the pool sits idle between graphs.
constexpr int kSpinIterations = 2000;

}  // namespace

ThreadPool::ThreadPool(unsigned nthreads) {
    const unsigned n = std::max(1u, nthreads);
    workers_.reserve(n - 1);
    for (unsigned i = 1; i < n; ++i) {
        workers_.emplace_back([this, i] { worker_loop(i); });
    }
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    start_cv_.notify_all();
    for (auto& w : workers_) w.join();
}

unsigned ThreadPool::default_threads() {
    return std::max(1u, std::thread::hardware_concurrency());
}

void ThreadPool::run_range(unsigned index) {
    if (index >= job_parts_) return;
    const int64_t begin = job_n_ * index / job_parts_;
    const int64_t end = job_n_ * (index + 1) / job_parts_;
    if (begin >= end) return;
    try {
        (*job_)(begin, end);
    } catch (...) {
        std::lock_guard lock(mutex_);
        if (!job_error_) job_error_ = std::current_exception();
    }
}

void ThreadPool::parallel_for(int64_t n, const RangeFn& fn, int64_t min_chunk) {
    if (n <= 0) return;
    const int64_t chunk = std::max<int64_t>(1, min_chunk);
    const int64_t max_parts = (n + chunk - 1) / chunk;
    const unsigned parts = static_cast<unsigned>(std::min<int64_t>(size(), max_parts));
    if (parts <= 1) {
        fn(0, n);
        return;
    }

    {
        std::lock_guard lock(mutex_);
        job_ = &fn;
        job_n_ = n;
        job_parts_ = parts;
        job_error_ = nullptr;
        pending_.store(static_cast<unsigned>(workers_.size()), std::memory_order_relaxed);
        generation_.fetch_add(1, std::memory_order_release);
    }
    start_cv_.notify_all();

    run_range(0);

    for (int i = 0; i < kSpinIterations && pending_.load(std::memory_order_acquire) != 0; ++i) {
        std::this_thread::yield();
    }
    std::exception_ptr error;
    {
        std::unique_lock lock(mutex_);
        done_cv_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
        job_ = nullptr;
        error = job_error_;
        job_error_ = nullptr;
    }
    if (error) std::rethrow_exception(error);
}

void ThreadPool::worker_loop(unsigned index) {
    uint64_t seen = 0;
    for (;;) {
        for (int i = 0; i < kSpinIterations && generation_.load(std::memory_order_acquire) == seen;
             ++i) {
            std::this_thread::yield();
        }
        {
            std::unique_lock lock(mutex_);
            start_cv_.wait(
                lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
            if (stop_) return;
            seen = generation_.load(std::memory_order_acquire);
        }
        run_range(index);
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            // Taking the lock orders this notify after the caller's wait
            // started or its predicate check, so the wakeup cannot be lost.
            std::lock_guard lock(mutex_);
            done_cv_.notify_one();
        }
    }
}

}  // namespace dwell::cpu
