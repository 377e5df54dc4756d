/*
 * pkmap.c: primary-key lookup for upsert/delete/get by key.
 *
 * Two structures answer "where is the live row of key k" (sx__pk_get_*):
 *   - the hash map below (sx__pkmap): keys of the segments without a key index: the growing
 *     segment, and a segment sealed in memory until the flush replaces it by its mapped file
 *     (then sx__pkmap_drop_seg removes its entries and shrinks the table). Its size follows the
 *     growing rows, not the collection. Open addressing with linear probing and tombstones;
 *     grows at 70% load (counting tombstones). String keys are copied into the map. Every entry
 *     is live (a delete removes it, an upsert overwrites it).
 *   - per sealed segment opened from its file, the file's key block (storage/segfile.h): rows in
 *     key order, the INT64 keys in that order (or none when the key column is already sorted,
 *     as auto ids are), a Bloom filter, all in the mapping (a version 1 file: built in the heap).
 *     A hit is live unless its delete bit is set; a segment may hold a key more than once (an
 *     upsert within one growing segment), at most one of them live.
 * A lookup tries the hash map, then the sealed segments newest first: Bloom filter (most absent
 * keys stop there), INT64 min/max, binary search, delete bit. This is Milvus's per-segment
 * primary-key statistics (Bloom filter + key range) with a sorted key column to find the row.
 * Rejected: one hash map for every row (measured 40 bytes a slot, 40 MB for 400k rows, the
 * largest part of an opened DISKANN collection's heap); keeping per-segment Bloom filters in the
 * heap (they are in the file and mapped, so they cost page cache only while used).
 * Guarded by the collection's write_mu (readers of get() also take write_mu: lookups are short).
 */
#include <string.h>

#include "engine/engine.h"
#include "platform/membudget.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/bitset.h"
#include "util/err.h"
#include "util/hash.h"

enum { EMPTY = 0, FULL = 1, TOMB = 2 };

typedef struct slot {
    uint8_t state;
    uint32_t row;
    uint64_t seg;
    int64_t ik;
    char *sk;
} slot;

struct sx__pkmap {
    bool str;
    size_t cap; /* power of two */
    size_t n;
    size_t used; /* FULL + TOMB */
    slot *s;
    sx__membudget *budget; /* NULL: not charged */
    uint64_t charged;      /* SX__MEM_PKMAP bytes charged for the table */
};

static void recharge(sx__pkmap *m)
{
    uint64_t now = m->cap * sizeof(slot);
    if (!m->budget || now == m->charged)
        return;
    if (now > m->charged)
        sx__mem_force(m->budget, SX__MEM_PKMAP, now - m->charged);
    else
        sx__mem_give(m->budget, SX__MEM_PKMAP, m->charged - now);
    m->charged = now;
}

void sx__pkmap_set_budget(sx__pkmap *m, sx__membudget *b)
{
    m->budget = b;
    m->charged = 0;
    recharge(m);
}

sx_status sx__pkmap_new(bool str, sx__pkmap **out)
{
    sx__pkmap *m = sx__calloc(1, sizeof *m);
    if (!m)
        return sx__err(SX_ENOMEM, "pk map");
    m->str = str;
    m->cap = 1024;
    m->s = sx__calloc(m->cap, sizeof(slot));
    if (!m->s) {
        sx__free(m);
        return sx__err(SX_ENOMEM, "pk map");
    }
    *out = m;
    return SX_OK;
}

void sx__pkmap_free(sx__pkmap *m)
{
    if (!m)
        return;
    if (m->str)
        for (size_t i = 0; i < m->cap; i++)
            sx__free(m->s[i].sk);
    sx__free(m->s);
    sx__mem_give(m->budget, SX__MEM_PKMAP, m->charged);
    sx__free(m);
}

static slot *find(const sx__pkmap *m, int64_t ik, const char *sk)
{
    size_t mask = m->cap - 1;
    size_t i = (size_t)(m->str ? sx__hash_str(sk) : sx__mix64((uint64_t)ik)) & mask;
    for (;;) {
        slot *s = &m->s[i];
        if (s->state == EMPTY)
            return NULL;
        if (s->state == FULL && (m->str ? strcmp(s->sk, sk) == 0 : s->ik == ik))
            return s;
        i = (i + 1) & mask;
    }
}

/* Rehashes (dropping tombstones) into a table of ncap slots (a power of two with room for the
 * live keys). */
static sx_status rehash(sx__pkmap *m, size_t ncap)
{
    slot *ns = sx__calloc(ncap, sizeof(slot));
    if (!ns)
        return sx__err(SX_ENOMEM, "pk map");
    for (size_t i = 0; i < m->cap; i++) {
        slot *o = &m->s[i];
        if (o->state != FULL) {
            if (m->str)
                sx__free(o->sk);
            continue;
        }
        size_t j = (size_t)(m->str ? sx__hash_str(o->sk) : sx__mix64((uint64_t)o->ik)) & (ncap - 1);
        while (ns[j].state != EMPTY)
            j = (j + 1) & (ncap - 1);
        ns[j] = *o;
    }
    sx__free(m->s);
    m->s = ns;
    m->cap = ncap;
    m->used = m->n;
    recharge(m);
    return SX_OK;
}

/* Rehashes into a table with room for at least `want` live keys below the 70% load factor. */
static sx_status grow_to(sx__pkmap *m, size_t want)
{
    size_t ncap = m->cap;
    while ((want + 1) * 10 >= ncap * 7)
        ncap *= 2;
    return rehash(m, ncap);
}

void sx__pkmap_drop_seg(sx__pkmap *m, uint64_t seg)
{
    for (size_t i = 0; i < m->cap; i++) {
        slot *s = &m->s[i];
        if (s->state != FULL || s->seg != seg)
            continue;
        s->state = TOMB;
        if (m->str) {
            sx__free(s->sk);
            s->sk = NULL;
        }
        m->n--;
    }
    size_t ncap = 1024;
    while ((m->n + 1) * 10 >= ncap * 7)
        ncap *= 2;
    if (ncap < m->cap || m->used > m->n)
        sx__ignore(rehash(m, ncap < m->cap ? ncap : m->cap)); /* ENOMEM: the old table stays */
}

static sx_status grow(sx__pkmap *m)
{
    return grow_to(m, m->n * 2 >= m->cap / 2 ? m->n * 2 : m->n);
}

sx_status sx__pkmap_reserve(sx__pkmap *m, size_t extra)
{
    if ((m->used + extra + 1) * 10 < m->cap * 7)
        return SX_OK;
    return grow_to(m, m->n + extra);
}

/* owned: for string maps, a heap copy of the key the map takes over (NULL: copy sk here) */
static sx_status
put(sx__pkmap *m, int64_t ik, const char *sk, char *owned, uint64_t seg, uint32_t row)
{
    slot *s = find(m, ik, sk);
    if (s) {
        s->seg = seg;
        s->row = row;
        sx__free(owned);
        return SX_OK;
    }
    if ((m->used + 1) * 10 >= m->cap * 7) {
        sx_status st = grow(m);
        if (st != SX_OK) {
            sx__free(owned);
            return st;
        }
    }
    char *copy = owned;
    if (m->str && !copy) {
        SX_ASSERT(sk != NULL); /* a string map is given a key */
        copy = sx__strdup(sk);
        if (!copy)
            return sx__err(SX_ENOMEM, "pk map");
    }
    size_t mask = m->cap - 1;
    size_t i = (size_t)(m->str ? sx__hash_str(sk) : sx__mix64((uint64_t)ik)) & mask;
    while (m->s[i].state == FULL)
        i = (i + 1) & mask;
    slot *d = &m->s[i];
    if (d->state == EMPTY)
        m->used++;
    if (m->str)
        sx__free(d->sk);
    d->state = FULL;
    d->ik = ik;
    d->sk = copy;
    d->seg = seg;
    d->row = row;
    m->n++;
    return SX_OK;
}

bool sx__pkmap_get_i(const sx__pkmap *m, int64_t k, uint64_t *seg, uint32_t *row)
{
    const slot *s = find(m, k, NULL);
    if (!s)
        return false;
    *seg = s->seg;
    *row = s->row;
    return true;
}

bool sx__pkmap_get_s(const sx__pkmap *m, const char *k, uint64_t *seg, uint32_t *row)
{
    const slot *s = find(m, 0, k);
    if (!s)
        return false;
    *seg = s->seg;
    *row = s->row;
    return true;
}

sx_status sx__pkmap_put_i(sx__pkmap *m, int64_t k, uint64_t seg, uint32_t row)
{
    return put(m, k, NULL, NULL, seg, row);
}

sx_status sx__pkmap_put_s(sx__pkmap *m, const char *k, uint64_t seg, uint32_t row)
{
    return put(m, 0, k, NULL, seg, row);
}

sx_status sx__pkmap_put_s_take(sx__pkmap *m, char *k, uint64_t seg, uint32_t row)
{
    return put(m, 0, k, k, seg, row);
}

static void del(sx__pkmap *m, int64_t ik, const char *sk)
{
    slot *s = find(m, ik, sk);
    if (!s)
        return;
    s->state = TOMB;
    if (m->str) {
        sx__free(s->sk);
        s->sk = NULL;
    }
    m->n--;
}

void sx__pkmap_del_i(sx__pkmap *m, int64_t k)
{
    del(m, k, NULL);
}

void sx__pkmap_del_s(sx__pkmap *m, const char *k)
{
    del(m, 0, k);
}

size_t sx__pkmap_count(const sx__pkmap *m)
{
    return m->n;
}

size_t sx__pkmap_memory(const sx__pkmap *m)
{
    return sizeof *m + m->cap * sizeof(slot);
}

/* The first live row among key index positions [lo, lo + cnt) of s. */
static bool first_live(const sx__segment *s, size_t lo, size_t cnt, uint64_t *seg, uint32_t *row)
{
    for (size_t j = 0; j < cnt; j++) {
        uint32_t r = sx__segpk_row(&s->pk, lo + j);
        if (!sx__bits_test_atomic(s->deleted, r)) {
            *seg = s->id;
            *row = r;
            return true;
        }
    }
    return false;
}

bool sx__pk_get_i(const sx_collection *c, int64_t k, uint64_t *seg, uint32_t *row)
{
    if (sx__pkmap_get_i(c->pkmap, k, seg, row))
        return true;
    for (size_t i = c->n_segs; i-- > 0;) {
        const sx__segment *s = c->segs[i];
        if (s->pk.col == UINT32_MAX)
            continue; /* its keys are in the hash map */
        size_t lo = 0, cnt = sx__segpk_find_i(&s->pk, s->chunks[c->pk][0], k, &lo);
        if (cnt && first_live(s, lo, cnt, seg, row))
            return true;
    }
    return false;
}

bool sx__pk_get_s(const sx_collection *c, const char *k, uint64_t *seg, uint32_t *row)
{
    if (sx__pkmap_get_s(c->pkmap, k, seg, row))
        return true;
    for (size_t i = c->n_segs; i-- > 0;) {
        const sx__segment *s = c->segs[i];
        if (s->pk.col == UINT32_MAX)
            continue;
        size_t lo = 0,
               cnt = sx__segpk_find_s(&s->pk, (const char *const *)s->chunks[c->pk][0], k, &lo);
        if (cnt && first_live(s, lo, cnt, seg, row))
            return true;
    }
    return false;
}

size_t sx__pk_memory(const sx_collection *c)
{
    size_t b = sx__pkmap_memory(c->pkmap);
    for (size_t i = 0; i < c->n_segs; i++)
        b += c->segs[i]->pk.owned_bytes;
    return b;
}
