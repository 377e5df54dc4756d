/*
 * test_vecfile.c: the NumPy header and TEXMEX shape checks (src/util/vecfile.c) that the bulk
 * import and the CLI share, on hand-built headers: versions 1 and 2, every dtype form the
 * import takes, and each malformed header refused with SX_EINVAL and a message naming what is
 * wrong (magic, version, header past the end, missing keys, structured dtype, shape overflow,
 * data shorter or longer than the shape says); TEXMEX sizes that are not whole records.
 */
#include <sextant.h>

#include "harness.h"
#include "util/vecfile.h"

static size_t npy_build(unsigned char *buf, int version, const char *dict, size_t data_bytes)
{
    size_t dl = strlen(dict), pre = version == 1 ? 10 : 12;
    size_t hlen = dl + 1;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)version;
    buf[7] = 0;
    if (version == 1) {
        buf[8] = (unsigned char)(hlen & 0xff);
        buf[9] = (unsigned char)(hlen >> 8);
    } else {
        buf[8] = (unsigned char)(hlen & 0xff);
        buf[9] = (unsigned char)(hlen >> 8);
        buf[10] = 0;
        buf[11] = 0;
    }
    memcpy(buf + pre, dict, dl);
    buf[pre + dl] = '\n';
    memset(buf + pre + hlen, 0, data_bytes);
    return pre + hlen + data_bytes;
}

static unsigned char buf[1 << 16];

static void npy_good(void)
{
    sx__npy h;
    size_t n = npy_build(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 48);
    ASSERT_OK(sx__npy_parse("a.npy", buf, n, n, &h));
    ASSERT(strcmp(h.descr, "<f4") == 0);
    ASSERT_EQ(h.kind, 'f');
    ASSERT_EQ(h.itemsize, 4);
    ASSERT_EQ(h.ndim, 2);
    ASSERT_EQ(h.shape[0], 3);
    ASSERT_EQ(h.shape[1], 4);
    ASSERT_EQ(h.n_elems, 12);
    ASSERT_EQ(h.data_off, n - 48);
    n = npy_build(buf, 2, "{\"descr\": \"<U5\", \"fortran_order\": False, \"shape\": (7,)}",
                  7 * 20);
    ASSERT_OK(sx__npy_parse("b.npy", buf, n, n, &h));
    ASSERT_EQ(h.kind, 'U');
    ASSERT_EQ(h.itemsize, 20);
    ASSERT_EQ(h.ndim, 1);
    n = npy_build(buf, 1, "{'descr': '|b1', 'fortran_order': True, 'shape': (0,), }", 0);
    ASSERT_OK(sx__npy_parse("c.npy", buf, n, n, &h));
    ASSERT(h.fortran);
    ASSERT_EQ(h.n_elems, 0);
}

static void npy_bad_one(const char *dict, size_t data, size_t cut, long extra, const char *want)
{
    sx__npy h;
    size_t n = npy_build(buf, 1, dict, data);
    size_t len = n - cut + (size_t)extra;
    ASSERT_STATUS(sx__npy_parse("x.npy", buf, len, len, &h), SX_EINVAL);
    if (!strstr(sx_errmsg(), want))
        FAILF("\"%s\" lacks \"%s\"", sx_errmsg(), want);
    if (!strstr(sx_errmsg(), "x.npy"))
        FAILF("\"%s\" does not name the file", sx_errmsg());
}

static void npy_bad(void)
{
    const char *ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
    npy_bad_one(ok, 48, 1, 0, "truncated NumPy file: the header's shape needs 48 data bytes");
    npy_bad_one(ok, 48, 0, 4, "4 bytes after the 48 data bytes");
    npy_bad_one(ok, 48, 48 + 30, 0, "the header needs");
    npy_bad_one("{'fortran_order': False, 'shape': (3, 4), }", 48, 0, 0, "no 'descr'");
    npy_bad_one("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", 12, 0, 0,
                "structured dtype");
    npy_bad_one("{'descr': '<f4', 'fortran_order': False, }", 48, 0, 0, "no 'shape'");
    npy_bad_one("{'descr': '<f4', 'shape': (3, 4), }", 48, 0, 0, "no 'fortran_order'");
    npy_bad_one("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, "
                "99999999999), }",
                0, 0, 0, "overflows");
    npy_bad_one("{'descr': '<f4', 'fortran_order': False, 'shape': (3, x), }", 48, 0, 0,
                "malformed");
    npy_bad_one("{'descr': 'f4', 'fortran_order': False, 'shape': (3, 4), }", 48, 0, 0,
                "byte-order");
    sx__npy h;
    size_t n = npy_build(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4);
    buf[0] = 'X';
    ASSERT_STATUS(sx__npy_parse("m.npy", buf, n, n, &h), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "magic") != NULL);
    buf[0] = 0x93;
    buf[6] = 9;
    ASSERT_STATUS(sx__npy_parse("v.npy", buf, n, n, &h), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "version 9") != NULL);
    ASSERT_STATUS(sx__npy_parse("s.npy", buf, 5, 5, &h), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "truncated") != NULL);
}

static void vecs(void)
{
    unsigned char d4[4] = { 8, 0, 0, 0 };
    uint32_t dim = 0;
    uint64_t n = 0;
    ASSERT_OK(sx__vecs_shape("a.fvecs", "fvecs", d4, 10 * 36, 4, SX_MAX_DIM, &dim, &n));
    ASSERT_EQ(dim, 8);
    ASSERT_EQ(n, 10);
    ASSERT_OK(sx__vecs_shape("a.bvecs", "bvecs", d4, 10 * 12, 1, SX_MAX_DIM, &dim, &n));
    ASSERT_EQ(n, 10);
    ASSERT_STATUS(sx__vecs_shape("t.fvecs", "fvecs", d4, 10 * 36 - 3, 4, SX_MAX_DIM, &dim, &n),
                  SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "not a multiple of the record size 36") != NULL);
    ASSERT(strstr(sx_errmsg(), "9 whole records, 33 bytes left over") != NULL);
    ASSERT_STATUS(sx__vecs_shape("e.fvecs", "fvecs", d4, 0, 4, SX_MAX_DIM, &dim, &n), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "empty") != NULL);
    unsigned char big[4] = { 0xff, 0xff, 0xff, 0x7f };
    ASSERT_STATUS(sx__vecs_shape("b.fvecs", "fvecs", big, 1000, 4, SX_MAX_DIM, &dim, &n),
                  SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "dimension 2147483647") != NULL);
}

int main(void)
{
    RUN(npy_good);
    RUN(npy_bad);
    RUN(vecs);
    return TEST_DONE();
}
