#include "admission.hpp"

namespace dwell::server {

std::optional<Admission::Slot> Admission::enter() {
    std::unique_lock lock(mutex_);
    if (running_ >= parallel_) {
        if (waiting_ >= max_queue_) return std::nullopt;
        ++waiting_;
        cv_.wait(lock, [&] { return running_ < parallel_; });
        --waiting_;
    }
    ++running_;
    return Slot(this);
}

void Admission::leave() {
    {
        std::lock_guard lock(mutex_);
        --running_;
    }
    cv_.notify_one();
}

int32_t Admission::running() const {
    std::lock_guard lock(mutex_);
    return running_;
}

int32_t Admission::waiting() const {
    std::lock_guard lock(mutex_);
    return waiting_;
}

}  // namespace dwell::server
