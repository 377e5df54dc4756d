/*
 * blockcache.c: the LRU block cache of remote objects (design and contracts in blockcache.h).
 *
 * Structures, all guarded by bc->mu:
 *   objects   a list of open objects (one per key, few: one per remote DISKANN file), each with
 *             a small id that names it in the block table
 *   buckets   a chained hash table of blocks keyed by (object id, block index), doubled when it
 *             holds more blocks than buckets
 *   lru       a doubly linked list of READY blocks, most recent at the head; eviction takes from
 *             the tail, skipping pinned blocks
 * Block states: LOADING (in the table, not in the LRU, being fetched by one thread; data not yet
 * valid), READY (in the table and the LRU), FAILED (removed from the table by the fetcher; kept
 * alive only for the waiters pinning it, freed by the last one). resident_bytes counts LOADING
 * and READY blocks, so concurrent fetches cannot overshoot the limit by more than what is in
 * flight.
 *
 * A read walks the blocks of [off, off+len) in order: READY blocks are copied (hit) and moved to
 * the head; a LOADING block is pinned and waited for; at an absent block the thread claims the
 * run of consecutive absent blocks (up to SX__BLOCKCACHE_RUN_BYTES) as LOADING, unlocks, fetches
 * the run with one get_range into a temporary buffer, relocks, copies the caller's part from
 * that buffer (so the caller is served even if the limit evicts the run at once), publishes the
 * blocks and evicts down to the limit.
 *
 * The memory budget (platform/membudget.h; sx__blockcache_set_budget): resident_bytes is charged
 * to the database's budget as SX__MEM_CACHE, kept equal by charge_sync after every change, under
 * mu. Blocks being fetched are charged with sx__mem_force (the reader needs them), and eviction
 * runs down to the cache's own limit and, while the budget is over its limit, further (the cache
 * is the first optional holder to give memory back; pinned blocks stay).
 */
#include "storage/blockcache.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "platform/membudget.h"
#include "util/alloc.h"
#include "util/err.h"
#include "util/lock.h"

enum { B_LOADING = 0, B_READY = 1, B_FAILED = 2 };

typedef struct blk {
    struct blk *hnext;       /* hash chain */
    struct blk *prev, *next; /* LRU (READY only) */
    uint64_t idx;            /* block index in the object */
    uint32_t obj;            /* object id */
    uint32_t len;            /* data bytes (the object's last block may be short) */
    uint32_t pins;           /* waiters holding a pointer across a wait */
    uint8_t state;
    sx_status err; /* FAILED: the fetch's status and message */
    char *errmsg;
    uint8_t *data;
} blk;

struct sx__bc_object {
    struct sx__bc_object *next;
    sx__blockcache *bc;
    char *key;
    uint64_t size;
    uint32_t id;
    int handles;
};

struct sx__blockcache {
    sx__objstore *store;
    uint64_t limit;
    uint32_t block;
    uint32_t shift; /* log2(block) */
    sx__mutex mu;
    pthread_cond_t cv; /* broadcast when a fetch completes */
    int refs;          /* the owner's + one per open object */
    uint32_t next_id;
    sx__bc_object *objects;
    blk **buckets;
    size_t nbuckets; /* power of two */
    size_t nblocks;  /* blocks in the table (LOADING + READY) */
    blk *head, *tail;
    sx__blockcache_stats st;
    sx__membudget *budget; /* NULL: none; not owned */
    uint64_t charged;      /* bytes charged to budget (SX__MEM_CACHE) */
};

/* ---------------------------------------------------------------- hash table and LRU */

static size_t bhash(uint32_t obj, uint64_t idx, size_t nb)
{
    uint64_t h = idx * 0x9E3779B97F4A7C15ull ^ ((uint64_t)obj * 0xC2B2AE3D27D4EB4Full);
    h ^= h >> 29;
    return (size_t)h & (nb - 1);
}

static blk *find(const sx__blockcache *bc, uint32_t obj, uint64_t idx)
{
    for (blk *b = bc->buckets[bhash(obj, idx, bc->nbuckets)]; b; b = b->hnext)
        if (b->obj == obj && b->idx == idx)
            return b;
    return NULL;
}

static void table_grow(sx__blockcache *bc)
{
    size_t nb = bc->nbuckets * 2;
    blk **v = sx__calloc(nb, sizeof *v);
    if (!v)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < bc->nbuckets; i++) {
        blk *b = bc->buckets[i];
        while (b) {
            blk *nx = b->hnext;
            size_t h = bhash(b->obj, b->idx, nb);
            b->hnext = v[h];
            v[h] = b;
            b = nx;
        }
    }
    sx__free(bc->buckets);
    bc->buckets = v;
    bc->nbuckets = nb;
}

static void table_add(sx__blockcache *bc, blk *b)
{
    if (bc->nblocks >= bc->nbuckets)
        table_grow(bc);
    size_t h = bhash(b->obj, b->idx, bc->nbuckets);
    b->hnext = bc->buckets[h];
    bc->buckets[h] = b;
    bc->nblocks++;
}

static void table_del(sx__blockcache *bc, blk *b)
{
    blk **pp = &bc->buckets[bhash(b->obj, b->idx, bc->nbuckets)];
    while (*pp && *pp != b)
        pp = &(*pp)->hnext;
    if (*pp) {
        *pp = b->hnext;
        bc->nblocks--;
    }
    b->hnext = NULL;
}

static void lru_unlink(sx__blockcache *bc, blk *b)
{
    if (b->prev)
        b->prev->next = b->next;
    else
        bc->head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    else
        bc->tail = b->prev;
    b->prev = b->next = NULL;
}

static void lru_push(sx__blockcache *bc, blk *b)
{
    b->prev = NULL;
    b->next = bc->head;
    if (bc->head)
        bc->head->prev = b;
    bc->head = b;
    if (!bc->tail)
        bc->tail = b;
}

static void blk_free(blk *b)
{
    sx__free(b->data);
    sx__free(b->errmsg);
    sx__free(b);
}

/* Brings the budget's SX__MEM_CACHE charge to resident_bytes. Caller holds mu. */
static void charge_sync(sx__blockcache *bc)
{
    uint64_t r = bc->st.resident_bytes;
    if (r > bc->charged)
        sx__mem_force(bc->budget, SX__MEM_CACHE, r - bc->charged);
    else if (r < bc->charged)
        sx__mem_give(bc->budget, SX__MEM_CACHE, bc->charged - r);
    bc->charged = r;
}

/* Removes a READY block from the table and the LRU; frees it unless pinned (the last waiter
 * frees a pinned one: it is marked FAILED with err SX_OK, "gone, look again"). */
static void drop_ready(sx__blockcache *bc, blk *b)
{
    table_del(bc, b);
    lru_unlink(bc, b);
    bc->st.resident_bytes -= b->len;
    charge_sync(bc);
    if (b->pins == 0) {
        blk_free(b);
    } else {
        b->state = B_FAILED;
        b->err = SX_OK; /* not an error: the waiter looks the block up again */
    }
}

/* True while the budget is over its limit (the cache then gives back what it can). */
static bool budget_over(const sx__blockcache *bc)
{
    uint64_t lim = sx__mem_limit(bc->budget);
    return lim != 0 && sx__mem_used(bc->budget) > lim;
}

/* Evicts least recently used unpinned blocks until resident <= limit and the budget is not over
 * its limit. Caller holds mu. */
static void evict(sx__blockcache *bc)
{
    blk *b = bc->tail;
    charge_sync(bc);
    while (b && (bc->st.resident_bytes > bc->limit || budget_over(bc))) {
        blk *prev = b->prev;
        if (b->pins == 0) {
            drop_ready(bc, b);
            bc->st.evictions++;
        }
        b = prev;
    }
}

/* ---------------------------------------------------------------- life cycle */

sx_status sx__blockcache_new(sx__objstore *store,
                             uint64_t limit_bytes,
                             uint32_t block_bytes,
                             sx__blockcache **out)
{
    if (block_bytes == 0)
        block_bytes = SX__BLOCKCACHE_BLOCK_DEF;
    if (!store || block_bytes < 512 || (block_bytes & (block_bytes - 1)) != 0)
        return sx__err(SX_EINVAL, "block cache: block size %u is not a power of two >= 512",
                       block_bytes);
    sx__blockcache *bc = sx__calloc(1, sizeof *bc);
    if (!bc)
        return sx__err(SX_ENOMEM, "block cache");
    bc->nbuckets = 1024;
    bc->buckets = sx__calloc(bc->nbuckets, sizeof *bc->buckets);
    if (!bc->buckets) {
        sx__free(bc);
        return sx__err(SX_ENOMEM, "block cache");
    }
    bc->store = store;
    bc->limit = limit_bytes;
    bc->block = block_bytes;
    while ((1u << bc->shift) < block_bytes)
        bc->shift++;
    bc->refs = 1;
    bc->next_id = 1;
    bc->st.limit_bytes = limit_bytes;
    bc->st.block_bytes = block_bytes;
    (void)sx__mutex_init(&bc->mu, SX__RANK_BLOCKCACHE, "blockcache.mu");
    pthread_cond_init(&bc->cv, NULL);
    *out = bc;
    return SX_OK;
}

/* Frees the cache; called with the last reference gone (no object open, no read running). */
static void cache_destroy(sx__blockcache *bc)
{
    for (size_t i = 0; i < bc->nbuckets; i++) {
        blk *b = bc->buckets[i];
        while (b) {
            blk *nx = b->hnext;
            blk_free(b);
            b = nx;
        }
    }
    sx__free(bc->buckets);
    sx__mem_give(bc->budget, SX__MEM_CACHE, bc->charged);
    sx__mutex_destroy(&bc->mu);
    pthread_cond_destroy(&bc->cv);
    sx__free(bc);
}

void sx__blockcache_set_budget(sx__blockcache *bc, sx__membudget *budget)
{
    sx__mutex_lock(&bc->mu);
    sx__mem_give(bc->budget, SX__MEM_CACHE, bc->charged);
    bc->charged = 0;
    bc->budget = budget;
    charge_sync(bc);
    sx__mutex_unlock(&bc->mu);
}

void sx__blockcache_release(sx__blockcache *bc)
{
    if (!bc)
        return;
    sx__mutex_lock(&bc->mu);
    bool last = --bc->refs == 0;
    sx__mutex_unlock(&bc->mu);
    if (last)
        cache_destroy(bc);
}

sx_status
sx__blockcache_open(sx__blockcache *bc, const char *key, uint64_t size, sx__bc_object **out)
{
    sx__mutex_lock(&bc->mu);
    for (sx__bc_object *o = bc->objects; o; o = o->next) {
        if (strcmp(o->key, key) != 0)
            continue;
        if (o->size != size) {
            sx__mutex_unlock(&bc->mu);
            return sx__err(SX_EINVAL, "block cache: %s opened with %llu and %llu bytes", key,
                           (unsigned long long)o->size, (unsigned long long)size);
        }
        o->handles++;
        bc->refs++;
        sx__mutex_unlock(&bc->mu);
        *out = o;
        return SX_OK;
    }
    sx__bc_object *o = sx__calloc(1, sizeof *o);
    char *k = sx__strdup(key);
    if (!o || !k) {
        sx__mutex_unlock(&bc->mu);
        sx__free(o);
        sx__free(k);
        return sx__err(SX_ENOMEM, "block cache");
    }
    o->bc = bc;
    o->key = k;
    o->size = size;
    o->id = bc->next_id++;
    o->handles = 1;
    o->next = bc->objects;
    bc->objects = o;
    bc->refs++;
    sx__mutex_unlock(&bc->mu);
    *out = o;
    return SX_OK;
}

void sx__blockcache_close(sx__bc_object *ob)
{
    if (!ob)
        return;
    sx__blockcache *bc = ob->bc;
    sx__mutex_lock(&bc->mu);
    bool last_ref = false;
    if (--ob->handles == 0) {
        /* drop its blocks: no read of it runs (the caller's contract), so none is LOADING */
        for (blk *b = bc->head; b;) {
            blk *nx = b->next;
            if (b->obj == ob->id)
                drop_ready(bc, b);
            b = nx;
        }
        sx__bc_object **pp = &bc->objects;
        while (*pp && *pp != ob)
            pp = &(*pp)->next;
        if (*pp)
            *pp = ob->next;
        sx__free(ob->key);
        sx__free(ob);
    }
    last_ref = --bc->refs == 0;
    sx__mutex_unlock(&bc->mu);
    if (last_ref)
        cache_destroy(bc);
}

uint64_t sx__bc_object_size(const sx__bc_object *ob)
{
    return ob->size;
}

const char *sx__bc_object_key(const sx__bc_object *ob)
{
    return ob->key;
}

/* ---------------------------------------------------------------- reads */

/* Copies the overlap of block b (index idx, data d of len bytes) with [off, off+len) to buf. */
static void copy_part(uint32_t shift,
                      uint64_t idx,
                      const uint8_t *d,
                      uint32_t dlen,
                      uint64_t off,
                      size_t len,
                      uint8_t *buf)
{
    uint64_t bstart = idx << shift, bend = bstart + dlen;
    uint64_t lo = off > bstart ? off : bstart;
    uint64_t hi = off + len < bend ? off + len : bend;
    if (hi > lo)
        memcpy(buf + (lo - off), d + (lo - bstart), (size_t)(hi - lo));
}

/* Fetches the run of absent blocks starting at `first` (bc->mu held on entry and exit). *next is
 * the block after the run. */
static sx_status fetch_run(sx__bc_object *ob,
                           uint64_t first,
                           uint64_t last,
                           uint64_t off,
                           size_t len,
                           uint8_t *buf,
                           uint64_t *next)
{
    sx__blockcache *bc = ob->bc;
    uint64_t max_blocks = SX__BLOCKCACHE_RUN_BYTES >> bc->shift;
    if (max_blocks == 0)
        max_blocks = 1;
    /* claim the run */
    blk *run[SX__BLOCKCACHE_RUN_BYTES / 512];
    size_t nrun = 0;
    uint64_t j = first;
    sx_status st = SX_OK;
    while (j <= last && nrun < max_blocks && !find(bc, ob->id, j)) {
        blk *b = sx__calloc(1, sizeof *b);
        uint64_t bstart = j << bc->shift;
        uint64_t blen = ob->size - bstart < bc->block ? ob->size - bstart : bc->block;
        uint8_t *d = b ? sx__malloc((size_t)blen) : NULL;
        if (!b || !d) {
            sx__free(b);
            st = sx__err(SX_ENOMEM, "block cache: %s", ob->key);
            break;
        }
        b->obj = ob->id;
        b->idx = j;
        b->len = (uint32_t)blen;
        b->data = d;
        b->state = B_LOADING;
        table_add(bc, b);
        bc->st.resident_bytes += blen;
        charge_sync(bc);
        run[nrun++] = b;
        j++;
    }
    *next = j;
    uint64_t rstart = first << bc->shift, rlen = 0;
    for (size_t i = 0; i < nrun; i++)
        rlen += run[i]->len;
    uint8_t *tmp = NULL;
    if (st == SX_OK && nrun > 0) {
        bc->st.misses += nrun;
        bc->st.fetches++;
        sx__mutex_unlock(&bc->mu);
        tmp = nrun == 1 ? run[0]->data : sx__malloc((size_t)rlen);
        st = tmp ? sx__objstore_get_range(bc->store, ob->key, rstart, (size_t)rlen, tmp)
                 : sx__err(SX_ENOMEM, "block cache: %s", ob->key);
        sx__mutex_lock(&bc->mu);
    }
    if (st == SX_OK) {
        bc->st.bytes_fetched += rlen;
        for (size_t i = 0; i < nrun; i++) {
            blk *b = run[i];
            const uint8_t *src = tmp + ((b->idx - first) << bc->shift);
            if (nrun > 1)
                memcpy(b->data, src, b->len);
            copy_part(bc->shift, b->idx, b->data, b->len, off, len, buf);
            b->state = B_READY;
            lru_push(bc, b);
        }
        evict(bc);
    } else {
        if (nrun > 0)
            bc->st.fetch_errors++;
        const char *msg = sx_errmsg();
        for (size_t i = 0; i < nrun; i++) {
            blk *b = run[i];
            table_del(bc, b);
            bc->st.resident_bytes -= b->len;
            charge_sync(bc);
            b->state = B_FAILED;
            b->err = st;
            if (b->pins == 0) {
                blk_free(b);
            } else {
                b->errmsg = sx__strdup(msg);
            }
        }
    }
    if (nrun > 1)
        sx__free(tmp);
    if (nrun > 0)
        pthread_cond_broadcast(&bc->cv);
    return st;
}

sx_status sx__blockcache_read(sx__bc_object *ob, uint64_t off, size_t len, void *buf)
{
    if (len == 0)
        return SX_OK;
    if (off > ob->size || len > ob->size - off)
        return sx__err(SX_EINVAL, "block cache: %s: range %llu+%zu past the end (%llu bytes)",
                       ob->key, (unsigned long long)off, len, (unsigned long long)ob->size);
    sx__blockcache *bc = ob->bc;
    uint64_t first = off >> bc->shift, last = (off + len - 1) >> bc->shift;
    sx_status st = SX_OK;
    sx__mutex_lock(&bc->mu);
    uint64_t b = first;
    while (b <= last && st == SX_OK) {
        blk *e = find(bc, ob->id, b);
        if (e && e->state == B_READY) {
            copy_part(bc->shift, b, e->data, e->len, off, len, buf);
            lru_unlink(bc, e);
            lru_push(bc, e);
            bc->st.hits++;
            b++;
            continue;
        }
        if (e) { /* LOADING by another thread: wait for it */
            e->pins++;
            bc->st.waits++;
            while (e->state == B_LOADING)
                sx__cond_wait(&bc->cv, &bc->mu);
            e->pins--;
            if (e->state == B_READY) {
                copy_part(bc->shift, b, e->data, e->len, off, len, buf);
                b++;
                continue;
            }
            /* failed (or dropped before we woke: err SX_OK, look again) */
            sx_status fe = e->err;
            char msg[512];
            (void)snprintf(msg, sizeof msg, "%s", e->errmsg ? e->errmsg : "");
            if (e->pins == 0)
                blk_free(e);
            if (fe != SX_OK)
                st = sx__err(fe, "%s", msg[0] ? msg : "block cache: fetch failed");
            continue;
        }
        uint64_t next = b;
        st = fetch_run(ob, b, last, off, len, buf, &next);
        b = next;
    }
    sx__mutex_unlock(&bc->mu);
    return st;
}

void sx__blockcache_invalidate(sx__bc_object *ob, uint64_t off, size_t len)
{
    if (len == 0)
        return;
    sx__blockcache *bc = ob->bc;
    uint64_t first = off >> bc->shift, last = (off + len - 1) >> bc->shift;
    sx__mutex_lock(&bc->mu);
    for (uint64_t b = first; b <= last; b++) {
        blk *e = find(bc, ob->id, b);
        if (e && e->state == B_READY) {
            drop_ready(bc, e);
            bc->st.invalidations++;
        }
    }
    sx__mutex_unlock(&bc->mu);
}

void sx__blockcache_stats_get(sx__blockcache *bc, sx__blockcache_stats *out)
{
    sx__mutex_lock(&bc->mu);
    *out = bc->st;
    sx__mutex_unlock(&bc->mu);
}
