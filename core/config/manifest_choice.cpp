#include "dwell/core/config/manifest_choice.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "dwell/core/base/error.hpp"

namespace dwell {

namespace fs = std::filesystem;

namespace {

bool is_generic(const fs::path& file) {
    return file.filename().string().rfind("generic-", 0) == 0;
}

}  // namespace

ManifestChoice choose_manifest(const DeviceFacts& facts, const std::vector<fs::path>& dirs,
                               std::string_view builtin) {
    ManifestChoice out;
    std::optional<Manifest> best, generic_fit, generic_first;
    for (const auto& dir : dirs) {
        std::error_code ec;
        if (!fs::is_directory(dir, ec)) continue;
        std::vector<fs::path> files;
        for (const auto& e : fs::directory_iterator(dir, ec)) {
            if (e.path().extension() == ".toml") files.push_back(e.path());
        }
        std::sort(files.begin(), files.end());
        for (const auto& f : files) {
            ManifestCandidate c;
            c.file = f;
            c.generic = is_generic(f);
            Manifest m;
            try {
                m = Manifest::load(f);
            } catch (const Error& e) {
                spdlog::warn("ignoring manifest: {}", e.what());
                c.why = e.what();
                out.candidates.push_back(std::move(c));
                continue;
            }
            c.name = m.name;
            c.matches = manifest_matches(m, facts);
            c.specificity = manifest_specificity(m);
            c.why = explain_match(m, facts);
            if (c.generic) {
                if (c.matches && !generic_fit) generic_fit = m;
                if (!generic_first) generic_first = m;
            } else if (c.matches && (!best || c.specificity > manifest_specificity(*best))) {
                best = m;
            }
            out.candidates.push_back(std::move(c));
        }
    }
    if (best) {
        out.reason = "matched this device: " + explain_match(*best, facts);
        out.manifest = std::move(*best);
        return out;
    }
    out.fell_back = true;
    if (generic_fit || generic_first) {
        out.manifest = std::move(generic_fit ? *generic_fit : *generic_first);
        out.reason = "no manifest for this device (" + facts.summary() +
                     "); using the generic manifest " + out.manifest.source.filename().string() +
                     " — write one for it (manifests/README.md) to use its accelerators";
        // On a phone (it has Android properties) a missing manifest leaves its
        // accelerators unused: worth a warning. A PC's generic one is normal.
        if (facts.properties.empty()) {
            spdlog::info("{}", out.reason);
        } else {
            spdlog::warn("{}", out.reason);
        }
        return out;
    }
    out.manifest = Manifest::parse(builtin, "<built-in>");
    out.reason = "no manifest folder found; using the built-in cpu-only manifest";
    spdlog::warn("{}", out.reason);
    return out;
}

}  // namespace dwell
