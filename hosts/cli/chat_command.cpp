// `dwell chat`: a conversation in the terminal. Each turn re-renders the
// conversation with the model's chat template and feeds only what the
// session does not hold yet; /reset, /backend NAME, /stats, /save FILE,
// /load FILE, /quit. Ctrl-C stops the reply being written, not the program.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "cli_common.hpp"
#include "dwell/core/base/error.hpp"
#include "dwell/core/base/format_bytes.hpp"
#include "dwell/core/base/printable_name.hpp"
#include "dwell/core/llm/text_generation.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/platform/output_file.hpp"
#include "dwell/core/platform/text_file.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/core/text/chat_prompt.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/core/thermal/thermal_governor.hpp"
#include "dwell/tools/progress_bar.hpp"
#include "stop_signals.hpp"

namespace dwell::cli {

namespace {

std::string thermal_line(const ThermalState& t) {
    char line[256];
    const ThermalActions& a = t.actions;
    std::snprintf(
        line, sizeof line, "thermal: %s%s | throttle %.2f: duty %.2f, threads x%.2f%s%s%s",
        t.reading.temp_c ? (std::to_string(*t.reading.temp_c).substr(0, 4) + " C").c_str()
                         : "no reading",
        t.reading.hottest_zone.empty() ? "" : (" (" + t.reading.hottest_zone + ")").c_str(),
        a.throttle, a.duty, a.thread_share, a.freq_capped ? ", frequency capped" : "",
        a.offloaded ? ", accelerators paused" : "", a.fallback ? " (sensor fallback)" : "");
    return line;
}

// Tokens at the start of every rendering of a conversation opening with
// `opening` (BOS, the system message): what a context shift keeps. Found as
// the common start of two renderings that differ only after it, since some
// templates fold the system message into the first user turn.
int32_t opening_tokens(const ChatPrompt& prompt, const std::vector<ChatMessage>& opening) {
    std::vector<ChatMessage> a = opening, b = opening;
    a.push_back({"user", "a"});
    b.push_back({"user", "b"});
    const std::vector<int32_t> ta = prompt.encode(a, true), tb = prompt.encode(b, true);
    const auto end = std::mismatch(ta.begin(), ta.end(), tb.begin(), tb.end()).first;
    return static_cast<int32_t>(end - ta.begin());
}

// The conversation: its messages, and the session holding their tokens.
class Chat {
public:
    Chat(Runtime& runtime, std::shared_ptr<const Model> model, ChatPrompt prompt,
         SessionOptions options, std::vector<ChatMessage> opening)
        : runtime_(runtime),
          model_(std::move(model)),
          prompt_(std::move(prompt)),
          options_(options),
          opening_(std::move(opening)) {
        reset();
    }

    void reset() {
        std::lock_guard lock(mutex_);
        session_ = std::make_unique<Session>(runtime_, model_, options_);
        messages_ = opening_;
        held_text_.clear();
        pending_ = -1;
    }

    // Ctrl-C, from the signal thread.
    void cancel() {
        std::lock_guard lock(mutex_);
        session_->cancel();
    }

    TextResult reply(const std::string& user, TextRequest request,
                     const std::function<bool(std::string_view)>& on_delta) {
        messages_.push_back({"user", user});
        try {
            prompt_.check_contents(messages_);
        } catch (...) {
            messages_.pop_back();
            throw;
        }
        std::string text = prompt_.chat_template().render(messages_, true);
        if (!held_text_.empty() && text.compare(0, held_text_.size(), held_text_) == 0) {
            // Only the new part: the end of the last reply, the user's turn and
            // the assistant's header.
            if (pending_ >= 0) request.prompt.push_back(pending_);
            const auto more = prompt_.encode_text(text.substr(held_text_.size()));
            request.prompt.insert(request.prompt.end(), more.begin(), more.end());
        } else {
            // First turn, or the template rewrote earlier turns: start over
            // (full pages of an earlier prompt come back from the prefix cache).
            {
                std::lock_guard lock(mutex_);
                session_ = std::make_unique<Session>(runtime_, model_, options_);
            }
            request.prompt = prompt_.encode(messages_, true);
            // A conversation longer than the context loses its oldest turns
            // (the opening stays), as the context shift would drop them: a
            // user message with its reply, so the roles still alternate.
            while (session_->shifts_context() &&
                   static_cast<int64_t>(request.prompt.size()) >= session_->n_ctx() &&
                   messages_.size() > opening_.size() + 1) {
                const auto first = messages_.begin() + static_cast<std::ptrdiff_t>(opening_.size());
                messages_.erase(first, first + (messages_.size() > opening_.size() + 2 ? 2 : 1));
                request.prompt = prompt_.encode(messages_, true);
                text = prompt_.chat_template().render(messages_, true);
            }
        }
        request.stop_tokens = prompt_.stop_tokens();
        TextResult r;
        try {
            r = generate_text(*session_, request, on_delta);
        } catch (const Error& e) {
            session_->clear_cancel();
            messages_.pop_back();
            // What the session holds no longer matches any rendering.
            held_text_.clear();
            pending_ = -1;
            throw;
        }
        messages_.push_back({"assistant", r.text});
        held_text_ = text + r.text;
        pending_ = r.pending_token;
        last_ = r.stats;
        return r;
    }

    void use_backend(const std::string& name) { session_->use_backend(name); }

    // One file: the conversation travels as the session file's host data,
    // so the two are written, renamed and checksummed together and can
    // never come from two different saves. The reply's last token is saved
    // undecoded, so a full context saves too.
    void save(const std::string& path) {
        nlohmann::json j = {{"held_text", held_text_}, {"messages", nlohmann::json::array()}};
        for (const auto& m : messages_)
            j["messages"].push_back({{"role", m.role}, {"content", m.content}});
        SessionExtras extras;
        // Invalid UTF-8 typed at the terminal is replaced, not a failure.
        extras.host_data = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        extras.pending_token = pending_;
        session_->save(path, extras);
    }

    void load(const std::string& path) {
        // Everything is read and checked before anything is replaced.
        SessionExtras extras;
        auto restored = Session::restore(runtime_, model_, path, options_, &extras);
        std::string conversation = std::move(extras.host_data);
        std::string source = path;
        if (!extras.had_host_data) {
            // A session file of an older dwell: its conversation is the
            // .chat.json beside it, read as before.
            source = path + ".chat.json";
            conversation = read_text_file(source, "the conversation file");
        } else if (conversation.empty()) {
            throw Error(DWELL_ERR_INVALID_ARGUMENT,
                        path +
                            ": the session holds no conversation (saved by dwell run or the "
                            "C API?): /load takes files written by /save");
        }
        std::vector<ChatMessage> messages;
        std::string held;
        try {
            const nlohmann::json j = nlohmann::json::parse(conversation);
            for (const auto& m : j.at("messages"))
                messages.push_back(
                    {m.at("role").get<std::string>(), m.at("content").get<std::string>()});
            held = j.at("held_text").get<std::string>();
        } catch (const nlohmann::json::exception&) {
            throw Error(DWELL_ERR_CORRUPT,
                        source +
                            ": not a saved conversation (its messages are not the JSON "
                            "/save writes)");
        }
        // What was saved is checked as if it had been typed: a crafted file
        // must not wedge the chat or forge turns.
        for (size_t i = 0; i < messages.size(); ++i) {
            const std::string& role = messages[i].role;
            if (role != "system" && role != "user" && role != "assistant")
                throw Error(DWELL_ERR_CORRUPT,
                            source + ": message " + std::to_string(i) + " has the role '" +
                                printable_text(role) +
                                "', not system, user or assistant (not a file /save wrote)");
        }
        if (const auto hit = prompt_.find_control_text(messages))
            throw Error(DWELL_ERR_CORRUPT, source + ": message " + std::to_string(hit->message) +
                                               " holds the chat template's control text '" +
                                               printable_text(hit->text) +
                                               "' (not a file /save wrote)");
        std::lock_guard lock(mutex_);
        session_ = std::move(restored);
        messages_ = std::move(messages);
        held_text_ = std::move(held);
        pending_ = extras.had_host_data ? extras.pending_token : -1;
    }

    std::string stats() const {
        const Session& s = *session_;
        const PoolStats pool = runtime_.pool().stats();
        char line[512];
        std::snprintf(line, sizeof line,
                      "context %d / %d tokens (%lld dropped by shifts), %zu messages | KV %s (%d "
                      "pages in use) | memory %s"
                      " | last reply %d tokens at %.1f tok/s, prompt %d at %.1f tok/s\n"
                      "placement: %s",
                      s.n_past(), s.n_ctx(), static_cast<long long>(s.n_shifted()),
                      messages_.size(), format_bytes(s.kv_cache().bytes()).c_str(),
                      runtime_.kv_pages().pages_in_use(), format_bytes(pool.used_bytes).c_str(),
                      last_.n_generated, last_.generation_tokens_per_second(), last_.n_prompt,
                      last_.prompt_tokens_per_second(), s.placement_summary().c_str());
        std::string out = line;
        out += "\nbackends:";
        // Appends, not operator+ chains: GCC 12 warns falsely (-Wrestrict) on those.
        for (const auto& b : runtime_.backends()) {
            out.append(&b == &runtime_.backends().front() ? " " : " | ")
                .append(b->label())
                .append(" ")
                .append(describe(b->health().report()));
        }
        if (const auto t = runtime_.thermal_state()) out.append("\n").append(thermal_line(*t));
        return out;
    }

private:
    Runtime& runtime_;
    std::shared_ptr<const Model> model_;
    ChatPrompt prompt_;
    SessionOptions options_;
    std::vector<ChatMessage> opening_;
    std::mutex mutex_;  // session_ swaps against cancel() from the signal thread
    std::unique_ptr<Session> session_;
    std::vector<ChatMessage> messages_;
    std::string held_text_;  // the conversation text the session's tokens stand for
    int32_t pending_ = -1;
    GenerationStats last_;
};

// The options of `dwell chat`.
struct ChatArgs {
    CommonArgs common;
    std::string model_path, system_prompt, template_name, kv_type, ctx_full = "shift";
    int32_t n_predict = 512, n_ctx = 0;
    SamplerParams sp;
    int64_t seed = -1;
};

// Parses the options and checks every one before anything loads (a typo
// costs no model load); nullopt when --help was printed.
std::optional<ChatArgs> parse_chat_args(const std::vector<std::string>& args) {
    ChatArgs a;
    po::options_description desc("dwell chat");
    // clang-format off
    desc.add_options()
        ("model,m", po::value(&a.model_path)->required(), "model file (GGUF or dwell pack)")
        ("system,s", po::value(&a.system_prompt), "system message opening the conversation")
        ("chat-template", po::value(&a.template_name), "chat template family instead of the model's (llama2, llama3, chatml, mistral, mistral-v3, gemma, phi3, zephyr)")
        ("n-predict,n", po::value(&a.n_predict)->default_value(a.n_predict), "longest reply in tokens")
        ("ctx,c", po::value(&a.n_ctx)->default_value(0), "context size (0: the model's)")
        ("ctx-full", po::value(&a.ctx_full)->default_value("shift"), "when the context is full: shift (keep the system message, drop the oldest turns) or stop")
        ("kv-type", po::value(&a.kv_type), "KV-cache type: f16, q8_0, fp8_e4m3 or f32")
        ("temp", po::value(&a.sp.temperature)->default_value(0.8f, "0.8"), "temperature (0: greedy)")
        ("top-k", po::value(&a.sp.top_k)->default_value(40), "top-k (0: off)")
        ("top-p", po::value(&a.sp.top_p)->default_value(0.95f, "0.95"), "top-p (1: off)")
        ("min-p", po::value(&a.sp.min_p)->default_value(0.05f, "0.05"), "min-p (0: off)")
        ("seed", po::value(&a.seed)->default_value(-1), "sampling seed (-1: random)");
    // clang-format on
    add_runtime_options(desc, a.common);
    po::variables_map vm;
    if (!parse("chat", "-m MODEL [--system TEXT] [--chat-template NAME] [options]", desc, args, vm))
        return std::nullopt;
    set_verbosity(a.common.verbosity);
    check_count(a.n_predict, "--n-predict", 1);
    check_ctx(a.n_ctx);
    check_sampling(a.sp);
    check_seed(a.seed);
    check_ctx_full(a.ctx_full);
    if (!a.template_name.empty()) {
        try {
            ChatTemplate::named(a.template_name);
        } catch (const Error& e) {
            throw po::error(std::string("--chat-template: ") + e.what());
        }
    }
    return a;
}

SessionOptions chat_session_options(const ChatArgs& a) {
    SessionOptions so;
    so.n_ctx = a.n_ctx;
    if (!a.kv_type.empty()) so.kv_dtype = parse_kv_type(a.kv_type);
    so.on_full = a.ctx_full == "shift" ? ContextFull::Shift : ContextFull::Stop;
    return so;
}

// /reset, /stats, /backend NAME, /save FILE, /load FILE, or an unknown one.
void run_slash_command(Chat& chat, const std::string& line, const std::string& model_path) {
    if (line == "/reset") {
        chat.reset();
        std::cout << "(conversation cleared)\n";
    } else if (line == "/stats") {
        std::cout << chat.stats() << "\n";
    } else if (line.rfind("/backend ", 0) == 0) {
        chat.use_backend(line.substr(9));
        std::cout << "(backend: " << line.substr(9) << ")\n";
    } else if (line.rfind("/save ", 0) == 0) {
        // Named as the user typed both; Session::save refuses it too.
        if (same_file(line.substr(6), model_path)) {
            throw Error(DWELL_ERR_INVALID_ARGUMENT,
                        "/save " + line.substr(6) + " is the same file as -m " + model_path +
                            ": saving would destroy the model (choose another file)");
        }
        chat.save(line.substr(6));
        std::cout << "(saved to " << line.substr(6) << ")\n";
    } else if (line.rfind("/load ", 0) == 0) {
        chat.load(line.substr(6));
        std::cout << "(loaded " << line.substr(6) << ")\n";
    } else {
        std::cout << "(unknown command " << line
                  << "; /reset /backend NAME /stats /save FILE /load FILE /quit)\n";
    }
}

// The reply to the user's `line`, written as it comes, then why it ended
// when not by itself. `replying` is set meanwhile: Ctrl-C stops it.
void write_reply(Chat& chat, const std::string& line, int32_t n_predict, const SamplerParams& sp,
                 std::atomic<bool>& replying) {
    TextRequest request;
    request.max_tokens = n_predict;
    request.sampling = sp;
    replying = true;
    try {
        const TextResult r = chat.reply(line, request, [](std::string_view delta) {
            std::cout << delta << std::flush;
            return true;
        });
        replying = false;
        std::cout << (r.stats.stopped_at_context
                          ? " [context full: /reset to start over, or restart "
                            "with a larger --ctx or --ctx-full shift]\n"
                      : r.finish == FinishReason::Length ? " [reply cut at -n]\n"
                                                         : "\n");
    } catch (const Error& e) {
        replying = false;
        if (e.status() != DWELL_ERR_CANCELLED) throw;
        std::cout << " [stopped]\n";
    }
}

// Reads lines until /quit, the end of input or a stop signal; each is a
// command or a user turn.
void converse(Chat& chat, StopSignals& stop, const ChatArgs& a, const SamplerParams& sp,
              std::atomic<bool>& replying) {
    const bool tty = ::isatty(STDIN_FILENO);
    for (std::string line;;) {
        if (tty) std::cout << "> " << std::flush;
        {
            const StopSignals::Reading reading(stop);
            if (stop.stopped_by() || !std::getline(std::cin, line)) break;
        }
        if (line == "/quit") break;
        if (line.empty()) continue;
        try {
            if (line[0] == '/') {
                run_slash_command(chat, line, a.model_path);
            } else {
                write_reply(chat, line, a.n_predict, sp, replying);
            }
        } catch (const std::exception& e) {  // one command failed; the conversation goes on
            std::cout << std::flush;
            std::cerr << "dwell chat: " << e.what() << "\n";
        }
    }
}

}  // namespace

int chat_command(const std::vector<std::string>& args) {
    const std::optional<ChatArgs> parsed = parse_chat_args(args);
    if (!parsed) return 0;
    const ChatArgs& a = *parsed;
    SessionOptions so = chat_session_options(a);
    SamplerParams sp = a.sp;
    sp.seed = a.seed >= 0 ? static_cast<uint64_t>(a.seed) : std::random_device{}();
    const RuntimeOptions ro = runtime_options(a.common);

    // Ctrl-C stops the reply; SIGTERM (or Ctrl-C while loading) ends the
    // chat through the destructors, which restore a devfreq cap the thermal
    // governor set.
    StopSignals stop({SIGINT, SIGTERM});

    Runtime runtime(ro);
    auto model = Model::load(runtime, a.model_path, terminal_load_progress());
    ChatPrompt prompt(
        model->tokenizer(),
        ChatTemplate::choose(a.template_name, chat_template_text(model->source().metadata())));
    std::vector<ChatMessage> opening;
    if (!a.system_prompt.empty()) opening.push_back({"system", a.system_prompt});
    so.n_keep = opening_tokens(prompt, opening);
    const std::string template_used = prompt.chat_template().name();
    Chat chat(runtime, model, std::move(prompt), so, opening);

    std::atomic<bool> replying{false};
    const auto hooked = stop.hook([&](int sig) {
        if (sig == SIGINT && !replying) {
            std::cerr << "\n(Ctrl-C stops a reply; /quit or Ctrl-D leaves)\n";
            return false;
        }
        chat.cancel();
        return sig != SIGINT;
    });
    if (stop.stopped_by()) return stop.exit_code();  // a signal came while loading
    std::cerr << "dwell chat: " << model->path().filename().string() << " with the "
              << template_used
              << " template. /reset /backend NAME /stats /save FILE /load FILE /quit\n";
    converse(chat, stop, a, sp, replying);
    return stop.stopped_by() ? stop.exit_code() : 0;
}

}  // namespace dwell::cli
