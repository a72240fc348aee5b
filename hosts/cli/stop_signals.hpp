// SIGINT/SIGTERM for the interactive commands (run, chat): turned into a
// clean stop instead of the default action, so that destructors run and
// leave the device as it was found (the thermal governor restores its
// devfreq caps). The signals are blocked in the constructing thread — and
// so in every thread started after it — and taken by one thread with
// sigtimedwait. A hook (set once there is something to cancel) decides what
// a signal does; a stop wakes the main thread out of a blocking read of
// stdin (EINTR from a no-op SIGUSR1 handler), and a second stop signal
// quits at once.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <thread>
#include <utility>

namespace dwell::cli {

class StopSignals {
public:
    // on_signal(sig) runs on the signal thread; true: the command stops.
    using Hook = std::function<bool(int sig)>;

    // Before any other thread is started.
    explicit StopSignals(std::initializer_list<int> signals) : main_(pthread_self()) {
        sigemptyset(&set_);
        for (const int s : signals) sigaddset(&set_, s);
        pthread_sigmask(SIG_BLOCK, &set_, nullptr);
        struct sigaction wake {};
        wake.sa_handler = [](int) {};  // only to make the blocked read() return EINTR
        sigemptyset(&wake.sa_mask);
        wake.sa_flags = 0;  // no SA_RESTART
        sigaction(SIGUSR1, &wake, &old_usr1_);
        thread_ = std::thread([this] { loop(); });
    }
    ~StopSignals() {
        done_ = true;
        thread_.join();
        sigaction(SIGUSR1, &old_usr1_, nullptr);
        // The signals stay blocked: the command is over and the process
        // exits with its code, not killed by a signal that came just now.
    }
    StopSignals(const StopSignals&) = delete;
    StopSignals& operator=(const StopSignals&) = delete;

    // Sets the hook until the returned object goes; declare it after what
    // the hook touches, so that it is removed first.
    class Hooked {
    public:
        explicit Hooked(StopSignals& s) : s_(s) {}
        ~Hooked() { s_.set_hook({}); }
        Hooked(const Hooked&) = delete;
        Hooked& operator=(const Hooked&) = delete;

    private:
        StopSignals& s_;
    };
    [[nodiscard]] Hooked hook(Hook h) {
        set_hook(std::move(h));
        return Hooked(*this);
    }

    // The signal that stopped the command, or 0.
    int stopped_by() const { return stopped_by_.load(); }
    int exit_code() const { return 128 + stopped_by(); }

    // Around a blocking read of stdin, which a stop interrupts.
    class Reading {
    public:
        explicit Reading(StopSignals& s) : s_(s) { s_.reading_ = true; }
        ~Reading() { s_.reading_ = false; }
        Reading(const Reading&) = delete;
        Reading& operator=(const Reading&) = delete;

    private:
        StopSignals& s_;
    };

private:
    void set_hook(Hook h) {
        std::lock_guard lock(mutex_);
        hook_ = std::move(h);
    }

    void loop() {
        // A tenth of a second: how soon a stop wakes a read that started
        // just after the previous wake-up, and how soon the destructor returns.
        const timespec tick{0, 100'000'000};
        while (!done_) {
            const int sig = sigtimedwait(&set_, nullptr, &tick);
            if (sig > 0) {
                if (stopped_by_ != 0) std::_Exit(128 + sig);  // asked twice: at once
                bool stop = true;
                {
                    std::lock_guard lock(mutex_);
                    if (hook_) stop = hook_(sig);
                }
                if (stop) stopped_by_ = sig;
            }
            if (stopped_by_ != 0 && reading_) pthread_kill(main_, SIGUSR1);
        }
    }

    sigset_t set_{};
    struct sigaction old_usr1_ {};
    const pthread_t main_;
    std::mutex mutex_;
    Hook hook_;
    std::atomic<int> stopped_by_{0};
    std::atomic<bool> reading_{false}, done_{false};
    std::thread thread_;
};

}  // namespace dwell::cli
