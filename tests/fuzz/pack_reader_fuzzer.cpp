// libFuzzer target: open_pack_source on arbitrary bytes (written to a temp
// file, since the reader maps files). When a pack opens, every tensor's
// bytes, its storage record, the metadata keys a model plugin reads and the
// tokenizer are touched. dwell::Error is the expected outcome for a
// malformed input; anything else is a finding.
#include <cstddef>
#include <cstdint>

#include "dwell/core/base/error.hpp"
#include "dwell/core/model/pack_file.hpp"
#include "scratch_file.hpp"

namespace {

constexpr const char* kKeys[] = {
    "general.architecture",          "general.alignment",
    "llama.embedding_length",        "llama.block_count",
    "llama.feed_forward_length",     "llama.attention.head_count",
    "llama.attention.head_count_kv", "llama.context_length",
    "llama.rope.freq_base",          "llama.attention.layer_norm_rms_epsilon",
    "tokenizer.ggml.tokens",         "tokenizer.ggml.scores",
};

void exercise(const dwell::PackSource& src) {
    uint64_t sum = 0;
    const dwell_metadata& m = src.metadata();
    if (src.storage().size() != src.tensors().size()) __builtin_trap();
    for (const dwell::SourceTensor& t : src.tensors()) {
        if (src.find_tensor(t.name) != &t) __builtin_trap();
        for (uint64_t i = 0; i < t.size; ++i) sum += t.data[i];
        dwell_dtype dt{};
        int32_t nd = 0;
        int64_t ne[DWELL_MAX_DIMS] = {};
        if (!m.get_tensor(m.self, t.name.c_str(), &dt, &nd, ne)) __builtin_trap();
    }
    for (const char* key : kKeys) {
        int64_t i = 0;
        double f = 0;
        const char* s = nullptr;
        size_t len = 0;
        uint64_t n = 0;
        (void)m.get_int(m.self, key, &i);
        (void)m.get_float(m.self, key, &f);
        if (m.get_string(m.self, key, &s, &len)) {
            for (size_t k = 0; k < len; ++k) sum += static_cast<unsigned char>(s[k]);
        }
        (void)m.get_array_length(m.self, key, &n);
    }
    volatile uint64_t sink = sum;
    (void)sink;
    if (!src.tokenizer_model().empty()) {
        try {
            const dwell::Tokenizer tok = src.tokenizer();
            (void)tok.decode(tok.encode("Hello, fuzzer! \xc3\xa9", true));
        } catch (const dwell::Error&) {
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const dwell::fuzz::ScratchFile scratch("pack");
    if (!scratch.write(data, size)) return 0;
    const std::filesystem::path& path = scratch.path();
    // Small budgets: a few KiB of zstd can legitimately claim hundreds of
    // MiB, which would only slow the fuzzer down.
    dwell::PackLimits limits;
    limits.max_tensor_bytes = uint64_t{16} << 20;
    limits.max_decompressed_bytes = uint64_t{64} << 20;
    try {
        const auto src = dwell::open_pack_source(path, limits);
        exercise(*src);
    } catch (const dwell::Error&) {
    }
    return 0;
}
