// A soak run: many text generations with random valid parameters, on
// several sessions driven from several threads, with random cancellations
// from another thread (a share of the generations each get a random moment
// in their first 10 ms to be cancelled at). Prints one JSON object: generations, how they ended,
// failures (anything but a cancellation, or a result that breaks its
// request), and the process's RSS at the start, at the end and at its peak.
// Exit status: 0 with no failure, 1 with failures, 2 for bad options, 77
// when the model file is missing (ctest's skip).
//
//   dwell-soak [-m stories260K.gguf] [--generations 1000] [--threads 3]
//              [--sessions-per-thread 2] [--cancel-percent 20] [--seed 1]
//
// tests/bench/soak.sh runs it (and reads LeakSanitizer's verdict in ASan builds).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/llm/text_generation.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/core/text/tokenizer.hpp"

namespace fs = std::filesystem;

namespace {

struct Options {
    fs::path model;
    int generations = 1000;
    int threads = 3;
    int sessions_per_thread = 2;
    int cancel_percent = 20;  // share of generations the canceller aims at
    uint64_t seed = 1;
};

// kB from a "Key:   123 kB" line of /proc/self/status.
long status_kb(const std::string& key) {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(key + ":", 0) == 0) return std::atol(line.c_str() + key.size() + 1);
    }
    return -1;
}

const std::vector<std::string> kPrompts = {
    "Once upon a time",
    "The little bird wanted to fly",
    "Lily went to the park",
    "Tom had a red ball. He",
    "The sun was hot and",
    "One day, a big dog",
    "She looked at the sky and said,",
    "The café was",
};
const std::vector<std::string> kStops = {"\n", ".", "!", " the", "\"", "was very", "Lily"};

// A session and whether a generation runs on it; the canceller may call
// cancel() on it only while it is busy, under the lock, once cancel_at has
// passed.
struct Slot {
    std::mutex mutex;
    std::unique_ptr<dwell::Session> session;
    bool busy = false;
    std::optional<std::chrono::steady_clock::time_point> cancel_at;
};

struct Totals {
    std::atomic<int> started{0}, completed{0}, cancelled{0}, failed{0};
    std::atomic<int> finished_stop{0}, finished_length{0}, sessions_made{0}, forks{0};
    std::atomic<int> cancels_aimed{0};  // generations given a moment to be cancelled
    std::atomic<long> tokens{0};
    std::mutex mutex;
    std::vector<std::string> failures;  // the first few, one line each

    void fail(const std::string& what) {
        ++failed;
        std::lock_guard lock(mutex);
        if (failures.size() < 10) failures.push_back(what);
    }
};

class Soak {
public:
    Soak(const Options& o, dwell::Runtime& runtime, std::shared_ptr<const dwell::Model> model)
        : o_(o), runtime_(runtime), model_(std::move(model)) {
        slots_.resize(static_cast<size_t>(o.threads * o.sessions_per_thread));
        for (auto& s : slots_) s = std::make_unique<Slot>();
    }

    void run() {
        std::vector<std::thread> workers;
        for (int t = 0; t < o_.threads; ++t) workers.emplace_back([this, t] { work(t); });
        std::thread canceller([this] { cancel_randomly(); });
        for (auto& w : workers) w.join();
        {
            std::lock_guard lock(done_mutex_);
            done_ = true;
        }
        done_changed_.notify_all();
        canceller.join();
        for (auto& s : slots_) s->session.reset();
    }

    Totals& totals() { return totals_; }
    std::vector<long> rss_samples_kb() {
        std::lock_guard lock(samples_mutex_);
        return rss_samples_kb_;
    }

private:
    std::unique_ptr<dwell::Session> new_session(std::mt19937_64& rng) {
        dwell::SessionOptions so;
        so.n_ctx = std::uniform_int_distribution<int>(96, 256)(rng);
        if (rng() % 2) {
            so.on_full = dwell::ContextFull::Shift;
            so.n_keep = std::uniform_int_distribution<int>(0, 8)(rng);
        }
        ++totals_.sessions_made;
        return std::make_unique<dwell::Session>(runtime_, model_, so);
    }

    dwell::TextRequest random_request(std::mt19937_64& rng, const dwell::Session& session) {
        dwell::TextRequest r;
        const std::string& text = kPrompts[rng() % kPrompts.size()];
        const bool fresh = session.n_past() == 0;
        r.prompt = model_->tokenizer().encode(fresh ? text : " " + text, fresh);
        r.max_tokens = std::uniform_int_distribution<int>(1, 48)(rng);
        r.sampling.temperature =
            rng() % 4 == 0 ? 0.0f : std::uniform_real_distribution<float>(0.1f, 1.3f)(rng);
        r.sampling.top_k = std::uniform_int_distribution<int>(0, 60)(rng);
        r.sampling.top_p = std::uniform_real_distribution<float>(0.5f, 1.0f)(rng);
        r.sampling.min_p = std::uniform_real_distribution<float>(0.0f, 0.2f)(rng);
        r.sampling.repeat_penalty = std::uniform_real_distribution<float>(1.0f, 1.3f)(rng);
        r.sampling.seed = rng();
        const int n_stop = std::uniform_int_distribution<int>(0, 2)(rng);
        for (int i = 0; i < n_stop; ++i) r.stop.push_back(kStops[rng() % kStops.size()]);
        return r;
    }

    // What a finished reply must satisfy whatever the sampling did.
    static std::string check(const dwell::TextRequest& r, const dwell::TextResult& res) {
        if (res.completion_tokens > r.max_tokens)
            return std::to_string(res.completion_tokens) + " tokens for max_tokens " +
                   std::to_string(r.max_tokens);
        for (const std::string& s : r.stop)
            if (res.text.find(s) != std::string::npos)
                return "the reply contains its stop string '" + s + "'";
        if (res.finish == dwell::FinishReason::Length && res.completion_tokens != r.max_tokens &&
            !res.stats.stopped_at_context)
            return "finished for length after " + std::to_string(res.completion_tokens) + " of " +
                   std::to_string(r.max_tokens) + " tokens";
        return {};
    }

    void work(int t) {
        std::mt19937_64 rng(o_.seed * 1000003u + static_cast<uint64_t>(t));
        const size_t first = static_cast<size_t>(t * o_.sessions_per_thread);
        while (totals_.started.fetch_add(1) < o_.generations) {
            Slot& slot = *slots_[first + rng() % static_cast<size_t>(o_.sessions_per_thread)];
            try {
                generate_once(rng, slot);
            } catch (const std::exception& e) {
                totals_.fail(std::string("setting up a generation: ") + e.what());
            }
            // RSS at every tenth of the run, to see that it levels off.
            const int done = ++finished_;
            if (done % std::max(1, o_.generations / 10) == 0) {
                std::lock_guard lock(samples_mutex_);
                rss_samples_kb_.push_back(status_kb("VmRSS"));
            }
        }
    }

    void generate_once(std::mt19937_64& rng, Slot& slot) {
        {
            std::lock_guard lock(slot.mutex);
            dwell::Session* s = slot.session.get();
            const int choice = static_cast<int>(rng() % 20);
            if (!s || choice == 0) {
                slot.session = new_session(rng);  // a fresh conversation
            } else if (choice == 1 && s->n_past() > 0) {
                slot.session = s->fork();  // the same conversation, sharing its pages
                ++totals_.forks;
            }
        }
        // slot.session is replaced only by this thread: reading it needs no lock.
        dwell::TextRequest request = random_request(rng, *slot.session);
        const int32_t room = slot.session->n_ctx() - slot.session->n_past();
        if (!slot.session->shifts_context() &&
            static_cast<int32_t>(request.prompt.size()) + 1 > room) {
            {
                std::lock_guard lock(slot.mutex);
                slot.session = new_session(rng);  // full: start over
            }
            request = random_request(rng, *slot.session);
        }
        {
            std::lock_guard lock(slot.mutex);
            slot.session->clear_cancel();
            slot.busy = true;
            slot.cancel_at.reset();
            if (static_cast<int>(rng() % 100) < o_.cancel_percent) {
                // Somewhere in the first 10 ms: before, during or (for short
                // replies) after the generation.
                slot.cancel_at =
                    std::chrono::steady_clock::now() + std::chrono::microseconds(rng() % 10000);
                ++totals_.cancels_aimed;
            }
        }
        try {
            const dwell::TextResult res =
                dwell::generate_text(*slot.session, request, [](std::string_view) { return true; });
            totals_.tokens += res.completion_tokens;
            ++(res.finish == dwell::FinishReason::Length ? totals_.finished_length
                                                         : totals_.finished_stop);
            if (const std::string bad = check(request, res); !bad.empty()) {
                totals_.fail(bad);
            } else {
                ++totals_.completed;
            }
        } catch (const dwell::Error& e) {
            if (e.status() == DWELL_ERR_CANCELLED) {
                ++totals_.cancelled;
            } else {
                totals_.fail(e.what());
            }
        } catch (const std::exception& e) {
            totals_.fail(e.what());
        }
        std::lock_guard lock(slot.mutex);
        slot.busy = false;
    }

    // Cancels each generation aimed at (cancel_percent of them, each at a
    // random moment) from this thread, if it still runs then.
    void cancel_randomly() {
        std::unique_lock lock(done_mutex_);
        while (!done_) {
            done_changed_.wait_for(lock, std::chrono::microseconds(250), [&] { return done_; });
            const auto now = std::chrono::steady_clock::now();
            for (auto& slot : slots_) {
                std::lock_guard slot_lock(slot->mutex);
                if (slot->busy && slot->cancel_at && now >= *slot->cancel_at) {
                    slot->session->cancel();
                    slot->cancel_at.reset();
                }
            }
        }
    }

    const Options& o_;
    dwell::Runtime& runtime_;
    std::shared_ptr<const dwell::Model> model_;
    std::vector<std::unique_ptr<Slot>> slots_;
    Totals totals_;
    std::atomic<int> finished_{0};
    std::mutex samples_mutex_;
    std::vector<long> rss_samples_kb_;
    std::mutex done_mutex_;
    std::condition_variable done_changed_;
    bool done_ = false;
};

int usage(const std::string& why) {
    std::cerr << "dwell-soak: " << why
              << "\nusage: dwell-soak [-m MODEL] [--generations N] [--threads N] "
                 "[--sessions-per-thread N] [--cancel-percent P] [--seed S]\n";
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (const char* dir = std::getenv("DWELL_MODELS_DIR"); dir && *dir)
        o.model = fs::path(dir) / "stories260K.gguf";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) return usage("option " + a + " needs a value");
        const std::string v = argv[++i];
        try {
            if (a == "-m" || a == "--model") {
                o.model = v;
            } else if (a == "--generations") {
                o.generations = std::stoi(v);
            } else if (a == "--threads") {
                o.threads = std::stoi(v);
            } else if (a == "--sessions-per-thread") {
                o.sessions_per_thread = std::stoi(v);
            } else if (a == "--cancel-percent") {
                o.cancel_percent = std::stoi(v);
            } else if (a == "--seed") {
                o.seed = std::stoull(v);
            } else {
                return usage("unknown option " + a);
            }
        } catch (const std::exception&) {
            return usage("option " + a + " needs a number, got '" + v + "'");
        }
    }
    if (o.generations < 1 || o.threads < 1 || o.sessions_per_thread < 1 || o.cancel_percent < 0 ||
        o.cancel_percent > 100)
        return usage(
            "generations, threads and sessions-per-thread must be >= 1, cancel-percent 0-100");
    if (o.model.empty() || !fs::exists(o.model)) {
        std::cerr << "dwell-soak: SKIP: model "
                  << (o.model.empty() ? "stories260K.gguf" : o.model.string())
                  << " not found (set DWELL_MODELS_DIR or pass -m)\n";
        return 77;
    }
    spdlog::set_level(spdlog::level::warn);  // not a placement line per session
    const long rss_start_kb = status_kb("VmRSS");
    const auto t0 = std::chrono::steady_clock::now();
    nlohmann::json out;
    int status = 0;
    try {
        dwell::RuntimeOptions ro;
        ro.prefix_cache_bytes = uint64_t{8} << 20;  // bounded, so RSS growth means a leak
        dwell::Runtime runtime(ro);
        std::shared_ptr<const dwell::Model> model = dwell::Model::load(runtime, o.model);
        const long rss_loaded_kb = status_kb("VmRSS");
        Soak soak(o, runtime, model);
        soak.run();
        Totals& t = soak.totals();
        out["generations"] = t.completed + t.cancelled + t.failed;
        out["completed"] = t.completed.load();
        out["cancellations"] = t.cancelled.load();
        out["cancellations_aimed"] = t.cancels_aimed.load();
        out["failures"] = t.failed.load();
        out["failure_messages"] = t.failures;
        out["finished_stop"] = t.finished_stop.load();
        out["finished_length"] = t.finished_length.load();
        out["tokens_generated"] = t.tokens.load();
        out["sessions_made"] = t.sessions_made.load();
        out["forks"] = t.forks.load();
        out["threads"] = o.threads;
        out["sessions"] = o.threads * o.sessions_per_thread;
        out["kv_pages_in_use_at_end"] = runtime.kv_pages().pages_in_use();
        out["rss_start_kb"] = rss_start_kb;
        out["rss_model_loaded_kb"] = rss_loaded_kb;
        out["rss_samples_kb"] = soak.rss_samples_kb();
        out["rss_end_kb"] = status_kb("VmRSS");  // runtime and model still loaded
        status = t.failed > 0 ? 1 : 0;
    } catch (const std::exception& e) {
        out["failures"] = 1;
        out["failure_messages"] = {e.what()};
        status = 1;
    }
    out["rss_after_teardown_kb"] = status_kb("VmRSS");
    out["rss_max_kb"] = status_kb("VmHWM");
    out["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out["model"] = o.model.string();
    out["seed"] = o.seed;
    std::cout << out.dump() << std::endl;
    return status;
}
