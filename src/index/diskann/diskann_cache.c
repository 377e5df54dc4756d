/*
 * diskann_cache.c: the DISKANN node cache (DiskANN paper, section 3.4: "cache the neighbourhood
 * of the entry point"). Every search starts at the medoid and its first hops land in the same
 * few nodes, so their slots are read once, when the index is built or loaded, and kept in RAM.
 *
 * Size: search_cache_budget_gb_ratio (Milvus's parameter name) x the raw vector bytes
 * (n * dim * 4), in whole slots. With 0 (the default) the engine sizes it instead
 * (ops->set_cache_bytes, build.c: under a memory limit, a quarter of the budget's free part, at
 * most a tenth of the raw bytes as Milvus's default ratio 0.1; none without a limit). The bytes
 * are part of the index's memory_bytes, so the engine charges them to the budget (SX__MEM_INDEX).
 *
 * Fill: breadth-first over node ids from the medoid. A node's slot is read (through
 * sx__diskann_read_at: the local file or the remote reader), its CRC checked, every node in the
 * slot decoded (a slot holds nodes_per_slot consecutive ids: all of them are cached with it and
 * all of their neighbours queued), until the slot budget is reached. The temporary state is two
 * bitsets (nodes queued, slots taken) and the queue.
 *
 * Lookup: cache_slots is sorted, a search binary-searches it for each slot of a beam step before
 * it reads the misses in one batch (diskann_search.c). The cache is immutable once filled: no
 * lock. The copy is byte for byte the file's slot, so a search gives the same answer with or
 * without it, with fewer reads.
 */
#include <stdlib.h>
#include <string.h>

#include "index/diskann/diskann.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"

typedef struct ent {
    uint64_t slot;
    uint32_t pos;
} ent;

static int ent_cmp(const void *a, const void *b)
{
    uint64_t x = ((const ent *)a)->slot, y = ((const ent *)b)->slot;
    return x < y ? -1 : x > y;
}

void sx__diskann_cache_free(sx__diskann *d)
{
    sx__free(d->cache_slots);
    sx__free(d->cache_pos);
    sx__free(d->cache_raw);
    d->cache_slots = NULL;
    d->cache_pos = NULL;
    d->cache_raw = NULL;
    d->cache_data = NULL;
    d->cache_n = 0;
}

size_t sx__diskann_cache_bytes(const sx__diskann *d)
{
    if (!d->cache_n)
        return 0;
    return d->cache_n * ((size_t)d->lay.slot_bytes + sizeof(uint64_t) + sizeof(uint32_t));
}

const uint8_t *sx__diskann_cache_get(const sx__diskann *d, uint64_t slot)
{
    size_t lo = 0, hi = d->cache_n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t v = d->cache_slots[mid];
        if (v == slot)
            return d->cache_data + (size_t)d->cache_pos[mid] * d->lay.slot_bytes;
        if (v < slot)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static sx_status warm_slots(sx__diskann *d, uint64_t want);

sx_status sx__diskann_cache_warm(sx__diskann *d)
{
    sx__diskann_cache_free(d);
    if (d->n == 0 || !(d->cache_ratio > 0.0f))
        return SX_OK;
    double budget = (double)d->cache_ratio * (double)d->n * (double)d->dim * 4.0;
    return warm_slots(d, (uint64_t)(budget / (double)d->lay.slot_bytes));
}

sx_status sx__diskann_set_cache_bytes(sx__index *idx, uint64_t bytes)
{
    sx__diskann *d = (sx__diskann *)idx;
    if (d->n == 0 || d->cache_ratio > 0.0f || d->cache_n > 0)
        return SX_OK; /* the build parameters chose (or it has one already) */
    /* the cache's own arrays: a slot, its id and its position */
    uint64_t per = (uint64_t)d->lay.slot_bytes + sizeof(uint64_t) + sizeof(uint32_t);
    return warm_slots(d, bytes / per);
}

static sx_status warm_slots(sx__diskann *d, uint64_t want)
{
    if (want > d->lay.n_slots)
        want = d->lay.n_slots;
    if (want == 0)
        return SX_OK;
    size_t sb = d->lay.slot_bytes;
    void *raw = NULL;
    uint8_t *data = sx__diskann_sector_alloc((size_t)want * sb, &raw);
    uint64_t *qbits = sx__calloc(sx__bits_words(d->n) + 1, sizeof(uint64_t));
    uint64_t *sbits = sx__calloc(sx__bits_words((size_t)d->lay.n_slots) + 1, sizeof(uint64_t));
    ent *ents = sx__malloc((size_t)want * sizeof *ents);
    uint32_t *queue =
        sx__malloc(((size_t)want * d->lay.nodes_per_slot * (d->R + 1) + 1) * sizeof *queue);
    uint32_t *nbrs = sx__malloc(((size_t)d->R + 1) * sizeof *nbrs);
    sx_status rc = data && qbits && sbits && ents && queue && nbrs
                       ? SX_OK
                       : sx__err(SX_ENOMEM, "DISKANN: cannot allocate the node cache");
    size_t qh = 0, qt = 0, got = 0;
    if (rc == SX_OK) {
        queue[qt++] = d->medoid;
        sx__bits_set(qbits, d->medoid);
    }
    size_t qcap = (size_t)want * d->lay.nodes_per_slot * (d->R + 1) + 1;
    while (rc == SX_OK && qh < qt && got < want) {
        uint32_t id = queue[qh++];
        uint64_t slot = sx__diskann_slot_of(&d->lay, id);
        if (sx__bits_test(sbits, (size_t)slot))
            continue;
        uint8_t *buf = data + got * sb;
        rc = sx__diskann_read_at(d, sx__diskann_slot_offset(&d->lay, slot), sb, buf);
        if (rc != SX_OK)
            break;
        if (!sx__diskann_slot_ok(&d->lay, buf)) {
            rc = sx__err(SX_ECORRUPT, "DISKANN %s: checksum mismatch in slot %llu", d->path,
                         (unsigned long long)slot);
            break;
        }
        sx__bits_set(sbits, (size_t)slot);
        ents[got] = (ent){ slot, (uint32_t)got };
        got++;
        /* every node of the slot comes with it: queue all their neighbours */
        uint64_t first = slot * d->lay.nodes_per_slot;
        for (uint64_t nid = first; rc == SX_OK && nid < first + d->lay.nodes_per_slot && nid < d->n;
             nid++) {
            uint32_t deg = 0;
            rc = sx__diskann_node_decode(&d->lay, buf, (uint32_t)nid, d->n, NULL, nbrs, &deg);
            for (uint32_t j = 0; rc == SX_OK && j < deg && qt < qcap; j++) {
                if (sx__bits_test(qbits, nbrs[j]))
                    continue;
                sx__bits_set(qbits, nbrs[j]);
                queue[qt++] = nbrs[j];
            }
        }
    }
    if (rc == SX_OK && got > 0) {
        qsort(ents, got, sizeof *ents, ent_cmp);
        d->cache_slots = sx__malloc(got * sizeof *d->cache_slots);
        d->cache_pos = sx__malloc(got * sizeof *d->cache_pos);
        if (!d->cache_slots || !d->cache_pos) {
            rc = sx__err(SX_ENOMEM, "DISKANN: cannot allocate the node cache");
        } else {
            for (size_t i = 0; i < got; i++) {
                d->cache_slots[i] = ents[i].slot;
                d->cache_pos[i] = ents[i].pos;
            }
            d->cache_raw = raw;
            d->cache_data = data;
            d->cache_n = got;
            raw = NULL;
        }
    }
    sx__free(qbits);
    sx__free(sbits);
    sx__free(ents);
    sx__free(queue);
    sx__free(nbrs);
    if (raw)
        sx__free(raw);
    if (rc != SX_OK)
        sx__diskann_cache_free(d);
    return rc;
}
