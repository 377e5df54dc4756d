/*
 * test_cluster_adopt.c: live writers adopt the collections of a writer that is gone for good, and
 * timed syncs (issue 17), on real clusters (`sextant cluster up`: 1 etcd member, 2 writers, the
 * proxy; lease TTL 3 s). Skipped (77) without etcd.
 *
 * test_adopt. Writer w1 holds five collections, written directly at w1: ka, kb, kc (database
 * default), kz (database zoo, created through the proxy on both writers) and kl (database late,
 * created on w1 only). w2 is restarted after ka and kb were flushed, so it holds a copy of them
 * restored at its start; kb is then written and flushed again (w2's copy is stale); kc, kz and
 * kl are created after (w2 has no copy, and lacks database late). ka gets 100 more rows
 * acknowledged by w1 and never flushed.
 *
 * The supervisor is stopped (SIGSTOP: nothing restarts) and w1 killed (kill -9): its machine is
 * lost. Through the proxy, Strong reads, a describe and writes of every collection are answered
 * by w2 once w1's lease expired (w2 adopts the four it has no current copy of), each with
 * exactly the committed rows (ka: the 300 flushed, not the 100 only w1's WAL had: the
 * documented recovery point); a search finds its own vector; w2 keeps its stale copy of kb.
 *
 * The supervisor resumed, w1 comes back on its directory: its copy of ka is stale (w2 marked the
 * pointer when it took ka) and moved aside, so the 100 rows of w1's fenced epoch are never
 * served, at w1 either; the proxy still sends ka to w2.
 *
 * A writer restarted is not lost: w2 killed with 50 acknowledged, unflushed rows of kr (a name
 * the proxy's hash places on w1) and restarted by the supervisor takes kr back (w1 does not
 * adopt it while w2 runs): the first answer and every one after has them.
 *
 * test_timed_sync. Writers with --sync-ms 300 and a query node: rows acknowledged and never
 * flushed by the client reach the store on the timer; an idle collection's pointer stays; Bounded
 * reads are answered by the query node; with the store stopped (SIGSTOP of s3rver) its state
 * ages past the 5 s bound and Bounded reads go to the writer (every row) while Eventually reads
 * stay on the query node; the store back, Bounded is the query node's again; w1's machine lost
 * 1.5 s after the last insert: w2 serves all 300.
 *
 * No sanitizer report in any node's log.
 */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>

#include "cluster.h"
#include "cluster/etcd.h"
#include "cluster/shard.h"
#include "harness.h"
#include "http.h"

static unsigned base;

static void at(unsigned port)
{
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", port);
}

static void vec_of(int id, double v[4])
{
    for (int k = 0; k < 4; k++)
        v[k] = sin(id * 0.37 + k * 1.3) + 0.001 * id;
}

/* inserts ids [lo, hi) into db.coll at th_base; the Milvus code */
static long long insert_at(const char *db, const char *coll, int lo, int hi, char *node)
{
    static char b[400 * 120 + 256];
    size_t k = (size_t)snprintf(
        b, sizeof b, "{\"dbName\":\"%s\",\"collectionName\":\"%s\",\"data\":[", db, coll);
    for (int i = lo; i < hi; i++) {
        double v[4];
        vec_of(i, v);
        k += (size_t)snprintf(b + k, sizeof b - k, "%s{\"id\":%d,\"vector\":[%.6f,%.6f,%.6f,%.6f]}",
                              i > lo ? "," : "", i, v[0], v[1], v[2], v[3]);
    }
    snprintf(b + k, sizeof b - k, "]}");
    return th_cl_via("/v2/vectordb/entities/insert", b, node);
}

static void create_at(const char *db, const char *coll)
{
    char body[256];
    snprintf(body, sizeof body,
             "{\"dbName\":\"%s\",\"collectionName\":\"%s\",\"dimension\":4,\"metricType\":\"L2\"}",
             db, coll);
    th_post_ok("/v2/vectordb/collections/create", body);
}

static void flush_at(const char *db, const char *coll)
{
    char body[256];
    snprintf(body, sizeof body, "{\"dbName\":\"%s\",\"collectionName\":\"%s\"}", db, coll);
    th_post_ok("/v2/vectordb/collections/flush", body);
}

/* count(*) of ids in [lo, hi) of db.coll at th_base, Strong; -1 on an error */
static long long
count_lv(const char *db, const char *coll, int lo, int hi, const char *level, char *node)
{
    char body[400];
    snprintf(body, sizeof body,
             "{\"dbName\":\"%s\",\"collectionName\":\"%s\",\"filter\":\"id >= %d and id < %d\","
             "\"outputFields\":[\"count(*)\"],\"consistencyLevel\":\"%s\"}",
             db, coll, lo, hi, level);
    if (th_cl_via("/v2/vectordb/entities/query", body, node) != 0)
        return -1;
    return json_integer_value(
        json_object_get(json_array_get(json_object_get(th_last.json, "data"), 0), "count(*)"));
}

/* count(*) of ids in [lo, hi) of db.coll at th_base, Strong; -1 on an error */
static long long count_at(const char *db, const char *coll, int lo, int hi, char *node)
{
    return count_lv(db, coll, lo, hi, "Strong", node);
}

static bool has_entry(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    bool found = false;
    struct dirent *e;
    while (d && !found && (e = readdir(d)))
        found = strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return found;
}

static int pid_of(const char *name)
{
    th_cl_line ls[64];
    int n = th_cl_status(ls, 64);
    const th_cl_line *l = th_cl_find(ls, n, name);
    return l ? l->pid : -1;
}

/* waits until the server on port answers readyz */
static bool ready(unsigned port, double secs)
{
    double t0 = th_cl_mono();
    while (th_cl_mono() - t0 < secs) {
        at(port);
        th_send("GET", "/readyz", NULL, 0, NULL, false);
        if (th_last.status == 200)
            return true;
        usleep(200000);
    }
    return false;
}

/* waits until the supervisor has restarted process name (pid old) and, a writer on port, it is
 * ready */
static void wait_restarted(const char *name, int old, unsigned port)
{
    double t0 = th_cl_mono();
    while ((pid_of(name) == old || pid_of(name) <= 0) && th_cl_mono() - t0 < 20)
        usleep(100000);
    ASSERT(pid_of(name) != old);
    ASSERT(ready(port, 30));
}

/* the machine of writer name is lost: the supervisor stopped (nothing restarts), kill -9 of
 * the writer. Returns the supervisor's pid (SIGCONT it to resume). */
static int lose_machine(const char *name)
{
    char path[800];
    snprintf(path, sizeof path, "%s/supervisor.pid", th_cl_dir);
    FILE *pf = fopen(path, "r");
    int sup = 0;
    ASSERT(pf != NULL && fscanf(pf, "%d", &sup) == 1 && sup > 0);
    fclose(pf);
    ASSERT_EQ(kill(sup, SIGSTOP), 0);
    int pid = pid_of(name);
    ASSERT(pid > 0);
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    return sup;
}

/* Strong count(*) of db.coll through the proxy, retried until answered (within 30 s);
 * *refused (optional): the answers that were errors */
static long long count_when_answered(const char *db, const char *coll, char *node, int *refused)
{
    at(base);
    long long n = -1;
    double t0 = th_cl_mono();
    while (n < 0 && th_cl_mono() - t0 < 30) {
        n = count_at(db, coll, 0, 1000000, node);
        if (n < 0) {
            if (refused)
                (*refused)++;
            usleep(100000);
        }
    }
    return n;
}

/* count(*) of default.ks at a level through the proxy, retried until it is want answered by
 * node want_node (within 30 s); the last count */
static long long count_until(const char *level, long long want, const char *want_node, char *node)
{
    at(base);
    long long n = -1;
    double t0 = th_cl_mono();
    while (th_cl_mono() - t0 < 30) {
        n = count_lv("default", "ks", 0, 1000000, level, node);
        if (n == want && strcmp(node, want_node) == 0)
            break;
        usleep(200000);
    }
    return n;
}

/* whether a line of logs/<log>.log has both a and b */
static bool log_has(const char *log, const char *a, const char *b)
{
    char lp[800], line[1024];
    snprintf(lp, sizeof lp, "%s/logs/%s.log", th_cl_dir, log);
    FILE *lf = fopen(lp, "r");
    ASSERT(lf != NULL);
    bool found = false;
    while (!found && fgets(line, sizeof line, lf))
        found = strstr(line, a) && strstr(line, b);
    fclose(lf);
    return found;
}

static void test_adopt(void)
{
    char out[8192], args[1200], node[64];
    base = th_cl_pick_base(31);
    ASSERT(base != 0);
    snprintf(args, sizeof args,
             "cluster up --dir '%s' --port %u --etcd 1 --writers 2 --lease-ttl 3", th_cl_dir, base);
    int rc = th_cl_run(out, sizeof out, args);
    if (rc != 0)
        FAILF("cluster up: exit %d: %s", rc, out);
    const unsigned w1 = base + 1, w2 = base + 2;

    /* w1 holds ka and kb (flushed) */
    at(base);
    th_post_ok("/v2/vectordb/databases/create", "{`dbName`:`zoo`}");
    at(w1);
    th_post_ok("/v2/vectordb/databases/create", "{`dbName`:`late`}");
    create_at("default", "ka");
    ASSERT_EQ(insert_at("default", "ka", 0, 300, node), 0);
    flush_at("default", "ka");
    create_at("default", "kb");
    ASSERT_EQ(insert_at("default", "kb", 0, 200, node), 0);
    flush_at("default", "kb");

    /* w2 restarted: it restores ka and kb as committed now */
    int p2 = pid_of("w2");
    ASSERT(p2 > 0);
    kill(p2, SIGKILL);
    wait_restarted("w2", p2, w2);
    at(w2);
    th_post("/v2/vectordb/collections/list", "{}", NULL);
    ASSERT(th_last.text && strstr(th_last.text, "\"kb\""));

    /* then w1 writes on: kb again, kc, kz, kl new; ka's last 100 rows acknowledged only */
    at(w1);
    ASSERT_EQ(insert_at("default", "kb", 200, 300, node), 0);
    flush_at("default", "kb");
    create_at("default", "kc");
    ASSERT_EQ(insert_at("default", "kc", 0, 150, node), 0);
    flush_at("default", "kc");
    create_at("zoo", "kz");
    ASSERT_EQ(insert_at("zoo", "kz", 0, 100, node), 0);
    flush_at("zoo", "kz");
    create_at("late", "kl");
    ASSERT_EQ(insert_at("late", "kl", 0, 100, node), 0);
    flush_at("late", "kl");
    ASSERT_EQ(insert_at("default", "ka", 300, 400, node), 0);
    ASSERT_EQ(count_at("default", "ka", 0, 1000000, node), 400);

    /* w1's machine is lost: nothing restarts it */
    int p1 = pid_of("w1");
    int sup = lose_machine("w1");
    double tk = th_cl_mono();

    /* through the proxy: ka answered by w2 with the committed rows */
    long long n = count_when_answered("default", "ka", node, NULL);
    double t_read = th_cl_mono() - tk;
    ASSERT_EQ(n, 300);
    ASSERT(strcmp(node, "w2") == 0);
    ASSERT_EQ(count_at("default", "ka", 300, 400, node), 0);
    ASSERT_EQ(insert_at("default", "ka", 1000, 1050, node), 0);
    ASSERT(strcmp(node, "w2") == 0);
    double t_write = th_cl_mono() - tk;
    ASSERT_EQ(count_at("default", "ka", 0, 1000000, node), 350);
    {
        double v[4];
        vec_of(7, v);
        char body[400];
        snprintf(body, sizeof body,
                 "{\"collectionName\":\"ka\",\"data\":[[%.6f,%.6f,%.6f,%.6f]],\"limit\":3,"
                 "\"consistencyLevel\":\"Strong\"}",
                 v[0], v[1], v[2], v[3]);
        ASSERT_EQ(th_cl_via("/v2/vectordb/entities/search", body, node), 0);
        json_t *d = json_object_get(th_last.json, "data");
        ASSERT_EQ(json_array_size(d), 3);
        ASSERT_EQ(json_integer_value(json_object_get(json_array_get(d, 0), "id")), 7);
    }
    fprintf(stderr,
            "w1 killed: ka read through the proxy after %.2f s, a write acknowledged after "
            "%.2f s (TTL 3 s), both by %s\n",
            t_read, t_write, node);

    /* kb: w2's stale copy replaced by the committed state, and kept aside */
    ASSERT_EQ(count_at("default", "kb", 0, 1000000, node), 300);
    ASSERT(strcmp(node, "w2") == 0);
    char path[800];
    snprintf(path, sizeof path, "%s/w2/cluster/stale", th_cl_dir);
    ASSERT(has_entry(path, "default.kb."));
    ASSERT_EQ(insert_at("default", "kb", 1000, 1010, node), 0);
    ASSERT_EQ(count_at("default", "kb", 0, 1000000, node), 310);
    /* kc (no copy on w2), kz (database zoo), kl (database late, which w2 did not have) */
    ASSERT_EQ(count_at("default", "kc", 0, 1000000, node), 150);
    ASSERT_EQ(insert_at("default", "kc", 1000, 1010, node), 0);
    ASSERT_EQ(count_at("default", "kc", 0, 1000000, node), 160);
    /* kz: first named by a describe (the proxy's gRPC path reads metadata so, too) */
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/describe",
                        "{\"dbName\":\"zoo\",\"collectionName\":\"kz\"}", node),
              0);
    ASSERT(strcmp(node, "w2") == 0);
    ASSERT_EQ(count_at("zoo", "kz", 0, 1000000, node), 100);
    ASSERT(strcmp(node, "w2") == 0);
    ASSERT_EQ(insert_at("zoo", "kz", 1000, 1010, node), 0);
    ASSERT_EQ(count_at("zoo", "kz", 0, 1000000, node), 110);
    ASSERT_EQ(count_at("late", "kl", 0, 1000000, node), 100);
    ASSERT(strcmp(node, "w2") == 0);
    ASSERT_EQ(insert_at("late", "kl", 1000, 1010, node), 0);
    ASSERT_EQ(count_at("late", "kl", 0, 1000000, node), 110);
    th_post_ok("/v2/vectordb/collections/flush", "{`collectionName`:`ka`}");
    /* w2 adopted the four it had no current copy of (ka too, when its index commit came after
     * w2's restore) */
    const char *const adopted[4] = { "default.kb ", "default.kc ", "zoo.kz ", "late.kl " };
    for (int i = 0; i < 4; i++)
        ASSERT(log_has("w2", "adopted ", adopted[i]));

    /* w1 back on its directory: its copy of ka is stale, the fenced epoch's rows never served */
    ASSERT_EQ(kill(sup, SIGCONT), 0);
    wait_restarted("w1", p1, w1);
    snprintf(path, sizeof path, "%s/w1/cluster/stale", th_cl_dir);
    ASSERT(has_entry(path, "default.ka."));
    at(w1);
    ASSERT_EQ(count_at("default", "ka", 300, 400, node), 0);
    at(base);
    ASSERT_EQ(count_at("default", "ka", 300, 400, node), 0);
    ASSERT_EQ(insert_at("default", "ka", 2000, 2010, node), 0);
    ASSERT(strcmp(node, "w2") == 0);
    ASSERT_EQ(count_at("default", "ka", 0, 1000000, node), 360);

    /* A writer that is restarted is not lost: w2 killed with 50 acknowledged, unflushed rows
     * of kr (a name the proxy's hash would place on w1) and restarted by the supervisor takes kr
     * back (the proxy sends it to the pointer's last writer while that one runs, and w1 refuses
     * to adopt it), so no answer misses them. */
    char kr[16] = "";
    for (int i = 0; i < 100 && !kr[0]; i++) {
        char cand[16], hn[64];
        snprintf(cand, sizeof cand, "kr%d", i);
        snprintf(hn, sizeof hn, "default.%s", cand);
        if (sx__shard_str_hash(hn) % 2 == 0) /* writers in id order: w1 first */
            snprintf(kr, sizeof kr, "%s", cand);
    }
    ASSERT(kr[0]);
    at(w2);
    create_at("default", kr);
    ASSERT_EQ(insert_at("default", kr, 0, 100, node), 0);
    flush_at("default", kr);
    at(base);
    ASSERT_EQ(insert_at("default", kr, 100, 150, node), 0);
    ASSERT(strcmp(node, "w2") == 0);
    int p2b = pid_of("w2");
    ASSERT(p2b > 0);
    ASSERT_EQ(kill(p2b, SIGKILL), 0);
    double t0 = th_cl_mono();
    /* the restarted w2 registered (the supervisor restarts it at once; a writer that stays
     * away longer than its TTL is lost, and then w1 would adopt kr, by design) */
    wait_restarted("w2", p2b, w2);
    int refused = 0;
    n = count_when_answered("default", kr, node, &refused);
    ASSERT_EQ(n, 150);
    ASSERT(strcmp(node, "w2") == 0);
    fprintf(stderr, "w2 restarted: %s answered whole by %s %.2f s after the kill (%d refused)\n",
            kr, node, th_cl_mono() - t0, refused);
    for (int i = 0; i < 5; i++) {
        ASSERT_EQ(count_at("default", kr, 0, 1000000, node), 150);
        ASSERT(strcmp(node, "w2") == 0);
    }
    /* writes: refused while the dead process's lease holds the epoch, then w2's */
    long long wc = -1;
    while (wc != 0 && th_cl_mono() - t0 < 30) {
        wc = insert_at("default", kr, 1000, 1010, node);
        if (wc != 0)
            usleep(100000);
    }
    ASSERT_EQ(wc, 0);
    ASSERT(strcmp(node, "w2") == 0);
    fprintf(stderr, "w2 restarted: a write to %s acknowledged by %s %.2f s after the kill\n", kr,
            node, th_cl_mono() - t0);
    ASSERT_EQ(count_at("default", kr, 0, 1000000, node), 160);
    char pat[64];
    snprintf(pat, sizeof pat, "default.%s ", kr);
    ASSERT(!log_has("w1", "adopted ", pat));

    char why[1200];
    if (!th_cl_logs_clean(why, sizeof why))
        FAILF("sanitizer report in a node's log: %s", why);
    th_cl_down();
}

/* the manifest pointer of default.<coll> in the cluster's etcd (member 1 on base + 101), "" none */
static void pointer_of(const char *coll, char *out, size_t cap)
{
    char ep[64], suffix[128];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%u", base + 101);
    snprintf(suffix, sizeof suffix, "/manifest/default/%s", coll);
    out[0] = '\0';
    sx__etcd *e = NULL;
    ASSERT_OK(sx__etcd_new(ep, 0, &e));
    sx__etcd_kv *kvs = NULL;
    size_t n = 0;
    ASSERT_OK(sx__etcd_range(e, "/sextant/", &kvs, &n, NULL));
    for (size_t i = 0; i < n; i++) {
        size_t kl = strlen(kvs[i].key), sl = strlen(suffix);
        if (kl >= sl && strcmp(kvs[i].key + kl - sl, suffix) == 0)
            snprintf(out, cap, "%s", kvs[i].value);
    }
    sx__etcd_kvs_free(kvs, n);
    sx__etcd_free(e);
}

/* writers with --sync-ms: rows acknowledged and never flushed by the client reach the store on
 * the timer, so a writer machine lost a second later loses none of them; an idle collection is
 * not flushed again (its pointer stays) */
static void test_timed_sync(void)
{
    char out[8192], args[1200], node[64];
    base = th_cl_pick_base(37);
    ASSERT(base != 0);
    snprintf(th_cl_dir, sizeof th_cl_dir, "%s", test_tmpdir("cluster_sync")); /* a new cluster */
    snprintf(args, sizeof args,
             "cluster up --dir '%s' --port %u --etcd 1 --writers 2 --query-nodes 1 --lease-ttl 3 "
             "--sync-ms 300",
             th_cl_dir, base);
    int rc = th_cl_run(out, sizeof out, args);
    if (rc != 0)
        FAILF("cluster up: exit %d: %s", rc, out);
    at(base + 1);
    create_at("default", "ks");
    ASSERT_EQ(insert_at("default", "ks", 0, 200, node), 0);
    char p1[1200] = "", p2[1200] = "";
    double t0 = th_cl_mono();
    /* the timed flush commits (then the index build may commit once more): wait until still */
    while (th_cl_mono() - t0 < 20) {
        usleep(1000000);
        pointer_of("ks", p2, sizeof p2);
        if (p2[0] && strcmp(p1, p2) == 0)
            break;
        snprintf(p1, sizeof p1, "%s", p2);
    }
    ASSERT(p1[0] && strcmp(p1, p2) == 0);
    usleep(1000000); /* idle: nothing to flush, nothing committed */
    pointer_of("ks", p2, sizeof p2);
    ASSERT(strcmp(p1, p2) == 0);

    /* Bounded reads: the query node answers (every writer syncs on the timer, so its state's
     * age is known), with every row */
    ASSERT_EQ(count_until("Bounded", 200, "q1", node), 200);
    ASSERT(strcmp(node, "q1") == 0);
    /* the store stops answering: syncs stall, the query node's state ages past the 5 s bound,
     * and Bounded reads go to the writer, which has every acknowledged row */
    int s3 = pid_of("s3rver");
    ASSERT(s3 > 0); /* make deps installs s3rver; cluster up runs it */
    ASSERT_EQ(kill(s3, SIGSTOP), 0);
    ASSERT_EQ(insert_at("default", "ks", 200, 250, node), 0);
    usleep(6500000);
    ASSERT_EQ(count_lv("default", "ks", 0, 1000000, "Bounded", node), 250);
    ASSERT(strcmp(node, "w1") == 0);
    ASSERT_EQ(count_lv("default", "ks", 0, 1000000, "Eventually", node), 200);
    ASSERT(strcmp(node, "q1") == 0); /* Eventually: any age */
    ASSERT_EQ(kill(s3, SIGCONT), 0);
    t0 = th_cl_mono();
    ASSERT_EQ(count_until("Bounded", 250, "q1", node), 250);
    ASSERT(strcmp(node, "q1") == 0);
    fprintf(stderr, "store back: Bounded reads answered by q1 again after %.2f s\n",
            th_cl_mono() - t0);
    at(base + 1);
    ASSERT_EQ(insert_at("default", "ks", 250, 300, node), 0);
    /* the next timed flush commits them: the query node (committed state only) shows them */
    ASSERT_EQ(count_until("Eventually", 300, "q1", node), 300);

    int sup = lose_machine("w1");
    ASSERT_EQ(count_when_answered("default", "ks", node, NULL), 300);
    ASSERT(strcmp(node, "w2") == 0);
    ASSERT_EQ(kill(sup, SIGCONT), 0);
    char why[1200];
    if (!th_cl_logs_clean(why, sizeof why))
        FAILF("sanitizer report in a node's log: %s", why);
    th_cl_down();
}

int main(void)
{
    int rc = th_cl_init("cluster_adopt");
    if (rc != 0)
        return rc;
    RUN(test_adopt);
    th_cl_down();
    RUN(test_timed_sync);
    th_cl_down();
    return TEST_DONE();
}
