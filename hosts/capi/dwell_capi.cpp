// The C API (include/dwell.h) over the core's C++ classes. Exceptions stop
// here: each call turns them into a status and a one-line message.
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <utility>

#include "dwell.h"
#include "dwell/core/base/error.hpp"
#include "dwell/core/config/device_facts.hpp"
#include "dwell/core/llm/generate.hpp"
#include "dwell/core/llm/sampler.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/core/thermal/thermal_governor.hpp"

struct dwell_runtime {
    std::shared_ptr<dwell::Runtime> runtime;
};

struct dwell_llm {
    std::shared_ptr<dwell::Runtime> runtime;  // outlives the model
    std::shared_ptr<dwell::Model> model;
};

struct dwell_session {
    std::shared_ptr<dwell::Runtime> runtime;
    std::shared_ptr<dwell::Model> model;
    dwell::SessionOptions options;
    std::unique_ptr<dwell::Session> session;  // declared last: goes first
    // The last token of a reply is not in the KV cache yet (generate()'s
    // contract): the next call feeds it before the new text.
    int32_t pending = -1;
};

namespace {

// ---- logging ---------------------------------------------------------------

int32_t api_level(spdlog::level::level_enum level) {
    switch (level) {
        case spdlog::level::trace:
        case spdlog::level::debug:
            return DWELL_CAPI_LOG_DEBUG;
        case spdlog::level::info:
            return DWELL_CAPI_LOG_INFO;
        case spdlog::level::warn:
            return DWELL_CAPI_LOG_WARNING;
        default:
            return DWELL_CAPI_LOG_ERROR;
    }
}

spdlog::level::level_enum spdlog_level(int32_t level) {
    switch (level) {
        case DWELL_CAPI_LOG_OFF:
            return spdlog::level::off;
        case DWELL_CAPI_LOG_ERROR:
            return spdlog::level::err;
        case DWELL_CAPI_LOG_WARNING:
            return spdlog::level::warn;
        case DWELL_CAPI_LOG_INFO:
            return spdlog::level::info;
        default:
            return spdlog::level::debug;
    }
}

bool is_log_level(int32_t level) {
    return level >= DWELL_CAPI_LOG_OFF && level <= DWELL_CAPI_LOG_DEBUG;
}

// Every line the library logs (the core's, and the plugins' through the
// host services) ends here: on stderr, never stdout (spdlog's own default),
// which belongs to the application, or in the application's callback.
// base_sink's mutex serialises the lines, and set_callback() takes it too,
// so a replaced callback is never running once set_callback() returns.
class ApiLogSink final : public spdlog::sinks::base_sink<std::mutex> {
public:
    void set_callback(dwell_log_callback callback, void* user) {
        std::lock_guard lock(mutex_);
        callback_ = callback;
        user_ = user;
    }

protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        // One call (or stderr line) per line of a multi-line report.
        std::string_view text(msg.payload.data(), msg.payload.size());
        while (!text.empty()) {
            const size_t end = text.find('\n');
            std::string_view line = text.substr(0, end);
            text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            if (line.empty()) continue;
            // Nothing may escape into the code that logged (a worker thread,
            // a destructor): a line that cannot be delivered is dropped.
            try {
                emit(msg.level, line);
            } catch (...) {
            }
        }
    }
    void flush_() override { std::fflush(stderr); }

private:
    void emit(spdlog::level::level_enum level, std::string_view text) {
        if (callback_) {
            const std::string line(text);
            callback_(user_, api_level(level), line.c_str(), line.size());
            return;
        }
        const auto name = spdlog::level::to_string_view(level);
        std::string line = "dwell: ";
        line.append(name.data(), name.size()).append(": ").append(text).append("\n");
        std::fwrite(line.data(), 1, line.size(), stderr);
    }

    dwell_log_callback callback_ = nullptr;
    void* user_ = nullptr;
};

struct ApiLog {
    std::shared_ptr<ApiLogSink> sink;
    std::shared_ptr<spdlog::logger> logger;
};

// spdlog's default logger is one per process (libspdlog is shared by
// libdwell, this library and the plugins), so this is too: made the first
// time a call needs it, and the default logger from then on.
ApiLog& api_log() {
    static ApiLog log = [] {
        ApiLog l;
        l.sink = std::make_shared<ApiLogSink>();
        l.logger = std::make_shared<spdlog::logger>("dwell-capi", l.sink);
        l.logger->set_level(spdlog::level::warn);
        spdlog::set_default_logger(l.logger);
        return l;
    }();
    return log;
}

// ---- messages --------------------------------------------------------------

// The core words its advice for the CLI, whose users set flags; a C API
// caller sets fields and has no flags, so the advice is reworded in the
// terms of dwell.h. Longer phrases first.
std::string api_terms(std::string message) {
    static constexpr std::array<std::pair<std::string_view, std::string_view>, 11> kTerms = {{
        {"--ctx-full shift", "shift_context = 1"},
        {"(drop --ctx to restore it)", "(create the session with n_ctx 0 to load it)"},
        {" or --weight-budget", ""},
        {"--weight-budget / ", ""},
        {"--weight-budget", "[memory] weight_budget_mb"},
        {"--memory-budget", "memory_budget_mb"},
        {"--kv-type q8_0", "kv_type DWELL_Q8_0"},
        {"--kv-type", "kv_type"},
        {"--ctx", "n_ctx"},
        {"--manifest", "manifest_path"},
        {"--threads", "threads"},
    }};
    for (const auto& [flag, field] : kTerms) {
        for (size_t at = message.find(flag); at != std::string::npos;
             at = message.find(flag, at + field.size()))
            message.replace(at, flag.size(), field);
    }
    return message;
}

std::string context_full_message(const dwell::ContextFullError& e) {
    const std::string n_ctx = std::to_string(e.n_ctx());
    if (e.n_tokens() > e.n_ctx()) {
        return "context full: the " + std::to_string(e.n_tokens()) +
               " tokens of the text are more than the session's n_ctx of " + n_ctx +
               " (pass less text at once, or create the session with a larger n_ctx)";
    }
    return "context full: " + std::to_string(e.n_past()) + " tokens in the context and " +
           std::to_string(e.n_tokens()) + " more exceed the session's n_ctx of " + n_ctx +
           " (create the session with a larger n_ctx or with shift_context = 1, or start over "
           "with dwell_session_reset)";
}

void copy_string(char* dst, size_t capacity, const std::string& src) {
    const size_t n = std::min(capacity - 1, src.size());
    std::memcpy(dst, src.data(), n);
    dst[n] = 0;
}

dwell_status fail(dwell_error* error, dwell_status code, const std::string& message) {
    if (error) {
        error->code = code;
        copy_string(error->message, sizeof error->message, message);
    }
    return code;
}

dwell_status succeed(dwell_error* error) {
    if (error) {
        error->code = DWELL_OK;
        error->message[0] = 0;
    }
    return DWELL_OK;
}

// Runs `body`, mapping every exception to a status and message.
template <class Body>
dwell_status guarded(dwell_error* error, Body&& body) {
    try {
        const dwell_status s = body();
        return s == DWELL_OK ? succeed(error) : s;
    } catch (const dwell::ContextFullError& e) {
        return fail(error, DWELL_ERR_CONTEXT_FULL, context_full_message(e));
    } catch (const dwell::Error& e) {
        return fail(error, e.status(), api_terms(e.what()));
    } catch (const std::bad_alloc&) {
        return fail(error, DWELL_ERR_OUT_OF_MEMORY, "out of memory");
    } catch (const std::exception& e) {
        return fail(error, DWELL_ERR_INTERNAL, api_terms(e.what()));
    } catch (...) {
        // From a C++ application's token callback: it must not unwind
        // through the C frames of the caller.
        return fail(error, DWELL_ERR_INTERNAL, "an exception of unknown type (from a callback?)");
    }
}

[[noreturn]] void bad_option(const char* call, const char* field, const std::string& value,
                             const char* rule) {
    throw dwell::Error(DWELL_ERR_INVALID_ARGUMENT, std::string(call) + ": options." + field +
                                                       " is " + value + " (" + rule + ")");
}

std::string number(float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
    return buf;
}

constexpr int32_t kMaxThreads = 1024;
constexpr int64_t kMaxBudgetMb = int64_t{1} << 30;  // 1 PiB, as the manifest's [memory] budget_mb
constexpr int32_t kMaxContext = int32_t{1} << 24;   // dwell::kSessionMaxContext

bool is_kv_type(int32_t t) {
    return t == DWELL_F16 || t == DWELL_Q8_0 || t == DWELL_FP8_E4M3 || t == DWELL_F32;
}

// struct_size of a caller's struct that is too small for the fields of
// this version: refused rather than read past its end.
template <class T>
bool too_small(const T* s, size_t needed) {
    return s && s->struct_size < needed;
}

}  // namespace

extern "C" {

uint32_t dwell_capi_version(void) {
    return (uint32_t{DWELL_CAPI_VERSION_MAJOR} << 16) | DWELL_CAPI_VERSION_MINOR;
}

const char* dwell_capi_status_name(dwell_status status) {
    return status == DWELL_ERR_CONTEXT_FULL ? "context full" : dwell_status_name(status);
}

void dwell_set_log_callback(dwell_log_callback callback, void* user) {
    try {
        api_log().sink->set_callback(callback, user);
    } catch (...) {
        // Only the first call can fail (out of memory making the sink);
        // the library then logs through spdlog's own default.
    }
}

dwell_status dwell_set_log_level(int32_t level, dwell_error* error) {
    if (!is_log_level(level))
        return fail(error, DWELL_ERR_INVALID_ARGUMENT,
                    "dwell_set_log_level: level " + std::to_string(level) +
                        " is not a level (use DWELL_CAPI_LOG_OFF -2 .. DWELL_CAPI_LOG_DEBUG 2)");
    return guarded(error, [&] {
        api_log().logger->set_level(spdlog_level(level));
        return DWELL_OK;
    });
}

void dwell_runtime_options_init(dwell_runtime_options* o) {
    if (!o) return;
    *o = dwell_runtime_options{};
    o->struct_size = sizeof *o;
    o->memory_budget_mb = -1;
    o->log_level = DWELL_CAPI_LOG_UNCHANGED;
}

dwell_status dwell_runtime_open(const dwell_runtime_options* options, dwell_runtime** out,
                                dwell_error* error) {
    if (!out) return fail(error, DWELL_ERR_INVALID_ARGUMENT, "dwell_runtime_open: out is NULL");
    *out = nullptr;
    if (too_small(options, sizeof(dwell_runtime_options)))
        return fail(error, DWELL_ERR_INVALID_ARGUMENT,
                    "dwell_runtime_open: options.struct_size is too small (call "
                    "dwell_runtime_options_init first)");
    dwell_runtime_options given;
    dwell_runtime_options_init(&given);
    if (options) given = *options;
    return guarded(error, [&] {
        constexpr const char* call = "dwell_runtime_open";
        // Every field is checked before anything is applied or loaded.
        if (given.threads < 0 || given.threads > kMaxThreads)
            bad_option(call, "threads", std::to_string(given.threads),
                       "use 1 .. 1024, or 0 for the manifest's [cpu] threads");
        if (given.memory_budget_mb < -1 || given.memory_budget_mb > kMaxBudgetMb)
            bad_option(call, "memory_budget_mb", std::to_string(given.memory_budget_mb),
                       "use 0 .. 1073741824 MiB (0: no budget), or -1 for the manifest's "
                       "[memory] budget_mb");
        if (given.log_level != DWELL_CAPI_LOG_UNCHANGED && !is_log_level(given.log_level))
            bad_option(call, "log_level", std::to_string(given.log_level),
                       "use DWELL_CAPI_LOG_OFF -2 .. DWELL_CAPI_LOG_DEBUG 2, or "
                       "DWELL_CAPI_LOG_UNCHANGED");
        ApiLog& log = api_log();  // before the runtime logs its first line
        if (given.log_level != DWELL_CAPI_LOG_UNCHANGED)
            log.logger->set_level(spdlog_level(given.log_level));
        dwell::RuntimeOptions o;
        if (given.manifest_path && *given.manifest_path) o.manifest = given.manifest_path;
        o.threads = given.threads;
        if (given.memory_budget_mb >= 0)
            o.memory_budget_bytes = static_cast<uint64_t>(given.memory_budget_mb) << 20;
        auto rt = std::make_unique<dwell_runtime>();
        rt->runtime = std::make_shared<dwell::Runtime>(o);
        *out = rt.release();
        return DWELL_OK;
    });
}

void dwell_runtime_close(dwell_runtime* runtime) {
    std::unique_ptr<dwell_runtime> owned(runtime);
}

dwell_status dwell_runtime_stats_get(const dwell_runtime* runtime, dwell_runtime_stats* stats,
                                     dwell_error* error) {
    if (!runtime || !stats)
        return fail(error, DWELL_ERR_INVALID_ARGUMENT, "dwell_runtime_stats_get: NULL argument");
    if (too_small(stats, offsetof(dwell_runtime_stats, thermal_active)))
        return fail(error, DWELL_ERR_INVALID_ARGUMENT,
                    "dwell_runtime_stats_get: stats.struct_size is too small");
    return guarded(error, [&] {
        dwell::Runtime& rt = *runtime->runtime;
        const dwell::PoolStats pool = rt.pool().stats();
        stats->n_backends = static_cast<uint32_t>(rt.backends().size());
        stats->memory_used_bytes = pool.used_bytes;
        stats->memory_budget_bytes = pool.budget_bytes;
        stats->kv_pages_in_use = static_cast<uint64_t>(rt.kv_pages().pages_in_use());
        stats->kv_page_bytes = rt.kv_pages().page_bytes();
        copy_string(stats->manifest, sizeof stats->manifest, rt.manifest().source.string());
        copy_string(stats->device, sizeof stats->device,
                    rt.device_facts().arch.empty() ? "" : rt.device_facts().summary());
        if (stats->struct_size >= sizeof(dwell_runtime_stats)) {
            const auto t = rt.thermal_state();
            stats->thermal_active = t.has_value();
            stats->temperature_valid = t && t->reading.temp_c.has_value();
            stats->temperature_c = t && t->reading.temp_c ? *t->reading.temp_c : 0.0;
            stats->throttle = t ? t->actions.throttle : 0.0;
            stats->duty = t ? t->actions.duty : 1.0;
            stats->thread_share = t ? t->actions.thread_share : 1.0;
            stats->frequency_capped = t && t->actions.freq_capped;
            stats->accelerators_paused = t && t->actions.offloaded;
        }
        return DWELL_OK;
    });
}

dwell_status dwell_backend_stats_get(const dwell_runtime* runtime, uint32_t index,
                                     dwell_backend_stats* stats, dwell_error* error) {
    if (!runtime || !stats)
        return fail(error, DWELL_ERR_INVALID_ARGUMENT, "dwell_backend_stats_get: NULL argument");
    if (too_small(stats, sizeof(dwell_backend_stats)))
        return fail(error, DWELL_ERR_INVALID_ARGUMENT,
                    "dwell_backend_stats_get: stats.struct_size is too small");
    return guarded(error, [&] {
        const auto& backends = runtime->runtime->backends();
        if (index >= backends.size()) {
            throw dwell::Error(DWELL_ERR_INVALID_ARGUMENT,
                               "dwell_backend_stats_get: backend " + std::to_string(index) +
                                   " of " + std::to_string(backends.size()) +
                                   " (use 0 .. n_backends - 1 of dwell_runtime_stats)");
        }
        const dwell::Backend& b = *backends[index];
        const dwell::BackendHealthReport r = b.health().report();
        copy_string(stats->label, sizeof stats->label, b.label());
        stats->healthy = r.healthy;
        stats->steps_run = r.steps_run;
        stats->failed_steps = r.failed_steps;
        stats->error_statuses = r.error_statuses;
        stats->timeouts = r.timeouts;
        stats->wrong_sizes = r.wrong_sizes;
        copy_string(stats->unhealthy_reason, sizeof stats->unhealthy_reason, r.unhealthy_reason);
        copy_string(stats->last_failure, sizeof stats->last_failure, r.last_failure);
        return DWELL_OK;
    });
}

dwell_status dwell_llm_load(dwell_runtime* runtime, const char* path, dwell_llm** out,
                            dwell_error* error) {
    if (!runtime || !path || !out)
        return fail(error, DWELL_ERR_INVALID_ARGUMENT, "dwell_llm_load: NULL argument");
    *out = nullptr;
    return guarded(error, [&] {
        auto m = std::make_unique<dwell_llm>();
        m->runtime = runtime->runtime;
        m->model = dwell::Model::load(*m->runtime, path);
        *out = m.release();
        return DWELL_OK;
    });
}

void dwell_llm_free(dwell_llm* model) {
    std::unique_ptr<dwell_llm> owned(model);
}

dwell_status dwell_llm_info_get(const dwell_llm* model, dwell_llm_info* info, dwell_error* error) {
    if (!model || !info)
        return fail(error, DWELL_ERR_INVALID_ARGUMENT, "dwell_llm_info_get: NULL argument");
    if (too_small(info, sizeof(dwell_llm_info)))
        return fail(error, DWELL_ERR_INVALID_ARGUMENT,
                    "dwell_llm_info_get: info.struct_size is too small");
    const dwell::Model& m = *model->model;
    info->n_vocab = static_cast<int32_t>(m.info().n_vocab);
    info->n_ctx_train = static_cast<int32_t>(m.info().n_ctx_train);
    info->n_layer = m.info().n_layer;
    info->kv_width = m.info().kv_width;
    info->weight_bytes = m.weight_bytes();
    copy_string(info->architecture, sizeof info->architecture, m.architecture());
    return succeed(error);
}

dwell_status dwell_tokenize(const dwell_llm* model, const char* text, int add_bos, int32_t* tokens,
                            size_t capacity, size_t* n_tokens, dwell_error* error) {
    if (!model || !text || !n_tokens || (capacity > 0 && !tokens))
        return fail(error, DWELL_ERR_INVALID_ARGUMENT, "dwell_tokenize: NULL argument");
    return guarded(error, [&] {
        const auto ids = model->model->tokenizer().encode(text, add_bos != 0);
        *n_tokens = ids.size();
        std::copy_n(ids.begin(), std::min(capacity, ids.size()), tokens);
        return DWELL_OK;
    });
}

void dwell_session_options_init(dwell_session_options* o) {
    if (!o) return;
    *o = dwell_session_options{};
    o->struct_size = sizeof *o;
    o->kv_type = -1;
}

dwell_status dwell_session_create(dwell_llm* model, const dwell_session_options* options,
                                  dwell_session** out, dwell_error* error) {
    if (!model || !out)
        return fail(error, DWELL_ERR_INVALID_ARGUMENT, "dwell_session_create: NULL argument");
    *out = nullptr;
    if (too_small(options, sizeof(dwell_session_options)))
        return fail(error, DWELL_ERR_INVALID_ARGUMENT,
                    "dwell_session_create: options.struct_size is too small (call "
                    "dwell_session_options_init first)");
    return guarded(error, [&] {
        auto s = std::make_unique<dwell_session>();
        s->runtime = model->runtime;
        s->model = model->model;
        dwell_session_options given;
        dwell_session_options_init(&given);
        if (options) given = *options;
        constexpr const char* call = "dwell_session_create";
        if (given.n_ctx < 0 || given.n_ctx > kMaxContext)
            bad_option(call, "n_ctx", std::to_string(given.n_ctx),
                       "use 1 .. 16777216 tokens, or 0 for the model's training context");
        if (given.kv_type != -1 && !is_kv_type(given.kv_type))
            bad_option(call, "kv_type", std::to_string(given.kv_type),
                       "use DWELL_F16, DWELL_Q8_0, DWELL_FP8_E4M3 or DWELL_F32, or -1 for the "
                       "manifest's [kv] dtype");
        s->options.n_ctx = given.n_ctx;
        if (given.kv_type != -1) s->options.kv_dtype = static_cast<dwell_dtype>(given.kv_type);
        if (given.shift_context) s->options.on_full = dwell::ContextFull::Shift;
        s->session = std::make_unique<dwell::Session>(*s->runtime, s->model, s->options);
        *out = s.release();
        return DWELL_OK;
    });
}

void dwell_session_free(dwell_session* session) {
    std::unique_ptr<dwell_session> owned(session);
}

dwell_status dwell_session_reset(dwell_session* session, dwell_error* error) {
    if (!session)
        return fail(error, DWELL_ERR_INVALID_ARGUMENT, "dwell_session_reset: NULL session");
    return guarded(error, [&] {
        // The new session first: if it cannot be made, the old one stays.
        auto fresh =
            std::make_unique<dwell::Session>(*session->runtime, session->model, session->options);
        session->session = std::move(fresh);
        session->pending = -1;
        return DWELL_OK;
    });
}

void dwell_generate_options_init(dwell_generate_options* o) {
    if (!o) return;
    *o = dwell_generate_options{};
    o->struct_size = sizeof *o;
    o->max_tokens = 128;
    o->temperature = 0.0f;
    o->top_k = 40;
    o->top_p = 0.95f;
    o->min_p = 0.05f;
    o->repeat_penalty = 1.0f;
    o->add_bos = 1;
}

dwell_status dwell_session_generate(dwell_session* session, const char* text,
                                    const dwell_generate_options* options,
                                    dwell_token_callback callback, void* user,
                                    dwell_generation_stats* stats, dwell_error* error) {
    if (!session || !text)
        return fail(error, DWELL_ERR_INVALID_ARGUMENT, "dwell_session_generate: NULL argument");
    if (too_small(options, sizeof(dwell_generate_options)) ||
        too_small(stats, sizeof(dwell_generation_stats)))
        return fail(error, DWELL_ERR_INVALID_ARGUMENT,
                    "dwell_session_generate: a struct_size is too small (call the *_init "
                    "functions first)");
    dwell_generate_options o;
    dwell_generate_options_init(&o);
    if (options) o = *options;
    return guarded(error, [&] {
        dwell::Session& s = *session->session;
        const dwell::Tokenizer& tok = s.model().tokenizer();
        std::vector<int32_t> prompt;
        if (session->pending >= 0) prompt.push_back(session->pending);
        const auto ids =
            tok.encode(text, o.add_bos != 0 && s.n_past() == 0 && session->pending < 0);
        prompt.insert(prompt.end(), ids.begin(), ids.end());
        if (prompt.empty() && s.n_past() == 0)
            throw dwell::Error(DWELL_ERR_INVALID_ARGUMENT,
                               "dwell_session_generate: the text has no tokens and the session is "
                               "empty (pass some text, or add_bos = 1)");
        constexpr const char* call = "dwell_session_generate";
        for (const auto& [field, v] :
             {std::pair{"temperature", o.temperature}, std::pair{"top_p", o.top_p},
              std::pair{"min_p", o.min_p}, std::pair{"repeat_penalty", o.repeat_penalty}}) {
            if (!std::isfinite(v)) bad_option(call, field, number(v), "use a finite number");
        }
        if (!(o.top_p > 0.0f))
            bad_option(call, "top_p", number(o.top_p), "use a number > 0; 1 or more: off");
        if (!(o.min_p < 1.0f))
            bad_option(call, "min_p", number(o.min_p), "use a number < 1; 0 or less: off");
        if (!(o.repeat_penalty > 0.0f))
            bad_option(call, "repeat_penalty", number(o.repeat_penalty),
                       "use a number > 0; 1: off");
        // The header's "off" values, in the sampler's ranges.
        dwell::SamplerParams sp;
        sp.temperature = std::max(o.temperature, 0.0f);
        sp.top_k = o.top_k;
        sp.top_p = std::min(o.top_p, 1.0f);
        sp.min_p = std::max(o.min_p, 0.0f);
        sp.repeat_penalty = o.repeat_penalty;
        sp.seed = o.seed;
        dwell::Sampler sampler(sp);
        dwell::StreamDecoder decoder(tok, false);  // the reply only: keep its leading space
        const int32_t n_predict = o.max_tokens > 0 ? o.max_tokens : s.n_ctx();
        int32_t last = -1;
        bool stopped_by_callback = false;
        dwell::GenerationStats g;
        try {
            g = dwell::generate(s, prompt, n_predict, sampler, [&](int32_t token) {
                last = token;
                const std::string piece = decoder.push(token);
                if (!callback || callback(user, token, piece.c_str(), piece.size()) == 0)
                    return true;
                stopped_by_callback = true;
                return false;
            });
        } catch (const dwell::Error& e) {
            s.clear_cancel();
            // The prompt went in (or not) as a whole. A reply cut short keeps
            // what was generated, whose last token is still to be fed; a
            // prompt that failed leaves the earlier pending token pending.
            if (last >= 0) session->pending = last;
            throw;
        }
        session->pending = g.stopped_at_eos ? -1 : last;
        if (callback && !stopped_by_callback) {
            const std::string tail = decoder.finish();
            if (!tail.empty()) callback(user, -1, tail.c_str(), tail.size());
        }
        if (stats) {
            stats->n_prompt = g.n_prompt;
            stats->n_generated = g.n_generated;
            stats->prompt_tokens_per_second = g.prompt_tokens_per_second();
            stats->generation_tokens_per_second = g.generation_tokens_per_second();
            stats->stopped_at_eos = g.stopped_at_eos;
            stats->stopped_at_context = g.stopped_at_context;
        }
        return DWELL_OK;
    });
}

void dwell_session_cancel(dwell_session* session) {
    if (session && session->session) session->session->cancel();
}

dwell_status dwell_session_stats_get(const dwell_session* session, dwell_session_stats* stats,
                                     dwell_error* error) {
    if (!session || !stats)
        return fail(error, DWELL_ERR_INVALID_ARGUMENT, "dwell_session_stats_get: NULL argument");
    if (too_small(stats, sizeof(dwell_session_stats)))
        return fail(error, DWELL_ERR_INVALID_ARGUMENT,
                    "dwell_session_stats_get: stats.struct_size is too small");
    const dwell::Session& s = *session->session;
    stats->n_past = s.n_past();
    stats->n_ctx = s.n_ctx();
    stats->n_shifted = s.n_shifted();
    stats->kv_bytes = s.kv_cache().bytes();
    return succeed(error);
}

dwell_status dwell_session_save(dwell_session* session, const char* path, dwell_error* error) {
    if (!session || !path)
        return fail(error, DWELL_ERR_INVALID_ARGUMENT, "dwell_session_save: NULL argument");
    return guarded(error, [&] {
        // The pending token goes into the file undecoded: a full context
        // has no room for it, and saving must not change the session.
        dwell::SessionExtras extras;
        extras.pending_token = session->pending;
        session->session->save(path, extras);
        return DWELL_OK;
    });
}

dwell_status dwell_session_load(dwell_session* session, const char* path, dwell_error* error) {
    if (!session || !path)
        return fail(error, DWELL_ERR_INVALID_ARGUMENT, "dwell_session_load: NULL argument");
    return guarded(error, [&] {
        dwell::SessionExtras extras;
        auto restored = dwell::Session::restore(*session->runtime, session->model, path,
                                                session->options, &extras);
        session->session = std::move(restored);
        session->pending = extras.pending_token;
        return DWELL_OK;
    });
}

}  // extern "C"
