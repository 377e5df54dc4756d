/*
 * lock.h: ranked mutexes, rwlocks and condition variables: the engine's lock order, enforced.
 *
 * Every engine lock has a rank (docs/internals/LOCKING.md lists them). A thread may only block on
 * a lock whose rank is strictly greater than the rank of every lock it already holds; so two
 * threads can never wait for each other in a cycle. In builds with SX_LOCK_CHECK (Debug,
 * ASan+UBSan and TSan builds: see below) each thread keeps the list of locks it holds, and
 * taking a lock out of order prints both locks (names and ranks) and aborts, so a future
 * inversion fails the first test that runs the path, on every interleaving, instead of
 * deadlocking a user once in a while. Release builds compile the wrappers to the bare pthread
 * calls (no list, no cost).
 *
 * Rules the checker applies:
 *   - lock / rdlock / wrlock: every held lock must have a smaller rank (equal ranks do not nest:
 *     e.g. two collections' flush_mu are never held together);
 *   - trylock: never blocks, so it may be taken out of order (the builder try-locks flush_mu);
 *     once taken it counts as held;
 *   - cond waits release and retake their mutex: the held list is unchanged;
 *   - unlock need not be in LIFO order.
 * At most SX__LOCK_MAX_HELD locks are tracked per thread (more is itself a violation).
 *
 * Thread-safety: the wrappers are as thread-safe as the pthread objects; the held list is
 * thread-local. Ownership: the caller owns the lock objects (init/destroy pair).
 */
#ifndef SX_UTIL_LOCK_H
#define SX_UTIL_LOCK_H
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#if defined(SX_DEBUG) || defined(SX_SANITIZE) || defined(SX_TSAN)
# define SX_LOCK_CHECK 1
#endif

/* Ranks: acquire in increasing order. Gaps leave room for locks added later. */
enum {
    /* server (above the engine; taken before any engine lock) */
    SX__RANK_CATALOG_DDL = 10, /* catalog.ddl_mu: serialises DDL, held across engine calls */
    SX__RANK_CATALOG = 20,     /* catalog.mu: metadata lookups and copies */
    /* engine, per collection */
    SX__RANK_FLUSH = 100,    /* collection.flush_mu: flush, compaction, index create/drop */
    SX__RANK_STORE = 110,    /* collection.store_mu: object-store sync state */
    SX__RANK_WRITE = 120,    /* collection.write_mu: one writer at a time, the pk map */
    SX__RANK_IDX_WAIT = 130, /* collection.idx_wait_mu: sx_index_wait's condition */
    SX__RANK_SEG = 140,      /* collection.seg_lock (rwlock): segment list, index spec */
    SX__RANK_SEG_IDX = 150,  /* segment.idx_mu: the segment's index pointer */
    /* engine, per database */
    SX__RANK_DB = 160, /* db.mu: the collection list, the creating set, the build queue */
    /* storage */
    SX__RANK_WAL = 170,        /* wal.mu: group commit */
    SX__RANK_BLOCKCACHE = 180, /* blockcache.mu */
    /* cluster (docs/internals/CLUSTER.md): called by the store sync under flush_mu/store_mu */
    SX__RANK_FENCE = 230,     /* fence.net_mu: a writer's takes and commits (etcd calls) */
    SX__RANK_FENCE_TAB = 235, /* fence.tab_mu: the table of held collections (no I/O inside) */
    SX__RANK_ETCD = 240,      /* sx__etcd.mu: one request at a time per client */
    SX__RANK_LEAF = 250       /* locks that never have another taken inside them */
};

#define SX__LOCK_MAX_HELD 16

typedef struct sx__mutex {
    pthread_mutex_t m;
    uint16_t rank;
    const char *name; /* static string, for messages */
} sx__mutex;

typedef struct sx__rwlock {
    pthread_rwlock_t l;
    uint16_t rank;
    const char *name;
} sx__rwlock;

/* Initialise / destroy. Returns 0 or the pthread error (init only). */
int sx__mutex_init(sx__mutex *m, unsigned rank, const char *name);
void sx__mutex_destroy(sx__mutex *m);
int sx__rwlock_init(sx__rwlock *l, unsigned rank, const char *name);
void sx__rwlock_destroy(sx__rwlock *l);

#ifdef SX_LOCK_CHECK
/* The checker (lock.c). `obj` identifies the lock in the held list. */
void sx__lockrank_acquire(const void *obj, unsigned rank, const char *name, bool blocking);
void sx__lockrank_release(const void *obj);
/* Number of locks the calling thread holds (tests). */
int sx__lockrank_held(void);
#else
static inline void sx__lockrank_acquire(const void *obj, unsigned rank, const char *name, bool b)
{
    (void)obj;
    (void)rank;
    (void)name;
    (void)b;
}

static inline void sx__lockrank_release(const void *obj)
{
    (void)obj;
}

static inline int sx__lockrank_held(void)
{
    return 0; /* not tracked */
}
#endif

static inline void sx__mutex_lock(sx__mutex *m)
{
    sx__lockrank_acquire(m, m->rank, m->name, true);
    (void)pthread_mutex_lock(&m->m);
}

/* True when taken. */
static inline bool sx__mutex_trylock(sx__mutex *m)
{
    if (pthread_mutex_trylock(&m->m) != 0)
        return false;
    sx__lockrank_acquire(m, m->rank, m->name, false);
    return true;
}

static inline void sx__mutex_unlock(sx__mutex *m)
{
    sx__lockrank_release(m);
    (void)pthread_mutex_unlock(&m->m);
}

static inline void sx__rwlock_rdlock(sx__rwlock *l)
{
    sx__lockrank_acquire(l, l->rank, l->name, true);
    (void)pthread_rwlock_rdlock(&l->l);
}

static inline void sx__rwlock_wrlock(sx__rwlock *l)
{
    sx__lockrank_acquire(l, l->rank, l->name, true);
    (void)pthread_rwlock_wrlock(&l->l);
}

static inline void sx__rwlock_unlock(sx__rwlock *l)
{
    sx__lockrank_release(l);
    (void)pthread_rwlock_unlock(&l->l);
}

/* Condition waits on a ranked mutex (held before and after). */
static inline void sx__cond_wait(pthread_cond_t *cv, sx__mutex *m)
{
    (void)pthread_cond_wait(cv, &m->m);
}

/* Returns 0, ETIMEDOUT or another pthread error. */
static inline int sx__cond_timedwait(pthread_cond_t *cv, sx__mutex *m, const struct timespec *abs)
{
    return pthread_cond_timedwait(cv, &m->m, abs);
}

#endif
