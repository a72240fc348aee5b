// `dwell`: one executable, one subcommand per job.
#include <spdlog/spdlog.h>

#include <cstring>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "dwell/core/base/error.hpp"
#include "dwell/core/base/printable_name.hpp"
#include "dwell/core/base/version.hpp"

namespace {

void usage(std::ostream& out) {
    out << "usage: dwell <command> [options]   (dwell <command> --help for its options)\n\n"
           "commands:\n"
           "  run         generate text from a prompt and print the speed\n"
           "  eval        write the logits of every position of a token sequence\n"
           "  perplexity  measure a model's perplexity on a text file (as llama-perplexity)\n"
           "  bench       measure prefill and decode speed (as llama-bench's pp/tg tests)\n"
           "  calibrate   measure per-input activation-sparsity thresholds on a text\n"
           "  chat        talk to a chat model in the terminal\n"
           "  serve       serve the OpenAI HTTP API (completions, chat, streaming)\n"
           "  devices     list plugins, devices and what the manifest selected\n"
           "  convert     turn a GGUF file into a dwell pack (quantized, compressed)\n"
           "  synth       write a GGUF of a model family with random weights\n"
           "  version     print the version\n";
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        usage(std::cerr);
        return 2;
    }
    const std::string command = argv[1];
    std::vector<std::string> args(argv + 2, argv + argc);
    if (command == "-h" || command == "--help" || command == "help") {
        usage(std::cout);
        return 0;
    }
    if (command == "version" || command == "--version") {
        try {
            dwell::cli::check_no_stray_arguments(args);
        } catch (const boost::program_options::error& e) {
            std::cerr << "dwell " << command << ": " << e.what() << "\n";
            return 2;
        }
        std::cout << "dwell " << dwell::version() << " (plugin ABI " << DWELL_ABI_MAJOR << "."
                  << DWELL_ABI_MINOR << ")\n";
        return 0;
    }
    try {
        if (command == "run") return dwell::cli::run_command(args);
        if (command == "devices") return dwell::cli::devices_command(args);
        if (command == "serve") {
#ifdef DWELL_HAVE_SERVER
            return dwell::cli::serve_command(args);
#else
            std::cerr << "dwell serve: this build has no HTTP server (cpp-httplib was missing when "
                         "it was built: apt install libcpp-httplib-dev, then rebuild)\n";
            return 1;
#endif
        }
        if (command == "chat") return dwell::cli::chat_command(args);
        if (command == "synth") return dwell::cli::synth_command(args);
        if (command == "eval") return dwell::cli::eval_command(args);
        if (command == "convert") return dwell::cli::convert_command(args);
        if (command == "perplexity") return dwell::cli::perplexity_command(args);
        if (command == "bench") return dwell::cli::bench_command(args);
        if (command == "calibrate") return dwell::cli::calibrate_command(args);
        std::cerr << "dwell: unknown command '" << dwell::printable_name(command) << "'\n";
        usage(std::cerr);
        return 2;
    } catch (const boost::program_options::error& e) {
        std::cerr << "dwell " << command << ": " << e.what() << " (see dwell " << command
                  << " --help)\n";
        return 2;
    } catch (const std::bad_alloc&) {
        // Anywhere an allocation is too large for this machine; the sizes
        // of a model or of options are the usual cause.
        std::cerr << "dwell " << command
                  << ": error: out of memory (an allocation failed: use a smaller model, "
                     "--ctx or --memory-budget)\n";
        return 1;
    } catch (const std::exception& e) {
        // Messages quote file names and device facts: outside input that must
        // not reach the terminal as escape sequences or forged lines.
        std::cerr << "dwell " << dwell::printable_text(command)
                  << ": error: " << dwell::printable_text(e.what()) << "\n";
        return 1;
    }
}
