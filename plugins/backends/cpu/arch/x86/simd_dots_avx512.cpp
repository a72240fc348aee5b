// AVX-512 (F, BW, VL) versions of the f32-activation dots in simd_dots.hpp;
// the integer dots keep their AVX2 versions. Compiled alone with the AVX-512
// flags and -ffp-contract=off (see CMakeLists.txt) and only called after the
// CPU probe reports SimdLevel::Avx512. Rows sit at any byte offset inside a
// mapped file, so every load is unaligned; the tail is one masked load, which
// never touches memory past the row or the activations.
#if defined(__x86_64__)

// GCC 12's AVX-512 conversion intrinsics read a self-initialised "undefined"
// vector and trip -W(maybe-)uninitialized where they are inlined (GCC bug
// 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include "simd/simd_dots.hpp"

namespace dwell::cpu {

namespace {

inline __mmask16 tail_mask(int64_t m) {
    return static_cast<__mmask16>((1u << m) - 1u);
}

struct LoadF32 {
    static constexpr int kBytes = 4;
    static __m512 load(const unsigned char* p) {
        return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
    }
    static __m512 maskz_load(__mmask16 m, const unsigned char* p) {
        return _mm512_maskz_loadu_ps(m, p);
    }
};

struct LoadF16 {
    static constexpr int kBytes = 2;
    static __m512 load(const unsigned char* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static __m512 maskz_load(__mmask16 m, const unsigned char* p) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    }
};

// bf16 is the top half of an f32, so a 16-bit shift of the widened lanes is
// an exact conversion (and needs no AVX512_BF16, which the level lacks).
struct LoadBF16 {
    static constexpr int kBytes = 2;
    static __m512 widen(__m256i h) {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    static __m512 load(const unsigned char* p) {
        return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static __m512 maskz_load(__mmask16 m, const unsigned char* p) {
        return widen(_mm256_maskz_loadu_epi16(m, p));
    }
};

// Four independent accumulators: a single one would serialise every FMA on
// the previous one's latency, and eight measured slower on Zen 4, where the
// two loads per FMA already set the pace.
template <typename Load>
float dot_rows_avx512(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    constexpr int B = Load::kBytes;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(Load::load(p + B * i), _mm512_loadu_ps(x + i), a0);
        a1 = _mm512_fmadd_ps(Load::load(p + B * (i + 16)), _mm512_loadu_ps(x + i + 16), a1);
        a2 = _mm512_fmadd_ps(Load::load(p + B * (i + 32)), _mm512_loadu_ps(x + i + 32), a2);
        a3 = _mm512_fmadd_ps(Load::load(p + B * (i + 48)), _mm512_loadu_ps(x + i + 48), a3);
    }
    for (; i + 16 <= n; i += 16) {
        a0 = _mm512_fmadd_ps(Load::load(p + B * i), _mm512_loadu_ps(x + i), a0);
    }
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        a1 = _mm512_fmadd_ps(Load::maskz_load(m, p + B * i), _mm512_maskz_loadu_ps(m, x + i), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

}  // namespace

float dot_f32_f32_avx512(const void* row, const float* x, int64_t n) {
    return dot_rows_avx512<LoadF32>(row, x, n);
}

float dot_f16_f32_avx512(const void* row, const float* x, int64_t n) {
    return dot_rows_avx512<LoadF16>(row, x, n);
}

float dot_bf16_f32_avx512(const void* row, const float* x, int64_t n) {
    return dot_rows_avx512<LoadBF16>(row, x, n);
}

}  // namespace dwell::cpu

#endif  // defined(__x86_64__)
