/*
 * buf.h: explicit little-endian encoding into a growable buffer (sx__wbuf) and bounds-checked
 * decoding from a byte range (sx__rbuf). On-disk formats are written only through these: never
 * memcpy a struct to disk.
 *
 * sx__wbuf: a failed allocation sets `failed`; callers check it once at the end (sx__wbuf_ok).
 * sx__rbuf: a read past the end sets `bad` and returns zeros; callers check sx__rbuf_ok and
 * return SX_ECORRUPT. Neither asserts on input.
 */
#ifndef SX_UTIL_BUF_H
#define SX_UTIL_BUF_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sx__wbuf {
    uint8_t *data; /* owned; free with sx__wbuf_fini */
    size_t len;
    size_t cap;
    bool failed;
} sx__wbuf;

void sx__wbuf_init(sx__wbuf *w);
void sx__wbuf_fini(sx__wbuf *w);
void sx__wbuf_reset(sx__wbuf *w);
bool sx__wbuf_reserve(sx__wbuf *w, size_t extra);
void sx__wbuf_put(sx__wbuf *w, const void *p, size_t n);
void sx__wbuf_u8(sx__wbuf *w, uint8_t v);
void sx__wbuf_u32(sx__wbuf *w, uint32_t v);
void sx__wbuf_u64(sx__wbuf *w, uint64_t v);
void sx__wbuf_i64(sx__wbuf *w, int64_t v);
void sx__wbuf_f32(sx__wbuf *w, float v);
void sx__wbuf_f64(sx__wbuf *w, double v);
/* u32 length + bytes */
void sx__wbuf_str(sx__wbuf *w, const char *s);
/* n floats, little-endian */
void sx__wbuf_f32s(sx__wbuf *w, const float *v, size_t n);
/* overwrite a u32 at offset (for back-patched lengths/CRCs) */
void sx__wbuf_patch_u32(sx__wbuf *w, size_t off, uint32_t v);

static inline bool sx__wbuf_ok(const sx__wbuf *w)
{
    return !w->failed;
}

typedef struct sx__rbuf {
    const uint8_t *p;
    size_t len;
    size_t off;
    bool bad;
} sx__rbuf;

void sx__rbuf_init(sx__rbuf *r, const void *p, size_t len);
uint8_t sx__rbuf_u8(sx__rbuf *r);
uint32_t sx__rbuf_u32(sx__rbuf *r);
uint64_t sx__rbuf_u64(sx__rbuf *r);
int64_t sx__rbuf_i64(sx__rbuf *r);
float sx__rbuf_f32(sx__rbuf *r);
double sx__rbuf_f64(sx__rbuf *r);
/* Returns a pointer into the buffer (borrowed) for n bytes, or NULL (and bad) past the end. */
const void *sx__rbuf_bytes(sx__rbuf *r, size_t n);
/* u32 length + bytes; returns a new NUL-terminated copy (owned, sx__free) or NULL on bad/ENOMEM.
 * *oom is set when the failure was an allocation. max bounds the length. */
char *sx__rbuf_str(sx__rbuf *r, uint32_t max, bool *oom);
/* n floats into out */
void sx__rbuf_f32s(sx__rbuf *r, float *out, size_t n);

static inline bool sx__rbuf_ok(const sx__rbuf *r)
{
    return !r->bad;
}

static inline size_t sx__rbuf_left(const sx__rbuf *r)
{
    return r->len - r->off;
}

/* plain helpers for fixed positions */
static inline uint32_t sx__le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t sx__le64(const uint8_t *p)
{
    return (uint64_t)sx__le32(p) | (uint64_t)sx__le32(p + 4) << 32;
}

static inline void sx__put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void sx__put_le64(uint8_t *p, uint64_t v)
{
    sx__put_le32(p, (uint32_t)v);
    sx__put_le32(p + 4, (uint32_t)(v >> 32));
}

#endif
