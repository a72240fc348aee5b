// The thread of a backend with a step deadline ([[backend]]
// step_timeout_ms). The scheduler hands it an IsolatedStep and waits at most
// the deadline. A step still running then is abandoned: the scheduler goes
// on (it reruns the nodes elsewhere) while this thread stays in the
// backend's call, under the backend's lock, holding the step's private
// buffers, until the call returns; meanwhile run() answers Busy at once.
// The backend's lock is held by this thread for the whole call, so nothing
// else touches the context while a late call runs in it: a session that was
// already asking the backend something (supports_op while placing a step)
// waits for the late call; once the backend is marked unhealthy, at the
// deadline, no one asks it anything more.
//
// Thread-safety: run() may be called from several threads (one step runs at
// a time; the others wait their turn). Ownership: the Backend owns its
// worker and outlives it; destroying the worker waits for a call in
// progress, however long it takes, because the plugin may still use its
// context and the host's services until it returns.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dwell/status.h"

namespace dwell {

class Backend;
class IsolatedStep;

class StepWorker {
public:
    explicit StepWorker(const Backend& backend);
    ~StepWorker();
    StepWorker(const StepWorker&) = delete;
    StepWorker& operator=(const StepWorker&) = delete;

    enum class Outcome {
        Done,      // the call returned in time: status (and error) tell how
        TimedOut,  // abandoned after the deadline
        Busy,      // an abandoned call is still running
    };
    struct Result {
        Outcome outcome = Outcome::Done;
        dwell_status status = DWELL_OK;
        std::string error;  // the backend's message when status is not OK
    };
    Result run(std::shared_ptr<IsolatedStep> step, std::chrono::milliseconds deadline);

private:
    struct Job;
    void loop();

    const Backend& backend_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::shared_ptr<Job> job_;  // waiting or running; null when idle
    bool abandoned_ = false;    // job_ ran past its deadline
    bool stopping_ = false;
    std::thread thread_;  // last: starts once the rest is ready
};

}  // namespace dwell
