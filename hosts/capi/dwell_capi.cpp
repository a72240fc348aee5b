// The C API (include/dwell.h) over the core's C++ classes. Exceptions stop
// here: each call turns them into a status and a one-line message.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "dwell.h"
#include "dwell/core/error.hpp"
#include "dwell/core/generate.hpp"
#include "dwell/core/model.hpp"
#include "dwell/core/runtime.hpp"
#include "dwell/core/sampler.hpp"
#include "dwell/core/session.hpp"
#include "dwell/core/tokenizer.hpp"

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
    } catch (const dwell::Error& e) {
        return fail(error, e.status(), e.what());
    } catch (const std::bad_alloc&) {
        return fail(error, DWELL_ERR_OUT_OF_MEMORY, "out of memory");
    } catch (const std::exception& e) {
        return fail(error, DWELL_ERR_INTERNAL, e.what());
    }
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

void dwell_runtime_options_init(dwell_runtime_options* o) {
    if (!o) return;
    *o = dwell_runtime_options{};
    o->struct_size = sizeof *o;
    o->memory_budget_mb = -1;
}

dwell_status dwell_runtime_open(const dwell_runtime_options* options, dwell_runtime** out,
                                dwell_error* error) {
    if (!out) return fail(error, DWELL_ERR_INVALID_ARGUMENT, "dwell_runtime_open: out is NULL");
    *out = nullptr;
    if (too_small(options, sizeof(dwell_runtime_options)))
        return fail(error, DWELL_ERR_INVALID_ARGUMENT,
                    "dwell_runtime_open: options.struct_size is too small (call "
                    "dwell_runtime_options_init first)");
    return guarded(error, [&] {
        dwell::RuntimeOptions o;
        if (options) {
            if (options->manifest_path && *options->manifest_path)
                o.manifest = options->manifest_path;
            if (options->threads < 0)
                throw dwell::Error(DWELL_ERR_INVALID_ARGUMENT,
                                   "dwell_runtime_open: threads must be >= 0");
            o.threads = options->threads;
            if (options->memory_budget_mb >= 0)
                o.memory_budget_bytes = static_cast<uint64_t>(options->memory_budget_mb) << 20;
            spdlog::set_level(options->log_level >= 2   ? spdlog::level::debug
                              : options->log_level == 1 ? spdlog::level::info
                              : options->log_level < 0  ? spdlog::level::err
                                                        : spdlog::level::warn);
        }
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
        if (options) {
            if (options->n_ctx < 0)
                throw dwell::Error(DWELL_ERR_INVALID_ARGUMENT,
                                   "dwell_session_create: n_ctx must be >= 0");
            s->options.n_ctx = options->n_ctx;
            if (options->kv_type >= 0)
                s->options.kv_dtype = static_cast<dwell_dtype>(options->kv_type);
            if (options->shift_context) s->options.on_full = dwell::ContextFull::Shift;
        }
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
        dwell::SamplerParams sp;
        sp.temperature = o.temperature;
        sp.top_k = o.top_k;
        sp.top_p = o.top_p;
        sp.min_p = o.min_p;
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
