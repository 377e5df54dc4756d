/*
 * test_ddl_crash.c: DDL of the REST catalog (src/server/catalog.c) is atomic on disk (issue 13,
 * finding 4: "after a restart the dropped database was back, as were a collection and a database
 * whose creates had failed").
 *
 *   fault_walk  every file operation of database create/drop and collection create/drop/rename
 *               fails in turn (the k-th open, write, fsync or rename for k = 1, 2, ... until the
 *               call succeeds; once and persistently): a call that failed leaves nothing (in the
 *               catalog, and after a reopen on disk), one that succeeded is there after a
 *               reopen, and the data directory passes the layout checks below.
 *   powerloss   a child process runs random DDL sequences (database create/drop, collection
 *               create/drop/rename, some names of 230+ bytes) in the platform layer's power-loss
 *               mode and dies at a random write (unsynced writes dropped or torn); the parent
 *               reopens the catalog and checks: every acknowledged operation is there (an
 *               acknowledged drop stays dropped), the one in flight is either done or not at
 *               all, and the layout checks pass. Rounds stack on one directory. SX_SEED replays;
 *               SX_DDL_ROUNDS changes the number of rounds.
 * Layout checks (after an open): no .tmp-/.drop- directory is left under databases/ or any
 * collections/; in every database each engine collection has its metadata file and each metadata
 * file its engine collection; every listed collection opens, with the declared (not derived)
 * schema; every database directory has its db.properties.json.
 */
#include <dirent.h>
#include <errno.h>
#include <sextant.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "platform/fs.h"
#include "server/server.h"

#define MAX_ITEMS      64
#define ROUNDS_DEFAULT 40
#define OPS_PER_ROUND  40

static char long_db[256], long_coll[256];

static sx__catalog *open_cat(const char *dir)
{
    sx_db_options o = { 0 };
    o.build_threads = 1;
    o.search_threads = 1;
    sx__catalog *cat = NULL;
    sx_status st = sx__cat_open(dir, &o, &cat);
    if (st != SX_OK)
        FAILF("sx__cat_open: %s: %s", sx_status_str(st), sx_errmsg());
    return cat;
}

/* id Int64 pk, vector FloatVector(4), age Int32: the declared Int32 tells declared metadata from
 * metadata derived from the engine schema (Int64). */
static void make_meta(sx__coll_meta *m, const char *name)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->vecs[0].metric = SX_METRIC_L2;
    const char *names[] = { "id", "vector", "age" };
    const char *types[] = { "Int64", "FloatVector", "Int32" };
    for (size_t i = 0; i < 3; i++) {
        snprintf(m->fields[i].name, sizeof m->fields[i].name, "%s", names[i]);
        snprintf(m->fields[i].type, sizeof m->fields[i].type, "%s", types[i]);
    }
    m->fields[0].is_primary = true;
    m->fields[1].dim = 4;
    m->n_fields = 3;
}

/* ---------------------------------------------------------------- state: "db" and "db/coll" */

typedef struct state {
    size_t n;
    char items[MAX_ITEMS][2 * 256 + 2];
} state;

static int cmp_items(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static void st_key(char *out, const char *db, const char *coll)
{
    if (coll)
        snprintf(out, 2 * 256 + 2, "%s/%s", db, coll);
    else
        snprintf(out, 2 * 256 + 2, "%s", db);
}

static bool st_has(const state *s, const char *db, const char *coll)
{
    char k[2 * 256 + 2];
    st_key(k, db, coll);
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->items[i], k) == 0)
            return true;
    return false;
}

static void st_add(state *s, const char *db, const char *coll)
{
    if (st_has(s, db, coll) || s->n == MAX_ITEMS)
        return;
    st_key(s->items[s->n++], db, coll);
    qsort(s->items, s->n, sizeof s->items[0], cmp_items);
}

static void st_del(state *s, const char *db, const char *coll)
{
    char k[2 * 256 + 2];
    st_key(k, db, coll);
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->items[i], k) == 0) {
            memmove(s->items[i], s->items[i + 1], (s->n - i - 1) * sizeof s->items[0]);
            s->n--;
            return;
        }
}

static bool st_eq(const state *a, const state *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->items[i], b->items[i]) != 0)
            return false;
    return true;
}

static size_t st_colls(const state *s, const char *db)
{
    size_t n = 0, l = strlen(db);
    for (size_t i = 0; i < s->n; i++)
        if (strncmp(s->items[i], db, l) == 0 && s->items[i][l] == '/')
            n++;
    return n;
}

static void st_print(const char *tag, const state *s)
{
    fprintf(stderr, "%s (%zu):", tag, s->n);
    for (size_t i = 0; i < s->n; i++)
        fprintf(stderr, " %.12s..%s", s->items[i],
                strlen(s->items[i]) > 30 ? s->items[i] + strlen(s->items[i]) - 16 : "");
    fprintf(stderr, "\n");
}

/* The catalog's state ("default" is left out: it always exists). */
static void st_read(sx__catalog *cat, state *s)
{
    memset(s, 0, sizeof *s);
    char **dbs = NULL;
    size_t n_dbs = 0;
    ASSERT_OK(sx__cat_db_list(cat, &dbs, &n_dbs));
    for (size_t i = 0; i < n_dbs; i++) {
        if (i > 0)
            st_add(s, dbs[i], NULL);
        char **cs = NULL;
        size_t n_cs = 0;
        ASSERT_OK(sx__cat_coll_list(cat, dbs[i], &cs, &n_cs));
        for (size_t j = 0; j < n_cs; j++)
            st_add(s, dbs[i], cs[j]);
        sx_strings_free(cs, n_cs);
    }
    sx_strings_free(dbs, n_dbs);
}

/* ---------------------------------------------------------------- layout checks */

static bool has_json(char **files, size_t n, const char *stem)
{
    char want[300];
    snprintf(want, sizeof want, "%s.json", stem);
    for (size_t i = 0; i < n; i++)
        if (strcmp(files[i], want) == 0)
            return true;
    return false;
}

static void check_db_dir(const char *path, const char *tag)
{
    char sub[4096];
    char **colls = NULL, **files = NULL;
    size_t n_c = 0, n_f = 0;
    snprintf(sub, sizeof sub, "%s/collections", path);
    if (sx__fs_exists(sub))
        ASSERT_OK(sx__fs_list(sub, &colls, &n_c));
    snprintf(sub, sizeof sub, "%s/rest", path);
    if (sx__fs_exists(sub))
        ASSERT_OK(sx__fs_list(sub, &files, &n_f));
    if (!has_json(files, n_f, "db.properties"))
        FAILF("%s: %s has no rest/db.properties.json", tag, path);
    for (size_t i = 0; i < n_c; i++) {
        if (colls[i][0] == '.')
            FAILF("%s: %s/collections/%s left after open", tag, path, colls[i]);
        else if (!has_json(files, n_f, colls[i]))
            FAILF("%s: engine collection %s/collections/%.40s has no metadata file", tag, path,
                  colls[i]);
    }
    for (size_t i = 0; i < n_f; i++) {
        size_t l = strlen(files[i]);
        if (strcmp(files[i], "db.properties.json") == 0 || l <= 5 ||
            strcmp(files[i] + l - 5, ".json") != 0)
            continue;
        bool found = false;
        for (size_t j = 0; j < n_c; j++)
            if (strlen(colls[j]) == l - 5 && strncmp(colls[j], files[i], l - 5) == 0)
                found = true;
        if (!found)
            FAILF("%s: metadata file %s/rest/%.40s has no engine collection", tag, path, files[i]);
    }
    sx_strings_free(colls, n_c);
    sx_strings_free(files, n_f);
}

static void check_layout(const char *dir, sx__catalog *cat, const state *s, const char *tag)
{
    check_db_dir(dir, tag);
    char path[4096];
    snprintf(path, sizeof path, "%s/databases", dir);
    char **names = NULL;
    size_t n = 0;
    if (sx__fs_exists(path))
        ASSERT_OK(sx__fs_list(path, &names, &n));
    size_t n_db = 0;
    for (size_t i = 0; i < n; i++) {
        if (names[i][0] == '.') {
            FAILF("%s: databases/%.40s left after open", tag, names[i]);
            continue;
        }
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, names[i]);
        check_db_dir(sub, tag);
        n_db++;
    }
    sx_strings_free(names, n);
    size_t want_db = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (strchr(s->items[i], '/') == NULL) {
            want_db++;
            continue;
        }
        char db[256], coll[256];
        const char *sl = strchr(s->items[i], '/');
        snprintf(db, sizeof db, "%.*s", (int)(sl - s->items[i]), s->items[i]);
        snprintf(coll, sizeof coll, "%s", sl + 1);
        static sx__coll_meta m;
        sx_collection *h = NULL;
        sx_status st = sx__cat_coll_get(cat, db, coll, &h, &m);
        if (st != SX_OK) {
            FAILF("%s: collection %.40s does not open: %s", tag, s->items[i], sx_errmsg());
            continue;
        }
        if (m.n_fields != 3 || strcmp(m.fields[2].type, "Int32") != 0)
            FAILF("%s: collection %.40s lost its declared schema", tag, s->items[i]);
        sx_collection_release(h);
    }
    if (n_db != want_db)
        FAILF("%s: %zu database directories for %zu databases", tag, n_db, want_db);
}

/* ---------------------------------------------------------------- fault walk */

enum { OP_DB_CREATE, OP_DB_DROP, OP_COLL_CREATE, OP_COLL_DROP, OP_COLL_RENAME, OP_N };

static const char *const op_names[OP_N] = { "db create", "db drop", "collection create",
                                            "collection drop", "collection rename" };

static sx_status run_op(sx__catalog *cat, int op, const char *db, const char *a, const char *b)
{
    static sx__coll_meta m;
    switch (op) {
    case OP_DB_CREATE:
        return sx__cat_db_create(cat, db);
    case OP_DB_DROP:
        return sx__cat_db_drop(cat, db);
    case OP_COLL_CREATE:
        make_meta(&m, a);
        return sx__cat_coll_create(cat, db, &m);
    case OP_COLL_DROP:
        return sx__cat_coll_drop(cat, db, a);
    default:
        return sx__cat_coll_rename(cat, db, a, NULL, b);
    }
}

static void apply_op(state *s, int op, const char *db, const char *a, const char *b)
{
    switch (op) {
    case OP_DB_CREATE:
        st_add(s, db, NULL);
        break;
    case OP_DB_DROP:
        st_del(s, db, NULL);
        break;
    case OP_COLL_CREATE:
        st_add(s, db, a);
        break;
    case OP_COLL_DROP:
        st_del(s, db, a);
        break;
    default:
        st_del(s, db, a);
        st_add(s, db, b);
        break;
    }
}

static void test_fault_walk(void)
{
    const char *tdir = test_tmpdir("ddl_faults");
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tdir);
    sx__catalog *cat = open_cat(dir);
    ASSERT(cat != NULL);
    ASSERT_OK(sx__cat_db_create(cat, long_db));
    ASSERT_OK(run_op(cat, OP_COLL_CREATE, long_db, "keep", NULL));
    static const sx__fault_op fops[] = { SX__FAULT_OPEN, SX__FAULT_WRITE, SX__FAULT_SYNC,
                                         SX__FAULT_RENAME };
    static const int errs[] = { ENOSPC, ENOSPC, EIO, ENOSPC };
    long attempts = 0, failed = 0;
    int fails0 = h_fail;
    for (int op = 0; op < OP_N && h_fail == fails0; op++)
        for (size_t f = 0; f < 4 && h_fail == fails0; f++)
            for (int persistent = 0; persistent < 2 && h_fail == fails0; persistent++)
                for (long k = 1; k < 80 && h_fail == fails0; k++) {
                    /* set up the op's precondition */
                    const char *db = op == OP_DB_CREATE || op == OP_DB_DROP ? "w" : long_db;
                    const char *a = op == OP_COLL_RENAME ? "keep" : long_coll;
                    const char *b = op == OP_COLL_RENAME ? long_coll : NULL;
                    if (op == OP_DB_DROP)
                        ASSERT_OK(sx__cat_db_create(cat, "w"));
                    if (op == OP_COLL_DROP)
                        ASSERT_OK(run_op(cat, OP_COLL_CREATE, long_db, long_coll, NULL));
                    state before, after, reopened;
                    st_read(cat, &before);
                    sx__fault_set(fops[f], k, errs[f], persistent != 0);
                    sx_status st = run_op(cat, op, db, a, b);
                    sx__fault_clear_all();
                    attempts++;
                    st_read(cat, &after);
                    state want = before;
                    if (st == SX_OK)
                        apply_op(&want, op, db, a, b);
                    else
                        failed++;
                    /* a failed create leaves nothing; a failed drop or rename may have happened
                     * (a failed fsync after its rename); with a fault that fires once, a rename
                     * is undone */
                    bool is_drop = op == OP_DB_DROP || op == OP_COLL_DROP ||
                                   (op == OP_COLL_RENAME && persistent);
                    state done = before;
                    apply_op(&done, op, db, a, b);
                    if (!st_eq(&after, &want) && !(is_drop && st != SX_OK && st_eq(&after, &done)))
                        FAILF("%s, fault on op %zu #%ld%s: %s, catalog state wrong", op_names[op],
                              f, k, persistent ? " (persistent)" : "", sx_status_str(st));
                    ASSERT_OK(sx__cat_close(cat));
                    cat = open_cat(dir);
                    if (!cat)
                        return;
                    st_read(cat, &reopened);
                    bool ok = st_eq(&reopened, &after) ||
                              (is_drop && st != SX_OK &&
                               (st_eq(&reopened, &before) || st_eq(&reopened, &done)));
                    if (!ok) {
                        st_print("catalog before the reopen", &after);
                        st_print("after the reopen", &reopened);
                        FAILF("%s, fault on op %zu #%ld%s: %s; a reopen changed the state",
                              op_names[op], f, k, persistent ? " (persistent)" : "",
                              sx_status_str(st));
                    }
                    char tag[128];
                    snprintf(tag, sizeof tag, "%s fault %zu #%ld", op_names[op], f, k);
                    check_layout(dir, cat, &reopened, tag);
                    /* back to the base state: long_db with "keep" */
                    if (st_has(&reopened, "w", NULL))
                        ASSERT_OK(sx__cat_db_drop(cat, "w"));
                    if (st_has(&reopened, long_db, long_coll) && op != OP_COLL_RENAME)
                        ASSERT_OK(sx__cat_coll_drop(cat, long_db, long_coll));
                    if (op == OP_COLL_RENAME && st_has(&reopened, long_db, long_coll))
                        ASSERT_OK(sx__cat_coll_rename(cat, long_db, long_coll, NULL, "keep"));
                    if (st == SX_OK)
                        break; /* the k-th call is past the op's last file operation */
                }
    printf("fault walk: %ld attempts, %ld failed calls, each checked after a reopen\n", attempts,
           failed);
    ASSERT(failed > 20);
    ASSERT_OK(sx__cat_close(cat));
}

/* ---------------------------------------------------------------- power loss */

typedef struct msg {
    char kind; /* 'B' begin, 'A' acknowledged, 'F' failed */
    char op;
    char db[256], a[256], b[256];
} msg;

static const char *pick(uint64_t *rs, const char *const *pool, size_t n)
{
    return pool[test_rand(rs) % n];
}

static void send_msg(int fd, char kind, int op, const char *db, const char *a, const char *b)
{
    msg m;
    memset(&m, 0, sizeof m);
    m.kind = kind;
    m.op = (char)op;
    snprintf(m.db, sizeof m.db, "%s", db ? db : "");
    snprintf(m.a, sizeof m.a, "%s", a ? a : "");
    snprintf(m.b, sizeof m.b, "%s", b ? b : "");
    if (write(fd, &m, sizeof m) != (ssize_t)sizeof m)
        _exit(8);
}

static _Noreturn void child(const char *dir, int fd, uint64_t seed, uint64_t crash_at)
{
    sx__catalog *cat = open_cat(dir);
    if (!cat)
        _exit(3);
    state s;
    st_read(cat, &s);
    sx__powerloss_enable(seed, crash_at);
    uint64_t rs = seed | 1;
    const char *const dbs[] = { "default", "d0", "d1", long_db };
    const char *const colls[] = { "c0", "c1", "c2", long_coll };
    for (int i = 0; i < OPS_PER_ROUND; i++) {
        int op = (int)(test_rand(&rs) % OP_N);
        const char *db = pick(&rs, dbs, 4), *a = pick(&rs, colls, 4), *b = pick(&rs, colls, 4);
        bool db_ok = strcmp(db, "default") == 0 || st_has(&s, db, NULL);
        bool can = false;
        switch (op) {
        case OP_DB_CREATE:
            can = !db_ok;
            break;
        case OP_DB_DROP:
            can = db_ok && strcmp(db, "default") != 0 && st_colls(&s, db) == 0;
            break;
        case OP_COLL_CREATE:
            can = db_ok && !st_has(&s, db, a);
            break;
        case OP_COLL_DROP:
            can = db_ok && st_has(&s, db, a);
            break;
        default:
            can = db_ok && st_has(&s, db, a) && !st_has(&s, db, b);
            break;
        }
        if (!can)
            continue;
        send_msg(fd, 'B', op, db, a, b);
        sx_status st = run_op(cat, op, db, a, b);
        if (st != SX_OK) {
            send_msg(fd, 'F', op, db, a, sx_errmsg());
            _exit(9);
        }
        apply_op(&s, op, db, a, b);
        send_msg(fd, 'A', op, db, a, b);
    }
    send_msg(fd, 'E', 0, NULL, NULL, NULL);
    _exit(0); /* no crash this round: the write count was never reached */
}

static void test_powerloss(void)
{
    const char *tdir = test_tmpdir("ddl_powerloss");
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tdir);
    uint64_t seed = test_seed(), rs = seed;
    const char *er = getenv("SX_DDL_ROUNDS");
    int rounds = er ? (int)strtol(er, NULL, 10) : ROUNDS_DEFAULT;
    sx__catalog *cat = open_cat(dir);
    ASSERT(cat != NULL);
    state cur;
    st_read(cat, &cur);
    ASSERT_OK(sx__cat_close(cat));
    long acks = 0, in_flight = 0, in_flight_done = 0, crashes = 0;
    int fails0 = h_fail;
    for (int round = 0; round < rounds && h_fail == fails0; round++) {
        int p[2];
        ASSERT(pipe(p) == 0);
        uint64_t crash_at = 1 + test_rand(&rs) % 12;
        fflush(NULL);
        pid_t pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            child(dir, p[1], seed + (uint64_t)round * 7919, crash_at);
        }
        close(p[1]);
        msg m, pending;
        bool has_pending = false, ended = false;
        while (read(p[0], &m, sizeof m) == (ssize_t)sizeof m) {
            if (m.kind == 'B') {
                pending = m;
                has_pending = true;
            } else if (m.kind == 'E') {
                ended = true;
            } else if (m.kind == 'A') {
                apply_op(&cur, m.op, m.db, m.a, m.b);
                has_pending = false;
                acks++;
            } else {
                FAILF("round %d: %s failed before the power cut: %s", round, op_names[(int)m.op],
                      m.b);
            }
        }
        close(p[0]);
        int wst;
        waitpid(pid, &wst, 0);
        if (!WIFEXITED(wst) || WEXITSTATUS(wst) != 0) {
            FAILF("round %d: child exited with status %d", round, wst);
            break;
        }
        crashes += !ended;
        cat = open_cat(dir);
        if (!cat)
            break;
        state got;
        st_read(cat, &got);
        state alt = cur;
        if (has_pending) {
            apply_op(&alt, pending.op, pending.db, pending.a, pending.b);
            in_flight++;
        }
        if (st_eq(&got, &cur)) {
            /* as acknowledged */
        } else if (has_pending && st_eq(&got, &alt)) {
            in_flight_done++;
            cur = alt;
        } else {
            st_print("acknowledged", &cur);
            if (has_pending)
                st_print("with the operation in flight", &alt);
            st_print("after the power loss", &got);
            FAILF("round %d (crash at write %llu, SX_SEED=%llu): the catalog is neither", round,
                  (unsigned long long)crash_at, (unsigned long long)seed);
        }
        char tag[64];
        snprintf(tag, sizeof tag, "round %d", round);
        check_layout(dir, cat, &got, tag);
        ASSERT_OK(sx__cat_close(cat));
    }
    printf("power loss: %d rounds, %ld of them cut, %ld acknowledged DDL calls, %ld in flight at "
           "the cut (%ld of them done)\n",
           rounds, crashes, acks, in_flight, in_flight_done);
    ASSERT(crashes > rounds / 3);
}

int main(void)
{
    long_db[0] = 'L';
    long_coll[0] = 'K';
    for (size_t i = 1; i < 240; i++) {
        long_db[i] = (char)('a' + i % 26);
        long_coll[i] = (char)('0' + i % 10);
    }
    long_db[230] = '\0';
    long_coll[240] = '\0';
    RUN(test_fault_walk);
    RUN(test_powerloss);
    return TEST_DONE();
}
