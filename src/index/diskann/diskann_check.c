/*
 * diskann_check.c: sx__diskann_check, the structural oracle of a DISKANN index (invariants 1-5 of
 * diskann.h):
 *   1. the layout matches n, dim, R and the file is long enough (re-checked on the open file);
 *   2. every slot's CRC-32C matches;
 *   3. every node's degree is <= R, its neighbours are < n, distinct, and not itself;
 *   4. n > 0 <=> medoid < n; every PQ code byte < ksub;
 *   5. every node is reachable from the medoid (graph.h's sx__graph_check_reach: invariant R,
 *      seed set {medoid}).
 * The file is read sequentially (or through the reader of a remote file: ranged reads), 64 slots
 * per read, into a 4 KiB-aligned buffer (the descriptor
 * may be O_DIRECT); these reads are not counted in io_stats. The lists are kept in CSR form for
 * the BFS: O(n + edges) words, so this is a test and `sextant check` tool, not a load-time step
 * (load validates the header and search validates every slot it reads).
 * Thread-safety: read-only on the index; safe to run while other threads search.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/diskann/diskann.h"
#include "index/graph/graph.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"

#define CHECK_SLOTS 64u

/* The lists in CSR form (node i's ids: edges[off[i] .. off[i+1])) as graph.h's store. */
typedef struct csr {
    const uint64_t *off;
    const uint32_t *edges;
} csr;

/* buf: the store callback's scratch (graph.h), unused here: the lists are in memory */
static sx_status csr_get(void *ctx,
                         uint32_t id,
                         uint32_t *buf, /* NOLINT(readability-non-const-parameter) */
                         const uint32_t **ids,
                         uint32_t *count)
{
    const csr *c = ctx;
    (void)buf;
    *ids = c->edges + c->off[id];
    *count = (uint32_t)(c->off[id + 1] - c->off[id]);
    return SX_OK;
}

static sx_status read_chunk(const sx__diskann *d, uint8_t *buf, uint64_t first, size_t count)
{
    sx_status rc = sx__diskann_read_at(d, sx__diskann_slot_offset(&d->lay, first),
                                       count * d->lay.slot_bytes, buf);
    if (rc == SX_ECORRUPT) /* short file */
        return sx__err(SX_ECORRUPT, "DISKANN %s: truncated at slot %llu", d->path,
                       (unsigned long long)first);
    return rc;
}

sx_status sx__diskann_check(const sx__index *idx)
{
    const sx__diskann *d = (const sx__diskann *)idx;
    if (!d)
        return sx__err(SX_EINVAL, "DISKANN check: no index");
    size_t n = d->n;
    sx__diskann_layout want;
    if (sx__diskann_layout_init(&want, n, d->dim, d->R) != SX_OK || want.dim != d->lay.dim ||
        want.R != d->lay.R || want.node_bytes != d->lay.node_bytes ||
        want.nodes_per_slot != d->lay.nodes_per_slot || want.slot_bytes != d->lay.slot_bytes ||
        want.n_slots != d->lay.n_slots)
        return sx__err(SX_ECORRUPT, "DISKANN: layout does not match n/dim/R");
    uint64_t fsize = 0;
    if (d->io_mode == SX__DISKANN_IO_READER) {
        fsize = d->rd.size;
    } else {
        if (d->fd < 0)
            return sx__err(SX_EINVAL, "DISKANN check: file not open");
        struct stat sb;
        if (fstat(d->fd, &sb) != 0)
            return sx__err_errno(errno, "DISKANN check: fstat %s", d->path);
        fsize = (uint64_t)sb.st_size;
    }
    if (fsize < sx__diskann_file_bytes(&d->lay))
        return sx__err(SX_ECORRUPT, "DISKANN %s: file too short", d->path);
    if (n == 0)
        return d->medoid == SX__DISKANN_NONE
                   ? SX_OK
                   : sx__err(SX_ECORRUPT, "DISKANN: empty index with medoid %u", d->medoid);
    if (d->medoid >= n)
        return sx__err(SX_ECORRUPT, "DISKANN: medoid %u out of range (n=%zu)", d->medoid, n);
    for (size_t i = 0; i < n * d->pq.m; i++)
        if (d->codes[i] >= d->pq.ksub)
            return sx__err(SX_ECORRUPT, "DISKANN: code byte %zu is %u >= ksub %u", i, d->codes[i],
                           d->pq.ksub);

    sx_status rc = SX_OK;
    void *raw = NULL;
    uint8_t *buf = sx__diskann_sector_alloc((size_t)CHECK_SLOTS * d->lay.slot_bytes, &raw);
    uint64_t *off = sx__malloc((n + 1) * sizeof *off);
    uint32_t *stamp = sx__calloc(n, sizeof *stamp);
    uint32_t *nb = sx__malloc((size_t)d->R * sizeof *nb + 4);
    size_t ecap = n * 8 + 16, ne = 0;
    uint32_t *edges = sx__malloc(ecap * sizeof *edges);
    if (!buf || !off || !stamp || !nb || !edges) {
        rc = sx__err(SX_ENOMEM, "DISKANN check: out of memory");
        goto out;
    }
    off[0] = 0;
    for (uint64_t s0 = 0; s0 < d->lay.n_slots && rc == SX_OK; s0 += CHECK_SLOTS) {
        size_t cnt =
            d->lay.n_slots - s0 < CHECK_SLOTS ? (size_t)(d->lay.n_slots - s0) : CHECK_SLOTS;
        rc = read_chunk(d, buf, s0, cnt);
        for (size_t s = 0; s < cnt && rc == SX_OK; s++) {
            const uint8_t *slot = buf + s * d->lay.slot_bytes;
            uint64_t sl = s0 + s;
            if (!sx__diskann_slot_ok(&d->lay, slot)) {
                rc = sx__err(SX_ECORRUPT, "DISKANN %s: checksum mismatch in slot %llu", d->path,
                             (unsigned long long)sl);
                break;
            }
            for (uint32_t k = 0; k < d->lay.nodes_per_slot && rc == SX_OK; k++) {
                uint64_t id64 = sl * d->lay.nodes_per_slot + k;
                if (id64 >= n)
                    break;
                uint32_t id = (uint32_t)id64, deg;
                rc = sx__diskann_node_decode(&d->lay, slot, id, n, NULL, nb, &deg);
                if (rc != SX_OK)
                    break;
                if (ne + deg > ecap) {
                    size_t nc = ecap * 2 + deg;
                    uint32_t *e2 = sx__realloc(edges, nc * sizeof *e2);
                    if (!e2) {
                        rc = sx__err(SX_ENOMEM, "DISKANN check: out of memory");
                        break;
                    }
                    edges = e2;
                    ecap = nc;
                }
                for (uint32_t j = 0; j < deg; j++) {
                    if (stamp[nb[j]] == id + 1) {
                        rc = sx__err(SX_ECORRUPT, "DISKANN: node %u lists neighbour %u twice", id,
                                     nb[j]);
                        break;
                    }
                    stamp[nb[j]] = id + 1;
                    edges[ne++] = nb[j];
                }
                off[id + 1] = ne;
            }
        }
    }
    if (rc != SX_OK)
        goto out;
    /* invariant 5: graph.h's BFS over the lists in CSR form */
    csr c = { off, edges };
    sx__graph_store st = { &c, csr_get, NULL };
    sx__graph_view gv = { .n = n, .cap = d->R, .format = SX__GRAPH_COUNTED, .store = &st };
    rc = sx__graph_check_reach(&gv, &d->medoid, 1, "DISKANN", "the medoid");
out:
    sx__free(raw);
    sx__free(off);
    sx__free(stamp);
    sx__free(nb);
    sx__free(edges);
    return rc;
}
