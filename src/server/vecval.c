/*
 * vecval.c: the values of the dense vector types on the wire, one codec for REST and gRPC.
 *
 * Stored encodings (sextant.h): FloatVector float32; Float16Vector / BFloat16Vector 2 bytes per
 * value (IEEE binary16 / bfloat16, little-endian); BinaryVector dim bits packed 8 to a byte, the
 * first bit the first byte's most significant.
 *
 * REST input (insert rows, search data), as Milvus 2.5 takes it:
 *   Float16Vector / BFloat16Vector: a JSON array of dim numbers, each rounded to the type
 *     (round to nearest even, util/half.h; a value beyond the type's range is refused, not
 *     turned into infinity), or a base64 string of the dim * 2 little-endian bytes (the form
 *     pymilvus and Milvus's own answers use); NaN and infinity refused either way;
 *   BinaryVector: a JSON array of dim / 8 byte values (integers 0..255), or a base64 string of
 *     the dim / 8 bytes.
 * REST output: FloatVector a number array; the others a base64 string of their bytes, which is
 *   what Milvus's server answers (its rows hold the fields' []byte slices, which Go's JSON
 *   encoder writes as base64).
 * Queries: the engine searches the 16-bit types with float32 queries (the values widened,
 *   exactly) and binary fields with the packed bytes (sx__vec_query_bytes).
 * Thread-safety: pure functions.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "server/rbac.h"
#include "server/server.h"
#include "util/alloc.h"
#include "util/half.h"

size_t sx__vec_query_bytes(sx_field_type t, uint32_t dim)
{
    return t == SX_FIELD_BINARY_VECTOR ? (size_t)dim / 8 : (size_t)dim * sizeof(float);
}

static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t sx__b64_encode(const void *src, size_t n, char *out)
{
    const uint8_t *p = src;
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        out[o++] = b64_chars[v >> 18 & 63];
        out[o++] = b64_chars[v >> 12 & 63];
        out[o++] = b64_chars[v >> 6 & 63];
        out[o++] = b64_chars[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        out[o++] = b64_chars[v >> 18 & 63];
        out[o++] = b64_chars[v >> 12 & 63];
        if (i + 1 < n)
            out[o++] = b64_chars[v >> 6 & 63];
        else
            out[o++] = '=';
        out[o++] = '=';
    }
    out[o] = '\0';
    return o;
}

/* A base64 string of exactly n bytes into dst. */
static bool b64_exact(const char *s, void *dst, size_t n, char *why, size_t cap, const char *what)
{
    char *buf = sx__malloc(n + 2);
    if (!buf) {
        (void)snprintf(why, cap, "out of memory");
        return false;
    }
    long got = sx__b64_decode(s, buf, n + 2);
    bool ok = got == (long)n;
    if (ok)
        memcpy(dst, buf, n);
    else if (got < 0)
        (void)snprintf(why, cap, "the %s is not valid base64 of %zu bytes", what, n);
    else
        (void)snprintf(why, cap, "the %s holds %ld bytes, the field needs %zu", what, got, n);
    sx__free(buf);
    return ok;
}

/* 16-bit values: from numbers or base64, checked finite. */
static bool
half_from_json(const json_t *v, bool bf, uint32_t dim, uint16_t *dst, char *why, size_t cap)
{
    const char *tname = bf ? "bfloat16" : "float16";
    if (json_is_string(v)) {
        if (!b64_exact(json_string_value(v), dst, (size_t)dim * 2, why, cap, "base64 vector"))
            return false;
        for (uint32_t i = 0; i < dim; i++) {
            if (bf ? !sx__bf16_finite(dst[i]) : !sx__f16_finite(dst[i])) {
                (void)snprintf(why, cap, "element %u is not a finite %s", i, tname);
                return false;
            }
        }
        return true;
    }
    if (!json_is_array(v)) {
        (void)snprintf(why, cap, "the vector is not an array of numbers or a base64 string");
        return false;
    }
    if (json_array_size(v) != dim) {
        (void)snprintf(why, cap, "the dimension (%zu) does not match the schema (%u)",
                       json_array_size(v), dim);
        return false;
    }
    for (uint32_t i = 0; i < dim; i++) {
        const json_t *e = json_array_get(v, i);
        double x = json_is_number(e) ? json_number_value(e) : (double)NAN;
        uint16_t h = 0;
        if (isfinite(x) && fabs(x) <= (double)FLT_MAX)
            h = bf ? sx__f32_to_bf16((float)x) : sx__f32_to_f16((float)x);
        if (!isfinite(x) || fabs(x) > (double)FLT_MAX ||
            (bf ? !sx__bf16_finite(h) : !sx__f16_finite(h))) {
            (void)snprintf(why, cap, "element %u is not a finite number in the %s range", i, tname);
            return false;
        }
        dst[i] = h;
    }
    return true;
}

static bool binary_from_json(const json_t *v, uint32_t dim, uint8_t *dst, char *why, size_t cap)
{
    size_t n = dim / 8;
    if (json_is_string(v))
        return b64_exact(json_string_value(v), dst, n, why, cap, "base64 vector");
    if (!json_is_array(v)) {
        (void)snprintf(why, cap, "the binary vector is not an array of bytes or a base64 string");
        return false;
    }
    if (json_array_size(v) != n) {
        (void)snprintf(why, cap,
                       "the binary vector has %zu bytes, the field needs %zu (dim %u / 8)",
                       json_array_size(v), n, dim);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        json_int_t b = json_is_integer(e) ? json_integer_value(e) : -1;
        if (b < 0 || b > 255) {
            (void)snprintf(why, cap, "byte %zu is not an integer in [0, 255]", i);
            return false;
        }
        dst[i] = (uint8_t)b;
    }
    return true;
}

bool sx__vec_from_json(
    const json_t *v, sx_field_type t, uint32_t dim, void *dst, char *why, size_t cap)
{
    switch (t) {
    case SX_FIELD_FLOAT16_VECTOR:
    case SX_FIELD_BFLOAT16_VECTOR:
        return half_from_json(v, t == SX_FIELD_BFLOAT16_VECTOR, dim, dst, why, cap);
    case SX_FIELD_BINARY_VECTOR:
        return binary_from_json(v, dim, dst, why, cap);
    case SX_FIELD_FLOAT_VECTOR: {
        if (!json_is_array(v) || json_array_size(v) != dim) {
            (void)snprintf(why, cap, "the dimension (%zu) does not match the schema (%u)",
                           json_is_array(v) ? json_array_size(v) : 0, dim);
            return false;
        }
        float *f = dst;
        for (uint32_t i = 0; i < dim; i++) {
            const json_t *e = json_array_get(v, i);
            double x = json_is_number(e) ? json_number_value(e) : (double)NAN;
            if (!isfinite(x) || fabs(x) > (double)FLT_MAX) {
                (void)snprintf(why, cap, "element %u is not a finite float", i);
                return false;
            }
            f[i] = (float)x;
        }
        return true;
    }
    default:
        break;
    }
    (void)snprintf(why, cap, "not a vector field");
    return false;
}

void sx__vec_row_to_query(sx_field_type t, uint32_t dim, const void *row, void *q)
{
    const uint16_t *h = row;
    float *f = q;
    switch (t) {
    case SX_FIELD_FLOAT16_VECTOR:
        for (uint32_t i = 0; i < dim; i++)
            f[i] = sx__f16_to_f32(h[i]);
        return;
    case SX_FIELD_BFLOAT16_VECTOR:
        for (uint32_t i = 0; i < dim; i++)
            f[i] = sx__bf16_to_f32(h[i]);
        return;
    default:
        memcpy(q, row, sx__vec_query_bytes(t, dim));
        return;
    }
}

bool sx__vec_query_from_json(
    const json_t *v, sx_field_type t, uint32_t dim, void *q, char *why, size_t cap)
{
    if (t == SX_FIELD_FLOAT_VECTOR || t == SX_FIELD_BINARY_VECTOR)
        return sx__vec_from_json(v, t, dim, q, why, cap);
    uint16_t *h = sx__malloc((size_t)dim * 2 + 1);
    if (!h) {
        (void)snprintf(why, cap, "out of memory");
        return false;
    }
    bool ok = sx__vec_from_json(v, t, dim, h, why, cap);
    if (ok)
        sx__vec_row_to_query(t, dim, h, q);
    sx__free(h);
    return ok;
}

json_t *sx__vec_to_json(sx_field_type t, uint32_t dim, const void *src)
{
    if (t == SX_FIELD_FLOAT_VECTOR) {
        const float *f = src;
        json_t *a = json_array();
        for (uint32_t i = 0; a && i < dim; i++)
            json_array_append_new(a, json_real((double)f[i]));
        return a;
    }
    size_t n = sx_vector_row_bytes(t, dim);
    char *s = sx__malloc((n + 2) / 3 * 4 + 1);
    if (!s)
        return NULL;
    size_t len = sx__b64_encode(src, n, s);
    json_t *j = json_stringn(s, len);
    sx__free(s);
    return j;
}
