#include "dwell/tools/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>

#include "dwell/core/base/error.hpp"
#include "dwell/quant.h"

namespace dwell {

namespace {

// Checks the shape and returns the bytes of one row of dtype t.
size_t checked_row_bytes(dwell_dtype t, int64_t cols, int64_t rows, const char* what) {
    const std::string name = dwell_dtype_name(t);
    int64_t n = 0;
    if (cols <= 0 || rows < 0 || __builtin_mul_overflow(cols, rows, &n)) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT, std::string(what) + ": a " + name + " tensor of " +
                                                    std::to_string(rows) + " rows of " +
                                                    std::to_string(cols) + " values");
    }
    const size_t row_bytes = dwell_row_bytes(t, cols);
    if (row_bytes == 0) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    std::string(what) + ": rows of " + std::to_string(cols) +
                        " values are not a whole number of " + name + " blocks of " +
                        std::to_string(dwell_dtype_block_elems(t)));
    }
    return row_bytes;
}

// Runs fn(begin, end) over [0, rows) on up to hardware_concurrency threads.
// Rows are independent, so the split changes no result; small tensors stay
// on the calling thread, where a thread start would cost more than the work.
template <typename Fn>
void for_row_ranges(int64_t rows, int64_t cols, Fn fn) {
    constexpr int64_t kMinValuesPerThread = int64_t{1} << 16;
    const int64_t by_work = std::max<int64_t>(1, rows * cols / kMinValuesPerThread);
    const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
    const int64_t n_threads = std::min({hw, by_work, std::max<int64_t>(rows, 1)});
    if (n_threads <= 1) {
        fn(int64_t{0}, rows);
        return;
    }
    std::vector<std::jthread> workers;
    workers.reserve(static_cast<size_t>(n_threads - 1));
    const int64_t per = rows / n_threads, extra = rows % n_threads;
    int64_t begin = 0;
    for (int64_t i = 0; i < n_threads; ++i) {
        const int64_t end = begin + per + (i < extra ? 1 : 0);
        if (i + 1 == n_threads) {
            fn(begin, end);  // the calling thread takes the last range
        } else {
            workers.emplace_back([&fn, begin, end] { fn(begin, end); });
        }
        begin = end;
    }
    // jthread joins on destruction.
}

}  // namespace

std::vector<uint8_t> quantize_tensor(dwell_dtype target, std::span<const float> values,
                                     int64_t cols, int64_t rows) {
    if (!dwell_has_encoder(target)) {
        throw Error(DWELL_ERR_UNSUPPORTED, std::string("quantize: no encoder for ") +
                                               dwell_dtype_name(target) + " (dtype " +
                                               std::to_string(static_cast<int>(target)) + ")");
    }
    const size_t row_bytes = checked_row_bytes(target, cols, rows, "quantize");
    if (values.size() != static_cast<size_t>(cols * rows)) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT, "quantize: " + std::to_string(values.size()) +
                                                    " values given for " + std::to_string(rows) +
                                                    " rows of " + std::to_string(cols));
    }
    std::vector<uint8_t> out(row_bytes * static_cast<size_t>(rows));
    for_row_ranges(rows, cols, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            dwell_quantize_row(target, values.data() + r * cols,
                               out.data() + static_cast<size_t>(r) * row_bytes, cols);
        }
    });
    return out;
}

std::vector<float> dequantize_tensor(dwell_dtype dtype, std::span<const uint8_t> bytes,
                                     int64_t cols, int64_t rows) {
    if (!dwell_has_decoder(dtype)) {
        throw Error(DWELL_ERR_UNSUPPORTED, std::string("dequantize: no decoder for ") +
                                               dwell_dtype_name(dtype) + " (dtype " +
                                               std::to_string(static_cast<int>(dtype)) + ")");
    }
    const size_t row_bytes = checked_row_bytes(dtype, cols, rows, "dequantize");
    if (bytes.size() != row_bytes * static_cast<size_t>(rows)) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "dequantize: " + std::to_string(bytes.size()) + " bytes given for " +
                        std::to_string(rows) + " rows of " + std::to_string(cols) + " " +
                        dwell_dtype_name(dtype) + " values (" +
                        std::to_string(row_bytes * static_cast<size_t>(rows)) + " bytes)");
    }
    // The block decoders read fp16 fields through struct pointers, so an odd
    // address (a slice of a file image, say) is first copied somewhere
    // aligned. Row-format rows are byte streams and need no copy.
    std::vector<uint64_t> aligned;
    const uint8_t* src = bytes.data();
    if (!dwell_dtype_is_row_format(dtype) && reinterpret_cast<uintptr_t>(src) % 4 != 0) {
        aligned.resize(bytes.size() / sizeof(uint64_t) + 1);
        std::copy(bytes.begin(), bytes.end(), reinterpret_cast<uint8_t*>(aligned.data()));
        src = reinterpret_cast<const uint8_t*>(aligned.data());
    }
    std::vector<float> out(static_cast<size_t>(cols * rows));
    for_row_ranges(rows, cols, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            dwell_dequantize_row(dtype, src + static_cast<size_t>(r) * row_bytes,
                                 out.data() + r * cols, cols);
        }
    });
    return out;
}

double quantization_snr_db(std::span<const float> original, std::span<const float> reconstructed) {
    if (original.size() != reconstructed.size()) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "snr: " + std::to_string(original.size()) + " original values but " +
                        std::to_string(reconstructed.size()) + " reconstructed");
    }
    double signal = 0.0, noise = 0.0;
    for (size_t i = 0; i < original.size(); ++i) {
        const double x = original[i];
        const double e = x - static_cast<double>(reconstructed[i]);
        signal += x * x;
        noise += e * e;
    }
    if (noise == 0.0) return std::numeric_limits<double>::infinity();
    return 10.0 * std::log10(signal / noise);
}

}  // namespace dwell
