// dwell-bench-moe-weight-bytes: which weight bytes a mixture-of-experts model
// reads per decoded token, measured by the kernel's page tables rather than
// counted by dwell's own code.
//
// It writes a synthetic Mixtral-style GGUF (F32 or F16 matrices, which the
// cpu backend reads in place from the file mapping: only quantized matmul
// weights are repacked) with general.alignment = the page size, so every
// tensor and every expert's slice of the [K, N, n_expert] expert tensors
// starts on a page and the slices are whole pages. Per decoded token it
// drops the mapping's pages (touched_file_pages.hpp), decodes, and reads
// which pages came back: per tensor, and per expert slice. The experts the
// router chose come from an independent scalar forward pass
// (moe_reference.hpp), which also checks dwell's logits.
//
// Per token one JSON line: bytes of weights touched, the bytes expected
// (every shared weight whole, the token's embedding row's page, and for each
// layer the chosen experts' gate/up/down slices), the model's total weight
// bytes, the experts touched and chosen per layer, and whether the touched
// pages are exactly the expected ones. A summary line last. Exit status 1
// when any token touched other pages than expected (or the reference's
// logits disagree with dwell's: cosine < 0.999), 77 when the machine cannot
// measure (no pagemap, a page cache that cannot be dropped).
//
//   dwell-bench-moe-weight-bytes [--dir DIR] [--tokens N] [--threads T]
//       [--type f32|f16] [--n-layer L] [--n-embd E] [--n-ff F]
//       [--n-expert X] [--n-expert-used K] [--seed S]
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/tools/progress_bar.hpp"
#include "dwell/tools/synthetic_model.hpp"
#include "moe_reference.hpp"
#include "touched_file_pages.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kCannotMeasure = 77;
constexpr double kMinCosine = 0.999;  // dwell's logits vs the reference's, every token

struct Options {
    fs::path dir = fs::temp_directory_path() / "dwell-moe-weight-bytes";
    int tokens = 8;
    int threads = 1;
    dwell::SyntheticModelSpec spec;
};

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(
        stderr,
        "dwell-bench-moe-weight-bytes: %s\nusage: dwell-bench-moe-weight-bytes [--dir DIR] "
        "[--tokens N] [--threads T] [--type f32|f16] [--n-layer L] [--n-embd E] "
        "[--n-ff F] [--n-expert X] [--n-expert-used K] [--seed S]\n",
        why.c_str());
    std::exit(2);
}

Options parse(int argc, char** argv) {
    Options o;
    dwell::SyntheticModelSpec& s = o.spec;
    s.family = dwell::SyntheticFamily::mixtral;
    s.n_layer = 4;
    s.n_embd = 256;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 512;
    s.n_vocab = 512;
    s.n_ctx = 256;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.dtype = DWELL_F32;
    s.alignment = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) usage(a + " needs a value");
        const std::string v = argv[++i];
        auto number = [&](long lo, long hi) {
            char* end = nullptr;
            const long n = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end != '\0' || n < lo || n > hi)
                usage(a + " must be an integer in " + std::to_string(lo) + ".." +
                      std::to_string(hi));
            return n;
        };
        if (a == "--dir") {
            o.dir = v;
        } else if (a == "--tokens") {
            o.tokens = static_cast<int>(number(1, 200));
        } else if (a == "--threads") {
            o.threads = static_cast<int>(number(1, 256));
        } else if (a == "--type") {
            if (v != "f32" && v != "f16") usage("--type must be f32 or f16 (read in place)");
            s.dtype = v == "f32" ? DWELL_F32 : DWELL_F16;
        } else if (a == "--n-layer") {
            s.n_layer = static_cast<int32_t>(number(1, 64));
        } else if (a == "--n-embd") {
            s.n_embd = number(64, 8192);
        } else if (a == "--n-ff") {
            s.n_ff = number(64, 32768);
        } else if (a == "--n-expert") {
            s.n_expert = number(2, 256);
        } else if (a == "--n-expert-used") {
            s.n_expert_used = number(1, 256);
        } else if (a == "--seed") {
            s.seed = static_cast<uint64_t>(number(0, 1L << 30));
        } else {
            usage("unknown option " + a);
        }
    }
    if (s.n_expert_used > s.n_expert) usage("--n-expert-used must be at most --n-expert");
    return o;
}

// A contiguous byte range of the weights: a whole tensor, or one expert's
// slice of an expert tensor.
struct Region {
    std::string tensor;
    int32_t layer = -1;   // -1: not in a layer
    int32_t expert = -1;  // -1: a shared weight
    uintptr_t begin = 0;
    uint64_t bytes = 0;
};

int32_t layer_of(const std::string& name) {
    if (name.rfind("blk.", 0) != 0) return -1;
    return static_cast<int32_t>(std::strtol(name.c_str() + 4, nullptr, 10));
}

bool is_expert_tensor(const std::string& name) {
    return name.find("_exps.weight") != std::string::npos;
}

// The bytes of `r` that lie in pages marked in `pages`.
uint64_t bytes_on(const Region& r, const std::vector<bool>& pages,
                  const dwell::bench::TouchedFilePages& map) {
    const size_t ps = map.page_size();
    uint64_t n = 0;
    for (uintptr_t a = r.begin; a < r.begin + r.bytes;) {
        const size_t page = (a - map.base()) / ps;
        const uintptr_t page_end = map.base() + (page + 1) * ps;
        const uintptr_t end = std::min<uintptr_t>(page_end, r.begin + r.bytes);
        if (pages[page]) n += end - a;
        a = end;
    }
    return n;
}

void mark(std::vector<bool>& pages, uintptr_t begin, uint64_t bytes,
          const dwell::bench::TouchedFilePages& map) {
    if (bytes == 0) return;
    const size_t ps = map.page_size();
    for (size_t p = (begin - map.base()) / ps; p <= (begin + bytes - 1 - map.base()) / ps; ++p)
        pages[p] = true;
}

double cosine(const std::vector<float>& a, std::span<const float> b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        ab += static_cast<double>(a[i]) * b[i];
        aa += static_cast<double>(a[i]) * a[i];
        bb += static_cast<double>(b[i]) * b[i];
    }
    return ab / std::sqrt(aa * bb);
}

int32_t argmax(std::span<const float> v) {
    return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

int run(const Options& o) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    fs::create_directories(o.dir);
    struct statfs fs_info {};
    constexpr long kTmpfsMagic = 0x01021994;
    if (statfs(o.dir.c_str(), &fs_info) == 0 && static_cast<long>(fs_info.f_type) == kTmpfsMagic) {
        throw dwell::bench::MeasurementUnavailable(
            o.dir.string() +
            " is on tmpfs, whose page cache cannot be dropped; use --dir on a "
            "disk filesystem");
    }
    const fs::path model_path = o.dir / "moe.gguf";
    dwell::write_synthetic_model(o.spec, model_path);
    const fs::path manifest = o.dir / "cpu-mmap.toml";
    std::ofstream(manifest)
        << "[device]\nname = \"moe weight bytes bench\"\n\n[memory]\n"
           "weights = \"mmap\"\nmlock = false\n\n[[backend]]\nplugin = \"cpu\"\n";

    dwell::RuntimeOptions ro;
    ro.manifest = manifest;
    ro.threads = o.threads;
    dwell::Runtime runtime(ro);
    auto model = dwell::Model::load(runtime, model_path);

    // Every weight must be read in place, page-aligned, and each expert's
    // slice whole pages, or pages would not tell tensors and experts apart.
    std::vector<Region> regions;
    uint64_t total = 0, expert_total = 0;
    for (const dwell::SourceTensor& t : model->source().tensors()) {
        const dwell_tensor* w = model->weight(t.name);
        if (w == nullptr) continue;  // not read by the model
        if (w->dtype != DWELL_F32 && w->dtype != DWELL_F16) {
            throw std::runtime_error("tensor " + t.name + " is " + t.type_name +
                                     ": only f32 and f16 weights are read in place");
        }
        const auto begin = reinterpret_cast<uintptr_t>(w->data);
        if (begin % page != 0)
            throw std::runtime_error("tensor " + t.name + " is not page-aligned");
        total += t.size;
        if (!is_expert_tensor(t.name)) {
            regions.push_back({t.name, layer_of(t.name), -1, begin, t.size});
            continue;
        }
        expert_total += t.size;
        const uint64_t slice = t.size / static_cast<uint64_t>(t.ne[2]);
        if (slice % page != 0) {
            throw std::runtime_error("tensor " + t.name + ": an expert's slice (" +
                                     std::to_string(slice) + " bytes) is not whole pages");
        }
        for (int64_t e = 0; e < t.ne[2]; ++e) {
            regions.push_back({t.name, layer_of(t.name), static_cast<int32_t>(e),
                               begin + static_cast<uintptr_t>(e) * slice, slice});
        }
    }
    std::sort(regions.begin(), regions.end(),
              [](const Region& a, const Region& b) { return a.begin < b.begin; });
    const uintptr_t first = regions.front().begin;
    const uintptr_t last = regions.back().begin + regions.back().bytes;

    dwell::bench::MoeReference ref(model->source());  // copies the weights now
    const dwell_tensor* embd = model->weight("token_embd.weight");
    const uint64_t embd_row_bytes = embd->nb[1];

    dwell::SessionOptions so;
    so.kv_dtype = DWELL_F32;
    so.n_ctx = 64 + o.tokens;
    dwell::Session session(runtime, model, so);
    std::vector<int32_t> prompt = {model->tokenizer().bos(), 300, 301, 302};
    std::vector<float> ref_logits;
    for (int32_t id : prompt) ref_logits = ref.step(id, nullptr);
    std::span<const float> logits = session.decode(prompt);

    dwell::bench::TouchedFilePages map(reinterpret_cast<const void*>(first), last - first,
                                       model_path);
    json summary = {{"bench", "moe_weight_bytes"},
                    {"model", model_path.string()},
                    {"plugin", model->plugin().name()},
                    {"type", dwell_dtype_name(o.spec.dtype)},
                    {"n_layer", o.spec.n_layer},
                    {"n_expert", o.spec.n_expert},
                    {"n_expert_used", o.spec.n_expert_used},
                    {"page_bytes", page},
                    {"total_weight_bytes", total},
                    {"expert_weight_bytes", expert_total},
                    {"threads", o.threads}};
    double min_cosine = cosine(ref_logits, logits);
    double min_margin = INFINITY;
    int exact_tokens = 0;
    uint64_t touched_sum = 0;
    dwell::ProgressBar progress("moe weight bytes", o.tokens);
    for (int step = 0; step < o.tokens; ++step) {
        const int32_t token = argmax(logits);
        dwell::bench::MoeRouting routing;
        ref_logits = ref.step(token, &routing);
        min_margin = std::min(min_margin, routing.min_margin);

        map.forget();
        logits = session.decode(std::span<const int32_t>(&token, 1));
        const std::vector<bool> present = map.present();
        const std::vector<bool> cached = map.cached();
        min_cosine = std::min(min_cosine, cosine(ref_logits, logits));

        // What the router's choice implies: every shared weight whole, but
        // of the embedding table (a row lookup) only this token's row,
        // unless it doubles as the output projection; the chosen experts.
        std::vector<bool> expected(map.n_pages(), false);
        uint64_t shared = 0, chosen = 0;
        for (const Region& r : regions) {
            if (r.expert < 0) {
                if (r.tensor == "token_embd.weight" && !ref.tied_output()) {
                    mark(expected, r.begin + static_cast<uint64_t>(token) * embd_row_bytes,
                         embd_row_bytes, map);
                } else {
                    mark(expected, r.begin, r.bytes, map);
                    shared += r.bytes;
                }
                continue;
            }
            const auto& picked = routing.experts[static_cast<size_t>(r.layer)];
            if (std::find(picked.begin(), picked.end(), r.expert) != picked.end()) {
                mark(expected, r.begin, r.bytes, map);
                chosen += r.bytes;
            }
        }
        uint64_t touched = 0, expected_bytes = 0;
        std::vector<bool> in_region(map.n_pages(), false);
        std::vector<std::set<int32_t>> experts_touched(static_cast<size_t>(ref.n_layer()));
        json unexpected = json::array(), missing = json::array();
        for (const Region& r : regions) {
            mark(in_region, r.begin, r.bytes, map);
            const uint64_t t = bytes_on(r, present, map);
            const uint64_t e = bytes_on(r, expected, map);
            touched += t;
            expected_bytes += e;
            if (r.expert >= 0 && t > 0)
                experts_touched[static_cast<size_t>(r.layer)].insert(r.expert);
            json where = {r.tensor};
            if (r.expert >= 0) where.push_back(r.expert);
            if (t > e) unexpected.push_back(where);
            if (t < e) missing.push_back(where);
        }
        size_t padding_touched = 0, differ = 0, cache_disagrees = 0;
        for (size_t p = 0; p < map.n_pages(); ++p) {
            if (present[p] && !in_region[p]) ++padding_touched;
            if (present[p] != expected[p]) ++differ;
            if (present[p] != cached[p]) ++cache_disagrees;
        }
        const bool exact = differ == 0;
        exact_tokens += exact ? 1 : 0;
        touched_sum += touched;

        json chosen_json = json::array(), touched_json = json::array();
        for (size_t l = 0; l < routing.experts.size(); ++l) {
            std::vector<int32_t> c = routing.experts[l];
            std::sort(c.begin(), c.end());
            chosen_json.push_back(c);
            touched_json.push_back(
                std::vector<int32_t>(experts_touched[l].begin(), experts_touched[l].end()));
        }
        json line = {
            {"step", step},
            {"token", token},
            {"touched_bytes", touched},
            {"expected_bytes", expected_bytes},
            {"shared_bytes", shared},
            {"chosen_expert_bytes", chosen},
            {"embedding_row_page_bytes", expected_bytes - shared - chosen},
            {"total_weight_bytes", total},
            {"touched_fraction", static_cast<double>(touched) / static_cast<double>(total)},
            {"experts_chosen", chosen_json},
            {"experts_touched", touched_json},
            {"pages_differing", differ},
            {"padding_pages_touched", padding_touched},
            {"pagemap_vs_page_cache_differ", cache_disagrees},
            {"router_margin", routing.min_margin},
            {"logit_cosine", cosine(ref_logits, logits)},
            {"same_argmax", argmax(logits) == argmax(std::span<const float>(ref_logits))},
            {"exact", exact}};
        if (!unexpected.empty()) line["unexpected"] = unexpected;
        if (!missing.empty()) line["missing"] = missing;
        progress.update(step + 1);
        std::printf("%s\n", line.dump().c_str());
        std::fflush(stdout);
    }
    progress.finish();
    summary["tokens"] = o.tokens;
    summary["exact_tokens"] = exact_tokens;
    summary["mean_touched_bytes"] = touched_sum / static_cast<uint64_t>(o.tokens);
    summary["min_logit_cosine"] = min_cosine;
    summary["min_router_margin"] = min_margin;
    summary["all_exact"] = exact_tokens == o.tokens;
    // The router's choice is the reference's: it counts only if the
    // reference computes what dwell computes.
    summary["reference_agrees"] = min_cosine >= kMinCosine;
    std::printf("%s\n", summary.dump().c_str());
    return exact_tokens == o.tokens && min_cosine >= kMinCosine ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    // stdout is the JSON lines; dwell's warnings go to stderr.
    spdlog::set_default_logger(spdlog::stderr_color_mt("dwell"));
    spdlog::set_level(spdlog::level::warn);
    try {
        return run(o);
    } catch (const dwell::bench::MeasurementUnavailable& e) {
        std::fprintf(stderr, "dwell-bench-moe-weight-bytes: cannot measure here: %s\n", e.what());
        return kCannotMeasure;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dwell-bench-moe-weight-bytes: %s\n", e.what());
        return 1;
    }
}
