// Times opening a model file (GGUF or dwell pack) the way the runtime does:
// header and directory validated, checksums verified, zstd frames
// decompressed. Prints one JSON object: median / min / max seconds over
// --repeat runs and the bytes made resident.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/model/model_source.hpp"

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: dwell-bench-model-open MODEL [REPEAT]\n");
        return 2;
    }
    const std::string path = argv[1];
    const int repeat = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
    std::vector<double> seconds;
    uint64_t resident = 0;
    uint64_t stored = 0;
    try {
        for (int i = 0; i < repeat; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            auto source = dwell::open_model_source(path);
            uint64_t sum = 0;
            // Touch one byte per page so a mapped file is really read.
            for (const auto& t : source->tensors()) {
                for (uint64_t off = 0; off < t.size; off += 4096) sum += t.data[off];
                resident += i == 0 ? t.size : 0;
                // What the tensor takes in the file: compressed frames, or raw.
                stored += i == 0 ? (t.stored.bytes ? t.stored.bytes : t.size) : 0;
            }
            seconds.push_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            if (sum == 1) std::fputc(' ', stderr);  // keeps the reads from being optimised away
        }
    } catch (const dwell::Error& e) {
        std::fprintf(stderr, "dwell-bench-model-open: %s\n", e.what());
        return 1;
    }
    std::sort(seconds.begin(), seconds.end());
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::printf(
        "{\"model\": \"%s\", \"runs\": %d, \"open_seconds\": {\"median\": %.6f, \"min\": %.6f, "
        "\"max\": %.6f}, "
        "\"tensor_bytes\": %llu, \"stored_bytes\": %llu, \"peak_rss_bytes\": %llu}\n",
        path.c_str(), repeat, seconds[seconds.size() / 2], seconds.front(), seconds.back(),
        static_cast<unsigned long long>(resident), static_cast<unsigned long long>(stored),
        static_cast<unsigned long long>(usage.ru_maxrss) * 1024ull);
    return 0;
}
