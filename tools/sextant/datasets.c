/*
 * datasets.c: TEXMEX (.fvecs/.bvecs/.ivecs), NumPy (.npy) and IDX (.gz) readers and the TEXMEX
 * writer behind datasets.h. The formats and the checks are described there; byte layouts:
 *
 *   TEXMEX record     offset  size     content
 *                     0       4        d, int32 LE (identical in every record)
 *                     4       d*s      values LE (s = 4 float32 / 1 uint8 / 4 int32)
 *
 *   NumPy             0       6        "\x93NUMPY"
 *                     6       1+1      major, minor version
 *                     8       2 (v1)   header length HLEN, LE (v2/v3: 4 bytes at 8)
 *                     10/12   HLEN     Python dict literal: 'descr', 'fortran_order', 'shape'
 *                     ...     n*d*s    data, C order
 *
 *   IDX (after gunzip) 0      4        0x00 0x00 type(0x08 = uint8) ndims, big-endian
 *                     4       4*ndims  dims, uint32 BE; row = product of dims[1..]
 *                     ...     N*row    uint8 values
 *
 * Invariants of every loaded ds_matrix:
 *   1. exactly one of f / i is non-NULL and it holds n*dim values;
 *   2. 1 <= dim <= DS_MAX_DIM and n*dim*4 did not overflow size_t;
 *   3. n >= 1 (an empty data file is an error: nothing useful can be done with it).
 *
 * Reading is streamed through a bounded row buffer (files are decoded row by row, never mapped
 * and cast), so a malformed header cannot make us read past what the size checks allowed.
 */
#include "datasets.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* NumPy headers are small; anything bigger is not a file we wrote or want. */
#define NPY_MAX_HEADER (1u << 20)
/* Rows decoded per chunk for formats without per-record framing. */
#define CHUNK_BYTES    (4u << 20)

static void set_err(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t err_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

/* `return fail(...)`: records the message and yields -1. A macro rather than a variadic function
 * returning -1 so that static analysis (which does not inline variadic calls) sees the value. */
#define fail(err, err_len, ...) (set_err((err), (err_len), __VA_ARGS__), -1)

static uint32_t le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[3] | (uint32_t)b[2] << 8 | (uint32_t)b[1] << 16 | (uint32_t)b[0] << 24;
}

static void put_le32(unsigned char *b, uint32_t v)
{
    b[0] = (unsigned char)v;
    b[1] = (unsigned char)(v >> 8);
    b[2] = (unsigned char)(v >> 16);
    b[3] = (unsigned char)(v >> 24);
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

const char *ds_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

void ds_free(ds_matrix *m)
{
    if (m == NULL)
        return;
    free(m->f);
    free(m->i);
    memset(m, 0, sizeof *m);
}

/* Allocates the value buffer for n x dim of the given type (invariants 1-2). */
static int alloc_matrix(
    ds_matrix *m, size_t n, size_t dim, ds_type type, const char *path, char *err, size_t err_len)
{
    if (dim == 0 || dim > DS_MAX_DIM)
        return fail(err, err_len, "%s: dimension %zu out of range 1..%u", path, dim, DS_MAX_DIM);
    if (n == 0)
        return fail(err, err_len, "%s: no rows", path);
    if (n > SIZE_MAX / 4 / dim)
        return fail(err, err_len, "%s: %zu x %zu values do not fit in memory", path, n, dim);
    memset(m, 0, sizeof *m);
    m->n = n;
    m->dim = dim;
    m->type = type;
    /* float and int32_t are both 4 bytes: one allocation size serves either type. */
    void *p = malloc(n * dim * 4);
    if (p == NULL)
        return fail(err, err_len, "%s: out of memory for %zu x %zu values", path, n, dim);
    if (type == DS_F32)
        m->f = p;
    else
        m->i = p;
    return 0;
}

/* ------------------------------------------------------------------ TEXMEX */

static int load_vecs(const char *path,
                     size_t elem,
                     bool is_int_src,
                     bool is_byte,
                     size_t limit,
                     ds_matrix *out,
                     char *err,
                     size_t err_len)
{
    const char *kind = is_byte ? "bvecs" : (is_int_src ? "ivecs" : "fvecs");
    unsigned char *row = NULL;
    ds_matrix m = { 0 };
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return fail(err, err_len, "cannot open %s: %s", path, strerror(errno));
    struct stat stbuf;
    if (fstat(fileno(f), &stbuf) != 0) {
        set_err(err, err_len, "cannot stat %s: %s", path, strerror(errno));
        goto fail;
    }
    uint64_t size = (uint64_t)stbuf.st_size;
    if (size < 4) {
        set_err(err, err_len, "%s: file is %s (%llu bytes): not a .%s file", path,
                size == 0 ? "empty" : "truncated", (unsigned long long)size, kind);
        goto fail;
    }
    unsigned char hdr[4];
    if (fread(hdr, 1, 4, f) != 4) {
        set_err(err, err_len, "%s: read error", path);
        goto fail;
    }
    int32_t d = (int32_t)le32(hdr);
    if (d <= 0 || (uint32_t)d > DS_MAX_DIM) {
        set_err(err, err_len, "%s: first record has dimension %d (want 1..%u): not a .%s file",
                path, (int)d, DS_MAX_DIM, kind);
        goto fail;
    }
    uint64_t rec = 4 + (uint64_t)d * elem;
    if (size % rec != 0) {
        set_err(err, err_len,
                "%s: size %llu is not a multiple of the record size %llu (4 + %d x %zu): the file "
                "is truncated or not a .%s file (%llu whole records, %llu bytes left over)",
                path, (unsigned long long)size, (unsigned long long)rec, (int)d, elem, kind,
                (unsigned long long)(size / rec), (unsigned long long)(size % rec));
        goto fail;
    }
    size_t n = (size_t)(size / rec);
    if (limit > 0 && limit < n)
        n = limit;
    if (alloc_matrix(&m, n, (size_t)d, is_int_src ? DS_I32 : DS_F32, path, err, err_len) != 0)
        goto fail;
    row = malloc((size_t)rec);
    if (row == NULL) {
        set_err(err, err_len, "%s: out of memory", path);
        goto fail;
    }
    if (fseek(f, 0, SEEK_SET) != 0) {
        set_err(err, err_len, "%s: seek failed: %s", path, strerror(errno));
        goto fail;
    }
    for (size_t r = 0; r < n; r++) {
        if (fread(row, 1, (size_t)rec, f) != (size_t)rec) {
            set_err(err, err_len, "%s: short read at record %zu (file changed while reading?)",
                    path, r);
            goto fail;
        }
        int32_t rd = (int32_t)le32(row);
        if (rd != d) {
            set_err(err, err_len,
                    "%s: record %zu has dimension %d but the first record has %d: corrupt .%s file",
                    path, r, (int)rd, (int)d, kind);
            goto fail;
        }
        const unsigned char *v = row + 4;
        size_t base = r * (size_t)d;
        if (is_byte) {
            for (size_t j = 0; j < (size_t)d; j++)
                m.f[base + j] = (float)v[j];
        } else if (is_int_src) {
            for (size_t j = 0; j < (size_t)d; j++)
                m.i[base + j] = (int32_t)le32(v + 4 * j);
        } else {
            for (size_t j = 0; j < (size_t)d; j++)
                m.f[base + j] = f32_from_bits(le32(v + 4 * j));
        }
    }
    free(row);
    (void)fclose(f);
    *out = m;
    return 0;
fail:
    free(row);
    ds_free(&m);
    (void)fclose(f);
    return -1;
}

/* ------------------------------------------------------------------ NumPy */

/* Finds the value text after 'key': in a NumPy header dict; NULL if absent. */
static const char *npy_value(const char *hdr, const char *key)
{
    char pat[64];
    const char *quotes = "'\"";
    for (const char *q = quotes; *q != '\0'; q++) {
        snprintf(pat, sizeof pat, "%c%s%c", *q, key, *q);
        const char *p = strstr(hdr, pat);
        if (p == NULL)
            continue;
        p += strlen(pat);
        while (*p == ' ')
            p++;
        if (*p != ':')
            return NULL;
        p++;
        while (*p == ' ')
            p++;
        return p;
    }
    return NULL;
}

static int npy_parse_header(const char *path,
                            const char *hdr,
                            char descr[16],
                            bool *fortran,
                            uint64_t shape[2],
                            char *err,
                            size_t err_len)
{
    const char *p = npy_value(hdr, "descr");
    if (p == NULL || (*p != '\'' && *p != '"'))
        return fail(err, err_len, "%s: NumPy header has no 'descr'", path);
    char quote = *p++;
    size_t len = 0;
    while (p[len] != '\0' && p[len] != quote && len < 15)
        len++;
    if (p[len] != quote)
        return fail(err, err_len, "%s: NumPy 'descr' is malformed or not a simple dtype", path);
    memcpy(descr, p, len);
    descr[len] = '\0';

    p = npy_value(hdr, "fortran_order");
    if (p == NULL)
        return fail(err, err_len, "%s: NumPy header has no 'fortran_order'", path);
    if (strncmp(p, "True", 4) == 0)
        *fortran = true;
    else if (strncmp(p, "False", 5) == 0)
        *fortran = false;
    else
        return fail(err, err_len, "%s: NumPy 'fortran_order' is neither True nor False", path);

    p = npy_value(hdr, "shape");
    if (p == NULL || *p != '(')
        return fail(err, err_len, "%s: NumPy header has no 'shape' tuple", path);
    p++;
    size_t nd = 0;
    for (;;) {
        while (*p == ' ')
            p++;
        if (*p == ')')
            break;
        if (*p < '0' || *p > '9')
            return fail(err, err_len, "%s: NumPy 'shape' is malformed", path);
        errno = 0;
        char *end = NULL;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno != 0)
            return fail(err, err_len, "%s: NumPy 'shape' value overflows", path);
        if (nd < 2)
            shape[nd] = (uint64_t)v;
        nd++;
        p = end;
        while (*p == ' ')
            p++;
        if (*p == ',')
            p++;
        else if (*p != ')')
            return fail(err, err_len, "%s: NumPy 'shape' is malformed", path);
    }
    if (nd != 2)
        return fail(err, err_len,
                    "%s: NumPy array has %zu dimensions; want a 2-D (rows, dim) array", path, nd);
    return 0;
}

static int load_npy(const char *path, size_t limit, ds_matrix *out, char *err, size_t err_len)
{
    char *hdr = NULL;
    unsigned char *buf = NULL;
    ds_matrix m = { 0 };
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return fail(err, err_len, "cannot open %s: %s", path, strerror(errno));
    struct stat stbuf;
    if (fstat(fileno(f), &stbuf) != 0) {
        set_err(err, err_len, "cannot stat %s: %s", path, strerror(errno));
        goto fail;
    }
    uint64_t size = (uint64_t)stbuf.st_size;
    unsigned char pre[12];
    if (size < 10 || fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        set_err(err, err_len, "%s: not a NumPy file (bad magic)", path);
        goto fail;
    }
    unsigned major = pre[6];
    uint64_t hlen, data_off;
    if (major == 1) {
        hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8;
        data_off = 10 + hlen;
    } else if (major == 2 || major == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) {
            set_err(err, err_len, "%s: truncated NumPy header", path);
            goto fail;
        }
        hlen = le32(pre + 8);
        data_off = 12 + hlen;
    } else {
        set_err(err, err_len, "%s: unsupported NumPy format version %u", path, major);
        goto fail;
    }
    if (hlen == 0 || hlen > NPY_MAX_HEADER || data_off > size) {
        set_err(err, err_len, "%s: NumPy header length %llu is invalid for a %llu-byte file", path,
                (unsigned long long)hlen, (unsigned long long)size);
        goto fail;
    }
    hdr = malloc((size_t)hlen + 1);
    if (hdr == NULL || fread(hdr, 1, (size_t)hlen, f) != (size_t)hlen) {
        set_err(err, err_len, "%s: cannot read the NumPy header", path);
        goto fail;
    }
    hdr[hlen] = '\0';
    char descr[16];
    bool fortran = false;
    uint64_t shape[2] = { 0, 0 };
    if (npy_parse_header(path, hdr, descr, &fortran, shape, err, err_len) != 0)
        goto fail;
    if (fortran) {
        set_err(err, err_len, "%s: Fortran-order arrays are not supported (save with C order)",
                path);
        goto fail;
    }
    size_t elem;

    enum { SRC_F4, SRC_U1, SRC_I4 } src;

    if (strcmp(descr, "<f4") == 0) {
        src = SRC_F4;
        elem = 4;
    } else if (strcmp(descr, "|u1") == 0 || strcmp(descr, "<u1") == 0 || strcmp(descr, "u1") == 0) {
        src = SRC_U1;
        elem = 1;
    } else if (strcmp(descr, "<i4") == 0) {
        src = SRC_I4;
        elem = 4;
    } else {
        set_err(err, err_len, "%s: NumPy dtype '%s' is not supported (want <f4, |u1 or <i4)", path,
                descr);
        goto fail;
    }
    if (shape[1] == 0 || shape[1] > DS_MAX_DIM || shape[0] == 0) {
        set_err(err, err_len, "%s: NumPy shape (%llu, %llu) is empty or too wide", path,
                (unsigned long long)shape[0], (unsigned long long)shape[1]);
        goto fail;
    }
    uint64_t row_bytes = shape[1] * elem;
    if (shape[0] > (UINT64_MAX - data_off) / row_bytes || data_off + shape[0] * row_bytes != size) {
        set_err(err, err_len,
                "%s: NumPy shape (%llu, %llu) of %s needs %llu data bytes but the file has %llu: "
                "truncated or corrupt",
                path, (unsigned long long)shape[0], (unsigned long long)shape[1], descr,
                (unsigned long long)shape[0] * (unsigned long long)row_bytes,
                (unsigned long long)(size - data_off));
        goto fail;
    }
    size_t n = (size_t)shape[0], dim = (size_t)shape[1];
    if (limit > 0 && limit < n)
        n = limit;
    if (alloc_matrix(&m, n, dim, src == SRC_I4 ? DS_I32 : DS_F32, path, err, err_len) != 0)
        goto fail;
    buf = malloc((size_t)row_bytes);
    if (buf == NULL) {
        set_err(err, err_len, "%s: out of memory", path);
        goto fail;
    }
    for (size_t r = 0; r < n; r++) {
        if (fread(buf, 1, (size_t)row_bytes, f) != (size_t)row_bytes) {
            set_err(err, err_len, "%s: short read at row %zu", path, r);
            goto fail;
        }
        size_t base = r * dim;
        for (size_t j = 0; j < dim; j++) {
            if (src == SRC_F4)
                m.f[base + j] = f32_from_bits(le32(buf + 4 * j));
            else if (src == SRC_U1)
                m.f[base + j] = (float)buf[j];
            else
                m.i[base + j] = (int32_t)le32(buf + 4 * j);
        }
    }
    free(buf);
    free(hdr);
    (void)fclose(f);
    *out = m;
    return 0;
fail:
    free(buf);
    free(hdr);
    ds_free(&m);
    (void)fclose(f);
    return -1;
}

/* ------------------------------------------------------------------ IDX (gzip'd) */

/* Reads exactly len bytes; returns 0, or -1 (short read or zlib error) with the zlib text. */
static int gz_read_all(gzFile g, void *dst, size_t len, const char **why)
{
    unsigned char *p = dst;
    while (len > 0) {
        unsigned chunk = len > (1u << 30) ? (1u << 30) : (unsigned)len;
        int got = gzread(g, p, chunk);
        if (got <= 0) {
            int zerr = Z_OK;
            const char *msg = gzerror(g, &zerr);
            *why = (got < 0 || zerr != Z_OK) ? msg : "unexpected end of data";
            return -1;
        }
        p += got;
        len -= (size_t)got;
    }
    return 0;
}

static int load_idx(const char *path, size_t limit, ds_matrix *out, char *err, size_t err_len)
{
    unsigned char *buf = NULL;
    ds_matrix m = { 0 };
    const char *why = NULL;
    gzFile g = gzopen(path, "rb");
    if (g == NULL)
        return fail(err, err_len, "cannot open %s: %s", path,
                    errno != 0 ? strerror(errno) : "zlib gzopen failed");
    if (gzbuffer(g, 256u * 1024u) != 0) {
        set_err(err, err_len, "%s: gzbuffer failed", path);
        goto fail;
    }
    unsigned char hdr[4 + 4 * 4];
    if (gz_read_all(g, hdr, 4, &why) != 0) {
        set_err(err, err_len, "%s: cannot read the IDX header: %s", path, why);
        goto fail;
    }
    unsigned ndims = hdr[3];
    if (hdr[0] != 0 || hdr[1] != 0 || ndims < 1 || ndims > 4) {
        set_err(err, err_len, "%s: bad IDX magic 0x%02x%02x%02x%02x (want 0x0000080N)", path,
                hdr[0], hdr[1], hdr[2], hdr[3]);
        goto fail;
    }
    if (hdr[2] != 0x08) {
        set_err(err, err_len, "%s: IDX element type 0x%02x is not supported (only 0x08, uint8)",
                path, hdr[2]);
        goto fail;
    }
    if (gz_read_all(g, hdr + 4, 4 * (size_t)ndims, &why) != 0) {
        set_err(err, err_len, "%s: cannot read the IDX dimensions: %s", path, why);
        goto fail;
    }
    uint64_t total = be32(hdr + 4);
    uint64_t dim = 1;
    for (unsigned k = 1; k < ndims; k++) {
        dim *= be32(hdr + 4 + (size_t)4 * k);
        if (dim > DS_MAX_DIM)
            break;
    }
    if (total == 0 || dim == 0 || dim > DS_MAX_DIM) {
        set_err(err, err_len, "%s: IDX dimensions give %llu rows of %llu values: unusable", path,
                (unsigned long long)total, (unsigned long long)dim);
        goto fail;
    }
    size_t n = (size_t)total;
    if (limit > 0 && limit < n)
        n = limit;
    if (alloc_matrix(&m, n, (size_t)dim, DS_F32, path, err, err_len) != 0)
        goto fail;
    size_t rows_per_chunk = CHUNK_BYTES / (size_t)dim;
    if (rows_per_chunk == 0)
        rows_per_chunk = 1;
    buf = malloc(rows_per_chunk * (size_t)dim);
    if (buf == NULL) {
        set_err(err, err_len, "%s: out of memory", path);
        goto fail;
    }
    for (size_t r = 0; r < n; r += rows_per_chunk) {
        size_t rows = n - r < rows_per_chunk ? n - r : rows_per_chunk;
        if (gz_read_all(g, buf, rows * (size_t)dim, &why) != 0) {
            set_err(err, err_len,
                    "%s: IDX data ends early: the header promises %llu rows of %llu bytes, reading "
                    "rows %zu..%zu failed (%s): truncated or corrupt",
                    path, (unsigned long long)total, (unsigned long long)dim, r, r + rows - 1, why);
            goto fail;
        }
        for (size_t j = 0; j < rows * (size_t)dim; j++)
            m.f[r * (size_t)dim + j] = (float)buf[j];
    }
    if (n == total) {
        unsigned char extra;
        int got = gzread(g, &extra, 1);
        if (got != 0) {
            int zerr = Z_OK;
            const char *msg = gzerror(g, &zerr);
            set_err(err, err_len, "%s: %s after the %llu rows the IDX header declares", path,
                    got > 0 ? "unexpected trailing data" : msg, (unsigned long long)total);
            goto fail;
        }
    }
    free(buf);
    gzclose(g);
    *out = m;
    return 0;
fail:
    free(buf);
    ds_free(&m);
    gzclose(g);
    return -1;
}

/* ------------------------------------------------------------------ dispatch */

int ds_load(const char *path, size_t limit, ds_matrix *out, char *err, size_t err_len)
{
    if (ends_with(path, ".fvecs"))
        return load_vecs(path, 4, false, false, limit, out, err, err_len);
    if (ends_with(path, ".bvecs"))
        return load_vecs(path, 1, false, true, limit, out, err, err_len);
    if (ends_with(path, ".ivecs"))
        return load_vecs(path, 4, true, false, limit, out, err, err_len);
    if (ends_with(path, ".npy"))
        return load_npy(path, limit, out, err, err_len);
    if (ends_with(path, ".gz") || ends_with(path, "-ubyte") || ends_with(path, ".idx"))
        return load_idx(path, limit, out, err, err_len);
    return fail(err, err_len,
                "%s: unknown file type (want .fvecs, .bvecs, .ivecs, .npy, or IDX .gz/-ubyte)",
                path);
}

int ds_load_float(const char *path, size_t limit, ds_matrix *out, char *err, size_t err_len)
{
    ds_matrix m = { 0 };
    if (ds_load(path, limit, &m, err, err_len) != 0)
        return -1;
    if (m.type == DS_I32) {
        float *f = malloc(m.n * m.dim * sizeof(float));
        if (f == NULL) {
            ds_free(&m);
            return fail(err, err_len, "%s: out of memory", path);
        }
        for (size_t j = 0; j < m.n * m.dim; j++)
            f[j] = (float)m.i[j];
        free(m.i);
        m.i = NULL;
        m.f = f;
        m.type = DS_F32;
    }
    *out = m;
    return 0;
}

/* ------------------------------------------------------------------ writer */

int ds_write_vecs(const char *path,
                  size_t n,
                  size_t dim,
                  const float *f,
                  const int32_t *i,
                  char *err,
                  size_t err_len)
{
    bool want_int = ends_with(path, ".ivecs");
    if (!want_int && !ends_with(path, ".fvecs"))
        return fail(err, err_len, "%s: can only write .fvecs or .ivecs", path);
    if ((want_int && i == NULL) || (!want_int && f == NULL))
        return fail(err, err_len, "%s: data type does not match the extension", path);
    if (dim == 0 || dim > DS_MAX_DIM)
        return fail(err, err_len, "%s: dimension %zu out of range", path, dim);
    char tmp[4096];
    int len = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (len < 0 || (size_t)len >= sizeof tmp)
        return fail(err, err_len, "%s: path too long", path);
    unsigned char *row = malloc(4 + 4 * dim);
    if (row == NULL)
        return fail(err, err_len, "%s: out of memory", path);
    FILE *fp = fopen(tmp, "wb");
    if (fp == NULL) {
        free(row);
        return fail(err, err_len, "cannot create %s: %s", tmp, strerror(errno));
    }
    for (size_t r = 0; r < n; r++) {
        put_le32(row, (uint32_t)dim);
        for (size_t j = 0; j < dim; j++) {
            uint32_t u;
            if (want_int) {
                u = (uint32_t)i[r * dim + j];
            } else {
                memcpy(&u, &f[r * dim + j], sizeof u);
            }
            put_le32(row + 4 + 4 * j, u);
        }
        if (fwrite(row, 1, 4 + 4 * dim, fp) != 4 + 4 * dim) {
            int e = errno;
            free(row);
            (void)fclose(fp);
            (void)unlink(tmp);
            return fail(err, err_len, "cannot write %s: %s", tmp, strerror(e));
        }
    }
    free(row);
    if (fflush(fp) != 0 || fsync(fileno(fp)) != 0) {
        int e = errno;
        (void)fclose(fp);
        (void)unlink(tmp);
        return fail(err, err_len, "cannot write %s: %s", tmp, strerror(e));
    }
    if (fclose(fp) != 0) {
        int e = errno;
        (void)unlink(tmp);
        return fail(err, err_len, "cannot write %s: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        (void)unlink(tmp);
        return fail(err, err_len, "cannot rename %s to %s: %s", tmp, path, strerror(e));
    }
    return 0;
}

/* ------------------------------------------------------------------ synthetic (sx-gmm-1) */

#define SYN_MAX_COMPONENTS 4096

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1]. */
static double unit_open0(uint64_t *s)
{
    return (double)((splitmix64(s) >> 11) + 1) * (1.0 / 9007199254740992.0);
}

/* Box-Muller: one pair of independent N(0,1) values per two uniforms; *spare keeps the second. */
typedef struct normal_gen {
    uint64_t state;
    double spare;
    bool has_spare;
} normal_gen;

static double normal(normal_gen *g)
{
    if (g->has_spare) {
        g->has_spare = false;
        return g->spare;
    }
    double u1 = unit_open0(&g->state), u2 = unit_open0(&g->state);
    double r = sqrt(-2.0 * log(u1)), t = 6.283185307179586 * u2;
    g->spare = r * sin(t);
    g->has_spare = true;
    return r * cos(t);
}

int ds_synthetic(size_t n_base,
                 size_t dim,
                 uint64_t seed,
                 unsigned stream,
                 size_t n_rows,
                 ds_matrix *out,
                 char *err,
                 size_t err_len)
{
    const char *what = stream == 0 ? "synthetic base" : "synthetic queries";
    if (n_base == 0)
        return fail(err, err_len, "%s: N must be at least 1", what);
    size_t c_n = (size_t)llround(sqrt((double)n_base));
    if (c_n < 1)
        c_n = 1;
    if (c_n > SYN_MAX_COMPONENTS)
        c_n = SYN_MAX_COMPONENTS;
    ds_matrix m;
    if (alloc_matrix(&m, n_rows, dim, DS_F32, what, err, err_len) != 0)
        return -1;
    size_t *perm = malloc(dim * sizeof *perm);
    double *lambda = malloc(dim * sizeof *lambda);
    float *mu = malloc(c_n * dim * sizeof *mu);
    float *sc = malloc(c_n * dim * sizeof *sc);
    double *cum = malloc(c_n * sizeof *cum);
    if (perm == NULL || lambda == NULL || mu == NULL || sc == NULL || cum == NULL) {
        free(perm);
        free(lambda);
        free(mu);
        free(sc);
        free(cum);
        ds_free(&m);
        return fail(err, err_len, "%s: out of memory for the model", what);
    }
    /* The model: from seed alone (plus n_base through c_n). */
    normal_gen g = { .state = seed ^ 0x73782d676d6d2d31ULL };
    for (size_t j = 0; j < dim; j++)
        perm[j] = j;
    for (size_t j = dim; j-- > 1;) {
        size_t r = (size_t)(splitmix64(&g.state) % (uint64_t)(j + 1));
        size_t t = perm[j];
        perm[j] = perm[r];
        perm[r] = t;
    }
    for (size_t j = 0; j < dim; j++)
        lambda[j] = 1.0 / sqrt(1.0 + (double)perm[j] / 16.0);
    double total = 0;
    for (size_t c = 0; c < c_n; c++) {
        for (size_t j = 0; j < dim; j++) {
            mu[c * dim + j] = (float)(lambda[j] * normal(&g));
            sc[c * dim + j] = (float)(1.4 * lambda[j] * exp(0.35 * normal(&g)));
        }
        total += exp(0.5 * normal(&g));
        cum[c] = total;
    }
    /* The rows: each from its own state, so row r is the same however many rows are drawn. */
    uint64_t base_state =
        seed * 0x9e3779b97f4a7c15ULL + ((uint64_t)stream + 1) * 0xd1b54a32d192ed03ULL;
    for (size_t r = 0; r < n_rows; r++) {
        normal_gen rg = { .state = base_state ^ ((uint64_t)r * 0xa24baed4963ee407ULL) };
        (void)splitmix64(&rg.state);
        double u = unit_open0(&rg.state) * total;
        size_t lo = 0, hi = c_n - 1;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (cum[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        const float *cm = mu + lo * dim, *cs = sc + lo * dim;
        float *x = m.f + r * dim;
        for (size_t j = 0; j < dim; j++)
            x[j] = (float)((double)cm[j] + (double)cs[j] * normal(&rg));
    }
    free(perm);
    free(lambda);
    free(mu);
    free(sc);
    free(cum);
    *out = m;
    return 0;
}
