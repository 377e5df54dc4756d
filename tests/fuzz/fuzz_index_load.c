/*
 * fuzz_index_load.c: libFuzzer harness for the index loaders, through the vtable
 * (src/index/index.h), on FZ_N x FZ_DIM fixed vectors (fuzz_common.h).
 *
 * Input byte 0: bits 0-2 pick the index (0 FLAT, 1 HNSW, 2 IVF_FLAT, 3 IVF_SQ8, 4 IVF_PQ,
 * 5 HNSW_SQ, 6 DISKANN, 7 FLAT), bits 3-4 the metric (0 L2, 1 IP, 2 COSINE, 3 L2), bit 7 set:
 * the bytes as given; clear: their checksums are recomputed first (fix_blob), so mutations reach
 * the decoding behind them.
 * For every index but DISKANN the rest is the serialized index given to deserialize. For DISKANN
 * the rest is [u32 LE ram_len][ram_len bytes: the RAM part][the <prefix>.diskann file], loaded
 * with load_files. An index that loads is searched (a few queries, k = 1, 5 and FZ_N + 3, with no
 * allow-set and with half the rows allowed; only when check_search_params accepts the defaults,
 * as the engine does), then freed. Loader and search errors are normal outcomes; the loaders
 * promise SX_ECORRUPT on any inconsistency, so a crash in search after a successful load is a
 * finding too. gen_corpus.c writes the seeds (real serializations of the same vectors).
 */
#include "fuzz_common.h"
#include "index/index.h"
#include "util/err.h"
#include "util/heap.h"

static const sx__index_ops *const k_ops[8] = {
    &sx__flat_index_ops,   &sx__hnsw_index_ops,    &sx__ivf_flat_index_ops, &sx__ivf_sq8_index_ops,
    &sx__ivf_pq_index_ops, &sx__hnsw_sq_index_ops, &sx__diskann_index_ops,  &sx__flat_index_ops,
};
static const sx_metric k_metrics[4] = { SX_METRIC_L2, SX_METRIC_IP, SX_METRIC_COSINE,
                                        SX_METRIC_L2 };

static float g_vecs[FZ_N * FZ_DIM];
static char g_prefix[600];
static char g_dfile[700];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("SX_DISKANN_DIRECT", "0", 1); /* tmpfs refuses O_DIRECT; keep runs comparable */
    const char *tmp = fz_tmpdir("index");
    snprintf(g_prefix, sizeof g_prefix, "%s/seg-00000000000000000001", tmp);
    snprintf(g_dfile, sizeof g_dfile, "%s.diskann", g_prefix);
    fz_fixed_vectors(g_vecs);
    return 0;
}

static void search_all(const sx__index_ops *ops, const sx__index *idx)
{
    static const size_t ks[] = { 1, 5, FZ_N + 3 };
    sx__hit hits[FZ_N + 3];
    uint64_t half[(FZ_N + 63) / 64];
    for (size_t i = 0; i < sizeof half / sizeof half[0]; i++)
        half[i] = 0x5555555555555555ull;
    for (size_t qi = 0; qi < 3; qi++) {
        const float *q = g_vecs + qi * 7 * FZ_DIM;
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            if (ops->check_search_params && ops->check_search_params(NULL, 0, ks[ki]) != SX_OK)
                continue;
            for (int a = 0; a < 2; a++) {
                sx__topk t;
                sx__topk_init(&t, hits, ks[ki]);
                if (ops->search(idx, q, ks[ki], NULL, 0, a ? half : NULL, &t) == SX_OK) {
                    size_t n = sx__topk_sort(&t);
                    for (size_t i = 0; i < n; i++)
                        if (hits[i].id >= FZ_N) {
                            fprintf(stderr, "fuzz_index_load: %s returned row %u of %u\n",
                                    ops->name, hits[i].id, FZ_N);
                            abort();
                        }
                }
            }
        }
    }
}

/* Recomputes the checksums the loaders verify first: FLAT's header CRC (bytes 24..27 over 0..23),
 * the trailing CRC of the other blobs and of DISKANN's RAM part, DISKANN's file header and slot
 * CRCs. (The PQ codebook's inner CRC of IVF_PQ / DISKANN is left alone.) */
static void fix_blob(const sx__index_ops *ops, uint8_t *p, size_t n)
{
    if (ops == &sx__flat_index_ops)
        fz_fix_crc(p, n, 0, 24, 24);
    else if (n >= 4)
        fz_fix_crc(p, n, 0, n - 4, n - 4);
}

static void fix_diskann_file(uint8_t *p, size_t n)
{
    if (n < 4096)
        return;
    fz_fix_crc(p, n, 0, 4092, 4092);
    uint32_t slot = sx__le32(p + 36);
    if (slot < 4096 || slot % 4096 != 0)
        return;
    for (size_t off = 4096; n - off >= slot; off += slot)
        fz_fix_crc(p, n, off, off + slot - 4, off + slot - 4);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const sx__index_ops *ops = k_ops[data[0] & 7];
    sx_metric metric = k_metrics[(data[0] >> 3) & 3];
    bool fix = !(data[0] & 0x80);
    uint8_t *buf = fz_dup(data + 1, size - 1);
    if (!buf)
        return 0;
    uint8_t *p = buf;
    size--;
    sx__index *idx = NULL;
    sx_status st = SX_EINVAL;
    if (ops->load_files) {
        if (size >= 4) {
            size_t ram = sx__le32(p);
            p += 4;
            size -= 4;
            if (ram > size)
                ram = size;
            if (fix) {
                fix_blob(ops, p, ram);
                fix_diskann_file(p + ram, size - ram);
            }
            if (fz_write_file(g_dfile, p + ram, size - ram))
                st = ops->load_files(p, ram, g_prefix, g_vecs, FZ_N, FZ_DIM, metric, &idx);
        }
    } else {
        if (fix)
            fix_blob(ops, p, size);
        st = ops->deserialize(p, size, g_vecs, FZ_N, FZ_DIM, metric, &idx);
    }
    if (st == SX_OK) {
        volatile size_t sink = ops->memory_bytes(idx);
        (void)sink;
        search_all(ops, idx);
        ops->free(idx);
    }
    free(buf);
    return 0;
}
