// Single-thread speed of the blocked matmul kernels (gemm_kernel.hpp), in
// run_blocked's loop order: per block of R weight rows, tiles of C
// activation rows over all of M. Activation quantization is timed apart.
//
//   dwell-bench-gemm-kernel [--levels scalar,avx2,avx512]
//                           [--dtypes q4_0,q8_0,q4_K,q6_K,q5_0,q4_1,q5_1,q5_K]
//                           [--runs 5] [--hot 1]
//
// Prints one JSON object per line: dtype, level, kernel, k, n, m, median ms
// of the tiles, and
//   M = 1:   gbps = file-layout weight bytes / time, with weights rotated
//            over copies larger than the last-level cache, as decode
//            streams a model from memory (packed_gbps: the packed bytes);
//   M > 1:   gops = 2 * k * n * m / time (int8 multiply-adds count two).
// quant_ms is the median time of quantize_act over the M rows.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dwell/quant.h"
#include "ops/packed_weights.hpp"
#include "simd/gemm_kernel.hpp"
#include "simd/simd_dots.hpp"

using namespace dwell::cpu;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Random quants with sane fp16 scales (random bytes could be NaN/Inf).
std::vector<uint8_t> random_weights(dwell_dtype t, int64_t k, int64_t n, uint32_t seed) {
    const size_t row = dwell_row_bytes(t, k);
    std::vector<uint8_t> w(row * static_cast<size_t>(n));
    std::mt19937 rng(seed);
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    const size_t block = dwell_dtype_block_bytes(t);
    const uint16_t d = dwell_fp32_to_fp16(0.01f);
    for (size_t off = 0; off < w.size(); off += block) {
        switch (t) {
            case DWELL_Q4_0:
            case DWELL_Q8_0:
            case DWELL_Q5_0:
                std::memcpy(&w[off], &d, 2);
                break;
            case DWELL_Q4_1:
            case DWELL_Q5_1:
            case DWELL_Q4_K:
            case DWELL_Q5_K:
                std::memcpy(&w[off], &d, 2);
                std::memcpy(&w[off + 2], &d, 2);
                break;
            case DWELL_Q6_K:
                std::memcpy(&w[off + block - 2], &d, 2);
                break;
            default:
                break;
        }
    }
    return w;
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
        const size_t comma = s.find(',', start);
        const size_t end = comma == std::string::npos ? s.size() : comma;
        if (end > start) out.push_back(s.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct Level {
    const char* name;
    SimdLevel level;
};

struct Dtype {
    const char* name;
    dwell_dtype t;
};

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> levels = {"avx2", "avx512"};
    std::vector<std::string> dtypes = {"q4_0", "q8_0", "q4_K", "q6_K"};
    int runs = 5;
    bool hot = false;  // --hot 1: one copy of the weights, so M = 1 reads from cache
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string opt = argv[i];
        if (opt == "--levels") {
            levels = split(argv[i + 1]);
        } else if (opt == "--dtypes") {
            dtypes = split(argv[i + 1]);
        } else if (opt == "--hot") {
            hot = std::atoi(argv[i + 1]) != 0;
        } else if (opt == "--runs") {
            runs = std::max(1, std::atoi(argv[i + 1]));
        } else {
            std::fprintf(stderr, "unknown option %s\n", opt.c_str());
            return 2;
        }
    }
    const Level all_levels[] = {{"scalar", SimdLevel::Scalar},       {"avx2", SimdLevel::Avx2},
                                {"avx512", SimdLevel::Avx512},       {"neon", SimdLevel::Neon},
                                {"dotprod", SimdLevel::NeonDotprod}, {"i8mm", SimdLevel::NeonI8mm}};
    const Dtype all_dtypes[] = {{"q4_0", DWELL_Q4_0}, {"q8_0", DWELL_Q8_0}, {"q4_K", DWELL_Q4_K},
                                {"q6_K", DWELL_Q6_K}, {"q5_0", DWELL_Q5_0}, {"q4_1", DWELL_Q4_1},
                                {"q5_1", DWELL_Q5_1}, {"q5_K", DWELL_Q5_K}};
    const int64_t shapes[][2] = {{2048, 2048}, {2048, 8192}, {8192, 2048}};
    const int64_t ms[] = {1, 128};
    constexpr size_t kColdBytes = size_t{256} << 20;  // far past any last-level cache

    const CpuFeatures features = detect_cpu_features();
    for (const auto& lname : levels) {
        const Level* level = nullptr;
        for (const auto& l : all_levels) {
            if (lname == l.name) level = &l;
        }
        if (level == nullptr || !simd_level_supported(level->level, features)) continue;
        for (const auto& dname : dtypes) {
            const Dtype* dt = nullptr;
            for (const auto& d : all_dtypes) {
                if (dname == d.name) dt = &d;
            }
            if (dt == nullptr) continue;
            const GemmKernel* kernel = gemm_kernel_for(dt->t, level->level);
            if (kernel == nullptr) continue;
            const int R = kernel->rows_per_block;
            const int C = kernel->max_cols;
            for (const auto& shape : shapes) {
                const int64_t k = shape[0], n = shape[1];
                const auto w = random_weights(dt->t, k, n, 1);
                const size_t row_bytes = dwell_row_bytes(dt->t, k);
                const int64_t blocks = (n + R - 1) / R;
                const size_t block_bytes = kernel->block_bytes(k);
                const size_t packed_bytes = block_bytes * static_cast<size_t>(blocks);
                // Copies so M = 1 runs stream from memory, not cache.
                const size_t copies = hot ? 1 : std::max<size_t>(1, kColdBytes / packed_bytes);
                std::vector<AlignedBytes> packed;
                for (size_t c = 0; c < copies; ++c) {
                    packed.push_back(make_aligned_bytes(packed_bytes));
                    for (int64_t b = 0; b < blocks; ++b) {
                        const int nr = static_cast<int>(std::min<int64_t>(R, n - b * R));
                        kernel->pack_block(
                            w.data() + static_cast<size_t>(b * R) * row_bytes, row_bytes, nr, k,
                            packed.back().get() + static_cast<size_t>(b) * block_bytes);
                    }
                }
                for (int64_t m : ms) {
                    std::vector<float> x(static_cast<size_t>(k * m));
                    std::mt19937 rng(2);
                    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
                    for (auto& v : x) v = dist(rng);
                    const size_t act_bytes = kernel->act_row_bytes(k);
                    AlignedBytes acts = make_aligned_bytes(act_bytes * static_cast<size_t>(m));
                    std::vector<float> tile(static_cast<size_t>(R * C));
                    std::vector<float> out(static_cast<size_t>(n * m));
                    size_t which = 0;
                    auto matmul = [&] {
                        const unsigned char* p = packed[which].get();
                        which = (which + 1) % packed.size();
                        for (int64_t b = 0; b < blocks; ++b) {
                            const int nr = static_cast<int>(std::min<int64_t>(R, n - b * R));
                            for (int64_t m0 = 0; m0 < m; m0 += C) {
                                const int nc = static_cast<int>(std::min<int64_t>(C, m - m0));
                                kernel->tile(k, p + static_cast<size_t>(b) * block_bytes, nr,
                                             acts.get() + m0 * act_bytes, act_bytes, nc,
                                             tile.data(), static_cast<size_t>(R));
                                for (int c = 0; c < nc; ++c) {
                                    std::copy_n(tile.data() + c * R, nr,
                                                out.data() + (m0 + c) * n + b * R);
                                }
                            }
                        }
                    };
                    auto quantize = [&] {
                        for (int64_t i = 0; i < m; ++i) {
                            kernel->quantize_act(x.data() + i * k, k, acts.get() + i * act_bytes);
                        }
                    };
                    quantize();
                    matmul();  // warm-up
                    // Repeat inside a timing so each one lasts ~20 ms or more.
                    auto t0 = Clock::now();
                    matmul();
                    const double once = std::max(1e-6, seconds_since(t0));
                    const int reps = std::max(1, static_cast<int>(0.02 / once));
                    std::vector<double> times, qtimes;
                    for (int r = 0; r < runs; ++r) {
                        t0 = Clock::now();
                        for (int i = 0; i < reps; ++i) matmul();
                        times.push_back(seconds_since(t0) / reps);
                        t0 = Clock::now();
                        for (int i = 0; i < reps; ++i) quantize();
                        qtimes.push_back(seconds_since(t0) / reps);
                    }
                    const double t = median(times);
                    std::printf(
                        "{\"dtype\": \"%s\", \"level\": \"%s\", \"kernel\": \"%s\", \"k\": %lld, "
                        "\"n\": %lld, \"m\": %lld, \"ms\": %.4f, \"quant_ms\": %.4f",
                        dt->name, level->name, kernel->name, static_cast<long long>(k),
                        static_cast<long long>(n), static_cast<long long>(m), t * 1e3,
                        median(qtimes) * 1e3);
                    if (m == 1) {
                        std::printf(", \"gbps\": %.2f, \"packed_gbps\": %.2f}\n",
                                    static_cast<double>(row_bytes) * n / t / 1e9,
                                    static_cast<double>(packed_bytes) / t / 1e9);
                    } else {
                        std::printf(", \"gops\": %.1f}\n",
                                    2.0 * static_cast<double>(k) * n * m / t / 1e9);
                    }
                    std::fflush(stdout);
                }
            }
        }
    }
    return 0;
}
