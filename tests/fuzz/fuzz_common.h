/*
 * fuzz_common.h: shared helpers of the libFuzzer harnesses (tests/fuzz/fuzz_*.c).
 *
 * Every harness defines LLVMFuzzerInitialize (one-time setup: temp directory, fixtures) and
 * LLVMFuzzerTestOneInput (one input: never exits, never leaks, treats every error status as a
 * normal outcome; only crashes, sanitizer reports and hangs are findings). The same harness
 * sources are linked either with libFuzzer (-fsanitize=fuzzer, the SX_FUZZ build) or with
 * replay_main.c (the normal and ASan builds: every corpus file is fed once, as a regression test).
 *
 * Scratch files live in one directory per process, made by fz_tmpdir() and removed at exit.
 * Thread-safety: none needed (libFuzzer runs inputs on one thread).
 */
#ifndef SX_FUZZ_COMMON_H
#define SX_FUZZ_COMMON_H
#include <fcntl.h>
#include <ftw.h>
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/crc32c.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static inline int fz_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(p); /* best effort */
    return 0;
}

/* Removes a directory tree (errors ignored). */
static inline void fz_rm_rf(const char *path)
{
    nftw(path, fz_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static char fz_tmp_root[512];

static inline void fz_tmp_cleanup(void)
{
    if (fz_tmp_root[0])
        fz_rm_rf(fz_tmp_root);
}

/* The process's scratch directory: $SX_TMPDIR, $TMPDIR or /tmp, plus "sxfuzz-<tag>-XXXXXX".
 * Exits the process (at initialisation only) when it cannot be made. */
static inline const char *fz_tmpdir(const char *tag)
{
    if (fz_tmp_root[0])
        return fz_tmp_root;
    const char *base = getenv("SX_TMPDIR");
    if (!base || !*base)
        base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    mkdir(base, 0755);
    snprintf(fz_tmp_root, sizeof fz_tmp_root, "%s/sxfuzz-%s-XXXXXX", base, tag);
    if (!mkdtemp(fz_tmp_root)) {
        perror(fz_tmp_root);
        exit(2);
    }
    atexit(fz_tmp_cleanup);
    return fz_tmp_root;
}

/* Writes data to path as a new file (the old one is unlinked first: truncating a file and
 * rewriting it makes ext4 flush it at close, auto_da_alloc, which costs milliseconds per input).
 * Returns false on any failure. */
static inline bool fz_write_file(const char *path, const void *data, size_t n)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return false;
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) {
            close(fd);
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return close(fd) == 0;
}

/* Reads a whole file (malloc'd, NUL-terminated for convenience). NULL on failure. */
static inline uint8_t *fz_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap + 1);
    while (buf) {
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        if (r == 0)
            break;
        len += r;
    }
    fclose(f);
    if (buf) {
        buf[len] = 0;
        *n = len;
    }
    return buf;
}

/* Checksums block most mutations before the parsing they protect, so harnesses also run a copy
 * of the input whose CRCs were recomputed ("fixed up"). These helpers store the CRC32C of
 * p[from, to) at p[at, at + 4) when all of it lies inside p[0, n). */
static inline void fz_fix_crc(uint8_t *p, size_t n, size_t from, size_t to, size_t at)
{
    if (from <= to && to <= n && at <= n && n - at >= 4)
        sx__put_le32(p + at, sx__crc32c(0, p + from, to - from));
}

/* A malloc'd copy of data (n bytes; at least 1 byte allocated). */
static inline uint8_t *fz_dup(const uint8_t *data, size_t n)
{
    uint8_t *c = malloc(n ? n : 1);
    if (c && n)
        memcpy(c, data, n);
    return c;
}

/* The fixed vectors every index / segment harness uses: FZ_N rows of FZ_DIM floats, a
 * deterministic pattern (seeds are generated from the same array by gen_corpus.c). */
#define FZ_N   64u
#define FZ_DIM 8u

static inline void fz_fixed_vectors(float *v)
{
    uint32_t x = 12345u;
    for (size_t i = 0; i < (size_t)FZ_N * FZ_DIM; i++) {
        x = x * 1103515245u + 12345u;
        v[i] = (float)((x >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

/* The fixed collection schema of the WAL and segment harnesses (and of gen_corpus.c):
 * id INT64 primary, vec FLOAT_VECTOR(FZ_DIM), age INT64, score DOUBLE, flag BOOL, name VARCHAR. */
#define FZ_N_FIELDS 6u
static const sx_field_def fz_fields[FZ_N_FIELDS] = {
    { .name = "id", .type = SX_FIELD_INT64, .is_primary = true },
    { .name = "vec", .type = SX_FIELD_FLOAT_VECTOR, .dim = FZ_DIM },
    { .name = "age", .type = SX_FIELD_INT64 },
    { .name = "score", .type = SX_FIELD_DOUBLE },
    { .name = "flag", .type = SX_FIELD_BOOL },
    { .name = "name", .type = SX_FIELD_VARCHAR, .max_length = 64 },
};

static inline sx_collection_def fz_fixture_def(const char *name)
{
    sx_collection_def d = {
        .name = name, .fields = fz_fields, .n_fields = FZ_N_FIELDS, .metric = SX_METRIC_L2
    };
    return d;
}

#endif
