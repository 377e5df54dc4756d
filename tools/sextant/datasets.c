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
 * The NumPy header and the TEXMEX shape are checked by src/util/vecfile.c, which the bulk import
 * (src/engine/import_fmt.c) shares, so both refuse the same files with the same messages.
 * Reading is streamed through a bounded row buffer (files are decoded row by row, never mapped
 * and cast), so a malformed header cannot make us read past what the size checks allowed.
 *
 * HDF5 (ann-benchmarks layout) goes through libhdf5 (Debian's libhdf5-dev, "serial" flavour),
 * which does its own validation: a file it cannot open is reported as not HDF5 or corrupt, a
 * missing dataset by name, and the element type is converted by the library (H5Dread into
 * native float / int32, so float64 train sets and int64 neighbours load too). Its automatic
 * error-stack printing is turned off so errors come out once, as our message. Built without
 * libhdf5 (SX_HAVE_HDF5 undefined) the reader reports that instead.
 */
#include "datasets.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#ifdef SX_HAVE_HDF5
# include <hdf5.h>
#endif

#include "util/vecfile.h"

/* Rows decoded per chunk for formats without per-record framing. */
#define CHUNK_BYTES (4u << 20)

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

const char *ds_known_name(const char *path)
{
    static const struct {
        const char *needle, *name;
    } known[] = {
        /* first match wins: the specific before the general */
        { "fashion-mnist", "Fashion-MNIST" },
        { "fashion_mnist", "Fashion-MNIST" },
        { "fmnist", "Fashion-MNIST" },
        { "mnist", "MNIST" },
        { "bigann10k", "BIGANN-10k" },
        { "bigann", "BIGANN" },
        { "siftsmall", "SIFT10K" },
        { "sift", "SIFT1M" },
        { "gist", "GIST1M" },
        { "glove", "GloVe" },
        { "nytimes", "NYTimes" },
        { "lastfm", "Last.fm" },
    };

    char low[1024];
    size_t n = 0;
    if (path == NULL)
        return NULL;
    /* the file name and its directory's name only, not the whole path (a home directory's name
     * says nothing about the data) */
    const char *tail = path + strlen(path);
    for (int slashes = 0; tail > path; tail--)
        if (tail[-1] == '/' && ++slashes == 2)
            break;
    path = tail;
    for (; path[n] != '\0' && n + 1 < sizeof low; n++)
        low[n] = (char)tolower((unsigned char)path[n]);
    low[n] = '\0';
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strstr(low, known[i].needle) != NULL)
            return known[i].name;
    return NULL;
}

void ds_free(ds_matrix *m)
{
    if (m == NULL)
        return;
    free(m->f);
    free(m->i);
    if (m->streamed && m->fd >= 0)
        (void)close(m->fd);
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
    unsigned char hdr[4] = { 0, 0, 0, 0 };
    if (size >= 4 && fread(hdr, 1, 4, f) != 4) {
        set_err(err, err_len, "%s: read error", path);
        goto fail;
    }
    uint32_t d = 0;
    uint64_t n_recs = 0;
    /* the shape checks are the bulk import's too (src/util/vecfile.c) */
    if (sx__vecs_shape(path, kind, hdr, size, elem, DS_MAX_DIM, &d, &n_recs) != SX_OK) {
        set_err(err, err_len, "%s", sx_errmsg());
        goto fail;
    }
    uint64_t rec = 4 + (uint64_t)d * elem;
    size_t n = (size_t)n_recs;
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
        uint32_t rd = le32(row);
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
    /* the header checks are the bulk import's too (src/util/vecfile.c): magic, version, dict,
     * shape, and a data size equal to what the file holds */
    size_t plen = size < SX__NPY_PREFIX ? (size_t)size : SX__NPY_PREFIX;
    hdr = malloc(plen ? plen : 1);
    if (hdr == NULL || fread(hdr, 1, plen, f) != plen) {
        set_err(err, err_len, "%s: cannot read the NumPy header", path);
        goto fail;
    }
    sx__npy h;
    if (sx__npy_parse(path, (const unsigned char *)hdr, plen, size, &h) != SX_OK) {
        set_err(err, err_len, "%s", sx_errmsg());
        goto fail;
    }
    if (h.ndim != 2) {
        set_err(err, err_len, "%s: NumPy array has %zu dimensions; want a 2-D (rows, dim) array",
                path, h.ndim);
        goto fail;
    }
    if (h.fortran) {
        set_err(err, err_len, "%s: Fortran-order arrays are not supported (save with C order)",
                path);
        goto fail;
    }
    const char *descr = h.descr;
    uint64_t shape[2] = { h.shape[0], h.shape[1] };
    size_t elem;

    enum { SRC_F4, SRC_U1, SRC_I4 } src;

    if (strcmp(descr, "<f4") == 0) {
        src = SRC_F4;
        elem = 4;
    } else if (strcmp(descr, "|u1") == 0 || strcmp(descr, "<u1") == 0) {
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
    if (fseek(f, (long)h.data_off, SEEK_SET) != 0) {
        set_err(err, err_len, "%s: seek failed: %s", path, strerror(errno));
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

/* ------------------------------------------------------------------ HDF5 (ann-benchmarks) */

/* Splits "FILE.hdf5[:DATASET]" into the file path (file[file_len]) and the dataset name (default
 * dflt). Returns false when path is not an HDF5 path. */
static bool
split_hdf5(const char *path, const char *dflt, char *file, size_t file_len, const char **dataset)
{
    static const char *const exts[] = { ".hdf5", ".h5" };
    for (size_t e = 0; e < sizeof exts / sizeof exts[0]; e++) {
        size_t el = strlen(exts[e]);
        const char *p = path;
        for (;;) {
            const char *hit = strstr(p, exts[e]);
            if (hit == NULL)
                break;
            const char *after = hit + el;
            if (*after == '\0' || *after == ':') {
                size_t n = (size_t)(after - path);
                if (n >= file_len)
                    return false;
                memcpy(file, path, n);
                file[n] = '\0';
                *dataset = *after == ':' && after[1] != '\0' ? after + 1 : dflt;
                return true;
            }
            p = hit + 1;
        }
    }
    return false;
}

bool ds_is_hdf5(const char *path)
{
    char file[4096];
    const char *ds;
    return path != NULL && split_hdf5(path, "train", file, sizeof file, &ds);
}

#ifdef SX_HAVE_HDF5

static void hdf5_quiet(void)
{
    (void)H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

/* Opens file read-only after checking it is there and is HDF5 (H5Fis_hdf5 reads the superblock
 * signature), with a message naming what is wrong. */
static hid_t hdf5_open(const char *file, char *err, size_t err_len)
{
    hdf5_quiet();
    struct stat st;
    if (stat(file, &st) != 0)
        return fail(err, err_len, "cannot open %s: %s", file, strerror(errno));
    htri_t is = H5Fis_hdf5(file);
    if (is <= 0)
        return fail(err, err_len, "%s: not an HDF5 file (no HDF5 signature)", file);
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return fail(err, err_len, "%s: cannot open the HDF5 file (corrupt or truncated?)", file);
    return f;
}

int ds_hdf5_has(const char *path)
{
    char file[4096];
    const char *name;
    if (!split_hdf5(path, "train", file, sizeof file, &name))
        return 0;
    char err[256];
    hid_t f = hdf5_open(file, err, sizeof err);
    if (f < 0)
        return 0;
    htri_t ex = H5Lexists(f, name, H5P_DEFAULT);
    (void)H5Fclose(f);
    return ex > 0;
}

int ds_hdf5_distance(const char *path, char *out, size_t out_len)
{
    char file[4096];
    const char *name;
    out[0] = '\0';
    if (!split_hdf5(path, "train", file, sizeof file, &name))
        return -1;
    char err[256];
    hid_t f = hdf5_open(file, err, sizeof err);
    if (f < 0)
        return -1;
    int rc = -1;
    if (H5Aexists(f, "distance") > 0) {
        hid_t a = H5Aopen(f, "distance", H5P_DEFAULT);
        hid_t t = a >= 0 ? H5Aget_type(a) : -1;
        if (t >= 0 && H5Tget_class(t) == H5T_STRING) {
            if (H5Tis_variable_str(t) > 0) {
                char *v = NULL;
                hid_t mt = H5Tcopy(H5T_C_S1);
                (void)H5Tset_size(mt, H5T_VARIABLE);
                if (H5Aread(a, mt, &v) >= 0 && v != NULL) {
                    snprintf(out, out_len, "%s", v);
                    rc = 0;
                }
                if (v != NULL)
                    H5free_memory(v);
                (void)H5Tclose(mt);
            } else {
                size_t sz = H5Tget_size(t);
                char buf[256];
                if (sz > 0 && sz < sizeof buf) {
                    hid_t mt = H5Tcopy(H5T_C_S1);
                    (void)H5Tset_size(mt, sz + 1);
                    memset(buf, 0, sizeof buf);
                    if (H5Aread(a, mt, buf) >= 0) {
                        snprintf(out, out_len, "%s", buf);
                        rc = 0;
                    }
                    (void)H5Tclose(mt);
                }
            }
        }
        if (t >= 0)
            (void)H5Tclose(t);
        if (a >= 0)
            (void)H5Aclose(a);
    }
    (void)H5Fclose(f);
    return rc;
}

static int load_hdf5(const char *path, size_t limit, ds_matrix *out, char *err, size_t err_len)
{
    char file[4096];
    const char *name;
    if (!split_hdf5(path, "train", file, sizeof file, &name))
        return fail(err, err_len, "%s: not an HDF5 path", path);
    hid_t f = hdf5_open(file, err, err_len);
    if (f < 0)
        return -1;
    hid_t d = -1, sp = -1, t = -1, msp = -1;
    ds_matrix m = { 0 };
    int rc = -1;
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) {
        set_err(err, err_len,
                "%s: no dataset '%s' (the ann-benchmarks layout has train, test, neighbors and "
                "distances)",
                file, name);
        goto out;
    }
    d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) {
        set_err(err, err_len, "%s: '%s' is not a readable dataset", file, name);
        goto out;
    }
    sp = H5Dget_space(d);
    t = H5Dget_type(d);
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (nd != 2) {
        set_err(err, err_len, "%s:%s: %d dimensions, want a 2-D matrix (rows x values)", file, name,
                nd);
        goto out;
    }
    hsize_t dims[2];
    if (H5Sget_simple_extent_dims(sp, dims, NULL) != 2) {
        set_err(err, err_len, "%s:%s: cannot read the shape", file, name);
        goto out;
    }
    H5T_class_t cls = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
        set_err(err, err_len, "%s:%s: element type is neither float nor integer", file, name);
        goto out;
    }
    size_t n = (size_t)dims[0];
    if (limit > 0 && limit < n)
        n = limit;
    if (alloc_matrix(&m, n, (size_t)dims[1], cls == H5T_FLOAT ? DS_F32 : DS_I32, path, err,
                     err_len) != 0)
        goto out;
    hsize_t start[2] = { 0, 0 }, count[2] = { (hsize_t)n, dims[1] };
    if (H5Sselect_hyperslab(sp, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
        (msp = H5Screate_simple(2, count, NULL)) < 0) {
        set_err(err, err_len, "%s:%s: cannot select %zu rows", file, name, n);
        goto out;
    }
    herr_t r = cls == H5T_FLOAT ? H5Dread(d, H5T_NATIVE_FLOAT, msp, sp, H5P_DEFAULT, m.f)
                                : H5Dread(d, H5T_NATIVE_INT32, msp, sp, H5P_DEFAULT, m.i);
    if (r < 0) {
        set_err(err, err_len, "%s:%s: read error (corrupt or truncated file?)", file, name);
        goto out;
    }
    if (m.type == DS_F32) {
        for (size_t j = 0; j < n * m.dim; j++) {
            if (!isfinite(m.f[j])) {
                set_err(err, err_len, "%s:%s: row %zu holds a NaN or infinity", file, name,
                        j / m.dim);
                goto out;
            }
        }
    }
    *out = m;
    m.f = NULL;
    m.i = NULL;
    rc = 0;
out:
    ds_free(&m);
    if (msp >= 0)
        (void)H5Sclose(msp);
    if (t >= 0)
        (void)H5Tclose(t);
    if (sp >= 0)
        (void)H5Sclose(sp);
    if (d >= 0)
        (void)H5Dclose(d);
    (void)H5Fclose(f);
    return rc;
}

#else /* !SX_HAVE_HDF5 */

int ds_hdf5_has(const char *path)
{
    (void)path;
    return 0;
}

int ds_hdf5_distance(const char *path, char *out, size_t out_len)
{
    (void)path;
    if (out_len > 0)
        out[0] = '\0';
    return -1;
}

static int load_hdf5(const char *path, size_t limit, ds_matrix *out, char *err, size_t err_len)
{
    (void)limit;
    (void)out;
    return fail(err, err_len,
                "%s: this sextant was built without HDF5 support (install libhdf5-dev and "
                "rebuild)",
                path);
}

#endif /* SX_HAVE_HDF5 */

/* ------------------------------------------------------------------ dispatch */

int ds_load(const char *path, size_t limit, ds_matrix *out, char *err, size_t err_len)
{
    if (ds_is_hdf5(path))
        return load_hdf5(path, limit, out, err, err_len);
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
                "%s: unknown file type (want .fvecs, .bvecs, .ivecs, .npy, .hdf5, or IDX "
                ".gz/-ubyte)",
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

/* ------------------------------------------------------------------ streamed TEXMEX */

int ds_open_float(const char *path, size_t limit, ds_matrix *out, char *err, size_t err_len)
{
    bool fv = ends_with(path, ".fvecs"), bv = ends_with(path, ".bvecs");
    if (!fv && !bv)
        return ds_load_float(path, limit, out, err, err_len);
    const char *kind = bv ? "bvecs" : "fvecs";
    ds_matrix m = { 0 };
    m.fd = open(path, O_RDONLY | O_CLOEXEC);
    if (m.fd < 0)
        return fail(err, err_len, "cannot open %s: %s", path, strerror(errno));
    m.streamed = true;
    m.byte_src = bv;
    m.type = DS_F32;
    struct stat stbuf;
    unsigned char hdr[4];
    if (fstat(m.fd, &stbuf) != 0) {
        set_err(err, err_len, "cannot stat %s: %s", path, strerror(errno));
        goto fail;
    }
    uint64_t size = (uint64_t)stbuf.st_size;
    memset(hdr, 0, sizeof hdr);
    if (size >= 4 && pread(m.fd, hdr, 4, 0) != 4) {
        set_err(err, err_len, "%s: read error: %s", path, strerror(errno));
        goto fail;
    }
    uint32_t d = 0;
    uint64_t n_recs = 0;
    /* the shape checks are the bulk import's too (src/util/vecfile.c) */
    if (sx__vecs_shape(path, kind, hdr, size, bv ? 1 : 4, DS_MAX_DIM, &d, &n_recs) != SX_OK) {
        set_err(err, err_len, "%s", sx_errmsg());
        goto fail;
    }
    m.rec = 4 + (uint64_t)d * (bv ? 1 : 4);
    m.n = (size_t)n_recs;
    if (limit > 0 && limit < m.n)
        m.n = limit;
    m.dim = (size_t)d;
    *out = m;
    return 0;
fail:
    ds_free(&m);
    return -1;
}

const float *
ds_rows(ds_matrix *m, size_t first, size_t count, float *buf, char *err, size_t err_len)
{
    if (first > m->n || count > m->n - first) {
        set_err(err, err_len, "rows %zu..%zu past the %zu rows", first, first + count, m->n);
        return NULL;
    }
    if (!m->streamed)
        return m->f + first * m->dim;
    /* read in pieces of at most 1 MiB of records */
    size_t per = (size_t)((1u << 20) / m->rec);
    if (per == 0)
        per = 1;
    unsigned char *rb = calloc(per, (size_t)m->rec);
    if (!rb) {
        set_err(err, err_len, "out of memory");
        return NULL;
    }
    for (size_t done = 0; done < count;) {
        size_t c = count - done < per ? count - done : per;
        size_t bytes = (size_t)m->rec * c;
        off_t off = (off_t)((first + done) * m->rec);
        size_t got = 0;
        while (got < bytes) {
            ssize_t r = pread(m->fd, rb + got, bytes - got, off + (off_t)got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                set_err(err, err_len, "read of record %zu: %s", first + done,
                        r < 0 ? strerror(errno) : "file shrank while reading");
                free(rb);
                return NULL;
            }
            got += (size_t)r;
        }
        for (size_t k = 0; k < c; k++) {
            const unsigned char *row = rb + (size_t)m->rec * k;
            if ((int32_t)le32(row) != (int32_t)m->dim) {
                set_err(err, err_len,
                        "record %zu has dimension %d but the first record has %zu: corrupt file",
                        first + done + k, (int)(int32_t)le32(row), m->dim);
                free(rb);
                return NULL;
            }
            float *o = buf + (done + k) * m->dim;
            if (m->byte_src) {
                for (size_t j = 0; j < m->dim; j++)
                    o[j] = (float)row[4 + j];
            } else {
                for (size_t j = 0; j < m->dim; j++) {
                    uint32_t u = le32(row + 4 + 4 * j);
                    memcpy(&o[j], &u, 4);
                }
            }
        }
        done += c;
    }
    free(rb);
    return buf;
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
    return ds_generate(DS_GEN_CLUSTERED, n_base, dim, seed, stream, n_rows, out, err, err_len);
}

/* sx-gmm-1: axis-aligned components (datasets.h). Unchanged since the first version: caches of
 * its ground truth are keyed by the name. */
static int gen_gmm1(size_t n_base,
                    size_t dim,
                    uint64_t seed,
                    unsigned stream,
                    size_t first_row,
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
        normal_gen rg = { .state =
                              base_state ^ ((uint64_t)(first_row + r) * 0xa24baed4963ee407ULL) };
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

/* ------------------------------------------------------------------ sx-gmm-rot-1 (+ unit) */

#define ROT_GLOBAL  8 /* Householder reflections in the global rotation */
#define ROT_PER_CMP 2 /* ... and per component */
#define ROT_SPREAD  1.4

/* x <- (I - 2 v v^T) x for a unit vector v. */
static void reflect(double *x, const float *v, size_t dim)
{
    double dot = 0;
    for (size_t j = 0; j < dim; j++)
        dot += (double)v[j] * x[j];
    dot *= 2.0;
    for (size_t j = 0; j < dim; j++)
        x[j] -= dot * (double)v[j];
}

/* A uniformly random unit vector (normalised Gaussian). */
static void random_unit(normal_gen *g, float *v, size_t dim)
{
    double nn = 0;
    for (size_t j = 0; j < dim; j++) {
        double x = normal(g);
        v[j] = (float)x;
        nn += x * x;
    }
    double inv = nn > 0 ? 1.0 / sqrt(nn) : 0.0;
    for (size_t j = 0; j < dim; j++)
        v[j] = (float)((double)v[j] * inv);
}

static int gen_rot(bool unit,
                   size_t n_base,
                   size_t dim,
                   uint64_t seed,
                   unsigned stream,
                   size_t first_row,
                   size_t n_rows,
                   ds_matrix *out,
                   char *err,
                   size_t err_len)
{
    const char *what = stream == 0 ? "generated base" : "generated queries";
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
    float *glob = malloc(ROT_GLOBAL * dim * sizeof *glob);
    float *hv = malloc(c_n * ROT_PER_CMP * dim * sizeof *hv);
    float *mu = malloc(c_n * dim * sizeof *mu);
    float *sc = malloc(c_n * dim * sizeof *sc);
    double *cum = malloc(c_n * sizeof *cum);
    double *x = malloc(dim * sizeof *x);
    double *offset = malloc(dim * sizeof *offset);
    if (glob == NULL || hv == NULL || mu == NULL || sc == NULL || cum == NULL || x == NULL ||
        offset == NULL) {
        free(glob);
        free(hv);
        free(mu);
        free(sc);
        free(cum);
        free(x);
        free(offset);
        ds_free(&m);
        return fail(err, err_len, "%s: out of memory for the model", what);
    }
    /* The model, from the seed alone (plus n_base through c_n). A different salt than sx-gmm-1
     * so the two generators' models are unrelated. */
    normal_gen g = { .state = seed ^ 0x73782d726f742d31ULL };
    for (size_t h = 0; h < ROT_GLOBAL; h++)
        random_unit(&g, glob + h * dim, dim);
    double total = 0;
    for (size_t c = 0; c < c_n; c++) {
        for (size_t j = 0; j < dim; j++) {
            double lambda = 1.0 / sqrt(1.0 + (double)j / 16.0);
            mu[c * dim + j] = (float)(lambda * normal(&g));
            sc[c * dim + j] = (float)(ROT_SPREAD * lambda * exp(0.35 * normal(&g)));
        }
        for (size_t h = 0; h < ROT_PER_CMP; h++)
            random_unit(&g, hv + (c * ROT_PER_CMP + h) * dim, dim);
        total += exp(0.5 * normal(&g));
        cum[c] = total;
    }
    /* The common offset of the cosine variant: embeddings share a mean direction, so their
     * cosine similarities are not centred on 0. Norm ~2x a centre's. */
    for (size_t j = 0; j < dim; j++)
        offset[j] = unit ? 2.0 * normal(&g) / sqrt(1.0 + (double)j / 16.0) : 0.0;
    uint64_t base_state =
        seed * 0x9e3779b97f4a7c15ULL + ((uint64_t)stream + 1) * 0xd1b54a32d192ed03ULL;
    for (size_t r = 0; r < n_rows; r++) {
        normal_gen rg = { .state =
                              base_state ^ ((uint64_t)(first_row + r) * 0xa24baed4963ee407ULL) };
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
        /* the component's own orientation: its scales, then its reflections */
        for (size_t j = 0; j < dim; j++)
            x[j] = (double)cs[j] * normal(&rg);
        for (size_t h = 0; h < ROT_PER_CMP; h++)
            reflect(x, hv + (lo * ROT_PER_CMP + h) * dim, dim);
        for (size_t j = 0; j < dim; j++)
            x[j] += (double)cm[j] + offset[j];
        /* the shared rotation: no axis carries a principal direction */
        for (size_t h = 0; h < ROT_GLOBAL; h++)
            reflect(x, glob + h * dim, dim);
        double nn = 0;
        for (size_t j = 0; j < dim; j++)
            nn += x[j] * x[j];
        double scale = unit && nn > 0 ? 1.0 / sqrt(nn) : 1.0;
        float *row = m.f + r * dim;
        for (size_t j = 0; j < dim; j++)
            row[j] = (float)(x[j] * scale);
    }
    free(glob);
    free(hv);
    free(mu);
    free(sc);
    free(cum);
    free(x);
    free(offset);
    *out = m;
    return 0;
}

static const char *const gen_names[] = { "sx-gmm-1", "sx-gmm-rot-1", "sx-gmm-rot-unit-1" };
static const char *const gen_kinds[] = { "clustered", "anisotropic", "cosine" };

const char *ds_gen_name(ds_gen gen)
{
    return (unsigned)gen < 3 ? gen_names[gen] : "?";
}

const char *ds_gen_kind(ds_gen gen)
{
    return (unsigned)gen < 3 ? gen_kinds[gen] : "?";
}

int ds_gen_parse(const char *s, ds_gen *out)
{
    for (unsigned j = 0; j < 3; j++) {
        if (strcmp(s, gen_kinds[j]) == 0 || strcmp(s, gen_names[j]) == 0) {
            *out = (ds_gen)j;
            return 0;
        }
    }
    return -1;
}

int ds_generate(ds_gen gen,
                size_t n_base,
                size_t dim,
                uint64_t seed,
                unsigned stream,
                size_t n_rows,
                ds_matrix *out,
                char *err,
                size_t err_len)
{
    return ds_generate_rows(gen, n_base, dim, seed, stream, 0, n_rows, out, err, err_len);
}

int ds_generate_rows(ds_gen gen,
                     size_t n_base,
                     size_t dim,
                     uint64_t seed,
                     unsigned stream,
                     size_t first_row,
                     size_t n_rows,
                     ds_matrix *out,
                     char *err,
                     size_t err_len)
{
    switch (gen) {
    case DS_GEN_CLUSTERED:
        return gen_gmm1(n_base, dim, seed, stream, first_row, n_rows, out, err, err_len);
    case DS_GEN_ANISOTROPIC:
        return gen_rot(false, n_base, dim, seed, stream, first_row, n_rows, out, err, err_len);
    case DS_GEN_COSINE:
        return gen_rot(true, n_base, dim, seed, stream, first_row, n_rows, out, err, err_len);
    }
    return fail(err, err_len, "unknown generator %d", (int)gen);
}

/* ------------------------------------------------------------------ hashes */

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME  0x100000001b3ULL

uint64_t ds_hash_init(void)
{
    return FNV_OFFSET;
}

uint64_t ds_hash_bytes(uint64_t h, const void *p, size_t len)
{
    const unsigned char *b = p;
    for (size_t j = 0; j < len; j++) {
        h ^= b[j];
        h *= FNV_PRIME;
    }
    return h;
}

uint64_t ds_hash_matrix(uint64_t h, const ds_matrix *m)
{
    size_t n = m->n * m->dim;
    unsigned char le[4];
    for (size_t j = 0; j < n; j++) {
        uint32_t u;
        if (m->type == DS_F32)
            memcpy(&u, &m->f[j], sizeof u);
        else
            u = (uint32_t)m->i[j];
        put_le32(le, u);
        h = ds_hash_bytes(h, le, 4);
    }
    return h;
}

int ds_hash_file(const char *path, uint64_t *out, char *err, size_t err_len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return fail(err, err_len, "cannot open %s: %s", path, strerror(errno));
    unsigned char *buf = malloc(1u << 16);
    if (buf == NULL) {
        (void)fclose(f);
        return fail(err, err_len, "%s: out of memory", path);
    }
    uint64_t h = FNV_OFFSET;
    size_t n;
    while ((n = fread(buf, 1, 1u << 16, f)) > 0)
        h = ds_hash_bytes(h, buf, n);
    int bad = ferror(f);
    free(buf);
    (void)fclose(f);
    if (bad)
        return fail(err, err_len, "%s: read error", path);
    *out = h;
    return 0;
}
