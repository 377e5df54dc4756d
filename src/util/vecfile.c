/*
 * vecfile.c: NumPy and TEXMEX header checks (vecfile.h). The NumPy dict is parsed by hand: it
 * is a Python literal written by numpy.save ({'descr': '<f4', 'fortran_order': False, 'shape':
 * (n, d), }), and only these three keys with simple values are accepted; a structured dtype or
 * anything else the parser does not understand is refused, never guessed.
 */
#include "util/vecfile.h"

#include <string.h>

#include "util/err.h"

static uint32_t le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* The value text after 'key': (or "key":) in the dict; NULL if absent. */
static const char *dict_value(const char *hdr, const char *key)
{
    char pat[40];
    for (int q = 0; q < 2; q++) {
        char quote = q ? '"' : '\'';
        size_t kl = strlen(key);
        if (kl + 3 > sizeof pat)
            return NULL;
        pat[0] = quote;
        memcpy(pat + 1, key, kl);
        pat[kl + 1] = quote;
        pat[kl + 2] = '\0';
        const char *p = strstr(hdr, pat);
        if (!p)
            continue;
        p += kl + 2;
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

static sx_status parse_descr(const char *name, const char *hdr, sx__npy *out)
{
    const char *p = dict_value(hdr, "descr");
    if (!p || (*p != '\'' && *p != '"'))
        return sx__err(SX_EINVAL, "%s: NumPy header has no 'descr' string (a structured dtype?)",
                       name);
    char quote = *p++;
    size_t len = 0;
    while (p[len] && p[len] != quote && len < sizeof out->descr - 1)
        len++;
    if (p[len] != quote || len < 2)
        return sx__err(SX_EINVAL, "%s: NumPy 'descr' is malformed or not a simple dtype", name);
    memcpy(out->descr, p, len);
    out->descr[len] = '\0';
    out->order = out->descr[0];
    out->kind = out->descr[1];
    if (!strchr("<>|=", out->order))
        return sx__err(SX_EINVAL, "%s: NumPy 'descr' %s has no byte-order mark", name, out->descr);
    uint64_t sz = 0;
    const char *d = out->descr + 2;
    if (!*d)
        return sx__err(SX_EINVAL, "%s: NumPy 'descr' %s has no item size", name, out->descr);
    for (; *d; d++) {
        if (*d < '0' || *d > '9' || sz > 100000)
            return sx__err(SX_EINVAL, "%s: NumPy 'descr' %s is not a simple dtype", name,
                           out->descr);
        sz = sz * 10 + (uint64_t)(*d - '0');
    }
    if (sz == 0)
        return sx__err(SX_EINVAL, "%s: NumPy 'descr' %s has item size 0", name, out->descr);
    out->itemsize = (size_t)(out->kind == 'U' ? sz * 4 : sz);
    return SX_OK;
}

static sx_status parse_shape(const char *name, const char *hdr, sx__npy *out)
{
    const char *p = dict_value(hdr, "shape");
    if (!p || *p != '(')
        return sx__err(SX_EINVAL, "%s: NumPy header has no 'shape' tuple", name);
    p++;
    out->ndim = 0;
    out->n_elems = 1;
    for (;;) {
        while (*p == ' ')
            p++;
        if (*p == ')')
            break;
        if (*p < '0' || *p > '9')
            return sx__err(SX_EINVAL, "%s: NumPy 'shape' is malformed", name);
        uint64_t v = 0;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (v > (UINT64_MAX - 9) / 10)
                return sx__err(SX_EINVAL, "%s: NumPy 'shape' value overflows", name);
            v = v * 10 + (uint64_t)(*p - '0');
        }
        if (*p == 'L') /* Python 2 longs */
            p++;
        if (out->ndim == SX__NPY_MAX_NDIM)
            return sx__err(SX_EINVAL, "%s: NumPy array has more than %u dimensions", name,
                           SX__NPY_MAX_NDIM);
        out->shape[out->ndim++] = v;
        if (v && out->n_elems > UINT64_MAX / v)
            return sx__err(SX_EINVAL, "%s: NumPy 'shape' overflows", name);
        out->n_elems *= v;
        while (*p == ' ')
            p++;
        if (*p == ',')
            p++;
        else if (*p != ')')
            return sx__err(SX_EINVAL, "%s: NumPy 'shape' is malformed", name);
    }
    if (out->ndim == 0)
        return sx__err(SX_EINVAL, "%s: NumPy array is a scalar (shape ())", name);
    return SX_OK;
}

sx_status sx__npy_parse(
    const char *name, const unsigned char *buf, size_t len, uint64_t file_size, sx__npy *out)
{
    char hdr[SX__NPY_MAX_HEADER + 1];
    sx__npy r;
    memset(&r, 0, sizeof r);
    if (file_size < 10 || len < 10)
        return sx__err(SX_EINVAL, "%s: truncated NumPy file (%llu bytes, no room for a header)",
                       name, (unsigned long long)file_size);
    if (memcmp(buf, "\x93NUMPY", 6) != 0)
        return sx__err(SX_EINVAL, "%s: not a NumPy file (no \\x93NUMPY magic)", name);
    unsigned major = buf[6];
    uint64_t hlen, off;
    if (major == 1) {
        hlen = (uint64_t)buf[8] | (uint64_t)buf[9] << 8;
        off = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return sx__err(SX_EINVAL, "%s: truncated NumPy header", name);
        hlen = le32(buf + 8);
        off = 12;
    } else {
        return sx__err(SX_EINVAL, "%s: NumPy format version %u.%u is not supported (1, 2, 3 are)",
                       name, major, buf[7]);
    }
    if (hlen > SX__NPY_MAX_HEADER)
        return sx__err(SX_EINVAL, "%s: NumPy header of %llu bytes is over the limit of %u", name,
                       (unsigned long long)hlen, SX__NPY_MAX_HEADER);
    if (off + hlen > file_size || off + hlen > len)
        return sx__err(SX_EINVAL,
                       "%s: truncated NumPy file: the header needs %llu bytes, the file has %llu",
                       name, (unsigned long long)(off + hlen), (unsigned long long)file_size);
    memcpy(hdr, buf + off, (size_t)hlen);
    hdr[hlen] = '\0';
    if (memchr(hdr, '\0', (size_t)hlen))
        return sx__err(SX_EINVAL, "%s: NumPy header holds a NUL byte", name);
    r.data_off = off + hlen;
    sx_status st = parse_descr(name, hdr, &r);
    if (st == SX_OK)
        st = parse_shape(name, hdr, &r);
    if (st != SX_OK)
        return st;
    const char *p = dict_value(hdr, "fortran_order");
    if (!p)
        return sx__err(SX_EINVAL, "%s: NumPy header has no 'fortran_order'", name);
    if (strncmp(p, "True", 4) == 0)
        r.fortran = true;
    else if (strncmp(p, "False", 5) != 0)
        return sx__err(SX_EINVAL, "%s: NumPy 'fortran_order' is neither True nor False", name);
    if (r.n_elems > UINT64_MAX / r.itemsize)
        return sx__err(SX_EINVAL, "%s: NumPy data size overflows", name);
    uint64_t need = r.n_elems * r.itemsize, have = file_size - r.data_off;
    if (have < need)
        return sx__err(SX_EINVAL,
                       "%s: truncated NumPy file: the header's shape needs %llu data bytes, the "
                       "file holds %llu",
                       name, (unsigned long long)need, (unsigned long long)have);
    if (have > need)
        return sx__err(SX_EINVAL,
                       "%s: NumPy file has %llu bytes after the %llu data bytes its header "
                       "describes",
                       name, (unsigned long long)(have - need), (unsigned long long)need);
    *out = r;
    return SX_OK;
}

sx_status sx__vecs_shape(const char *name,
                         const char *kind,
                         const unsigned char first4[4],
                         uint64_t file_size,
                         size_t elem,
                         uint32_t max_dim,
                         uint32_t *dim,
                         uint64_t *n)
{
    if (file_size < 4)
        return sx__err(SX_EINVAL, "%s: file is %s (%llu bytes): not a .%s file", name,
                       file_size == 0 ? "empty" : "truncated", (unsigned long long)file_size, kind);
    int32_t d = (int32_t)le32(first4);
    if (d <= 0 || (uint32_t)d > max_dim)
        return sx__err(SX_EINVAL, "%s: first record has dimension %d (want 1..%u): not a .%s file",
                       name, (int)d, max_dim, kind);
    uint64_t rec = 4 + (uint64_t)d * elem;
    if (file_size % rec != 0)
        return sx__err(SX_EINVAL,
                       "%s: size %llu is not a multiple of the record size %llu (4 + %d x %zu): "
                       "the file is truncated or not a .%s file (%llu whole records, %llu bytes "
                       "left over)",
                       name, (unsigned long long)file_size, (unsigned long long)rec, (int)d, elem,
                       kind, (unsigned long long)(file_size / rec),
                       (unsigned long long)(file_size % rec));
    *dim = (uint32_t)d;
    *n = file_size / rec;
    return SX_OK;
}
