/*
 * test_store_fence.c: the engine's fenced store mode (sx_db_options.store_fence, cluster mode)
 * over a file:// store, with an in-test fence standing in for etcd (it holds, per collection,
 * which writer may commit and the pointer to the current store manifest). What it checks:
 *
 *   - a writer of epoch e1 uploads under <c>/e1/, its manifests are new objects
 *     <c>/e1/MANIFEST.<gen>.<n> made current by commit; there is no <c>/MANIFEST; after the next
 *     commit the previous manifest object is collected;
 *   - a second writer (e2, another directory) opens from the pointer alone: same count, same
 *     search answers; its new content goes under e2/ while e1's objects keep their keys;
 *   - the first writer, fenced (the fence says it no longer holds the collection): its flush is
 *     SX_EFENCED, the pointer and every object the current manifest names are untouched, its
 *     upload under e1/ is never named and a later holder's first sync collects it;
 *   - may_ack false: inserts and deletes are refused with SX_EFENCED; a lease that lapses
 *     during the WAL sync answers SX_EFENCED after the write (outcome unknown);
 *   - drop commits a NULL pointer: a fresh directory no longer restores the collection;
 *   - a fence without storage_url is refused.
 */
#include <dirent.h>
#include <sextant.h>
#include <sys/stat.h>

#include "harness.h"

#define DIM 8

typedef struct fake_fence {
    const char *holder; /* the writer allowed to commit ("A", "B") */
    char pointer[512];  /* current manifest key, "" none */
    int commits, refused;
    bool ack_ok;
    int ack_fail_after; /* may_ack answers false after this many calls (-1: never) */
    int ack_calls;
    bool lax_prefix; /* prefix() answers even to a writer that lost the collection (the fence
                        moved between its upload and its commit) */
} fake_fence;

typedef struct writer {
    fake_fence *f;
    const char *me;
    const char *epoch;
    sx_store_fence fence;
} writer;

static sx_status w_prefix(void *ctx, const char *store, const char *coll, char *buf, size_t cap)
{
    (void)store;
    (void)coll;
    writer *w = ctx;
    if (strcmp(w->f->holder, w->me) != 0 && !w->f->lax_prefix)
        return SX_EFENCED;
    snprintf(buf, cap, "%s/", w->epoch);
    return SX_OK;
}

static sx_status w_commit(void *ctx, const char *store, const char *coll, const char *key)
{
    (void)store;
    (void)coll;
    writer *w = ctx;
    if (strcmp(w->f->holder, w->me) != 0) {
        w->f->refused++;
        return SX_EFENCED;
    }
    snprintf(w->f->pointer, sizeof w->f->pointer, "%s", key ? key : "");
    w->f->commits++;
    return SX_OK;
}

static sx_status w_current(void *ctx, const char *store, const char *coll, char *buf, size_t cap)
{
    (void)store;
    writer *w = ctx;
    size_t cl = strlen(coll);
    if (!w->f->pointer[0] || strncmp(w->f->pointer, coll, cl) != 0 || w->f->pointer[cl] != '/')
        return SX_ENOTFOUND; /* the fake keeps one collection's pointer */
    snprintf(buf, cap, "%s", w->f->pointer);
    return SX_OK;
}

static sx_status w_may_ack(void *ctx, const char *store, const char *coll)
{
    (void)store;
    (void)coll;
    writer *w = ctx;
    w->f->ack_calls++;
    if (w->f->ack_fail_after >= 0 && w->f->ack_calls > w->f->ack_fail_after)
        return SX_EFENCED;
    return w->f->ack_ok && strcmp(w->f->holder, w->me) == 0 ? SX_OK : SX_EFENCED;
}

static void writer_init(writer *w, fake_fence *f, const char *me, const char *epoch)
{
    w->f = f;
    w->me = me;
    w->epoch = epoch;
    w->fence = (sx_store_fence){ w, w_prefix, w_commit, w_current, w_may_ack, NULL };
}

static char root[600], url[700];

static int n_under(const char *sub, const char *contains)
{
    char d[900];
    snprintf(d, sizeof d, "%s/%s", root, sub);
    DIR *dir = opendir(d);
    if (!dir)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)))
        if (e->d_name[0] != '.' && (!contains || strstr(e->d_name, contains)))
            n++;
    closedir(dir);
    return n;
}

static bool obj_exists(const char *key)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", root, key);
    struct stat st;
    return stat(p, &st) == 0;
}

static sx_db *open_db(const char *dir, writer *w)
{
    sx_db_options o = { 0 };
    o.storage_url = url;
    o.store_fence = &w->fence;
    o.build_threads = 1;
    sx_db *db = NULL;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    return db;
}

static void vec_of(int64_t id, float *v)
{
    for (int d = 0; d < DIM; d++)
        v[d] = (float)((id * 7919 + d * 104729) % 1000) / 100.0f;
}

static void insert_range(sx_collection *c, int64_t from, int64_t n, sx_status want)
{
    int64_t ids[256];
    float v[256 * DIM];
    for (int64_t i = 0; i < n; i++) {
        ids[i] = from + i;
        vec_of(from + i, v + i * DIM);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "vec", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch bt = { (size_t)n, cols, 2 };
    ASSERT_STATUS(sx_insert(c, &bt, NULL), want);
}

/* ids of the top 5 for a fixed query, as a string */
static void top5(sx_collection *c, char *out, size_t cap)
{
    float q[DIM];
    vec_of(4242, q);
    sx_search_req rq;
    memset(&rq, 0, sizeof rq);
    rq.queries = q;
    rq.nq = 1;
    rq.k = 5;
    rq.metric = -1;
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_search(c, &rq, &rs));
    size_t off = 0;
    out[0] = '\0';
    ASSERT_EQ(rs->topks[0], 5);
    const int64_t *ids = rs->cols[0].data;
    for (size_t i = 0; i < rs->topks[0]; i++)
        off += (size_t)snprintf(out + off, cap - off, "%lld:%.4f ", (long long)ids[i],
                                (double)rs->distances[i]);
    sx_rowset_free(rs);
}

/* root and url: a new file:// store in a temporary directory named tag */
static void new_store(const char *tag)
{
    snprintf(root, sizeof root, "%s", test_tmpdir(tag));
    snprintf(url, sizeof url, "file://%s", root);
}

/* creates collection name (id, vec) in db and opens it */
static sx_collection *create_open(sx_db *db, const char *name)
{
    sx_field_def fd[] = {
        { "id", SX_FIELD_INT64, true, false, 0, 0 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
    };
    sx_collection_def def = { name, fd, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &def));
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, name, &c));
    return c;
}

static void test_fenced_writers(void)
{
    new_store("fence_root");
    char a[600], b[600], fresh[600];
    snprintf(a, sizeof a, "%s", test_tmpdir("fence_a"));
    snprintf(b, sizeof b, "%s", test_tmpdir("fence_b"));
    snprintf(fresh, sizeof fresh, "%s", test_tmpdir("fence_fresh"));
    fake_fence f = { "A", "", 0, 0, true, -1, 0, false };
    writer wa, wb;
    writer_init(&wa, &f, "A", "e1");
    writer_init(&wb, &f, "B", "e2");

    /* writer A, epoch e1 */
    sx_db *da = open_db(a, &wa);
    sx_collection *ca = create_open(da, "fc");
    insert_range(ca, 0, 200, SX_OK);
    ASSERT_OK(sx_flush(ca));
    ASSERT(strncmp(f.pointer, "fc/e1/MANIFEST.", 15) == 0);
    ASSERT(!obj_exists("fc/MANIFEST"));
    ASSERT(obj_exists(f.pointer));
    ASSERT(n_under("fc/e1", ".sxs") == 1);
    char first_m[512];
    snprintf(first_m, sizeof first_m, "%s", f.pointer);
    insert_range(ca, 200, 200, SX_OK);
    ASSERT_OK(sx_flush(ca));
    ASSERT(strcmp(first_m, f.pointer) != 0);
    ASSERT(!obj_exists(first_m)); /* collected after the newer commit */
    ASSERT(n_under("fc/e1", ".sxs") == 2);
    ASSERT_EQ(n_under("fc/e1", "MANIFEST"), 1);
    char want[512], got[512];
    top5(ca, want, sizeof want);

    /* writer B takes over (the fence moves), opens from the pointer in its own directory */
    f.holder = "B";
    sx_db *db = open_db(b, &wb);
    sx_collection *cb;
    ASSERT_OK(sx_collection_open(db, "fc", &cb));
    uint64_t n = 0;
    ASSERT_OK(sx_count(cb, NULL, &n));
    ASSERT_EQ(n, 400);
    top5(cb, got, sizeof got);
    ASSERT(strcmp(want, got) == 0);

    /* A is fenced: writes refused before they start; a flush of what it has cannot commit */
    insert_range(ca, 400, 10, SX_EFENCED);
    char before[512];
    snprintf(before, sizeof before, "%s", f.pointer);
    f.ack_ok = true; /* even were its lease valid, the commit is refused */
    int refused = f.refused;
    ASSERT_STATUS(sx_flush(ca), SX_EFENCED); /* the fence refuses before any upload */
    ASSERT(strstr(sx_errmsg(), "may not write it to the store") != NULL);
    ASSERT_EQ(f.refused, refused);
    ASSERT(strcmp(before, f.pointer) == 0);

    /* B writes: new segments under e2/, e1's keep their keys */
    insert_range(cb, 1000, 100, SX_OK);
    ASSERT_OK(sx_flush(cb));
    ASSERT(strncmp(f.pointer, "fc/e2/MANIFEST.", 15) == 0);
    ASSERT_EQ(n_under("fc/e2", ".sxs"), 1);
    ASSERT_EQ(n_under("fc/e1", ".sxs"), 2);
    ASSERT(!obj_exists(before)); /* A's last manifest collected by B */

    /* A, fenced but with rows to seal, tries to commit: refused, store untouched */
    f.holder = "A";
    insert_range(ca, 500, 50, SX_OK); /* (the fence let A write for a moment) */
    f.holder = "B";
    f.lax_prefix = true; /* A uploads its segment under e1/, then its commit is refused */
    snprintf(before, sizeof before, "%s", f.pointer);
    ASSERT_STATUS(sx_flush(ca), SX_EFENCED);
    ASSERT(strstr(sx_errmsg(), "committing store manifest") != NULL);
    f.lax_prefix = false;
    ASSERT(strcmp(before, f.pointer) == 0);
    ASSERT(obj_exists(f.pointer));
    ASSERT_EQ(n_under("fc/e2", ".sxs"), 1);
    ASSERT_EQ(n_under("fc/e1", ".sxs"), 3);     /* A's orphan: named by no committed manifest */
    ASSERT_EQ(n_under("fc/e1", "MANIFEST"), 1); /* A's refused manifest object */
    sx_collection_release(ca);
    sx_db_close(da);

    /* a fresh directory opens from the pointer: B's state (A's 50 rows were never committed);
     * its first sync lists the prefix and collects A's orphans */
    sx_db *df = open_db(fresh, &wb);
    sx_collection *cf;
    ASSERT_OK(sx_collection_open(df, "fc", &cf));
    ASSERT_OK(sx_count(cf, NULL, &n));
    ASSERT_EQ(n, 500);
    ASSERT_OK(sx_db_sync(df));
    ASSERT_EQ(n_under("fc/e1", ".sxs"), 2);
    ASSERT_EQ(n_under("fc/e1", "MANIFEST"), 0);
    ASSERT(obj_exists(f.pointer));
    sx_collection_release(cf);
    sx_db_close(df);

    /* may_ack: refused up front, and after the WAL sync when the lease lapses during it */
    f.ack_ok = false;
    insert_range(cb, 2000, 10, SX_EFENCED);
    int64_t k1 = 1000;
    sx_keys keys = { 1, &k1, NULL };
    ASSERT_STATUS(sx_delete(cb, &keys, NULL), SX_EFENCED);
    f.ack_ok = true;
    f.ack_calls = 0;
    f.ack_fail_after = 1; /* the check before passes, the one after the sync fails */
    insert_range(cb, 3000, 10, SX_EFENCED);
    ASSERT(strstr(sx_errmsg(), "outcome unknown") != NULL);
    f.ack_fail_after = -1;
    ASSERT_OK(sx_count(cb, NULL, &n));
    ASSERT_EQ(n, 510); /* in B's WAL: the outcome was unknown, not undone */

    /* drop: the pointer goes; a fresh directory does not bring the collection back */
    sx_collection_release(cb);
    ASSERT_OK(sx_collection_drop(db, "fc"));
    ASSERT(f.pointer[0] == '\0');
    sx_db_close(db);
    snprintf(fresh, sizeof fresh, "%s", test_tmpdir("fence_fresh2"));
    df = open_db(fresh, &wb);
    ASSERT_STATUS(sx_collection_open(df, "fc", &cf), SX_ENOTFOUND);
    sx_db_close(df);
}

/* sx_collection_reload: writer B's copy is stale (A committed since B opened it) and B has rows A
 * never saw; the reload replaces the copy with the committed state, keeps the old directory
 * where asked, retires handles of the old copy, and refuses what it cannot do */
static void test_reload(void)
{
    new_store("reload_root");
    char a[600], b[600], keep[700];
    snprintf(a, sizeof a, "%s", test_tmpdir("reload_a"));
    snprintf(b, sizeof b, "%s", test_tmpdir("reload_b"));
    snprintf(keep, sizeof keep, "%s/kept/rc.1", b);
    fake_fence f = { "A", "", 0, 0, true, -1, 0, false };
    writer wa, wb;
    writer_init(&wa, &f, "A", "e1");
    writer_init(&wb, &f, "B", "e2");
    sx_db *da = open_db(a, &wa);
    sx_collection *ca = create_open(da, "rc");
    insert_range(ca, 0, 100, SX_OK);
    ASSERT_OK(sx_flush(ca));

    /* B opens (restores 100 rows), writes 20 of its own (held for a moment), then A goes on */
    sx_db *dbb = open_db(b, &wb);
    sx_collection *cb;
    ASSERT_OK(sx_collection_open(dbb, "rc", &cb));
    f.holder = "B";
    insert_range(cb, 5000, 20, SX_OK);
    f.holder = "A";
    insert_range(ca, 100, 150, SX_OK);
    ASSERT_OK(sx_flush(ca));
    char want[512], got[512];
    top5(ca, want, sizeof want);
    uint64_t n = 0;
    ASSERT_OK(sx_count(cb, NULL, &n));
    ASSERT_EQ(n, 120);

    /* B adopts: the committed 250 rows, its own 20 gone (kept in `keep`), old handle retired */
    f.holder = "B";
    ASSERT_OK(sx_collection_reload(dbb, "rc", keep));
    char kept[800];
    snprintf(kept, sizeof kept, "%s/MANIFEST", keep);
    struct stat stt;
    ASSERT(stat(kept, &stt) == 0);
    insert_range(cb, 7000, 5, SX_ENOTFOUND); /* a handle of the retired copy writes nothing */
    ASSERT_OK(sx_count(cb, NULL, &n));       /* and reads what it had */
    ASSERT_EQ(n, 120);
    sx_collection_release(cb);
    ASSERT_OK(sx_collection_open(dbb, "rc", &cb));
    ASSERT_OK(sx_count(cb, NULL, &n));
    ASSERT_EQ(n, 250);
    top5(cb, got, sizeof got);
    ASSERT(strcmp(want, got) == 0);
    /* B writes on under its epoch and commits */
    insert_range(cb, 6000, 10, SX_OK);
    ASSERT_OK(sx_flush(cb));
    ASSERT(strncmp(f.pointer, "rc/e2/MANIFEST.", 15) == 0);
    sx_collection_release(cb);

    /* a reload with no copy to keep (NULL: deleted) gives the same state again */
    ASSERT_OK(sx_collection_reload(dbb, "rc", NULL));
    ASSERT_OK(sx_collection_open(dbb, "rc", &cb));
    ASSERT_OK(sx_count(cb, NULL, &n));
    ASSERT_EQ(n, 260);
    sx_collection_release(cb);

    /* refusals: no such collection in the store, a bad name, a read-only database */
    ASSERT_STATUS(sx_collection_reload(dbb, "nothere", NULL), SX_ENOTFOUND);
    ASSERT_STATUS(sx_collection_open(dbb, "nothere", &cb), SX_ENOTFOUND);
    ASSERT_STATUS(sx_collection_reload(dbb, "bad name", NULL), SX_EINVAL);
    sx_db_options ro = { 0 };
    ro.storage_url = url;
    ro.read_only = true;
    sx_db *dro = NULL;
    ASSERT_OK(sx_db_open(test_tmpdir("reload_ro"), &ro, &dro));
    ASSERT_STATUS(sx_collection_reload(dro, "rc", NULL), SX_EINVAL);
    sx_db_close(dro);
    sx_collection_release(ca);
    sx_db_close(da);
    sx_db_close(dbb);
}

static void test_fence_needs_store(void)
{
    fake_fence f = { "A", "", 0, 0, true, -1, 0, false };
    writer w;
    writer_init(&w, &f, "A", "e1");
    sx_db_options o = { 0 };
    o.store_fence = &w.fence;
    sx_db *db;
    ASSERT_STATUS(sx_db_open(test_tmpdir("fence_nostore"), &o, &db), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "storage_url") != NULL);
}

int main(void)
{
    RUN(test_fenced_writers);
    RUN(test_fence_needs_store);
    RUN(test_reload);
    return TEST_DONE();
}
