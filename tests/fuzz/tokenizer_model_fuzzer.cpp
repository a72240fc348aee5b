// libFuzzer target: a serialized sentencepiece model (a .model file, or the
// tokenizer a dwell pack embeds) loaded by Tokenizer::from_serialized_model,
// then every piece looked up and a few texts encoded and decoded. Checks
// what tokenizer.hpp promises for any model that loads: ids in range, and
// StreamDecoder's pieces adding up to decode(). dwell::Error is the
// expected outcome for a bad model; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/text/tokenizer.hpp"

namespace {

constexpr std::string_view kTexts[] = {
    "Once upon a time, there was a little girl.",
    "  two  spaces\tand\nlines ",
    "caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x99\x82 <s></s><unk>",
    "\xff\xfe invalid \xc3",
};

void exercise(const dwell::Tokenizer& tok) {
    const int32_t n = tok.n_vocab();
    std::vector<int32_t> all;
    for (int32_t id = 0; id < n; ++id) {
        (void)tok.piece(id);
        (void)tok.token_bytes(id);
        (void)tok.is_control(id);
        all.push_back(id);
    }
    dwell::StreamDecoder stream(tok);
    std::string streamed;
    for (int32_t id : all) streamed += stream.push(id);
    streamed += stream.finish();
    if (streamed != tok.decode(all)) __builtin_trap();
    for (std::string_view text : kTexts) {
        for (bool special : {false, true}) {
            std::vector<int32_t> ids;
            try {
                ids = tok.encode(text, true, special);
            } catch (const dwell::Error&) {
                continue;  // e.g. no BOS token to prepend
            }
            for (int32_t id : ids)
                if (id < 0 || id >= n) __builtin_trap();
            (void)tok.decode(ids);
        }
    }
    (void)tok.serialized_model();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view model(reinterpret_cast<const char*>(data), size);
    try {
        const dwell::Tokenizer tok = dwell::Tokenizer::from_serialized_model(model, "fuzz.model");
        exercise(tok);
    } catch (const dwell::Error&) {
    }
    return 0;
}
