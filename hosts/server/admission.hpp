// Admission control for the server: at most `parallel` requests generate at
// once, at most `max_queue` more wait; beyond that a request is refused
// at once (the server answers 503 with Retry-After).
//
// Thread-safety: all members may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>

namespace dwell::server {

class Admission {
public:
    Admission(int32_t parallel, int32_t max_queue) : parallel_(parallel), max_queue_(max_queue) {}

    // Held while a request generates; leaving frees its place.
    class Slot {
    public:
        explicit Slot(Admission* a) : a_(a) {}
        Slot(Slot&& o) noexcept : a_(o.a_) { o.a_ = nullptr; }
        Slot(const Slot&) = delete;
        Slot& operator=(const Slot&) = delete;
        Slot& operator=(Slot&&) = delete;
        ~Slot() {
            if (a_) a_->leave();
        }

    private:
        Admission* a_;
    };

    // Waits for a place; nothing when the queue is full or closed.
    std::optional<Slot> enter();
    // Refuses every request from now on and wakes those waiting.
    void close();
    bool closed() const;

    int32_t running() const;
    int32_t waiting() const;

private:
    void leave();

    const int32_t parallel_;
    const int32_t max_queue_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    int32_t running_ = 0;
    int32_t waiting_ = 0;
    bool closed_ = false;
};

}  // namespace dwell::server
