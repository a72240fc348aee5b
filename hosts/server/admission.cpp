#include "admission.hpp"

namespace dwell::server {

std::optional<Admission::Slot> Admission::enter() {
    std::unique_lock lock(mutex_);
    if (closed_) return std::nullopt;
    if (running_ >= parallel_) {
        if (waiting_ >= max_queue_) return std::nullopt;
        ++waiting_;
        cv_.wait(lock, [&] { return running_ < parallel_ || closed_; });
        --waiting_;
        if (closed_) return std::nullopt;
    }
    ++running_;
    return Slot(this);
}

void Admission::close() {
    {
        std::lock_guard lock(mutex_);
        closed_ = true;
    }
    cv_.notify_all();
}

bool Admission::closed() const {
    std::lock_guard lock(mutex_);
    return closed_;
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
