// Read bandwidth as token generation meets it: each thread streams once
// through its own contiguous slice of a buffer far larger than the caches,
// as a matrix-vector product streams through its rows of the weights. The
// ceiling for decode speed is this figure divided by the weight bytes read
// per token (tests/bench/cpu_speed_vs_llamacpp.sh computes that ratio).
//
//   dwell-bench-bandwidth [--threads T] [--mib M] [--passes P]
//
// Prints one JSON object: {"threads", "bytes", "passes",
// "read_gb_per_s": {"median", "max"}} (GB = 1e9 bytes).
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Options {
    int threads = 1;
    uint64_t mib = 1024;
    int passes = 7;
};

bool parse_int(const char* text, long long min, long long max, long long& out) {
    char* end = nullptr;
    const long long v = std::strtoll(text, &end, 10);
    if (end == text || *end != '\0' || v < min || v > max) return false;
    out = v;
    return true;
}

// Several independent accumulators so the adds are not one serial chain and
// the compiler may keep them in vector registers.
uint64_t sum_words(const uint64_t* p, size_t n) {
    uint64_t a = 0, b = 0, c = 0, d = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a += p[i];
        b += p[i + 1];
        c += p[i + 2];
        d += p[i + 3];
    }
    for (; i < n; ++i) a += p[i];
    return a + b + c + d;
}

struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
};

}  // namespace

int main(int argc, char** argv) {
    Options o;
    o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        long long v = 0;
        const bool has_value = i + 1 < argc;
        if (arg == "--threads" && has_value && parse_int(argv[i + 1], 1, 1024, v)) {
            o.threads = static_cast<int>(v);
        } else if (arg == "--mib" && has_value && parse_int(argv[i + 1], 1, 1 << 20, v)) {
            o.mib = static_cast<uint64_t>(v);
        } else if (arg == "--passes" && has_value && parse_int(argv[i + 1], 1, 1000, v)) {
            o.passes = static_cast<int>(v);
        } else {
            std::fprintf(stderr,
                         "usage: dwell-bench-bandwidth [--threads 1..1024] [--mib M] "
                         "[--passes P] (bad or missing value at '%s')\n",
                         arg.c_str());
            return 2;
        }
        ++i;
    }
    const uint64_t bytes = o.mib << 20;
    const size_t words = bytes / sizeof(uint64_t);
    // Page-aligned, and written by the thread that will read each slice so
    // first-touch puts its pages near that thread on NUMA machines.
    std::unique_ptr<uint64_t, FreeDeleter> buffer(
        static_cast<uint64_t*>(std::aligned_alloc(4096, bytes)));
    if (!buffer) {
        std::fprintf(stderr, "dwell-bench-bandwidth: cannot allocate %llu bytes\n",
                     static_cast<unsigned long long>(bytes));
        return 1;
    }
    const auto slice = [&](int t) {
        const size_t begin = words * static_cast<size_t>(t) / static_cast<size_t>(o.threads);
        const size_t end = words * static_cast<size_t>(t + 1) / static_cast<size_t>(o.threads);
        return std::pair{begin, end};
    };

    // The calling thread reads slice 0 and times each pass between two
    // barriers, so the figure is the slowest thread's, as a decode step
    // waits for its slowest thread. It works rather than waits because an
    // idle timer thread beside T readers would oversubscribe T cores and
    // start its clock late.
    std::barrier sync(o.threads);
    std::vector<uint64_t> sinks(static_cast<size_t>(o.threads) * 8);  // 64 bytes apart
    const auto read_passes = [&](int t, std::vector<double>* gbps) {
        const auto [begin, end] = slice(t);
        uint64_t* p = buffer.get();
        for (size_t i = begin; i < end; ++i) p[i] = i;
        for (int pass = 0; pass < o.passes + 1; ++pass) {
            sync.arrive_and_wait();
            const auto t0 = std::chrono::steady_clock::now();
            sinks[static_cast<size_t>(t) * 8] += sum_words(p + begin, end - begin);
            sync.arrive_and_wait();
            const double s =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            // Pass 0 warms the TLB and the prefetchers.
            if (gbps && pass > 0) gbps->push_back(static_cast<double>(bytes) / s / 1e9);
        }
    };
    std::vector<std::jthread> workers;
    for (int t = 1; t < o.threads; ++t) workers.emplace_back(read_passes, t, nullptr);
    std::vector<double> gbps;
    read_passes(0, &gbps);
    workers.clear();
    uint64_t check = 0;
    for (size_t t = 0; t < sinks.size(); t += 8) check += sinks[t];
    if (check == 1) std::fputc(' ', stderr);  // keeps the sums from being optimised away

    std::sort(gbps.begin(), gbps.end());
    const size_t n = gbps.size();
    const double median = n % 2 ? gbps[n / 2] : (gbps[n / 2 - 1] + gbps[n / 2]) / 2;
    std::printf(
        "{\"threads\": %d, \"bytes\": %llu, \"passes\": %d, \"read_gb_per_s\": {\"median\": "
        "%.3f, \"max\": %.3f}}\n",
        o.threads, static_cast<unsigned long long>(bytes), o.passes, median, gbps.back());
    return 0;
}
