// Writes the fuzz seed corpora: small valid GGUF files and dwell packs that
// cover every metadata type, several dtypes, raw and zstd tensors with many
// frames, and an embedded tokenizer, so the fuzzers start from inputs that
// reach deep into both readers. Usage: dwell_fuzz_seeds OUT_DIR
// (writes OUT_DIR/gguf/* and OUT_DIR/pack/*).
#include <algorithm>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "dwell/core/gguf_file.hpp"
#include "dwell/core/gguf_writer.hpp"
#include "dwell/core/model_source.hpp"
#include "dwell/core/pack_file.hpp"
#include "dwell/core/synthetic_model.hpp"

namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> bytes_of(size_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 7 + seed) % 13 + (i / 16) % 5);
    return v;
}

void add_keys(dwell::GgufWriter& w) {
    w.add_string("general.architecture", "llama");
    w.add_uint32("llama.block_count", 1);
    w.add_int32("llama.context_length", 128);
    w.add_uint64("test.u64", 1234567890123);
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    w.add_bool("test.flag", true);
    const std::vector<std::string> strings = {"<unk>", "<s>", "</s>", "a"};
    w.add_string_array("test.strings", strings);
    const std::vector<float> floats = {0.0f, -1.0f, 2.5f};
    w.add_float32_array("test.floats", floats);
    const std::vector<int32_t> ints = {1, 2, 3};
    w.add_int32_array("test.ints", ints);
}

struct Tensor {
    const char* name;
    dwell_dtype dtype;
    std::vector<int64_t> ne;
    size_t bytes;
};

const std::vector<Tensor>& tensors() {
    static const std::vector<Tensor> t = {
        {"a.weight", DWELL_F32, {5, 3}, 60},
        {"b.weight", DWELL_F16, {8}, 16},
        {"c.weight", DWELL_Q8_0, {32, 2}, 68},
        {"d.weight", DWELL_Q4_0, {64, 3}, 108},
    };
    return t;
}

// Each tensor costs 16 KiB of alignment padding, so packs hold few tensors:
// the fuzzer mutates the whole input and padding is wasted effort.
void write_pack(const fs::path& path, const dwell::PackWriter::Options& o, size_t n_tensors,
                const std::string& tokenizer) {
    dwell::PackWriter w(path, o);
    add_keys(w.metadata());
    w.set_tokenizer(tokenizer);
    for (size_t i = 0; i < n_tensors; ++i) {
        const Tensor& t = tensors()[i];
        std::vector<uint8_t> data = bytes_of(t.bytes, static_cast<uint32_t>(i));
        // Runs of equal bytes, so even small zstd frames come out smaller.
        if (o.compression == dwell::PackCompression::Zstd) {
            for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<uint8_t>(k / 16);
        }
        w.add_tensor(t.name, t.dtype, t.ne, data);
    }
    const std::vector<dwell::PackTensorStorage> stored = w.finish();
    // A tensor too small to shrink stays raw; the seed needs a zstd one.
    if (std::none_of(stored.begin(), stored.end(), [&](const dwell::PackTensorStorage& s) {
            return s.compression == o.compression;
        })) {
        throw std::runtime_error(path.string() + ": no tensor was stored as requested");
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: dwell_fuzz_seeds OUT_DIR\n";
        return 2;
    }
    try {
        const fs::path out = argv[1];
        const fs::path gguf = out / "gguf";
        const fs::path pack = out / "pack";
        fs::create_directories(gguf);
        fs::create_directories(pack);

        {
            dwell::GgufWriter w;
            add_keys(w);
            uint32_t seed = 0;
            for (const Tensor& t : tensors()) {
                w.add_tensor(t.name, t.dtype, t.ne, bytes_of(t.bytes, seed++));
            }
            w.write(gguf / "keys-and-tensors.gguf");
        }
        {
            dwell::GgufWriter w(64);
            w.add_string("general.architecture", "llama");
            w.add_tensor("x", DWELL_F32, std::vector<int64_t>{4, 1, 1, 2}, bytes_of(32, 9));
            w.write(gguf / "aligned-64.gguf");
        }
        dwell::GgufWriter().write(gguf / "empty.gguf");

        // A tiny Llama with a generated vocabulary: tokenizer keys a real
        // model has, and the tokenizer a converted pack embeds.
        dwell::SyntheticLlamaSpec spec;
        spec.n_embd = 32;
        spec.n_layer = 1;
        spec.n_head = 2;
        spec.n_head_kv = 1;
        spec.n_ff = 32;
        spec.n_vocab = 512;
        spec.n_ctx = 64;
        spec.tied_output = true;
        spec.dtype = DWELL_Q4_0;
        const fs::path synth = gguf / "synth-llama.gguf";
        dwell::write_synthetic_llama(spec, synth);

        const dwell::GgufFile synth_file = dwell::GgufFile::open(synth);
        const std::string tok = dwell::Tokenizer::from_gguf(synth_file).serialized_model();
        write_pack(pack / "raw.dwell", {}, 1, "");
        dwell::PackWriter::Options z;
        z.compression = dwell::PackCompression::Zstd;
        z.zstd_level = 3;
        z.frame_bytes = 32;
        write_pack(pack / "zstd-frames.dwell", z, 2, "");
        {
            dwell::PackWriter w(pack / "tokenizer-only.dwell", {});
            add_keys(w.metadata());
            w.set_tokenizer(tok);
            w.finish();
        }
    } catch (const std::exception& e) {
        std::cerr << "dwell_fuzz_seeds: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
