// libFuzzer target: arbitrary text through fixed tokenizers, as a prompt
// reaches them: a sentencepiece vocabulary (tok512.model when
// DWELL_FUZZ_SPM_MODEL names it, else a generated one) and a byte-level BPE
// vocabulary (generated, with the qwen2 pre-tokenizer). Checks what
// tokenizer.hpp promises: ids in range, decode(encode(s)) == s for valid
// UTF-8 s that needs no unknown token (and, for SPM, holds no U+2581), and
// StreamDecoder's pieces adding up to decode(). Any exception or broken
// promise is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/tools/gguf_writer.hpp"
#include "dwell/tools/synthetic_bpe_vocab.hpp"
#include "dwell/tools/synthetic_model.hpp"
#include "scratch_file.hpp"

namespace {

dwell::Tokenizer spm_tokenizer() {
    if (const char* path = std::getenv("DWELL_FUZZ_SPM_MODEL"); path && *path) {
        return dwell::Tokenizer::from_model_file(path);
    }
    const dwell::fuzz::ScratchFile file("spm-vocab");
    dwell::SyntheticModelSpec spec;
    spec.n_embd = 32;
    spec.n_layer = 1;
    spec.n_head = 2;
    spec.n_head_kv = 1;
    spec.n_ff = 32;
    spec.n_vocab = 512;
    spec.n_ctx = 64;
    spec.tied_output = true;
    dwell::write_synthetic_model(spec, file.path());
    return dwell::Tokenizer::from_gguf(dwell::GgufFile::open(file.path()));
}

dwell::Tokenizer bpe_tokenizer() {
    dwell::GgufWriter w;
    dwell::write_bpe_vocab(w, dwell::make_synthetic_bpe_vocab(600, 1), "qwen2");
    return dwell::Tokenizer::from_gguf(dwell::GgufFile::from_bytes(w.bytes(), "bpe-vocab.gguf"));
}

bool valid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto b = static_cast<uint8_t>(s[i]);
        size_t n = b < 0x80                   ? 1
                   : (b >= 0xC2 && b <= 0xDF) ? 2
                   : (b >= 0xE0 && b <= 0xEF) ? 3
                   : (b >= 0xF0 && b <= 0xF4) ? 4
                                              : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (size_t k = 1; k < n; ++k)
            if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
        const auto b1 = static_cast<uint8_t>(n > 1 ? s[i + 1] : 0);
        if ((b == 0xE0 && b1 < 0xA0) || (b == 0xED && b1 > 0x9F) || (b == 0xF0 && b1 < 0x90) ||
            (b == 0xF4 && b1 > 0x8F))
            return false;
        i += n;
    }
    return true;
}

void check(const dwell::Tokenizer& tok, std::string_view text) {
    // SPM writes spaces as U+2581 and decodes every U+2581 as a space, as
    // llama.cpp does: text that holds one does not come back unchanged.
    const bool round_trips =
        valid_utf8(text) && (tok.is_byte_level_bpe() || text.find("\xe2\x96\x81") == text.npos);
    for (bool special : {false, true}) {
        const std::vector<int32_t> ids = tok.encode(text, tok.wants_bos(), special);
        for (int32_t id : ids)
            if (id < 0 || id >= tok.n_vocab()) __builtin_trap();
        const std::string decoded = tok.decode(ids);
        bool has_unknown = false;
        for (int32_t id : ids) has_unknown = has_unknown || id == tok.unk();
        if (!special && round_trips && !has_unknown && decoded != text) __builtin_trap();
        dwell::StreamDecoder stream(tok);
        std::string streamed;
        for (int32_t id : ids) streamed += stream.push(id);
        streamed += stream.finish();
        if (streamed != decoded) __builtin_trap();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const dwell::Tokenizer spm = spm_tokenizer();
    static const dwell::Tokenizer bpe = bpe_tokenizer();
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    check(spm, text);
    check(bpe, text);
    return 0;
}
