/*
 * lock.c: init/destroy of the ranked locks and, with SX_LOCK_CHECK, the per-thread lock-rank
 * checker (lock.h explains the rules).
 *
 * The held list is a small thread-local array (no allocation, so the checker itself can never
 * fail or take a lock). A violation prints what was being taken, what was held (innermost last)
 * and aborts: it is a programming error, and an abort gives a core file and a stack, where
 * carrying on would risk the deadlock the order exists to prevent.
 */
#include "util/lock.h"

#include <stdio.h>
#include <stdlib.h>

int sx__mutex_init(sx__mutex *m, unsigned rank, const char *name)
{
    m->rank = (uint16_t)rank;
    m->name = name;
    return pthread_mutex_init(&m->m, NULL);
}

void sx__mutex_destroy(sx__mutex *m)
{
    (void)pthread_mutex_destroy(&m->m);
}

int sx__rwlock_init(sx__rwlock *l, unsigned rank, const char *name)
{
    l->rank = (uint16_t)rank;
    l->name = name;
    return pthread_rwlock_init(&l->l, NULL);
}

void sx__rwlock_destroy(sx__rwlock *l)
{
    (void)pthread_rwlock_destroy(&l->l);
}

#ifdef SX_LOCK_CHECK

typedef struct held {
    const void *obj;
    unsigned rank;
    const char *name;
} held;

static _Thread_local held h_list[SX__LOCK_MAX_HELD];
static _Thread_local int h_n;

static void violation(const char *what, const void *obj, unsigned rank, const char *name)
{
    fprintf(stderr, "sextant: lock order violation: %s %s (rank %u, %p) while holding:\n", what,
            name ? name : "?", rank, obj);
    for (int i = 0; i < h_n; i++)
        fprintf(stderr, "  %s (rank %u, %p)\n", h_list[i].name ? h_list[i].name : "?",
                h_list[i].rank, h_list[i].obj);
    fprintf(stderr, "sextant: see docs/internals/LOCKING.md for the order\n");
    fflush(stderr);
    abort();
}

void sx__lockrank_acquire(const void *obj, unsigned rank, const char *name, bool blocking)
{
    if (blocking) {
        for (int i = 0; i < h_n; i++)
            if (h_list[i].rank >= rank)
                violation("taking", obj, rank, name);
    }
    if (h_n == SX__LOCK_MAX_HELD)
        violation("too many locks held taking", obj, rank, name);
    h_list[h_n].obj = obj;
    h_list[h_n].rank = rank;
    h_list[h_n].name = name;
    h_n++;
}

void sx__lockrank_release(const void *obj)
{
    for (int i = h_n - 1; i >= 0; i--) {
        if (h_list[i].obj != obj)
            continue;
        for (int j = i; j + 1 < h_n; j++)
            h_list[j] = h_list[j + 1];
        h_n--;
        return;
    }
    violation("releasing a lock not held:", obj, 0, "?");
}

int sx__lockrank_held(void)
{
    return h_n;
}

#endif
