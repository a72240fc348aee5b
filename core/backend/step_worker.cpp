#include "dwell/core/backend/step_worker.hpp"

#include <spdlog/spdlog.h>

#include "dwell/core/backend/backend.hpp"
#include "dwell/core/backend/isolated_step.hpp"

namespace dwell {

struct StepWorker::Job {
    std::shared_ptr<IsolatedStep> step;
    bool started = false;
    bool done = false;
    dwell_status status = DWELL_OK;
    std::string error;
    std::chrono::steady_clock::time_point handed_over;
};

StepWorker::StepWorker(const Backend& backend) : backend_(backend), thread_([this] { loop(); }) {}

StepWorker::~StepWorker() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        if (abandoned_ && job_) {
            const auto late = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - job_->handed_over);
            spdlog::warn(
                "{}: waiting for a step abandoned {} ms ago to return before closing the backend",
                backend_.label(), late.count());
        }
    }
    changed_.notify_all();
    thread_.join();
}

StepWorker::Result StepWorker::run(std::shared_ptr<IsolatedStep> step,
                                   std::chrono::milliseconds deadline) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !job_ || abandoned_; });
    if (abandoned_) return {Outcome::Busy, DWELL_OK, {}};
    auto job = std::make_shared<Job>();
    job->step = std::move(step);
    job->handed_over = std::chrono::steady_clock::now();
    job_ = job;
    changed_.notify_all();
    if (!changed_.wait_until(lock, job->handed_over + deadline, [&] { return job->done; })) {
        abandoned_ = true;
        changed_.notify_all();  // callers waiting their turn answer Busy
        return {Outcome::TimedOut, DWELL_OK, {}};
    }
    return {Outcome::Done, job->status, job->error};
}

void StepWorker::loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
        changed_.wait(lock, [&] { return stopping_ || (job_ && !job_->started); });
        if (stopping_) return;
        const std::shared_ptr<Job> job = job_;
        job->started = true;
        lock.unlock();
        dwell_status status = DWELL_OK;
        std::string error;
        {
            std::lock_guard backend_lock(backend_.mutex());
            const IsolatedStep& step = *job->step;
            status = backend_.api().graph_compute(backend_.context(), &step.graph(),
                                                  step.ids().data(), step.ids().size());
            if (status != DWELL_OK) error = backend_.last_error();
        }
        lock.lock();
        job->status = status;
        job->error = std::move(error);
        job->done = true;
        job_.reset();
        abandoned_ = false;
        changed_.notify_all();
    }
}

}  // namespace dwell
