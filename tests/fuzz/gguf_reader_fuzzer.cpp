// libFuzzer target: GgufFile on arbitrary bytes. Parses with the same checks
// as a mapped file, then reads every metadata key with every getter, every
// tensor's bytes, copies the metadata as `dwell convert` does, and builds
// the tokenizer (SPM or byte-level BPE); dwell::Error is the expected
// outcome for a malformed input, anything else (crash, sanitizer report,
// other exception) is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/tools/gguf_metadata_copy.hpp"
#include "dwell/tools/gguf_writer.hpp"

namespace {

// Swallows the expected error of one accessor so the others still run.
template <typename F>
void tolerate(F&& f) {
    try {
        f();
    } catch (const dwell::Error&) {
    }
}

void exercise(const dwell::GgufFile& file) {
    for (const std::string& key : file.keys()) {
        (void)file.has(key);
        (void)file.type_of(key);
        (void)file.get_int(key);
        (void)file.get_float(key);
        if (auto s = file.get_string(key)) {
            volatile size_t n = 0;
            for (char c : *s) n = n + static_cast<unsigned char>(c);
        }
        (void)file.array_length(key);
        (void)file.array_type(key);
        tolerate([&] {
            for (std::string_view s : file.get_string_array(key)) {
                volatile size_t n = s.empty() ? 0 : static_cast<unsigned char>(s.back());
                (void)n;
            }
        });
        tolerate([&] { (void)file.get_float_array(key); });
        tolerate([&] { (void)file.get_int_array(key); });
    }
    uint64_t sum = 0;
    for (const dwell::GgufFile::TensorInfo& t : file.tensors()) {
        if (file.find_tensor(t.name) == nullptr) __builtin_trap();
        for (uint64_t i = 0; i < t.size; ++i) sum += t.data[i];
    }
    volatile uint64_t sink = sum;
    (void)sink;
    dwell_metadata m = dwell::gguf_metadata(file);
    int64_t v = 0;
    (void)m.get_int(m.self, "general.alignment", &v);
    tolerate([&] {
        dwell::GgufWriter copy;
        dwell::copy_gguf_metadata(file, copy, [](std::string_view) { return true; });
        (void)copy.bytes();
    });
    if (file.has("tokenizer.ggml.tokens")) {
        tolerate([&] {
            const dwell::Tokenizer tok = dwell::Tokenizer::from_gguf(file);
            for (bool special : {false, true}) {
                const auto ids =
                    tok.encode("Hello, fuzzer! \xc3\xa9 <|im_start|></s>", true, special);
                (void)tok.decode(ids);
            }
        });
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const dwell::GgufFile file =
            dwell::GgufFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf");
        exercise(file);
    } catch (const dwell::Error&) {
    }
    return 0;
}
