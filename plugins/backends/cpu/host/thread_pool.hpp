// A small persistent thread pool for data-parallel kernels.
//
// The calling thread takes part in every parallel_for, so a pool of size 1
// has no worker threads at all. Work is split into contiguous ranges with
// fixed boundaries (independent of timing); threads take ranges from a
// shared counter, so a worker the OS has not scheduled yet never delays the
// caller: the threads that run do its share.
//
// Hand-off is a generation counter the workers spin on (with a CPU pause)
// for a short while before they block, so the back-to-back jobs of one
// graph cost no system call; an idle pool sleeps on a condition variable.
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

    // nthreads counts the calling thread; 0 is treated as 1. When cpus is
    // not empty, every worker may run on those CPUs only (the OS balances
    // them there, also when there are more threads than CPUs); the calling
    // thread is left alone (see CpuAffinityScope for it).
    explicit ThreadPool(unsigned nthreads, std::vector<int> cpus = {});
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

    // The CPUs workers are pinned to (empty: not pinned).
    const std::vector<int>& cpus() const { return cpus_; }

    // Calls fn(begin, end) over disjoint ranges covering [0, n). Ranges hold
    // at least min_chunk items (except when n is smaller), so tiny jobs run
    // inline without waking anyone. Rethrows the first exception a range
    // threw, after every range has finished.
    void parallel_for(int64_t n, const RangeFn& fn, int64_t min_chunk = 1);

    // Like parallel_for, but balanced at run time: [0, n) is cut into one
    // contiguous share per thread, each thread takes ranges of at most
    // `chunk` items from the front of its own share, then from the back of
    // the others' shares, so a thread the OS delays (or a slower core) does
    // less instead of holding everyone up, while each thread still walks
    // one contiguous stretch (memory prefetching carries across its
    // ranges). Which thread runs which range varies from call to call: use
    // it only where a range's result does not depend on who computes it.
    void parallel_for_dynamic(int64_t n, const RangeFn& fn, int64_t chunk);

    // The default size: one thread per hardware thread, at least one.
    static unsigned default_threads();

private:
    // One thread's share of a dynamic job: [front, back) packed in one word
    // so that the owner (front) and thieves (back) claim with one CAS.
    struct alignas(64) Share {
        std::atomic<uint64_t> bounds{0};
    };

    void worker_loop(unsigned home);
    void run_ranges(unsigned home);
    // Claims up to job_chunk_ items of share s, from its front when
    // from_front, else from its back; false when the share is empty.
    bool claim(unsigned s, bool from_front, int64_t& begin, int64_t& end);
    void run_job(const RangeFn& fn, int64_t n, int64_t ranges, int64_t chunk);
    // Waits (spinning, then blocking) until generation_ differs from seen.
    uint64_t wait_for_job(uint64_t seen);

    std::vector<std::thread> workers_;
    std::vector<int> cpus_;
    std::mutex mutex_;
    std::condition_variable start_cv_;
    // Bumped once per job; workers compare it with the last job they saw.
    std::atomic<uint64_t> generation_{0};
    // The generation of the job still open to newcomers, 0 when none.
    std::atomic<uint64_t> open_{0};
    // Workers inside a job's ranges right now.
    std::atomic<unsigned> active_{0};
    // Workers blocked on start_cv_ (the caller notifies only if any).
    std::atomic<unsigned> sleepers_{0};
    std::atomic<bool> stop_{false};

    // The current job; written before generation_ is bumped, read by
    // workers after they see the bump, stable until every worker is done.
    const RangeFn* job_ = nullptr;
    int64_t job_n_ = 0;
    int64_t job_ranges_ = 0;
    int64_t job_chunk_ = 0;             // > 0: shares (dynamic); 0: job_ranges_ equal parts
    std::atomic<int64_t> job_next_{0};  // the next range to take (equal parts)
    std::vector<Share> shares_;         // one per thread (dynamic jobs)
    std::mutex error_mutex_;
    std::exception_ptr job_error_;
};

// Restricts the calling thread to `cpus` for the scope's lifetime and then
// restores its previous mask; does nothing for an empty list or where the
// OS refuses. Lets a backend call run on the cores its pool is pinned to.
class CpuAffinityScope {
public:
    explicit CpuAffinityScope(const std::vector<int>& cpus);
    ~CpuAffinityScope();
    CpuAffinityScope(const CpuAffinityScope&) = delete;
    CpuAffinityScope& operator=(const CpuAffinityScope&) = delete;

private:
    bool active_ = false;
    std::vector<unsigned char> saved_;  // the old cpu_set_t bytes
};

}  // namespace dwell::cpu
