/*
 * npy.h: writes NumPy .npy files (format version 1: magic, header dict padded with spaces to a
 * multiple of 64 bytes and ended by '\n', then the raw array) for the bulk-import tests.
 * Include after harness.h (it fails the test with FAILF on I/O errors).
 */
#ifndef SX_TEST_NPY_H
#define SX_TEST_NPY_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* descr: a NumPy dtype string ("<f4", "<i8", "|b1", "<U8"); shape: a Python tuple ("(50,)",
 * "(50, 8)"); d: n bytes of array data. */
static inline void
th_write_npy(const char *path, const char *descr, const char *shape, const void *d, size_t n)
{
    char dict[256];
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                      descr, shape);
    size_t total = 10 + (size_t)dl + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)dl + pad + 1;
    unsigned char *buf = malloc(10 + hlen + n);
    if (!buf)
        FAILF("out of memory writing %s", path);
    static const unsigned char magic[8] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0 };
    memcpy(buf, magic, sizeof magic);
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)dl);
    memset(buf + 10 + dl, ' ', pad);
    buf[10 + hlen - 1] = '\n';
    if (n)
        memcpy(buf + 10 + hlen, d, n);
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(buf, 1, 10 + hlen + n, f) == 10 + hlen + n;
    if (f && fclose(f) != 0)
        ok = false;
    free(buf);
    if (!ok)
        FAILF("cannot write %s", path);
}

#endif
