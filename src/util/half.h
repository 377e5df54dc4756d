/*
 * half.h: 16-bit floating-point values (IEEE 754 binary16 "float16", and bfloat16) to and from
 * float32, bit-exact, for FLOAT16_VECTOR and BFLOAT16_VECTOR fields (sextant.h).
 *
 * float16: 1 sign bit, 5 exponent bits (bias 15), 10 fraction bits; largest finite 65504,
 * smallest normal 2^-14, subnormals down to 2^-24. bfloat16: the upper half of a float32 (8
 * exponent bits, 7 fraction bits), the same range as float32.
 *
 * Widening (to float32) is exact: every float16 and bfloat16 value is a float32 value. Narrowing
 * rounds to nearest, ties to even, as IEEE 754 and the F16C / AVX-512 conversion instructions do:
 * float16 overflows to infinity from 65520 up (the midpoint between 65504 and 65536), bfloat16
 * from the midpoint above FLT_MAX's bfloat16; NaN stays NaN (quiet). So a float16 or bfloat16
 * value widened and narrowed again gives back the same bits (NaN payloads aside), which is what
 * lets the server take float lists for these fields and answer the values that were stored.
 *
 * The narrowing of float16 follows the well-known "magic number" construction (F. Giesen's
 * float_to_half_fast3_rtne): subnormal results come from one float32 addition, whose rounding
 * (the default round-to-nearest-even mode) is the rounding wanted.
 * Thread-safety: pure functions.
 */
#ifndef SX_UTIL_HALF_H
#define SX_UTIL_HALF_H
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t sx__f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float sx__f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float sx__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in float32 */
        float v = (float)man * 0x1p-24f;
        return sx__f32_from_bits(sx__f32_bits(v) | sign);
    }
    if (exp == 31)
        return sx__f32_from_bits(sign | 0x7F800000u | (man << 13));
    return sx__f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t sx__f32_to_f16(float f)
{
    const uint32_t f32_inf = 255u << 23;
    const uint32_t f16_limit = (127u + 16u) << 23; /* 2^16: from here on, infinity */
    const uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    uint32_t x = sx__f32_bits(f);
    uint32_t sign = x & 0x80000000u;
    x ^= sign;
    uint16_t o;
    if (x >= f16_limit) {
        o = x > f32_inf ? 0x7E00u : 0x7C00u;
    } else if (x < (113u << 23)) {
        /* below 2^-14: the float16 is subnormal (or zero); the addition rounds it */
        float v = sx__f32_from_bits(x) + sx__f32_from_bits(denorm_magic);
        o = (uint16_t)(sx__f32_bits(v) - denorm_magic);
    } else {
        uint32_t mant_odd = (x >> 13) & 1u;
        x += (uint32_t)((15 - 127) * (1 << 23)) + 0xFFFu; /* rebias; round half up ... */
        x += mant_odd;                                    /* ... to even */
        o = (uint16_t)(x >> 13);
    }
    return (uint16_t)(o | (sign >> 16));
}

static inline float sx__bf16_to_f32(uint16_t b)
{
    return sx__f32_from_bits((uint32_t)b << 16);
}

static inline uint16_t sx__f32_to_bf16(float f)
{
    uint32_t x = sx__f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((x >> 16) | 0x40u); /* NaN: keep it NaN (quiet) */
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* Finite (neither infinity nor NaN). */
static inline bool sx__f16_finite(uint16_t h)
{
    return (h & 0x7C00u) != 0x7C00u;
}

static inline bool sx__bf16_finite(uint16_t b)
{
    return (b & 0x7F80u) != 0x7F80u;
}

#endif
