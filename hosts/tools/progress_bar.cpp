#include "dwell/tools/progress_bar.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <memory>

namespace dwell {

namespace {

std::string clock_text(double seconds) {
    const auto s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
    char buf[32];
    if (s >= 3600) {
        std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                      static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
    } else {
        std::snprintf(buf, sizeof buf, "%02lld:%02lld", static_cast<long long>(s / 60),
                      static_cast<long long>(s % 60));
    }
    return buf;
}

int terminal_width(std::FILE* out) {
    winsize ws{};
    if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    return 80;
}

}  // namespace

ProgressBar::ProgressBar(std::string label, int64_t total, std::FILE* out)
    : label_(std::move(label)),
      total_(std::max<int64_t>(total, 0)),
      out_(out),
      enabled_(out != nullptr && isatty(fileno(out)) != 0),
      start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() {
    finish();
}

std::string ProgressBar::render(const std::string& label, int64_t done, int64_t total,
                                double elapsed_seconds, double eta_seconds, int width) {
    done = std::clamp<int64_t>(done, 0, std::max<int64_t>(total, 0));
    const double fraction = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1;
    char counts[96];
    std::snprintf(counts, sizeof counts, " %*lld/%lld %3d%%",
                  static_cast<int>(std::to_string(total).size()), static_cast<long long>(done),
                  static_cast<long long>(total), static_cast<int>(fraction * 100));
    std::string tail = counts;
    tail += "  " + clock_text(elapsed_seconds) + " elapsed";
    if (done < total) tail += ", ETA " + (eta_seconds >= 0 ? clock_text(eta_seconds) : "--:--");

    // The bar takes what the label and the figures leave, within reason.
    const int fixed = static_cast<int>(label.size() + tail.size()) + 3;  // " [" and "]"
    const int bar = std::clamp(width - fixed, 0, 30);
    std::string line = label;
    if (bar >= 5) {
        const int filled = static_cast<int>(fraction * bar);
        line += " [" + std::string(static_cast<size_t>(filled), '#') +
                std::string(static_cast<size_t>(bar - filled), '-') + "]";
    }
    line += tail;
    if (width > 0 && line.size() > static_cast<size_t>(width)) {
        line.resize(static_cast<size_t>(width));
    }
    return line;
}

void ProgressBar::update(int64_t done) {
    if (!enabled_ || finished_) return;
    done_ = done;
    const auto now = std::chrono::steady_clock::now();
    // Redrawing on every step can cost more than the step on fast loops.
    if (done < total_ && drawn_ >= 0 && now - last_draw_ < std::chrono::milliseconds(100)) {
        return;
    }
    last_draw_ = now;
    draw(done);
}

void ProgressBar::finish() {
    if (!enabled_ || finished_) return;
    if (drawn_ != done_) draw(done_);
    std::fputc('\n', out_);
    std::fflush(out_);
    finished_ = true;
}

void ProgressBar::draw(int64_t done) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double eta = done > 0 && total_ > done ? elapsed / static_cast<double>(done) *
                                                       static_cast<double>(total_ - done)
                                                 : -1;
    // One column spare: writing the last column makes some terminals wrap.
    std::string line = render(label_, done, total_, elapsed, eta, terminal_width(out_) - 1);
    const size_t length = line.size();
    // Blank what a longer previous line left behind.
    if (length < last_length_) line.append(last_length_ - length, ' ');
    last_length_ = length;
    drawn_ = done;
    std::fputc('\r', out_);
    std::fwrite(line.data(), 1, line.size(), out_);
    std::fflush(out_);
}

LoadProgress terminal_load_progress() {
    struct Step {
        std::string what;
        std::unique_ptr<ProgressBar> bar;
    };
    auto step = std::make_shared<Step>();
    return [step](std::string_view what, int64_t done, int64_t total) {
        if (!step->bar || step->what != what) {
            step->what = std::string(what);
            step->bar = std::make_unique<ProgressBar>(step->what, total);
        }
        step->bar->update(done);
        if (done >= total) {
            step->bar->finish();
            step->bar.reset();
        }
    };
}

}  // namespace dwell
