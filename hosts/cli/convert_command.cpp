// `dwell convert`: a GGUF file to a dwell pack, optionally quantized to
// dwell's formats and zstd-compressed, with a per-tensor report.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli_common.hpp"
#include "dwell/core/base/error.hpp"
#include "dwell/core/base/format_bytes.hpp"
#include "dwell/tools/convert.hpp"
#include "dwell/tools/progress_bar.hpp"

namespace dwell::cli {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s;
    // append, not "x" + to_string(...): GCC 12 warns falsely (-Wrestrict) on the latter.
    for (size_t i = 0; i < shape.size(); ++i)
        s.append(i ? "x" : "").append(std::to_string(shape[i]));
    return s;
}

}  // namespace

int convert_command(const std::vector<std::string>& args) {
    std::string input, output, quant, compress;
    double snr_db = 20.0;
    int zstd_level = 9;
    int64_t frame_kb = 256;
    bool quiet = false;
    po::options_description desc("dwell convert");
    po::positional_options_description positional;
    positional.add("input", 1);
    // clang-format off
    desc.add_options()
        ("input", po::value(&input)->required(), "the GGUF file to convert")
        ("output,o", po::value(&output)->required(), "the pack to write (.dwell)")
        ("quant", po::value(&quant)->default_value("keep"), "keep, q8 (int8 per channel), q4g128 / q4g64 / q4g32 (int4, groups of 128 / 64 / 32) or mixed")
        ("snr-db", po::value(&snr_db)->default_value(20.0, "20"), "mixed: the least signal-to-noise ratio a tensor may keep (dB)")
        ("compress", po::value(&compress)->default_value("none"), "none or zstd (independent frames per tensor)")
        ("zstd-level", po::value(&zstd_level)->default_value(9), "zstd compression level (1-22)")
        ("frame-kb", po::value(&frame_kb)->default_value(256), "raw KiB per zstd frame")
        ("quiet,q", po::bool_switch(&quiet), "do not print the per-tensor table");
    // clang-format on
    po::variables_map vm;
    if (!parse("convert",
               "IN.gguf -o OUT.dwell [--quant q4g128|q4g64|q4g32|q8|mixed|keep] [--compress zstd]",
               desc, args, vm, &positional)) {
        return 0;
    }
    set_verbosity(0);
    check_output_not_input({"-o", output}, {{"the input", input}});
    ConvertOptions o;
    o.input = input;
    o.output = output;
    try {
        o.quant = parse_quant_policy(quant);
    } catch (const Error& e) {
        throw po::error(e.what());
    }
    if (!(snr_db > 0) || std::isinf(snr_db))
        throw po::error("--snr-db " + std::to_string(snr_db) + " must be a positive number of dB");
    o.snr_db = snr_db;
    if (compress == "zstd") {
        o.compression = PackCompression::Zstd;
    } else if (compress != "none") {
        throw po::error("--compress '" + compress + "' is not a compression (use none or zstd)");
    }
    if (zstd_level < 1 || zstd_level > 22)
        throw po::error("--zstd-level " + std::to_string(zstd_level) + " must be 1..22");
    if (frame_kb < 4 || frame_kb > (1 << 20))
        throw po::error("--frame-kb " + std::to_string(frame_kb) + " must be 4..1048576");
    o.zstd_level = zstd_level;
    o.frame_bytes = static_cast<uint64_t>(frame_kb) * 1024;

    const auto t0 = std::chrono::steady_clock::now();
    std::optional<ProgressBar> bar;  // made once the tensor count is known
    const ConvertReport report = convert_to_pack(o, [&](size_t done, size_t total) {
        if (!bar) bar.emplace("convert", static_cast<int64_t>(total));
        bar->update(static_cast<int64_t>(done));
    });
    if (bar) bar->finish();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    if (!quiet) {
        std::printf("%-34s %-14s %-8s %8s %9s\n", "tensor", "shape", "type", "bits/w", "SNR dB");
        for (const auto& t : report.tensors) {
            char snr[32];
            if (std::isinf(t.snr_db)) {
                std::snprintf(snr, sizeof snr, "exact");
            } else {
                std::snprintf(snr, sizeof snr, "%.1f", t.snr_db);
            }
            std::printf("%-34s %-14s %-8s %8.2f %9s\n", t.name.c_str(), shape_text(t.shape).c_str(),
                        dwell_dtype_name(t.to), t.bits_per_weight, snr);
        }
    }
    std::printf("%s: %s, %.2f bits/weight on average, %s -> %s in %.1f s\n", output.c_str(),
                quant_policy_name(o.quant), report.bits_per_weight,
                format_bytes(report.input_bytes).c_str(), format_bytes(report.output_bytes).c_str(),
                seconds);
    return 0;
}

}  // namespace dwell::cli
