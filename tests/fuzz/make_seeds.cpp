// Writes the fuzz seed corpora, one folder per fuzzer, from real inputs:
// small valid GGUF files and dwell packs (every metadata type, several
// dtypes, raw and zstd tensors with many frames, SPM and byte-level BPE
// vocabularies), session files written by the session writer, serialized
// sentencepiece models, the shipped manifests, the captured device trees of
// tests/data/devices, and the hand-written texts of tests/fuzz/seeds/.
// Usage: dwell_fuzz_seeds OUT_DIR MANIFESTS_DIR SEEDS_DIR DEVICES_DIR [MODELS_DIR]
// (MODELS_DIR: where tok512.model may be; skipped when absent).
#include <algorithm>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/core/model/model_source.hpp"
#include "dwell/core/model/pack_file.hpp"
#include "dwell/core/session/session_file.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/tools/gguf_writer.hpp"
#include "dwell/tools/pack_writer.hpp"
#include "dwell/tools/synthetic_bpe_vocab.hpp"
#include "dwell/tools/synthetic_model.hpp"
#include "session_file_model.hpp"

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

// The model-file corpora; returns the serialized sentencepiece model of
// the synthetic vocabulary.
std::string write_model_file_seeds(const fs::path& gguf, const fs::path& pack) {
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
    dwell::SyntheticModelSpec spec;
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
    dwell::write_synthetic_model(spec, synth);

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
    {
        // A byte-level BPE vocabulary (tokenizer.ggml.model "gpt2"), small
        // so that mutations reach its merges.
        dwell::GgufWriter w;
        w.add_string("general.architecture", "qwen2");
        dwell::write_bpe_vocab(w, dwell::make_synthetic_bpe_vocab(300, 1), "qwen2");
        w.write(gguf / "bpe-vocab.gguf");
    }
    return tok;
}

void write_file(const fs::path& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error(path.string() + ": cannot write");
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path.string() + ": cannot read");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every regular file of `dir` (sorted), or none when it does not exist.
std::vector<fs::path> files_in(const fs::path& dir) {
    std::vector<fs::path> out;
    if (!fs::is_directory(dir)) return out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file()) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

// Copies the files of `from` (those ending in `suffix`) into `to`.
void copy_seeds(const fs::path& from, const fs::path& to, std::string_view suffix = "") {
    for (const fs::path& f : files_in(from)) {
        if (!f.filename().string().ends_with(suffix)) continue;
        fs::copy_file(f, to / f.filename(), fs::copy_options::overwrite_existing);
    }
}

// Sessions of every KV type, as Session::save writes them: empty, and
// three tokens with their logits, a pending token and host data, and the
// fuzz model's recurrent states.
void write_session_seeds(const fs::path& dir) {
    const dwell::SessionFileModel model = dwell::fuzz::session_file_model();
    for (const dwell_dtype dtype : {DWELL_F16, DWELL_F32, DWELL_Q8_0, DWELL_FP8_E4M3}) {
        for (const int32_t n_past : {0, 3}) {
            dwell::SessionFileHeader h;
            h.kv_dtype = dtype;
            h.n_ctx = 8;
            h.n_past = n_past;
            h.n_logits = n_past ? static_cast<int32_t>(model.n_vocab) : 0;
            // With tokens: a pending token and host data (a chat's conversation).
            const std::string host = n_past ? "{\"messages\":[]}" : "";
            h.pending_token = n_past ? 5 : -1;
            h.host_data_bytes = static_cast<uint32_t>(host.size());
            const fs::path path = dir / (std::string(dwell_dtype_name(dtype)) + "-" +
                                         std::to_string(n_past) + ".dwses");
            dwell::SessionFileWriter w(path, model, h);
            for (int32_t t = 0; t < n_past; ++t) {
                const int32_t id = t * 7 + 1;
                w.write(&id, sizeof id);
            }
            for (int32_t i = 0; i < h.n_logits; ++i) {
                const float logit = 0.25f * static_cast<float>(i % 9) - 1.0f;
                w.write(&logit, sizeof logit);
            }
            w.write(host.data(), host.size());
            const std::vector<uint8_t> row = bytes_of(dwell_row_bytes(dtype, model.kv_width), 3);
            for (int64_t r = 0; r < 2 * model.n_layer * n_past; ++r)
                w.write(row.data(), row.size());
            for (int64_t v = 0; v < model.n_layer * (model.state_elems[0] + model.state_elems[1]);
                 ++v) {
                const float value = 0.125f * static_cast<float>(v % 11) - 0.5f;
                w.write(&value, sizeof value);
            }
            w.finish();
        }
    }
}

// Request bodies: tests/fuzz/seeds/openai_request/chat-*.json go to the chat
// endpoint, the others to completions; the fuzzer reads the endpoint from
// the first byte ('1': chat, '0': completions).
void write_request_seeds(const fs::path& from, const fs::path& to) {
    for (const fs::path& f : files_in(from)) {
        const bool chat = f.filename().string().rfind("chat-", 0) == 0;
        write_file(to / f.filename(), (chat ? "1" : "0") + read_file(f));
    }
}

// Each captured device tree as the device-facts fuzzer's input: cpuinfo,
// getprop.txt, meminfo and soc_id, separated by NUL bytes.
void write_device_seeds(const fs::path& devices, const fs::path& to) {
    if (!fs::is_directory(devices)) return;
    for (const auto& e : fs::directory_iterator(devices)) {
        if (!e.is_directory()) continue;
        std::string input;
        bool first = true;
        for (const char* file :
             {"proc/cpuinfo", "getprop.txt", "proc/meminfo", "sys/devices/soc0/soc_id"}) {
            if (!first) input.push_back('\0');
            first = false;
            if (fs::is_regular_file(e.path() / file)) input += read_file(e.path() / file);
        }
        write_file(to / (e.path().filename().string() + ".txt"), input);
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 5 || argc > 6) {
        std::cerr
            << "usage: dwell_fuzz_seeds OUT_DIR MANIFESTS_DIR SEEDS_DIR DEVICES_DIR [MODELS_DIR]\n";
        return 2;
    }
    try {
        const fs::path out = argv[1];
        const fs::path manifests = argv[2];
        const fs::path seeds = argv[3];
        const fs::path devices = argv[4];
        const fs::path models = argc > 5 ? fs::path(argv[5]) : fs::path();
        const auto corpus = [&](const char* fuzzer) {
            const fs::path dir = out / fuzzer;
            fs::create_directories(dir);
            return dir;
        };

        const std::string spm =
            write_model_file_seeds(corpus("gguf_reader"), corpus("pack_reader"));

        const fs::path tok_models = corpus("tokenizer_model");
        write_file(tok_models / "synthetic-spm.model", spm);
        if (!models.empty() && fs::is_regular_file(models / "tok512.model"))
            fs::copy_file(models / "tok512.model", tok_models / "tok512.model",
                          fs::copy_options::overwrite_existing);

        const fs::path manifest = corpus("manifest");
        copy_seeds(manifests, manifest, ".toml");
        copy_seeds(seeds / "manifest", manifest);
        copy_seeds(seeds / "tokenizer_text", corpus("tokenizer_text"));
        // The published chat templates the engine is tested against.
        copy_seeds(seeds / ".." / ".." / "data" / "chat_templates", corpus("jinja_template"),
                   ".jinja");
        write_request_seeds(seeds / "openai_request", corpus("openai_request"));
        write_session_seeds(corpus("session_file"));
        write_device_seeds(devices, corpus("device_facts"));
    } catch (const std::exception& e) {
        std::cerr << "dwell_fuzz_seeds: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
