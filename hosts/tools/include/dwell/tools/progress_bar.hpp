// A one-line terminal progress bar for long operations (perplexity, convert,
// bench):
//
//   perplexity [##########----------]  13/26  50%  00:05 elapsed, ETA 00:05
//
// It draws only when its stream (stderr by default) is a terminal, and
// redraws in place with '\r', at most ten times a second except for the
// final update; otherwise it prints nothing, so logs and pipes stay clean.
// finish() (or the destructor) ends the line.
//
// No C++ progress-bar library is packaged in Debian 12, hence this one.
//
// Thread-safety: thread-compatible; one owner updates it.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "dwell/core/model/load_progress.hpp"

namespace dwell {

class ProgressBar {
public:
    // Draws on `out` only if it is a terminal.
    ProgressBar(std::string label, int64_t total, std::FILE* out = stderr);
    ~ProgressBar();
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;

    void update(int64_t done);
    // Draws the last state and ends the line; later updates are ignored.
    void finish();
    bool enabled() const { return enabled_; }

    // The line for a state, `width` columns at most (no '\r', no newline);
    // eta_seconds < 0 means unknown. Exposed for tests.
    static std::string render(const std::string& label, int64_t done, int64_t total,
                              double elapsed_seconds, double eta_seconds, int width);

private:
    void draw(int64_t done);

    std::string label_;
    int64_t total_;
    std::FILE* out_;
    bool enabled_;
    bool finished_ = false;
    int64_t done_ = 0;
    int64_t drawn_ = -1;  // the state on screen; -1 before the first draw
    std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point last_draw_;
    size_t last_length_ = 0;
};

// A LoadProgress (Model::load) that draws one ProgressBar on stderr per step:
// a step starts with its first call and ends when done reaches total.
LoadProgress terminal_load_progress();

}  // namespace dwell
