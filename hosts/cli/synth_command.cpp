// `dwell synth`: a GGUF of one decoder family with deterministic random weights.
#include <iostream>

#include "cli_common.hpp"
#include "dwell/core/base/error.hpp"
#include "dwell/tools/synthetic_model.hpp"

namespace dwell::cli {

namespace {

dwell_dtype parse_type(const std::string& s) {
    if (s == "f32") return DWELL_F32;
    if (s == "f16") return DWELL_F16;
    if (s == "q8_0") return DWELL_Q8_0;
    if (s == "q4_0") return DWELL_Q4_0;
    throw po::error("--type '" + s + "' is not one synth writes (f32, f16, q8_0, q4_0)");
}

}  // namespace

int synth_command(const std::vector<std::string>& args) {
    SyntheticModelSpec spec;
    std::string arch, type, out, vocab, rope_scaling;
    int64_t seed = 1;
    po::options_description desc("dwell synth");
    // clang-format off
    desc.add_options()
        ("arch", po::value(&arch)->default_value("llama"), "model family: llama, qwen2, gemma, mixtral, qwen3, qwen3moe, smollm3, gemma2, gemma3, llama3, phi3, lfm2 or qwen35")
        ("l-cache", po::value(&spec.conv_l_cache)->default_value(spec.conv_l_cache), "lfm2, qwen35: taps of the short convolutions (2..16)")
        ("sliding-window", po::value(&spec.sliding_window), "gemma2/3: window of the local layers (default 16)")
        ("swa-pattern", po::value(&spec.swa_pattern)->default_value(0), "gemma2/3: every Nth layer is global (0: the family's 2 / 6)")
        ("rope-base-swa", po::value(&spec.rope_freq_base_swa)->default_value(0.0f), "gemma2/3: RoPE base of the local layers (0: the family's)")
        ("attn-softcap", po::value(&spec.attn_softcap), "gemma2: attention-logit soft-cap (default 1)")
        ("final-softcap", po::value(&spec.final_softcap), "gemma2/3: final-logit soft-cap (default 1 for gemma2, none for gemma3)")
        ("head-dim", po::value(&spec.head_dim)->default_value(spec.head_dim), "attention head size (0: n-embd / n-head)")
        ("n-expert", po::value(&spec.n_expert)->default_value(8), "mixtral, qwen3moe: experts per layer")
        ("n-expert-used", po::value(&spec.n_expert_used)->default_value(2), "mixtral, qwen3moe: experts each token uses")
        ("n-embd", po::value(&spec.n_embd)->default_value(spec.n_embd), "embedding width")
        ("n-layer", po::value(&spec.n_layer)->default_value(spec.n_layer), "layers")
        ("n-head", po::value(&spec.n_head)->default_value(spec.n_head), "attention heads")
        ("n-head-kv", po::value(&spec.n_head_kv)->default_value(spec.n_head_kv), "key/value heads (GQA)")
        ("n-ff", po::value(&spec.n_ff)->default_value(spec.n_ff), "feed-forward width")
        ("n-vocab", po::value(&spec.n_vocab)->default_value(spec.n_vocab), "vocabulary size (generated vocab)")
        ("ctx", po::value(&spec.n_ctx)->default_value(spec.n_ctx), "training context length")
        ("n-rot", po::value(&spec.n_rot), "phi3: rotated dims per head (default: 3/4 of the head, even)")
        ("ctx-orig", po::value(&spec.n_ctx_orig)->default_value(0), "phi3, --rope-scaling yarn: the original context (0: ctx / 4)")
        ("rope-scaling", po::value(&rope_scaling)->default_value("none"), "RoPE scaling written: none or yarn (not phi3, whose is LongRoPE)")
        ("rope-scaling-factor", po::value(&spec.yarn_factor)->default_value(4.0f), "--rope-scaling yarn: the context factor (>= 1)")
        ("tied", po::bool_switch(&spec.tied_output), "share the embedding as the output layer")
        ("type", po::value(&type)->default_value("f32"), "weight type: f32, f16, q8_0, q4_0")
        ("vocab", po::value(&vocab), "take the vocabulary from this sentencepiece .model file")
        ("seed", po::value(&seed)->default_value(1), "random seed")
        ("output,o", po::value(&out)->required(), "output GGUF file");
    // clang-format on
    po::variables_map vm;
    if (!parse("synth", "-o FILE.gguf [options]", desc, args, vm)) return 0;
    set_verbosity(0);
    try {
        spec.family = parse_synthetic_family(arch);
    } catch (const Error&) {
        throw po::error("--arch '" + arch +
                        "' is not a model family (llama, qwen2, gemma, mixtral, qwen3, qwen3moe, "
                        "smollm3, gemma2, gemma3, llama3, phi3, lfm2, qwen35)");
    }
    // The Gemma 2/3 defaults exercise their special paths at synth's sizes:
    // a window shorter than a short prompt, soft-caps the synthetic scores
    // and logits reach.
    const bool gemma23 =
        spec.family == SyntheticFamily::gemma2 || spec.family == SyntheticFamily::gemma3;
    if (gemma23 && !vm.count("sliding-window")) spec.sliding_window = 16;
    if (spec.family == SyntheticFamily::gemma2 && !vm.count("attn-softcap"))
        spec.attn_softcap = 1.0f;
    if (spec.family == SyntheticFamily::gemma2 && !vm.count("final-softcap"))
        spec.final_softcap = 1.0f;
    for (const auto& [flag, value] : {std::pair{"--sliding-window", spec.sliding_window},
                                      {"--swa-pattern", spec.swa_pattern}}) {
        if (value < 0)
            throw po::error(std::string(flag) + " " + std::to_string(value) + " must be >= 0");
    }
    // LFM2: six layers interleave convolutions and attention (attention at
    // 2 and 5), and the norms, QK-norms included, are jittered off 1.
    if (spec.family == SyntheticFamily::lfm2) {
        if (vm["n-layer"].defaulted()) spec.n_layer = 6;
        spec.norm_jitter = 0.2f;
    } else if (spec.family == SyntheticFamily::qwen35) {
        // Four layers: delta nets at 0..2, full attention at 3.
        if (vm["n-layer"].defaulted()) spec.n_layer = 4;
        spec.norm_jitter = 0.2f;
    } else if (!vm["l-cache"].defaulted()) {
        throw po::error("--l-cache is for --arch lfm2 and qwen35");
    }
    // Llama 3's base; its factors are derived from it.
    if (spec.family == SyntheticFamily::llama3) spec.rope_freq_base = 500000.0f;
    for (const auto& [flag, value] : {std::pair{"--n-embd", spec.n_embd},
                                      {"--n-layer", spec.n_layer},
                                      {"--n-head", spec.n_head},
                                      {"--n-head-kv", spec.n_head_kv},
                                      {"--n-ff", spec.n_ff},
                                      {"--n-vocab", spec.n_vocab},
                                      {"--ctx", spec.n_ctx}}) {
        if (value < 1)
            throw po::error(std::string(flag) + " " + std::to_string(value) + " must be >= 1");
    }
    if (spec.head_dim < 0)
        throw po::error("--head-dim " + std::to_string(spec.head_dim) + " must be >= 0");
    if (vm.count("n-rot") && spec.family != SyntheticFamily::phi3)
        throw po::error("--n-rot is for --arch phi3");
    if (rope_scaling != "none" && rope_scaling != "yarn")
        throw po::error("--rope-scaling '" + rope_scaling +
                        "' is not one synth writes (none, yarn)");
    const bool yarn = rope_scaling == "yarn";
    if (yarn && spec.family == SyntheticFamily::phi3)
        throw po::error("--rope-scaling yarn is not for --arch phi3 (its scaling is LongRoPE)");
    if (!yarn && !vm["rope-scaling-factor"].defaulted())
        throw po::error("--rope-scaling-factor is for --rope-scaling yarn");
    if (!yarn) spec.yarn_factor = 0.0f;
    if (yarn && !(spec.yarn_factor >= 1.0f))
        throw po::error("--rope-scaling-factor " + std::to_string(spec.yarn_factor) +
                        " must be >= 1");
    if (spec.n_ctx_orig < 0 ||
        (spec.n_ctx_orig != 0 && spec.family != SyntheticFamily::phi3 && !yarn))
        throw po::error("--ctx-orig must be >= 0 and is for --arch phi3 or --rope-scaling yarn");
    if (spec.family == SyntheticFamily::phi3 && !vm.count("n-rot")) {
        const int64_t head = spec.head_dim > 0 ? spec.head_dim : spec.n_embd / spec.n_head;
        spec.n_rot = head * 3 / 4 / 2 * 2;  // partial rotary, as Phi-4-mini
    }
    if (spec.n_rot < 0) throw po::error("--n-rot " + std::to_string(spec.n_rot) + " must be >= 0");
    if (!vocab.empty()) check_input_file({"--vocab", vocab});
    check_output_not_input({"-o", out}, {{"--vocab", vocab}});
    if (spec.family != SyntheticFamily::mixtral && spec.family != SyntheticFamily::qwen3moe)
        spec.n_expert = spec.n_expert_used = 0;
    spec.dtype = parse_type(type);
    spec.seed = static_cast<uint64_t>(seed);
    if (!vocab.empty()) spec.vocab_model = vocab;
    try {
        write_synthetic_model(spec, out);
    } catch (const Error& e) {
        // The spec's own checks (shapes that do not fit together) run before
        // anything is written: they are option errors too.
        const std::string what = e.what();
        if (e.status() == DWELL_ERR_INVALID_ARGUMENT && what.rfind("synth: ", 0) == 0)
            throw po::error(what.substr(7));
        throw;
    }
    std::cerr << "wrote " << out << "\n";
    return 0;
}

}  // namespace dwell::cli
