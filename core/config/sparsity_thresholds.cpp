// Reading and writing calibrated sparsity thresholds (sparsity_thresholds.hpp).
#include "dwell/core/config/sparsity_thresholds.hpp"

#include <toml++/toml.h>

#include <cmath>
#include <sstream>

#include "dwell/core/base/error.hpp"
#include "dwell/core/platform/output_file.hpp"
#include "dwell/core/platform/text_file.hpp"

namespace dwell {

namespace {

// Thresholds files are small: one number per projection input.
constexpr uint64_t kMaxThresholdsBytes = uint64_t{16} << 20;

[[noreturn]] void bad(const std::filesystem::path& file, const std::string& what) {
    throw Error(DWELL_ERR_INVALID_ARGUMENT,
                "sparsity thresholds " + file.string() + ": " + what +
                    " (write one with dwell calibrate -m MODEL -f TEXT --sparsity S -o FILE)");
}

}  // namespace

SparsityThresholds read_sparsity_thresholds(const std::filesystem::path& file) {
    const std::string text =
        read_text_file(file, "the sparsity thresholds file", kMaxThresholdsBytes);
    toml::table root;
    try {
        root = toml::parse(text, file.string());
    } catch (const toml::parse_error& e) {
        bad(file,
            "line " + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
    }
    SparsityThresholds t;
    for (const auto& [key, node] : root) {
        const std::string_view k = key.str();
        if (k != "model" && k != "weights" && k != "sparsity" && k != "tokens" &&
            k != "thresholds") {
            bad(file, "unknown key '" + std::string(k) +
                          "' (known: model, weights, sparsity, tokens, thresholds)");
        }
    }
    const auto* model = root.get_as<std::string>("model");
    if (!model || model->get().empty()) bad(file, "'model' must be a non-empty string");
    t.model = model->get();
    const auto* weights = root.get_as<std::string>("weights");
    if (!weights || weights->get().size() != 16 ||
        weights->get().find_first_not_of("0123456789abcdef") != std::string::npos)
        bad(file, "'weights' must be the model's fingerprint, 16 lower-case hex digits");
    t.weights = weights->get();
    if (const toml::node* s = root.get("sparsity")) {
        const auto v = s->value<double>();
        if (!v || !(*v >= 0 && *v < 1)) bad(file, "'sparsity' must be a number in [0, 1)");
        t.sparsity = *v;
    }
    if (const toml::node* n = root.get("tokens")) {
        const auto v = n->value<int64_t>();
        if (!v || *v < 0) bad(file, "'tokens' must be an integer >= 0");
        t.tokens = *v;
    }
    const toml::table* th = root.get_as<toml::table>("thresholds");
    if (!th) bad(file, "no [thresholds] table");
    for (const auto& [key, node] : *th) {
        const std::string k(key.str());
        const auto v = node.value<double>();
        if (!v || !std::isfinite(*v) || *v < 0)
            bad(file, "threshold '" + k + "' must be a finite number >= 0");
        t.values[k] = static_cast<float>(*v);
    }
    if (t.values.empty()) bad(file, "[thresholds] is empty");
    return t;
}

void write_sparsity_thresholds(const std::filesystem::path& file, const SparsityThresholds& t) {
    toml::table th;
    for (const auto& [k, v] : t.values) th.insert(k, static_cast<double>(v));
    toml::table root;
    root.insert("model", t.model);
    root.insert("weights", t.weights);
    root.insert("sparsity", t.sparsity);
    root.insert("tokens", t.tokens);
    root.insert("thresholds", std::move(th));
    std::ostringstream out;
    out << "# dwell calibrate: |x| below its input's threshold is zeroed (activation-sparsity.md)\n"
        << root << "\n";
    write_output_file(file, out.str());
}

}  // namespace dwell
