/*
 * buf.c: little-endian encode/decode (see buf.h). The host is assumed little-endian for the bulk
 * float copies (checked at compile time); scalar fields are encoded byte by byte.
 */
#include "util/buf.h"

#include <string.h>

#include "util/alloc.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
# error "Sextant's bulk float encoding assumes a little-endian host"
#endif

void sx__wbuf_init(sx__wbuf *w)
{
    memset(w, 0, sizeof *w);
}

void sx__wbuf_fini(sx__wbuf *w)
{
    sx__free(w->data);
    memset(w, 0, sizeof *w);
}

void sx__wbuf_reset(sx__wbuf *w)
{
    w->len = 0;
    w->failed = false;
}

bool sx__wbuf_reserve(sx__wbuf *w, size_t extra)
{
    if (w->failed)
        return false;
    if (w->len + extra <= w->cap)
        return true;
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + extra)
        cap *= 2;
    uint8_t *d = sx__realloc(w->data, cap);
    if (!d) {
        w->failed = true;
        return false;
    }
    w->data = d;
    w->cap = cap;
    return true;
}

void sx__wbuf_put(sx__wbuf *w, const void *p, size_t n)
{
    if (n == 0 || !sx__wbuf_reserve(w, n))
        return;
    memcpy(w->data + w->len, p, n);
    w->len += n;
}

void sx__wbuf_u8(sx__wbuf *w, uint8_t v)
{
    sx__wbuf_put(w, &v, 1);
}

void sx__wbuf_u32(sx__wbuf *w, uint32_t v)
{
    uint8_t b[4];
    sx__put_le32(b, v);
    sx__wbuf_put(w, b, 4);
}

void sx__wbuf_u64(sx__wbuf *w, uint64_t v)
{
    uint8_t b[8];
    sx__put_le64(b, v);
    sx__wbuf_put(w, b, 8);
}

void sx__wbuf_i64(sx__wbuf *w, int64_t v)
{
    sx__wbuf_u64(w, (uint64_t)v);
}

void sx__wbuf_f32(sx__wbuf *w, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    sx__wbuf_u32(w, u);
}

void sx__wbuf_f64(sx__wbuf *w, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    sx__wbuf_u64(w, u);
}

void sx__wbuf_str(sx__wbuf *w, const char *s)
{
    size_t n = strlen(s);
    sx__wbuf_u32(w, (uint32_t)n);
    sx__wbuf_put(w, s, n);
}

void sx__wbuf_f32s(sx__wbuf *w, const float *v, size_t n)
{
    sx__wbuf_put(w, v, n * sizeof(float));
}

void sx__wbuf_patch_u32(sx__wbuf *w, size_t off, uint32_t v)
{
    if (!w->failed && off + 4 <= w->len)
        sx__put_le32(w->data + off, v);
}

void sx__rbuf_init(sx__rbuf *r, const void *p, size_t len)
{
    r->p = p;
    r->len = len;
    r->off = 0;
    r->bad = false;
}

const void *sx__rbuf_bytes(sx__rbuf *r, size_t n)
{
    if (r->bad || n > r->len - r->off) {
        r->bad = true;
        return NULL;
    }
    const void *p = r->p + r->off;
    r->off += n;
    return p;
}

uint8_t sx__rbuf_u8(sx__rbuf *r)
{
    const uint8_t *p = sx__rbuf_bytes(r, 1);
    return p ? p[0] : 0;
}

uint32_t sx__rbuf_u32(sx__rbuf *r)
{
    const uint8_t *p = sx__rbuf_bytes(r, 4);
    return p ? sx__le32(p) : 0;
}

uint64_t sx__rbuf_u64(sx__rbuf *r)
{
    const uint8_t *p = sx__rbuf_bytes(r, 8);
    return p ? sx__le64(p) : 0;
}

int64_t sx__rbuf_i64(sx__rbuf *r)
{
    return (int64_t)sx__rbuf_u64(r);
}

float sx__rbuf_f32(sx__rbuf *r)
{
    uint32_t u = sx__rbuf_u32(r);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

double sx__rbuf_f64(sx__rbuf *r)
{
    uint64_t u = sx__rbuf_u64(r);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

char *sx__rbuf_str(sx__rbuf *r, uint32_t max, bool *oom)
{
    if (oom)
        *oom = false;
    uint32_t n = sx__rbuf_u32(r);
    if (r->bad || n > max) {
        r->bad = true;
        return NULL;
    }
    const char *p = sx__rbuf_bytes(r, n);
    if (!p)
        return NULL;
    char *s = sx__strndup(p, n);
    if (!s && oom)
        *oom = true;
    return s;
}

void sx__rbuf_f32s(sx__rbuf *r, float *out, size_t n)
{
    if (n > SIZE_MAX / sizeof(float)) {
        r->bad = true;
        return;
    }
    const void *p = sx__rbuf_bytes(r, n * sizeof(float));
    if (p)
        memcpy(out, p, n * sizeof(float));
}
