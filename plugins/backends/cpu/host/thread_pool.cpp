#include "host/thread_pool.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace dwell::cpu {

namespace {

// How long a worker keeps spinning for the next job before it blocks: long
// enough to bridge the gaps between kernels of a graph and between decoded
// tokens, short enough not to burn a core once generation stops.
// The first kPauseSpins polls only pause the core; after that each poll
// yields, so a machine with more runnable threads than cores (tests run in
// parallel, other apps) still schedules whoever the pool waits for.
constexpr auto kSpinFor = std::chrono::milliseconds(1);
constexpr unsigned kPauseSpins = 2048;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void pin_thread(pthread_t thread, const std::vector<int>& cpus) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus) {
        if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
    }
    // Best effort: a CPU taken offline or outside the cgroup leaves the
    // thread unpinned, which costs speed, not correctness.
    (void)pthread_setaffinity_np(thread, sizeof set, &set);
}

}  // namespace

ThreadPool::ThreadPool(unsigned nthreads, std::vector<int> cpus) : cpus_(std::move(cpus)) {
    const unsigned n = std::max(1u, nthreads);
    shares_ = std::vector<Share>(n);
    workers_.reserve(n - 1);
    for (unsigned i = 1; i < n; ++i) {
        workers_.emplace_back([this, i] { worker_loop(i); });
        if (!cpus_.empty()) pin_thread(workers_.back().native_handle(), cpus_);
    }
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mutex_);
        stop_.store(true);
        generation_.fetch_add(1);  // wakes spinning workers too
    }
    start_cv_.notify_all();
    for (auto& w : workers_) w.join();
}

unsigned ThreadPool::default_threads() {
    return std::max(1u, std::thread::hardware_concurrency());
}

namespace {

constexpr uint64_t pack_bounds(int64_t front, int64_t back) {
    return static_cast<uint64_t>(front) | (static_cast<uint64_t>(back) << 32);
}

}  // namespace

bool ThreadPool::claim(unsigned s, bool from_front, int64_t& begin, int64_t& end) {
    std::atomic<uint64_t>& bounds = shares_[s].bounds;
    uint64_t seen = bounds.load(std::memory_order_relaxed);
    for (;;) {
        const auto front = static_cast<int64_t>(seen & 0xffffffffu);
        const auto back = static_cast<int64_t>(seen >> 32);
        if (front >= back) return false;
        if (from_front) {
            begin = front;
            end = std::min(back, front + job_chunk_);
        } else {
            begin = std::max(front, back - job_chunk_);
            end = back;
        }
        const uint64_t next = from_front ? pack_bounds(end, back) : pack_bounds(front, begin);
        if (bounds.compare_exchange_weak(seen, next, std::memory_order_relaxed)) return true;
    }
}

void ThreadPool::run_ranges(unsigned home) {
    const auto run = [&](int64_t begin, int64_t end) {
        // Every range runs even after another one threw.
        try {
            (*job_)(begin, end);
        } catch (...) {
            std::lock_guard lock(error_mutex_);
            if (!job_error_) job_error_ = std::current_exception();
        }
    };
    if (job_chunk_ > 0) {
        const auto n = static_cast<unsigned>(shares_.size());
        int64_t begin = 0, end = 0;
        while (claim(home, true, begin, end)) run(begin, end);
        // Then the others' shares from their far end, nearest share first.
        for (unsigned i = 1; i < n; ++i) {
            const unsigned victim = (home + i) % n;
            while (claim(victim, false, begin, end)) run(begin, end);
        }
        return;
    }
    for (;;) {
        const int64_t i = job_next_.fetch_add(1, std::memory_order_relaxed);
        if (i >= job_ranges_) break;
        // Fixed boundaries whoever runs them: results that depend on the
        // split stay the same from run to run.
        const int64_t begin = job_n_ * i / job_ranges_;
        const int64_t end = job_n_ * (i + 1) / job_ranges_;
        if (begin < end) run(begin, end);
    }
}

void ThreadPool::parallel_for(int64_t n, const RangeFn& fn, int64_t min_chunk) {
    if (n <= 0) return;
    const int64_t chunk = std::max<int64_t>(1, min_chunk);
    const int64_t max_parts = (n + chunk - 1) / chunk;
    const int64_t parts = std::min<int64_t>(size(), max_parts);
    if (parts <= 1) {
        fn(0, n);
        return;
    }
    run_job(fn, n, parts, 0);
}

void ThreadPool::parallel_for_dynamic(int64_t n, const RangeFn& fn, int64_t chunk) {
    if (n <= 0) return;
    chunk = std::max<int64_t>(1, chunk);
    if (size() == 1 || n <= chunk) {
        fn(0, n);
        return;
    }
    // Shares hold 32-bit bounds; a larger job keeps equal static parts.
    if (n > INT32_MAX) {
        run_job(fn, n, size(), 0);
        return;
    }
    const auto threads = static_cast<int64_t>(size());
    for (int64_t s = 0; s < threads; ++s) {
        shares_[static_cast<size_t>(s)].bounds.store(
            pack_bounds(n * s / threads, n * (s + 1) / threads), std::memory_order_relaxed);
    }
    run_job(fn, n, threads, chunk);
}

// The caller publishes the job, takes ranges itself, then closes the job and
// waits only for workers that joined it. A worker the OS has not scheduled
// (more threads than free cores) is never waited for: its share is done by
// whoever is running.
void ThreadPool::run_job(const RangeFn& fn, int64_t n, int64_t ranges, int64_t chunk) {
    job_ = &fn;
    job_n_ = n;
    job_ranges_ = ranges;
    job_chunk_ = chunk;
    job_next_.store(0, std::memory_order_relaxed);
    job_error_ = nullptr;
    const uint64_t g = generation_.load(std::memory_order_relaxed) + 1;
    open_.store(g, std::memory_order_seq_cst);
    // seq_cst pairs with the sleepers_ increment in wait_for_job: either
    // this load sees the sleeper, or the sleeper sees the new generation.
    generation_.store(g, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) != 0) {
        std::lock_guard lock(mutex_);
        start_cv_.notify_all();
    }

    run_ranges(0);

    // Closing first, then reading active_ (both seq_cst, mirrored in
    // worker_loop): a worker either is counted here, or sees the job closed
    // and leaves it untouched.
    open_.store(0, std::memory_order_seq_cst);
    for (unsigned spins = 0; active_.load(std::memory_order_seq_cst) != 0; ++spins) {
        if (spins >= kPauseSpins) {
            std::this_thread::yield();
        } else {
            cpu_relax();
        }
    }
    job_ = nullptr;
    if (job_error_) {
        std::exception_ptr error = std::exchange(job_error_, nullptr);
        std::rethrow_exception(error);
    }
}

uint64_t ThreadPool::wait_for_job(uint64_t seen) {
    const auto deadline = std::chrono::steady_clock::now() + kSpinFor;
    for (unsigned spins = 1;; ++spins) {
        const uint64_t g = generation_.load(std::memory_order_acquire);
        if (g != seen) return g;
        if (spins < kPauseSpins) {
            cpu_relax();
        } else {
            std::this_thread::yield();
            if (spins % 64 == 0 && std::chrono::steady_clock::now() > deadline) break;
        }
    }
    std::unique_lock lock(mutex_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    start_cv_.wait(lock, [&] { return generation_.load(std::memory_order_seq_cst) != seen; });
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    return generation_.load(std::memory_order_acquire);
}

void ThreadPool::worker_loop(unsigned home) {
    uint64_t seen = 0;
    for (;;) {
        seen = wait_for_job(seen);
        if (stop_.load(std::memory_order_acquire)) return;
        active_.fetch_add(1, std::memory_order_seq_cst);
        if (open_.load(std::memory_order_seq_cst) == seen) run_ranges(home);
        active_.fetch_sub(1, std::memory_order_release);
    }
}

CpuAffinityScope::CpuAffinityScope(const std::vector<int>& cpus) {
    if (cpus.empty()) return;
    cpu_set_t old;
    if (pthread_getaffinity_np(pthread_self(), sizeof old, &old) != 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus) {
        if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
    }
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) return;
    saved_.resize(sizeof old);
    std::memcpy(saved_.data(), &old, sizeof old);
    active_ = true;
}

CpuAffinityScope::~CpuAffinityScope() {
    if (!active_) return;
    cpu_set_t old;
    std::memcpy(&old, saved_.data(), sizeof old);
    (void)pthread_setaffinity_np(pthread_self(), sizeof old, &old);
}

}  // namespace dwell::cpu
