// `dwell eval`: the logits of every position of a token sequence, as raw
// little-endian f32 [n_tokens x n_vocab], for comparison with other
// implementations.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli_common.hpp"
#include "dwell/core/base/error.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/platform/output_file.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/tools/progress_bar.hpp"

namespace dwell::cli {

namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
    std::vector<int32_t> ids;
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, ',');) {
        size_t used = 0;
        int32_t id = 0;
        try {
            id = std::stoi(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != item.size()) {
            throw po::error("--ids '" + text + "' is not a comma-separated list of token ids");
        }
        ids.push_back(id);
    }
    return ids;
}

}  // namespace

int eval_command(const std::vector<std::string>& args) {
    CommonArgs common;
    std::string model_path, ids_text, prompt, logits_path;
    std::string kv_type;
    int32_t n_ctx = 0;
    po::options_description desc("dwell eval");
    // clang-format off
    desc.add_options()
        ("model,m", po::value(&model_path)->required(), "model file (GGUF)")
        ("ids", po::value(&ids_text), "comma-separated token ids, e.g. 1,403,407")
        ("prompt,p", po::value(&prompt), "text to tokenize (with BOS) instead of --ids")
        ("logits", po::value(&logits_path)->required(), "output file: f32 [n_tokens x n_vocab], little-endian")
        ("kv-type", po::value(&kv_type), "KV-cache type: f16, q8_0, fp8_e4m3 or f32 (default: the manifest's [kv] dtype)")
        ("ctx,c", po::value(&n_ctx)->default_value(0), "context size (0: the model's)");
    // clang-format on
    add_runtime_options(desc, common);
    po::variables_map vm;
    if (!parse("eval", "-m MODEL (--ids 1,2,3 | -p TEXT) --logits FILE", desc, args, vm)) return 0;
    set_verbosity(common.verbosity);
    if (vm.count("ids") == vm.count("prompt")) {
        throw po::error("give exactly one of --ids and --prompt");
    }
    // Every option is checked before anything loads.
    std::vector<int32_t> ids;
    if (vm.count("ids")) ids = parse_ids(ids_text);
    check_ctx(n_ctx);
    SessionOptions so;
    if (!kv_type.empty()) so.kv_dtype = parse_kv_type(kv_type);
    const RuntimeOptions ro = runtime_options(common);
    check_output_not_input(
        {"--logits", logits_path},
        {{"-m", model_path}, {"--manifest", common.manifest}, {"--getprop", common.getprop}});

    Runtime runtime(ro);
    auto model = Model::load(runtime, model_path, terminal_load_progress());
    if (!vm.count("ids")) ids = model->tokenizer().encode(prompt, true);
    so.n_ctx = n_ctx > 0 ? n_ctx : std::max<int32_t>(static_cast<int32_t>(ids.size()), 1);
    Session session(runtime, model, so);
    const auto logits = session.decode(ids, /*all_logits=*/true);

    OutputFile out(logits_path);
    out.write(logits.data(), logits.size_bytes());
    out.commit();
    std::cerr << "wrote " << ids.size() << " x " << model->info().n_vocab << " logits to "
              << logits_path << "\n";
    return 0;
}

}  // namespace dwell::cli
