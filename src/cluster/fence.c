/*
 * fence.c: a writer's fencing on etcd (fence.h has the protocol; docs/internals/CLUSTER.md the
 * design and the failure cases).
 *
 * A collection is identified by (db, name); the engine's callbacks give the database's store URL,
 * from which the db is taken (".../databases/<db>" or the default database).
 *
 * Taking a collection (take_locked), f->net_mu held (f->tab_mu only around table lookups, so
 * may_ack on a held collection never waits behind an etcd call):
 *   txn(compare create_revision(epoch) == 0, success: put(epoch, node, lease), failure: get epoch)
 *   succeeded: R = the answer's revision. Not succeeded but the key is on our own lease (a retried
 *   txn whose first try was applied): R = its mod_revision. Otherwise another writer holds it.
 *   Then the committed pointer must be the one this process knows (the known file), else the
 *   local copy is stale: the epoch is given back (txn compare mod_revision == R, delete) and the
 *   take is refused with SX_ESTALE. The server then adopts the collection
 *   (sx_cluster_node_before_collection: the copy moved to DATA/cluster/stale/, the committed
 *   state restored from the store) and takes it again.
 * Commit: txn(compare mod_revision(epoch) == R, success: put or delete the manifest pointer).
 *   Not succeeded: the collection was lost (lease expired, key taken): R = 0, SX_EFENCED. An
 *   unknown outcome (etcd did not answer) is settled by reading the pointer back.
 */
#include "cluster/fence.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cluster/etcd.h"
#include "cluster/indexjob.h"
#include "cluster/shard.h"
#include "platform/fs.h"
#include "sextant_server.h"
#include "util/alloc.h"
#include "util/err.h"
#include "util/lock.h"

typedef struct held {
    char db[SX_MAX_NAME + 1];
    char name[SX_MAX_NAME + 1];
    _Atomic int64_t rev;            /* fencing token; 0: not held. Written under net_mu */
    _Atomic int64_t other_until_ns; /* a take found another holder: reads skip takes until */
} held;

struct sx__fence {
    sx__fence_config cfg;
    char *etcd_eps, *node_id, *data_dir, *storage_url, *addr;
    char uuid[40];
    char prefix[96]; /* "/sextant/<uuid>/" */
    sx__etcd *kv;    /* requests under mu */
    sx__etcd *ka;    /* the keep-alive thread's */
    int64_t lease;
    uint32_t ttl_s;
    _Atomic int64_t trusted_until_ns; /* CLOCK_MONOTONIC */
    atomic_bool lost, stop;
    atomic_bool keep_lease; /* stop: let the lease expire instead of revoking it */
    pthread_t thr;
    bool thr_started;
    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cv;
    sx__mutex net_mu;         /* takes and commits: one etcd conversation at a time */
    pthread_mutex_t adopt_mu; /* one adoption at a time (before net_mu; never under it) */
    sx__mutex tab_mu;         /* tab (entries never move: may_ack reads them without net_mu) */
    bool mu_init;
    held **tab;
    size_t n_tab, cap_tab;
    sx_store_fence iface;
    /* a query node's replica placement inputs (cb_serves), read from etcd at most every
     * PLACE_NS: the registered query nodes (ids in key order) and replicas/<db>/<c> */
    pthread_mutex_t place_mu;
    int64_t place_at_ns;
    char **qids;
    size_t n_qids;

    struct rep {
        char key[300]; /* "db/collection" */
        unsigned r;
    } * reps;

    size_t n_reps;
};

#define PLACE_NS 200000000LL

/* ---------------------------------------------------------------- helpers */

/* The db of a store URL: the path component after "/databases/" at its end, else "default". */
static void db_of(const sx__fence *f, const char *store, char *db, size_t cap)
{
    const char *base = f->storage_url ? f->storage_url : "";
    size_t bl = strlen(base);
    while (bl && base[bl - 1] == '/')
        bl--;
    if (store && strncmp(store, base, bl) == 0 && strncmp(store + bl, "/databases/", 11) == 0)
        (void)snprintf(db, cap, "%s", store + bl + 11);
    else
        (void)snprintf(db, cap, "default");
}

static void key_of(
    const sx__fence *f, const char *kind, const char *db, const char *name, char *out, size_t cap)
{
    (void)snprintf(out, cap, "%s%s/%s/%s", f->prefix, kind, db, name);
}

static void known_path(const sx__fence *f, const char *db, const char *name, char *out, size_t cap)
{
    (void)snprintf(out, cap, "%s/cluster/known/%s/%s", f->data_dir, db, name);
}

/* The committed pointer values this process's copy matches ("" none): the one it last committed
 * or restored from; two lines while a take marks the pointer (take_locked). */
static void known_read(const sx__fence *f, const char *db, const char *name, char *out, size_t cap)
{
    char path[4096];
    known_path(f, db, name, path, sizeof path);
    out[0] = '\0';
    void *data = NULL;
    size_t len = 0;
    if (sx__fs_read_all(path, 4096, &data, &len) == SX_OK) {
        (void)snprintf(out, cap, "%.*s", (int)len, (const char *)data);
        sx__free(data);
    }
}

/* Whether cur (a pointer value, "" none) is one of the known file's lines. */
static bool known_has(const char *known, const char *cur)
{
    size_t cl = strlen(cur);
    for (const char *l = known;;) {
        size_t ll = strcspn(l, "\n");
        if (ll == cl && strncmp(l, cur, cl) == 0)
            return true;
        if (!l[ll])
            return false;
        l += ll + 1;
    }
}

/* A pointer's value is the store manifest's key, or that key, '#' and a take's mark: the engine
 * gets the key. */
static void ptr_key(const char *value, char *out, size_t cap)
{
    (void)snprintf(out, cap, "%.*s", (int)strcspn(value, "#"), value);
}

/* One key's value into out ("" when absent) and, when mod is given, its mod_revision: SX_OK,
 * SX_ENOTFOUND, or the client's error. The caller holds net_mu, or is alone (start). */
static sx_status kv_text(sx__fence *f, const char *key, char *out, size_t cap, int64_t *mod)
{
    out[0] = '\0';
    sx__etcd_kv kv;
    sx_status st = sx__etcd_get(f->kv, key, &kv, NULL);
    if (st == SX_OK) {
        (void)snprintf(out, cap, "%s", kv.value);
        if (mod)
            *mod = kv.mod_revision;
        sx__free(kv.key);
        sx__free(kv.value);
    }
    return st;
}

static sx_status known_write(const sx__fence *f, const char *db, const char *name, const char *key)
{
    char path[4096], dir[4096];
    (void)snprintf(dir, sizeof dir, "%s/cluster/known/%s", f->data_dir, db);
    sx_status st = sx__fs_mkdir_p(dir);
    known_path(f, db, name, path, sizeof path);
    if (st == SX_OK)
        st = key ? sx__fs_write_atomic(path, key, strlen(key)) : sx__fs_unlink(path);
    return st;
}

static int64_t now_ns(void)
{
    return sx_clock_ns();
}

static held *find_held(sx__fence *f, const char *db, const char *name, bool add)
{
    held *h = NULL;
    sx__mutex_lock(&f->tab_mu);
    for (size_t i = 0; i < f->n_tab && !h; i++)
        if (strcmp(f->tab[i]->db, db) == 0 && strcmp(f->tab[i]->name, name) == 0)
            h = f->tab[i];
    if (!h && add) {
        if (f->n_tab == f->cap_tab) {
            size_t cap = f->cap_tab ? f->cap_tab * 2 : 16;
            held **v = sx__realloc(f->tab, cap * sizeof *v);
            if (v) {
                f->tab = v;
                f->cap_tab = cap;
            }
        }
        h = f->n_tab < f->cap_tab ? sx__calloc(1, sizeof *h) : NULL;
        if (h) {
            (void)snprintf(h->db, sizeof h->db, "%s", db);
            (void)snprintf(h->name, sizeof h->name, "%s", name);
            atomic_init(&h->rev, 0);
            atomic_init(&h->other_until_ns, 0);
            f->tab[f->n_tab++] = h;
        }
    }
    sx__mutex_unlock(&f->tab_mu);
    return h;
}

/* ---------------------------------------------------------------- take / commit */

static sx_status take_locked(sx__fence *f, const char *db, const char *name, held **out)
{
    *out = NULL;
    if (atomic_load(&f->lost))
        return sx__err(SX_EFENCED, "writer %s: its etcd lease is gone; it holds nothing",
                       f->node_id);
    if (strlen(name) > SX_MAX_NAME || strlen(db) > SX_MAX_NAME)
        return sx__err(SX_EINVAL, "collection name too long");
    held *h = find_held(f, db, name, true);
    if (!h)
        return sx__err(SX_ENOMEM, "fence table");
    if (atomic_load(&h->rev)) {
        *out = h;
        return SX_OK;
    }
    char ek[512], mk[512], lease[32];
    key_of(f, "epoch", db, name, ek, sizeof ek);
    key_of(f, "manifest", db, name, mk, sizeof mk);
    (void)snprintf(lease, sizeof lease, "%" PRId64, f->lease);
    sx__etcd_cmp absent = { ek, SX__ETCD_CREATE, 0, NULL };
    sx__etcd_op put = { SX__ETCD_PUT, ek, f->node_id, f->lease };
    sx__etcd_op get[2] = { { SX__ETCD_GET, ek, NULL, 0 }, { SX__ETCD_GET, mk, NULL, 0 } };
    sx__etcd_txn_result r;
    sx_status st = sx__etcd_txn(f->kv, &absent, 1, &put, 1, get, 1, &r);
    if (st != SX_OK)
        return sx__err(st == SX_ENOMEM ? SX_ENOMEM : SX_EREMOTE, "writer %s: taking %s.%s: %s",
                       f->node_id, db, name, sx_errmsg());
    int64_t rev = 0;
    if (r.succeeded)
        rev = r.revision;
    else if (r.n_kvs && r.kvs[0].lease == f->lease)
        rev = r.kvs[0].mod_revision; /* our own earlier try was applied */
    char holder[128];
    (void)snprintf(holder, sizeof holder, "%s", r.n_kvs ? r.kvs[0].value : "?");
    sx__etcd_txn_result_fini(&r);
    if (!rev && strcmp(holder, f->node_id) == 0)
        return sx__err(SX_EFENCED,
                       "collection %s.%s is held by an earlier process of writer %s (restarted?) "
                       "until its etcd lease expires (TTL %u s)",
                       db, name, holder, f->ttl_s);
    if (!rev) {
        /* held by another writer: when this copy is older than the committed state, its rows
         * that never reached the store belong to an epoch that is over (SX_ESTALE: a timed
         * sync does not wait for them, and a read reloads the copy first) */
        char cur[1024], known[2100];
        sx_status g = kv_text(f, mk, cur, sizeof cur, NULL);
        sx__err_clear();
        known_read(f, db, name, known, sizeof known);
        return sx__err(g == SX_OK && !known_has(known, cur) ? SX_ESTALE : SX_EFENCED,
                       "collection %s.%s is held by writer %s, not by %s", db, name, holder,
                       f->node_id);
    }
    /* the committed state must be the one the local copy has */
    char cur[1024], known[2100];
    int64_t cur_mod = 0;
    st = kv_text(f, mk, cur, sizeof cur, &cur_mod);
    if (st != SX_OK && st != SX_ENOTFOUND) {
        return sx__err(SX_EREMOTE, "writer %s: reading the manifest of %s.%s: %s", f->node_id, db,
                       name, sx_errmsg());
    }
    known_read(f, db, name, known, sizeof known);
    sx__etcd_cmp mine = { ek, SX__ETCD_MOD, rev, NULL };
    sx__etcd_op del = { SX__ETCD_DEL, ek, NULL, 0 };
    sx__etcd_txn_result rr;
    if (!known_has(known, cur)) {
        if (sx__etcd_txn(f->kv, &mine, 1, &del, 1, NULL, 0, &rr) == SX_OK)
            sx__etcd_txn_result_fini(&rr);
        return sx__err(SX_ESTALE,
                       "collection %s.%s: this writer's copy was synced with manifest '%s' but "
                       "'%s' is committed (another writer wrote it since); writer %s reloads it "
                       "from the store before its next request of it",
                       db, name, known[0] ? known : "(none)", cur[0] ? cur : "(none)", f->node_id);
    }
    if (cur[0]) {
        /* The mark: the pointer is rewritten under the new epoch with this take's mark, so every
         * other copy synced with it (a writer that acknowledged rows after it and died, restored
         * later) is stale from now on and is reloaded before it is written or taken: rows of an
         * earlier epoch that never reached the store are never served once another epoch wrote.
         * The known file names both values while the txn is out, so a crash at any point leaves
         * this copy current. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        char key[1024], mark[1200], both[2500];
        ptr_key(cur, key, sizeof key);
        (void)snprintf(mark, sizeof mark, "%s#%s.%lld%09ld", key, f->node_id, (long long)ts.tv_sec,
                       ts.tv_nsec);
        (void)snprintf(both, sizeof both, "%s\n%s", cur, mark);
        st = known_write(f, db, name, both);
        sx__etcd_cmp cmps[2] = { { ek, SX__ETCD_MOD, rev, NULL },
                                 { mk, SX__ETCD_MOD, cur_mod, NULL } };
        sx__etcd_op mput = { SX__ETCD_PUT, mk, mark, 0 };
        bool marked = false;
        if (st == SX_OK && sx__etcd_txn(f->kv, cmps, 2, &mput, 1, NULL, 0, &rr) == SX_OK) {
            marked = rr.succeeded;
            sx__etcd_txn_result_fini(&rr);
        }
        if (marked)
            sx__ignore(known_write(f, db, name, mark));
        if (!marked) {
            if (sx__etcd_txn(f->kv, &mine, 1, &del, 1, NULL, 0, &rr) == SX_OK)
                sx__etcd_txn_result_fini(&rr);
            return sx__err(SX_EREMOTE, "writer %s: marking the manifest of %s.%s failed: %s",
                           f->node_id, db, name, *sx_errmsg() ? sx_errmsg() : "it changed");
        }
    }
    atomic_store(&h->rev, rev);
    *out = h;
    return SX_OK;
}

static sx_status cb_prefix(void *ctx, const char *store, const char *coll, char *buf, size_t cap)
{
    sx__fence *f = ctx;
    char db[SX_MAX_NAME + 1];
    db_of(f, store, db, sizeof db);
    sx__mutex_lock(&f->net_mu);
    held *h;
    sx_status st = take_locked(f, db, coll, &h);
    if (st == SX_OK)
        (void)snprintf(buf, cap, "e%" PRId64 "/", atomic_load(&h->rev));
    sx__mutex_unlock(&f->net_mu);
    return st;
}

static sx_status cb_commit(void *ctx, const char *store, const char *coll, const char *mkey)
{
    sx__fence *f = ctx;
    char db[SX_MAX_NAME + 1], ek[512], mk[512];
    db_of(f, store, db, sizeof db);
    key_of(f, "epoch", db, coll, ek, sizeof ek);
    key_of(f, "manifest", db, coll, mk, sizeof mk);
    /* the pointer is relative to the database's store root; the engine passes <coll>/... */
    sx__mutex_lock(&f->net_mu);
    held *h;
    sx_status st = take_locked(f, db, coll, &h);
    if (st != SX_OK)
        goto out;
    sx__etcd_cmp fence = { ek, SX__ETCD_MOD, atomic_load(&h->rev), NULL };
    char val[1200] = "";
    if (mkey) /* the manifest's key and who committed it (the proxy's last holder) */
        (void)snprintf(val, sizeof val, "%s#%s", mkey, f->node_id);
    sx__etcd_op op = mkey ? (sx__etcd_op){ SX__ETCD_PUT, mk, val, 0 }
                          : (sx__etcd_op){ SX__ETCD_DEL, mk, NULL, 0 };
    sx__etcd_txn_result r;
    st = sx__etcd_txn(f->kv, &fence, 1, &op, 1, NULL, 0, &r);
    if (st == SX_OK) {
        bool ok = r.succeeded;
        sx__etcd_txn_result_fini(&r);
        if (!ok) {
            atomic_store(&h->rev, 0);
            st = sx__err(SX_EFENCED,
                         "collection %s.%s: writer %s's epoch is over (its lease expired or "
                         "another writer took the collection); the commit was refused",
                         db, coll, f->node_id);
            goto out;
        }
    } else {
        /* unknown outcome: read the pointer back */
        char msg[512];
        (void)snprintf(msg, sizeof msg, "%s", sx_errmsg());
        sx__etcd_kv kv;
        sx_status g = sx__etcd_get(f->kv, mk, &kv, NULL);
        bool applied = mkey ? g == SX_OK && strcmp(kv.value, val) == 0 : g == SX_ENOTFOUND;
        if (g == SX_OK) {
            sx__free(kv.key);
            sx__free(kv.value);
        }
        if (!applied) {
            st =
                sx__err(SX_EREMOTE, "collection %s.%s: committing the manifest: %s", db, coll, msg);
            goto out;
        }
    }
    st = known_write(f, db, coll, mkey ? val : NULL);
    if (st != SX_OK)
        /* committed, but a restart would think its copy stale (and reload: safe) */
        st = SX_OK;
out:
    sx__mutex_unlock(&f->net_mu);
    return st;
}

static sx_status cb_current(void *ctx, const char *store, const char *coll, char *buf, size_t cap)
{
    sx__fence *f = ctx;
    char db[SX_MAX_NAME + 1], mk[512];
    db_of(f, store, db, sizeof db);
    key_of(f, "manifest", db, coll, mk, sizeof mk);
    char raw[1200];
    sx__mutex_lock(&f->net_mu);
    sx_status st = kv_text(f, mk, raw, sizeof raw, NULL);
    if (st == SX_OK) {
        ptr_key(raw, buf, cap);
        /* a collection this process does not have locally is being restored from it */
        char path[4096];
        if (strcmp(db, "default") == 0)
            (void)snprintf(path, sizeof path, "%s/collections/%s", f->data_dir, coll);
        else
            (void)snprintf(path, sizeof path, "%s/databases/%s/collections/%s", f->data_dir, db,
                           coll);
        if (!sx__fs_exists(path))
            sx__ignore(known_write(f, db, coll, raw));
    } else if (st != SX_ENOTFOUND) {
        st =
            sx__err(SX_EREMOTE, "reading the manifest pointer of %s.%s: %s", db, coll, sx_errmsg());
    }
    sx__mutex_unlock(&f->net_mu);
    return st;
}

/* Refreshes the placement inputs when older than PLACE_NS. Caller holds place_mu. An etcd
 * error keeps the previous ones. */
static void place_load_locked(sx__fence *f)
{
    int64_t now = now_ns();
    if (f->place_at_ns && now - f->place_at_ns < PLACE_NS)
        return;
    char pre[256];
    sx__etcd_kv *kvs = NULL, *rk = NULL;
    size_t n = 0, nr = 0;
    (void)snprintf(pre, sizeof pre, "%snode/", f->prefix);
    sx__mutex_lock(&f->net_mu);
    sx_status st = sx__etcd_range(f->kv, pre, &kvs, &n, NULL);
    char rpre[256];
    (void)snprintf(rpre, sizeof rpre, "%sreplicas/", f->prefix);
    if (st == SX_OK)
        st = sx__etcd_range(f->kv, rpre, &rk, &nr, NULL);
    sx__mutex_unlock(&f->net_mu);
    if (st != SX_OK) {
        sx__err_clear();
        sx__etcd_kvs_free(kvs, n);
        return;
    }
    char **ids = sx__calloc(n + 1, sizeof *ids);
    struct rep *reps = sx__calloc(nr + 1, sizeof *reps);
    size_t m = 0;
    for (size_t i = 0; ids && i < n; i++)
        if (strstr(kvs[i].value, "\"role\":\"query\"")) {
            ids[m] = sx__strdup(kvs[i].key + strlen(pre));
            if (ids[m])
                m++;
        }
    for (size_t i = 0; reps && i < nr; i++) {
        (void)snprintf(reps[i].key, sizeof reps[i].key, "%s", rk[i].key + strlen(rpre));
        reps[i].r = (unsigned)strtoul(rk[i].value, NULL, 10);
    }
    sx__etcd_kvs_free(kvs, n);
    sx__etcd_kvs_free(rk, nr);
    if (!ids || !reps) {
        sx_strings_free(ids, m);
        sx__free(reps);
        return;
    }
    sx_strings_free(f->qids, f->n_qids);
    sx__free(f->reps);
    f->qids = ids;
    f->n_qids = m;
    f->reps = reps;
    f->n_reps = nr;
    f->place_at_ns = now;
}

/* A query node serves a collection (or shard) whose collection has no replica number, or whose
 * holders (sx__replica_holders over the registered query nodes) include it. When its own
 * registration is not among the nodes read (etcd did not answer yet), it serves everything. */
static bool cb_serves(void *ctx, const char *store, const char *coll)
{
    sx__fence *f = ctx;
    if (!f->cfg.query_node)
        return true;
    char db[SX_MAX_NAME + 1], base[SX_MAX_NAME + 1], key[SX_MAX_NAME * 2 + 8];
    db_of(f, store, db, sizeof db);
    unsigned k;
    if (!sx__shard_parse(coll, base, sizeof base, &k))
        (void)snprintf(base, sizeof base, "%s", coll);
    (void)snprintf(key, sizeof key, "%s/%s", db, base);
    pthread_mutex_lock(&f->place_mu);
    place_load_locked(f);
    unsigned r = 0;
    for (size_t i = 0; i < f->n_reps; i++)
        if (strcmp(f->reps[i].key, key) == 0)
            r = f->reps[i].r;
    bool serves = true;
    size_t me = f->n_qids;
    for (size_t i = 0; i < f->n_qids; i++)
        if (strcmp(f->qids[i], f->node_id) == 0)
            me = i;
    if (r && me < f->n_qids) {
        size_t hold[64];
        size_t nh = sx__replica_holders(db, coll, (const char *const *)f->qids, f->n_qids, r,
                                        hold); /* at most 64 holders */
        serves = false;
        for (size_t h = 0; h < nh; h++)
            serves = serves || hold[h] == me;
    }
    pthread_mutex_unlock(&f->place_mu);
    return serves;
}

static sx_status cb_may_ack(void *ctx, const char *store, const char *coll)
{
    sx__fence *f = ctx;
    if (atomic_load(&f->lost))
        return sx__err(SX_EFENCED, "writer %s: its etcd lease is gone", f->node_id);
    if (now_ns() >= atomic_load(&f->trusted_until_ns))
        return sx__err(SX_EFENCED,
                       "writer %s: its etcd lease was not renewed within 0.9 x its TTL (%u s): "
                       "it may have expired",
                       f->node_id, f->ttl_s);
    char db[SX_MAX_NAME + 1];
    db_of(f, store, db, sizeof db);
    held *h = find_held(f, db, coll, false);
    sx_status st = SX_OK;
    if (!h || !atomic_load(&h->rev)) { /* not held yet: take it (etcd) */
        sx__mutex_lock(&f->net_mu);
        st = take_locked(f, db, coll, &h);
        sx__mutex_unlock(&f->net_mu);
    }
    if (st == SX_OK && now_ns() >= atomic_load(&f->trusted_until_ns))
        st = sx__err(SX_EFENCED, "writer %s: its etcd lease lapsed", f->node_id);
    return st;
}

/* ---------------------------------------------------------------- lease */

static void *keepalive_main(void *arg)
{
    sx__fence *f = arg;
    const int64_t period_ns = (int64_t)f->ttl_s * 1000000000LL / 3;
    while (!atomic_load(&f->stop)) {
        int64_t t = now_ns(), left = 0;
        sx_status st = sx__etcd_lease_keepalive(f->ka, f->lease, &left);
        if (st == SX_OK) {
            atomic_store(&f->trusted_until_ns, t + (int64_t)f->ttl_s * 900000000LL);
        } else if (st == SX_ENOTFOUND) {
            atomic_store(&f->lost, true);
            atomic_store(&f->trusted_until_ns, 0);
            (void)fprintf(stderr, "writer %s: etcd lease %" PRId64 " has expired: fenced\n",
                          f->node_id, f->lease);
            if (f->cfg.on_lost)
                f->cfg.on_lost(f->cfg.on_lost_ud);
            break;
        } /* else etcd unreachable: retried; writes stop being acknowledged at trusted_until */
        int64_t wait = st == SX_OK ? period_ns : 200000000LL;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t abs = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + wait;
        ts.tv_sec = abs / 1000000000LL;
        ts.tv_nsec = abs % 1000000000LL;
        pthread_mutex_lock(&f->stop_mu);
        if (!atomic_load(&f->stop))
            pthread_cond_timedwait(&f->stop_cv, &f->stop_mu, &ts);
        pthread_mutex_unlock(&f->stop_mu);
    }
    return NULL;
}

/* ---------------------------------------------------------------- identity */

static void new_uuid(char *out)
{
    unsigned char b[16];
    FILE *r = fopen("/dev/urandom", "rb");
    size_t got = r ? fread(b, 1, sizeof b, r) : 0;
    if (r)
        (void)fclose(r);
    if (got != sizeof b) {
        uint64_t x = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
        for (size_t i = 0; i < sizeof b; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            b[i] = (unsigned char)(x >> 56);
        }
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    (void)snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                   b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                   b[13], b[14], b[15]);
}

_Atomic long sx__cluster_uuid_pause_ms;

#define UUID_KEY    "/sextant/uuid"
#define UUID_OBJECT "CLUSTER-UUID"

sx_status
sx__cluster_uuid(const char *etcd, const char *storage_url, const char *s3_endpoint, char *uuid_out)
{
    uuid_out[0] = '\0';
    sx__etcd *e;
    sx_status st = sx__etcd_new(etcd, 0, &e);
    if (st != SX_OK)
        return st;
    char in_etcd[64] = "", in_store[64] = "";
    /* The store first, then etcd: a UUID reaches etcd before the store, so a store that has one
     * was read after etcd had it, and an etcd found empty after that was reset. (The other order
     * would take a node that starts beside the first one, which wrote etcd and the store between
     * its two reads, for a reset etcd.) */
    char *data = NULL;
    size_t len = 0;
    st = sx_store_object_get(storage_url, s3_endpoint, UUID_OBJECT, &data, &len);
    if (st == SX_OK) {
        (void)snprintf(in_store, sizeof in_store, "%.*s", (int)strcspn(data, "\r\n"), data);
        sx_free_bytes(data);
    } else if (st != SX_ENOTFOUND) {
        sx__etcd_free(e);
        return sx__err(SX_EREMOTE, "reading %s from the store %s: %s", UUID_OBJECT, storage_url,
                       sx_errmsg());
    }
    long pause = atomic_load(&sx__cluster_uuid_pause_ms);
    if (pause > 0) {
        struct timespec ts = { pause / 1000, (pause % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
    sx__etcd_kv kv;
    st = sx__etcd_get(e, UUID_KEY, &kv, NULL);
    if (st == SX_OK) {
        (void)snprintf(in_etcd, sizeof in_etcd, "%s", kv.value);
        sx__free(kv.key);
        sx__free(kv.value);
    } else if (st != SX_ENOTFOUND) {
        sx__etcd_free(e);
        return st;
    }
    st = SX_OK;
    if (!in_etcd[0] && in_store[0]) {
        st = sx__err(SX_EINVAL,
                     "etcd (%s) has no cluster but the store %s belongs to cluster %s: etcd was "
                     "reset or is another cluster's; refusing to start empty (restore etcd from "
                     "a snapshot, or point --etcd at the cluster's members)",
                     etcd, storage_url, in_store);
    } else if (in_etcd[0] && in_store[0] && strcmp(in_etcd, in_store) != 0) {
        st = sx__err(SX_EINVAL,
                     "etcd (%s) belongs to cluster %s but the store %s to cluster %s: refusing "
                     "to start",
                     etcd, in_etcd, storage_url, in_store);
    } else if (!in_etcd[0]) {
        char fresh[40];
        new_uuid(fresh);
        sx__etcd_cmp absent = { UUID_KEY, SX__ETCD_CREATE, 0, NULL };
        sx__etcd_op put = { SX__ETCD_PUT, UUID_KEY, fresh, 0 };
        sx__etcd_op get = { SX__ETCD_GET, UUID_KEY, NULL, 0 };
        sx__etcd_txn_result r;
        st = sx__etcd_txn(e, &absent, 1, &put, 1, &get, 1, &r);
        if (st == SX_OK) {
            (void)snprintf(in_etcd, sizeof in_etcd, "%s",
                           r.succeeded ? fresh
                           : r.n_kvs   ? r.kvs[0].value
                                       : "");
            sx__etcd_txn_result_fini(&r);
        }
    }
    if (st == SX_OK && !in_store[0]) {
        char line[64];
        int n = snprintf(line, sizeof line, "%s\n", in_etcd);
        st = sx_store_object_put(storage_url, s3_endpoint, UUID_OBJECT, line, (size_t)n);
        if (st != SX_OK)
            st = sx__err(SX_EREMOTE, "writing %s to the store %s: %s", UUID_OBJECT, storage_url,
                         sx_errmsg());
    }
    if (st == SX_OK)
        (void)snprintf(uuid_out, 37, "%s", in_etcd);
    sx__etcd_free(e);
    return st;
}

/* ---------------------------------------------------------------- life */

sx_status sx__fence_start(const sx__fence_config *cfg, sx__fence **out)
{
    *out = NULL;
    if (!cfg->etcd || !cfg->node_id || !*cfg->node_id || !cfg->data_dir || !cfg->storage_url ||
        !*cfg->storage_url)
        return sx__err(SX_EINVAL, "a cluster node needs --etcd, --node-id, --data and --storage");
    for (const char *p = cfg->node_id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-'))
            return sx__err(SX_EINVAL, "--node-id '%s': only [A-Za-z0-9_-]", cfg->node_id);
    if (strlen(cfg->node_id) > 63) /* the proxy keeps ids in 64 bytes (placement must agree) */
        return sx__err(SX_EINVAL, "--node-id '%s': at most 63 characters", cfg->node_id);
    sx__fence *f = sx__calloc(1, sizeof *f);
    if (!f)
        return sx__err(SX_ENOMEM, "fence");
    f->cfg = *cfg;
    f->ttl_s = cfg->lease_ttl_s ? cfg->lease_ttl_s : 5;
    f->etcd_eps = sx__strdup(cfg->etcd);
    f->node_id = sx__strdup(cfg->node_id);
    f->data_dir = sx__strdup(cfg->data_dir);
    f->storage_url = sx__strdup(cfg->storage_url);
    f->addr = sx__strdup(cfg->addr ? cfg->addr : "");
    pthread_mutex_init(&f->stop_mu, NULL);
    pthread_cond_init(&f->stop_cv, NULL);
    pthread_mutex_init(&f->place_mu, NULL);
    pthread_mutex_init(&f->adopt_mu, NULL);
    sx_status st = f->etcd_eps && f->node_id && f->data_dir && f->storage_url && f->addr
                       ? SX_OK
                       : sx__err(SX_ENOMEM, "fence");
    if (st == SX_OK) {
        int a = sx__mutex_init(&f->net_mu, SX__RANK_FENCE, "fence.net_mu");
        int b = sx__mutex_init(&f->tab_mu, SX__RANK_FENCE_TAB, "fence.tab_mu");
        f->mu_init = true; /* destroying a mutex whose init failed is harmless here */
        if (a != 0 || b != 0)
            st = sx__err(SX_ENOMEM, "fence");
    }
    if (st == SX_OK)
        st = sx__cluster_uuid(cfg->etcd, cfg->storage_url, cfg->s3_endpoint, f->uuid);
    if (st == SX_OK) {
        (void)snprintf(f->prefix, sizeof f->prefix, "/sextant/%s/", f->uuid);
        st = sx__etcd_new(cfg->etcd, 0, &f->kv);
    }
    if (st == SX_OK)
        st = sx__etcd_new(cfg->etcd, 1000, &f->ka);
    int64_t t = now_ns();
    if (st == SX_OK)
        st = sx__etcd_lease_grant(f->kv, f->ttl_s, &f->lease);
    if (st == SX_OK) {
        atomic_store(&f->trusted_until_ns, t + (int64_t)f->ttl_s * 900000000LL);
        char nk[256], val[512];
        (void)snprintf(nk, sizeof nk, "%snode/%s", f->prefix, f->node_id);
        (void)snprintf(val, sizeof val,
                       "{\"role\":\"%s\",\"addr\":\"%s\",\"pid\":%ld,\"lease\":\"%" PRId64 "\"}",
                       cfg->index_worker ? "index"
                       : cfg->query_node ? "query"
                                         : "writer",
                       f->addr, (long)getpid(), f->lease);
        st = sx__etcd_put(f->kv, nk, val, f->lease, NULL);
    }
    if (st == SX_OK) {
        if (pthread_create(&f->thr, NULL, keepalive_main, f) != 0)
            st = sx__err(SX_ENOMEM, "fence keep-alive thread");
        else
            f->thr_started = true;
    }
    f->iface = (sx_store_fence){ f, cb_prefix, cb_commit, cb_current, cb_may_ack, cb_serves };
    if (st != SX_OK) {
        char msg[1024];
        (void)snprintf(msg, sizeof msg, "%s", sx_errmsg());
        sx__fence_stop(f);
        return sx__err(st, "%s", msg);
    }
    *out = f;
    return SX_OK;
}

const sx_store_fence *sx__fence_iface(sx__fence *f)
{
    return &f->iface;
}

bool sx__fence_lost(const sx__fence *f)
{
    return atomic_load(&f->lost);
}

const char *sx__fence_prefix(const sx__fence *f)
{
    return f->prefix;
}

int64_t sx__fence_lease(const sx__fence *f)
{
    return f->lease;
}

const char *sx__fence_node_id(const sx__fence *f)
{
    return f->node_id;
}

const char *sx__fence_etcd(const sx__fence *f)
{
    return f->etcd_eps;
}

void sx__fence_db_of(const sx__fence *f, const char *store, char *db, size_t cap)
{
    db_of(f, store, db, cap);
}

const char *sx__fence_uuid(const sx__fence *f)
{
    return f->uuid;
}

/* One database's collections (dir: its directory, db: its name). */
static sx_status reconcile_db(sx__fence *f, const char *dbdir, const char *db)
{
    char dir[4096];
    (void)snprintf(dir, sizeof dir, "%s/collections", dbdir);
    if (!sx__fs_exists(dir))
        return SX_OK;
    char **names = NULL;
    size_t n = 0;
    sx_status st = sx__fs_list(dir, &names, &n);
    for (size_t i = 0; st == SX_OK && i < n; i++) {
        const char *name = names[i];
        if (name[0] == '.' || strlen(name) > SX_MAX_NAME)
            continue;
        char mk[512], cur[1024], known[2100];
        key_of(f, "manifest", db, name, mk, sizeof mk);
        sx_status g = kv_text(f, mk, cur, sizeof cur, NULL);
        if (g != SX_OK && g != SX_ENOTFOUND) {
            st = g;
            break;
        }
        known_read(f, db, name, known, sizeof known);
        if (known_has(known, cur))
            continue;
        /* stale: another writer committed or took it since this copy was synced (or it never
         * was and the collection exists elsewhere). Kept for inspection, out of the engine's
         * way. */
        char stale[4096], from[4096];
        (void)snprintf(stale, sizeof stale, "%s/cluster/stale", f->data_dir);
        st = sx__fs_mkdir_p(stale);
        (void)snprintf(from, sizeof from, "%s/%s", dir, name);
        (void)snprintf(stale, sizeof stale, "%s/cluster/stale/%s.%s.%lld", f->data_dir, db, name,
                       (long long)time(NULL));
        if (st == SX_OK && !cur[0] && !known[0])
            continue; /* never synced, never committed anywhere: this writer's own new data */
        if (st == SX_OK)
            st = sx__fs_rename(from, stale);
        if (st == SX_OK) {
            (void)fprintf(stderr,
                          "writer %s: collection %s.%s was synced with '%s' but '%s' is "
                          "committed: the local copy moved to %s (its rows not in the store are "
                          "not served); it is opened from the store\n",
                          f->node_id, db, name, known[0] ? known : "(none)",
                          cur[0] ? cur : "(none)", stale);
            if (cur[0])
                st = known_write(f, db, name, cur);
        }
    }
    sx_strings_free(names, n);
    return st;
}

/* Every database's: the default one in DATA, the others in DATA/databases/<name> (a writer's
 * databases are named as their directories; longer names are not placed in the cluster). */
sx_status sx__fence_reconcile(sx__fence *f)
{
    sx_status st = reconcile_db(f, f->data_dir, "default");
    char dbs[4096];
    (void)snprintf(dbs, sizeof dbs, "%s/databases", f->data_dir);
    char **names = NULL;
    size_t n = 0;
    if (st == SX_OK && sx__fs_exists(dbs))
        st = sx__fs_list(dbs, &names, &n);
    for (size_t i = 0; st == SX_OK && i < n; i++) {
        if (names[i][0] == '.' || strlen(names[i]) > SX_MAX_NAME)
            continue;
        char dbdir[4096];
        (void)snprintf(dbdir, sizeof dbdir, "%s/%s", dbs, names[i]);
        st = reconcile_db(f, dbdir, names[i]);
    }
    sx_strings_free(names, n);
    return st;
}

void sx__fence_stop(sx__fence *f)
{
    if (!f)
        return;
    if (f->thr_started) {
        pthread_mutex_lock(&f->stop_mu);
        atomic_store(&f->stop, true);
        pthread_cond_broadcast(&f->stop_cv);
        pthread_mutex_unlock(&f->stop_mu);
        pthread_join(f->thr, NULL);
    }
    if (f->kv && f->lease && !atomic_load(&f->lost) && !atomic_load(&f->keep_lease))
        sx__ignore(sx__etcd_lease_revoke(f->kv, f->lease));
    sx__etcd_free(f->kv);
    sx__etcd_free(f->ka);
    for (size_t i = 0; i < f->n_tab; i++)
        sx__free(f->tab[i]);
    sx__free(f->tab);
    if (f->mu_init) {
        sx__mutex_destroy(&f->net_mu);
        sx__mutex_destroy(&f->tab_mu);
    }
    pthread_mutex_destroy(&f->stop_mu);
    pthread_cond_destroy(&f->stop_cv);
    pthread_mutex_destroy(&f->place_mu);
    pthread_mutex_destroy(&f->adopt_mu);
    sx_strings_free(f->qids, f->n_qids);
    sx__free(f->reps);
    sx__free(f->etcd_eps);
    sx__free(f->node_id);
    sx__free(f->data_dir);
    sx__free(f->storage_url);
    sx__free(f->addr);
    sx__free(f);
}

/* ---------------------------------------------------------------- public (sextant_server.h) */

struct sx_cluster_node {
    sx__fence *f;
    sx__ijobs *jobs; /* a writer: its builds offered to index workers */
    sx__iworker *iw; /* an index worker */
};

sx_status sx_cluster_node_start(const sx_cluster_node_options *opts, sx_cluster_node **out)
{
    sx__err_clear();
    if (!opts || !out)
        return sx__err(SX_EINVAL, "sx_cluster_node_start: options and out are required");
    *out = NULL;
    sx__fence_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.etcd = opts->etcd;
    cfg.node_id = opts->node_id;
    cfg.data_dir = opts->data_dir;
    cfg.storage_url = opts->storage_url;
    cfg.s3_endpoint = opts->s3_endpoint;
    cfg.addr = opts->addr;
    cfg.lease_ttl_s = opts->lease_ttl_s;
    cfg.on_lost = opts->on_fenced;
    cfg.on_lost_ud = opts->ud;
    cfg.query_node = opts->query_node;
    cfg.index_worker = opts->index_worker;
    sx_cluster_node *w = sx__calloc(1, sizeof *w);
    if (!w)
        return sx__err(SX_ENOMEM, "cluster writer");
    sx_status st = sx__fence_start(&cfg, &w->f);
    bool writer = !opts->query_node && !opts->index_worker;
    if (st == SX_OK && writer)
        st = sx__fence_reconcile(w->f);
    if (st == SX_OK && writer)
        st = sx__ijobs_new(w->f, opts->s3_endpoint, &w->jobs);
    if (st == SX_OK && opts->index_worker)
        st =
            sx__iworker_start(w->f, opts->data_dir, opts->s3_endpoint, opts->build_threads, &w->iw);
    if (st != SX_OK) {
        char msg[1024];
        (void)snprintf(msg, sizeof msg, "%s", sx_errmsg());
        sx__ijobs_free(w->jobs);
        sx__fence_stop(w->f);
        sx__free(w);
        return sx__err(st, "%s", msg);
    }
    *out = w;
    return SX_OK;
}

const sx_store_fence *sx_cluster_node_fence(sx_cluster_node *n)
{
    return sx__fence_iface(n->f);
}

const sx_index_builder *sx_cluster_node_index_builder(sx_cluster_node *n)
{
    return n->jobs ? sx__ijobs_iface(n->jobs) : NULL;
}

sx_status sx_cluster_node_databases(sx_cluster_node *n, char ***names, size_t *count)
{
    sx__err_clear();
    *names = NULL;
    *count = 0;
    sx__fence *f = n->f;
    char pre[256];
    (void)snprintf(pre, sizeof pre, "%smanifest/", f->prefix);
    sx__etcd_kv *kvs = NULL;
    size_t nk = 0;
    sx__mutex_lock(&f->net_mu);
    sx_status st = sx__etcd_range(f->kv, pre, &kvs, &nk, NULL);
    sx__mutex_unlock(&f->net_mu);
    if (st != SX_OK)
        return st;
    char **out = sx__calloc(nk + 1, sizeof *out);
    size_t m = 0, pl = strlen(pre);
    for (size_t i = 0; out && i < nk; i++) {
        const char *db = kvs[i].key + pl, *sl = strchr(db, '/');
        size_t len = sl ? (size_t)(sl - db) : 0;
        if (!len || (len == 7 && strncmp(db, "default", 7) == 0))
            continue;
        /* keys come in order: a database's collections are adjacent */
        if (m && strlen(out[m - 1]) == len && strncmp(out[m - 1], db, len) == 0)
            continue;
        out[m] = sx__strndup(db, len);
        if (!out[m])
            break;
        m++;
    }
    sx__etcd_kvs_free(kvs, nk);
    if (!out)
        return sx__err(SX_ENOMEM, "cluster databases");
    *names = out;
    *count = m;
    return SX_OK;
}

/* Adoption. A writer is sent a collection it does not hold when its holder is gone (the proxy
 * places a collection whose epoch key is absent on a live writer). Its copy is then older than
 * the committed state, or absent: take_locked refuses with SX_ESTALE. Under adopt_mu (so two
 * requests adopt once), the take is tried again (another request may have adopted it), then the
 * copy goes to DATA/cluster/stale/<db>.<name>.<time> and the committed state is restored
 * (sx_server_adopt_collection) and taken. A read of a collection another writer holds is served
 * from the local copy, as before; a write gets the take's refusal, which names the holder. */
static sx_status take_now(sx__fence *f, const char *db, const char *coll)
{
    held *h = find_held(f, db, coll, false);
    if (h && atomic_load(&h->rev))
        return SX_OK;
    sx__mutex_lock(&f->net_mu);
    sx_status st = take_locked(f, db, coll, &h);
    sx__mutex_unlock(&f->net_mu);
    return st;
}

/* Whether etcd has a committed manifest pointer for db.coll (errors: true, the take decides);
 * holder: the writer that last committed or took it ("" unknown). */
static bool committed(sx__fence *f, const char *db, const char *coll, char *holder, size_t cap)
{
    char mk[512], val[1200];
    key_of(f, "manifest", db, coll, mk, sizeof mk);
    sx__mutex_lock(&f->net_mu);
    sx_status st = kv_text(f, mk, val, sizeof val, NULL);
    sx__mutex_unlock(&f->net_mu);
    const char *h = strchr(val, '#');
    (void)snprintf(holder, cap, "%.*s", h ? (int)strcspn(h + 1, ".") : 0, h ? h + 1 : "");
    sx__err_clear();
    return st != SX_ENOTFOUND;
}

/* Whether writer id is registered (its lease alive). Errors: true (no adoption on doubt). */
static bool node_alive(sx__fence *f, const char *id)
{
    char nk[256], val[512];
    (void)snprintf(nk, sizeof nk, "%snode/%s", f->prefix, id);
    sx__mutex_lock(&f->net_mu);
    sx_status st = kv_text(f, nk, val, sizeof val, NULL);
    sx__mutex_unlock(&f->net_mu);
    sx__err_clear();
    return st != SX_ENOTFOUND;
}

/* Gives a held collection back (its epoch key deleted if still ours) and forgets that this
 * process's copy matches the committed state (its known file), so the next take adopts again:
 * an adoption that failed half-way (the copy moved aside, the restore or open failed) must not
 * leave the collection held here without data. */
static void give_back(sx__fence *f, const char *db, const char *coll)
{
    char ek[512];
    key_of(f, "epoch", db, coll, ek, sizeof ek);
    sx__mutex_lock(&f->net_mu);
    held *h = find_held(f, db, coll, false);
    int64_t rev = h ? atomic_load(&h->rev) : 0;
    if (rev) {
        sx__etcd_cmp mine = { ek, SX__ETCD_MOD, rev, NULL };
        sx__etcd_op del = { SX__ETCD_DEL, ek, NULL, 0 };
        sx__etcd_txn_result rr;
        if (sx__etcd_txn(f->kv, &mine, 1, &del, 1, NULL, 0, &rr) == SX_OK)
            sx__etcd_txn_result_fini(&rr);
        atomic_store(&h->rev, 0);
    }
    sx__ignore(known_write(f, db, coll, NULL));
    sx__mutex_unlock(&f->net_mu);
}

sx_status sx_cluster_node_before_collection(
    void *ud, sx_server *srv, const char *db, const char *coll, bool write, bool local)
{
    sx_cluster_node *n = ud;
    if (!n || n->f->cfg.query_node || n->f->cfg.index_worker || !db || !coll ||
        strlen(db) > SX_MAX_NAME || strlen(coll) > SX_MAX_NAME)
        return SX_OK;
    sx__fence *f = n->f;
    held *h = find_held(f, db, coll, false);
    if (h && atomic_load(&h->rev) && local)
        return SX_OK; /* held: the common case, no etcd call */
    if (h && !write && local && now_ns() < atomic_load(&h->other_until_ns))
        return SX_OK; /* another writer held it a moment ago: the local copy answers reads */
    char last[128];
    if (!committed(f, db, coll, last, sizeof last))
        return SX_OK; /* nothing committed anywhere: a new collection, or no such one */
    sx_status st;
    if (last[0] && strcmp(last, f->node_id) != 0 && node_alive(f, last))
        /* its last writer is running (restarted on its directory: its WAL may hold
         * acknowledged rows the store lacks): it takes the collection back, not this writer */
        st = sx__err(SX_EFENCED,
                     "collection %s.%s was last written by writer %s, which is running: it is "
                     "held by writer %s once it takes it back (retry)",
                     db, coll, last, last);
    else
        st = take_now(f, db, coll);
    if (st == SX_ESTALE || (st == SX_OK && !local)) {
        /* this copy is older than the committed state, or absent (held, with no data: an
         * adoption of another request that is still downloading, or one that failed) */
        pthread_mutex_lock(&f->adopt_mu);
        st = take_now(f, db, coll);
        if (st == SX_ESTALE || (st == SX_OK && !sx_server_has_collection(srv, db, coll))) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            char keep[4096];
            (void)snprintf(keep, sizeof keep, "%s/cluster/stale/%s.%s.%lld.%09ld", f->data_dir, db,
                           coll, (long long)ts.tv_sec, ts.tv_nsec);
            int64_t t0 = now_ns();
            st = sx_server_adopt_collection(srv, db, coll, keep);
            if (st != SX_OK) {
                char msg[1024];
                (void)snprintf(msg, sizeof msg, "%s", sx_errmsg());
                give_back(f, db, coll);
                st = sx__err(st, "writer %s: adopting %s.%s: %s", f->node_id, db, coll, msg);
            }
            if (st == SX_OK)
                st = take_now(f, db, coll);
            if (st == SX_OK)
                (void)fprintf(stderr, "writer %s: adopted %s.%s from the store in %.2f s (%s%s)\n",
                              f->node_id, db, coll, (double)(now_ns() - t0) / 1e9,
                              sx__fs_exists(keep) ? "its older copy kept in " : "it had no copy",
                              sx__fs_exists(keep) ? keep : "");
        }
        pthread_mutex_unlock(&f->adopt_mu);
    }
    if (st == SX_EFENCED) { /* another holder: reads of the local copy skip takes for 1 s */
        sx__mutex_lock(&f->net_mu);
        h = find_held(f, db, coll, true);
        sx__mutex_unlock(&f->net_mu);
        if (h)
            atomic_store(&h->other_until_ns, now_ns() + 1000000000LL);
    }
    if (st != SX_OK && !write) {
        sx__err_clear(); /* a read: the local copy answers, as without a fence */
        st = SX_OK;
    }
    return st;
}

sx_status sx_cluster_node_synced(sx_cluster_node *n, int64_t wall_ms)
{
    sx__err_clear();
    sx__fence *f = n->f;
    char key[256], val[32];
    (void)snprintf(key, sizeof key, "%ssynced/%s", f->prefix, f->node_id);
    (void)snprintf(val, sizeof val, "%lld", (long long)wall_ms);
    sx__mutex_lock(&f->net_mu);
    sx_status st = sx__etcd_put(f->kv, key, val, f->lease, NULL);
    sx__mutex_unlock(&f->net_mu);
    return st;
}

sx_status sx_cluster_node_fresh_floor(sx_cluster_node *n, int64_t *wall_ms)
{
    sx__err_clear();
    *wall_ms = 0;
    sx__fence *f = n->f;
    char np[256], sp[256];
    (void)snprintf(np, sizeof np, "%snode/", f->prefix);
    (void)snprintf(sp, sizeof sp, "%ssynced/", f->prefix);
    sx__etcd_kv *nodes = NULL, *syn = NULL;
    size_t nn = 0, ns = 0;
    /* synced first: a writer registered after this read has acknowledged nothing before it */
    sx__mutex_lock(&f->net_mu);
    sx_status st = sx__etcd_range(f->kv, sp, &syn, &ns, NULL);
    if (st == SX_OK)
        st = sx__etcd_range(f->kv, np, &nodes, &nn, NULL);
    sx__mutex_unlock(&f->net_mu);
    int64_t floor = INT64_MAX;
    size_t writers = 0;
    for (size_t i = 0; st == SX_OK && i < nn; i++) {
        if (!strstr(nodes[i].value, "\"role\":\"writer\""))
            continue;
        writers++;
        const char *id = nodes[i].key + strlen(np);
        int64_t v = 0;
        for (size_t k = 0; k < ns; k++)
            if (strcmp(syn[k].key + strlen(sp), id) == 0)
                v = strtoll(syn[k].value, NULL, 10);
        if (v < floor)
            floor = v;
    }
    sx__etcd_kvs_free(nodes, nn);
    sx__etcd_kvs_free(syn, ns);
    if (st == SX_OK && writers && floor != INT64_MAX)
        *wall_ms = floor;
    return st;
}

const char *sx_cluster_node_uuid(const sx_cluster_node *n)
{
    return sx__fence_uuid(n->f);
}

void sx_cluster_node_keep_lease(sx_cluster_node *n)
{
    if (n)
        atomic_store(&n->f->keep_lease, true);
}

bool sx_cluster_node_fenced(const sx_cluster_node *n)
{
    return sx__fence_lost(n->f);
}

void sx_cluster_node_stop(sx_cluster_node *n)
{
    if (!n)
        return;
    sx__iworker_stop(n->iw); /* its running build ends first */
    sx__ijobs_free(n->jobs);
    sx__fence_stop(n->f);
    sx__free(n);
}
