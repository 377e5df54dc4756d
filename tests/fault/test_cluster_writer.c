/*
 * test_cluster_writer.c: shard writers of cluster mode (docs/internals/CLUSTER.md) as real
 * processes (`sextant serve --etcd ... --node-id ... --storage file://...`) on a real 3-member
 * etcd (tests/harness/etcd.h), with a history of every write (invoke, then ok / fail / unknown,
 * with times; written to TMP/history.jsonl) and a checker. Lease TTL 2 s. Skipped (77) without
 * /usr/bin/etcd.
 *
 *  1. writer A creates "fc", acknowledges 200 rows, flushes (commit P1), acknowledges 100 more
 *     (in its WAL only).
 *  2. kill -STOP A past its lease: its epoch key disappears from etcd.
 *  3. writer B (its own, empty directory) opens "fc" from P1 (200 rows, the same search answer
 *     as A gave), takes the epoch, acknowledges 100 rows, flushes (commit P2).
 *  4. kill -CONT A and write to it at once: refused (never code 0); A exits with status 3
 *     (fenced); the pointer is still P2 and its objects intact.
 *  5. A restarted on its directory moves its stale copy aside (cluster/stale/), opens P2 from
 *     the store, and refuses writes to "fc" (held by B).
 *  6. kill -9 of B with 20 rows acknowledged and unshipped; B restarted on its directory
 *     replays its WAL and takes "fc" again once the dead process's lease expired: the 20 rows
 *     are there (same-node recovery loses nothing).
 *  7. kill -9 of the etcd leader while B is written to: writes go on once the two survivors
 *     elect a leader (a write that fails meanwhile is recorded as failed or unknown); the
 *     member rejoins.
 *  partition (test_partition): a writer whose only etcd endpoint is a proxy that stops answering
 *     stops acknowledging within 0.9 x TTL of its last keep-alive, before a second writer can
 *     take the collection (the last acknowledgement of the first precedes the first of the
 *     second, on this host's monotonic clock); healed, the first exits fenced (status 3).
 *  S3 faults (test_s3_faults, needs s3rver): a writer on S3 through the fault proxy (random
 *     errors, resets, lost responses; one flush against a store that answers 503 to everything,
 *     which must fail): flushes succeed or fail naming the store, writes are
 *     still acknowledged, the committed pointer always names a manifest the bucket has, and a
 *     second writer opens every acknowledged row from the bucket once the faults stop.
 *  8. the checker, on B's answer (ids by query) after a final flush and on a fresh directory
 *     opened from the committed pointer: every write acknowledged by a writer that still held
 *     its epoch when the collection was next committed is present; A's 100 acknowledged but
 *     unshipped rows are the only acknowledged rows missing (the recovery point of a writer
 *     lost to another node, stated in CLUSTER.md); no write refused or unknown from A after
 *     its fencing is present; nothing is present that no writer was asked to write.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sextant.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "cluster/etcd.h"
#include "etcd.h"
#include "faultproxy.h"
#include "harness.h"
#include "http.h"
#include "s3rver.h"
#include "storage/s3.h"
#include "util/alloc.h"

#define DIM  4
#define TTL  "2"
#define MAXI 8192

static const char *bin;
static char tmp[600], store[700], store_url[800];
static th_etcd ec;
static sx__etcd *E;
static FILE *hist;

typedef struct writer {
    const char *id;
    char dir[700], log[800];
    unsigned port;
    pid_t pid;
    char etcd[128];          /* "": the cluster's endpoints; else (through the fault proxy) this */
    char store[256], s3[64]; /* "": store_url; else this store (and S3 endpoint) */
    char netns[64];          /* "": the host's network; else it runs in this namespace */
    char host[32];           /* "": 127.0.0.1; else the address it listens on (and --bind) */
} writer;

/* the Authorization header of requests to the writer in use ("" none: loopback writers) */
static char cur_auth[64];

static writer wa = { .id = "wa", .pid = -1 }, wb = { .id = "wb", .pid = -1 };

/* what happened to each id: 0 never asked, 1 acknowledged, 2 failed, 3 unknown */
static unsigned char fate[MAXI];
static unsigned char lost_ok[MAXI]; /* acknowledged but allowed lost (recovery point) */

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double t_start;

static void use(writer *w)
{
    snprintf(th_base, sizeof th_base, "http://%s:%u", w->host[0] ? w->host : "127.0.0.1", w->port);
    /* a writer on another address than loopback needs credentials (--auth-token) */
    snprintf(cur_auth, sizeof cur_auth, "%s", w->host[0] ? "Bearer sx-netns-test" : "");
}

static const char *auth(void)
{
    return cur_auth[0] ? cur_auth : NULL;
}

static void spawn(writer *w)
{
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%u", w->port);
    pid_t pid = fork();
    if (pid < 0)
        FAILF("fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves no writer behind */
        if (w->netns[0]) {
            char nsp[128];
            snprintf(nsp, sizeof nsp, "/var/run/netns/%s", w->netns);
            int nfd = open(nsp, O_RDONLY | O_CLOEXEC);
            if (nfd < 0 || setns(nfd, CLONE_NEWNET) != 0)
                _exit(126);
            close(nfd);
        }
        int fd = open(w->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        const char *av[32] = { bin,
                               "serve",
                               "--data",
                               w->dir,
                               "--port",
                               portstr,
                               "--quiet",
                               "--storage",
                               w->store[0] ? w->store : store_url,
                               "--etcd",
                               w->etcd[0] ? w->etcd : ec.endpoints,
                               "--node-id",
                               w->id,
                               "--lease-ttl",
                               TTL,
                               "--build-threads",
                               "1" };
        int ac = 17;
        if (w->host[0]) {
            av[ac++] = "--bind";
            av[ac++] = w->host;
            av[ac++] = "--auth-token";
            av[ac++] = "sx-netns-test";
        }
        if (w->s3[0]) {
            av[ac++] = "--s3-endpoint";
            av[ac++] = w->s3;
        }
        av[ac] = NULL;
        execv(bin, (char *const *)av);
        _exit(127);
    }
    w->pid = pid;
    use(w);
    double t0 = mono();
    while (mono() - t0 < 60) {
        th_resp *r = th_request("GET", "/readyz", NULL, 0, NULL);
        if (r->status == 200)
            return;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            w->pid = -1;
            FAILF("writer %s exited during start (status 0x%x); log %s", w->id, st, w->log);
        }
        usleep(20000);
    }
    FAILF("writer %s not ready after 60 s; log %s", w->id, w->log);
}

/* waits up to secs for the writer to exit; returns its wait status or -1 */
static int wait_exit(writer *w, double secs)
{
    double t0 = mono();
    int st = 0;
    while (mono() - t0 < secs) {
        if (waitpid(w->pid, &st, WNOHANG) == w->pid) {
            w->pid = -1;
            return st;
        }
        usleep(20000);
    }
    return -1;
}

static void kill_writer(writer *w, int sig)
{
    if (w->pid > 0) {
        kill(w->pid, sig);
        if (sig == SIGKILL || sig == SIGTERM) {
            waitpid(w->pid, NULL, 0);
            w->pid = -1;
        }
    }
}

static const char *coll = "fc"; /* the collection insert(), flush() and ids_of() use */

static char *insert_body(int first, int n)
{
    size_t cap = 128 + (size_t)n * 96;
    char *b = malloc(cap);
    if (!b)
        FAILF("oom");
    size_t k = (size_t)snprintf(b, cap, "{\"collectionName\":\"%s\",\"data\":[", coll);
    for (int i = 0; i < n; i++) {
        int id = first + i;
        k += (size_t)snprintf(b + k, cap - k, "%s{\"id\":%d,\"vector\":[%d,%d,%d,1]}", i ? "," : "",
                              id, id % 97, id % 13, id % 7);
    }
    snprintf(b + k, cap - k, "]}");
    return b;
}

/* One insert of ids [first, first + n) through w, recorded. Returns 1 ok, 2 fail, 3 unknown. */
static int insert(writer *w, int first, int n)
{
    use(w);
    char *body = insert_body(first, n);
    double t0 = mono() - t_start;
    th_post("/v2/vectordb/entities/insert", body, auth());
    free(body);
    int res;
    const char *what;
    if (th_last.status == 0) {
        res = 3; /* no answer: it may or may not have been applied */
        what = "unknown";
    } else if (th_code() == 0) {
        res = 1;
        what = "ok";
    } else {
        /* an answer with an error: SX_EFENCED after the WAL sync is still "unknown" */
        res = th_last.text && strstr(th_last.text, "outcome unknown") ? 3 : 2;
        what = res == 3 ? "unknown" : "fail";
    }
    for (int i = 0; i < n; i++)
        if (first + i < MAXI)
            fate[first + i] = (unsigned char)res;
    char msg[160];
    snprintf(msg, sizeof msg, "%s", th_last.text ? th_last.text : "");
    for (char *p = msg; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            *p = '\'';
    fprintf(hist,
            "{\"op\":\"insert\",\"node\":\"%s\",\"ids\":[%d,%d],\"invoke\":%.3f,\"result\":\"%s\","
            "\"t\":%.3f,\"answer\":\"%s\"}\n",
            w->id, first, first + n - 1, t0, what, mono() - t_start, msg);
    fflush(hist);
    return res;
}

static void flush(writer *w)
{
    use(w);
    char body[128];
    snprintf(body, sizeof body, "{\"collectionName\":\"%s\"}", coll);
    th_post("/v2/vectordb/collections/flush", body, auth());
    if (th_code() != 0)
        FAILF("flush through %s: %s", w->id, th_last.text ? th_last.text : "(no answer)");
    fprintf(hist, "{\"op\":\"flush\",\"node\":\"%s\",\"t\":%.3f}\n", w->id, mono() - t_start);
}

/* the ids "fc" holds, through w */
static int ids_of(writer *w, unsigned char *present)
{
    use(w);
    memset(present, 0, MAXI);
    char body[256];
    snprintf(body, sizeof body,
             "{\"collectionName\":\"%s\",\"filter\":\"id >= 0\",\"outputFields\":[\"id\"],"
             "\"limit\":16384}",
             coll);
    th_post("/v2/vectordb/entities/query", body, auth());
    if (th_code() != 0)
        FAILF("query through %s: %s", w->id, th_last.text ? th_last.text : "(no answer)");
    json_t *d = json_object_get(th_last.json, "data");
    int n = 0;
    for (size_t i = 0; i < json_array_size(d); i++) {
        json_int_t id = json_integer_value(json_object_get(json_array_get(d, i), "id"));
        if (id < 0 || id >= MAXI)
            FAILF("id %lld is no id any writer was asked to write", (long long)id);
        present[id] = 1;
        n++;
    }
    return n;
}

static void top5(writer *w, char *out, size_t cap)
{
    use(w);
    th_post(
        "/v2/vectordb/entities/search",
        "{\"collectionName\":\"fc\",\"data\":[[5,5,5,1]],\"limit\":5,\"outputFields\":[\"id\"]}",
        NULL);
    if (th_code() != 0)
        FAILF("search through %s: %s", w->id, th_last.text ? th_last.text : "(no answer)");
    json_t *d = json_object_get(th_last.json, "data");
    size_t off = 0;
    out[0] = '\0';
    for (size_t i = 0; i < json_array_size(d); i++) {
        json_t *h = json_array_get(d, i);
        off += (size_t)snprintf(out + off, cap - off, "%lld ",
                                (long long)json_integer_value(json_object_get(h, "id")));
    }
}

static bool etcd_has(const char *suffix, char *val, size_t cap)
{
    sx__etcd_kv *kvs;
    size_t n;
    if (sx__etcd_range(E, "/sextant/", &kvs, &n, NULL) != SX_OK)
        FAILF("etcd range: %s", sx_errmsg());
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        size_t kl = strlen(kvs[i].key), sl = strlen(suffix);
        if (kl >= sl && strcmp(kvs[i].key + kl - sl, suffix) == 0) {
            found = true;
            if (val) /* a pointer's manifest key: the part before "#<writer>" */
                snprintf(val, cap, "%.*s", (int)strcspn(kvs[i].value, "#"), kvs[i].value);
        }
    }
    sx__etcd_kvs_free(kvs, n);
    return found;
}

/* "fc/e12/MANIFEST.3.4" -> "fc/e12" (the epoch that committed it) */
static void epoch_dir(const char *ptr, char *out, size_t cap)
{
    const char *m = strstr(ptr, "/MANIFEST");
    snprintf(out, cap, "%.*s", m ? (int)(m - ptr) : (int)strlen(ptr), ptr);
}

static bool file_exists(const char *p)
{
    return access(p, F_OK) == 0;
}

static void test_writers(void)
{
    t_start = mono();
    char path[1200], p1[512], p2[512], cur[512], want[256], got[256];
    int acked_a_unshipped = 0;

    /* 1. writer A */
    spawn(&wa);
    use(&wa);
    th_post("/v2/vectordb/collections/create",
            "{\"collectionName\":\"fc\",\"dimension\":4,\"metricType\":\"L2\"}", NULL);
    ASSERT_EQ(th_code(), 0);
    for (int b = 0; b < 10; b++)
        ASSERT_EQ(insert(&wa, b * 20, 20), 1);
    flush(&wa);
    ASSERT(etcd_has("/manifest/default/fc", p1, sizeof p1));
    ASSERT(strstr(p1, "/MANIFEST.") != NULL);
    snprintf(path, sizeof path, "%s/%s", store, p1);
    ASSERT(file_exists(path));
    top5(&wa, want, sizeof want);
    for (int b = 0; b < 5; b++) {
        ASSERT_EQ(insert(&wa, 200 + b * 20, 20), 1);
        for (int i = 0; i < 20; i++)
            lost_ok[200 + b * 20 + i] = 1; /* acknowledged, in A's WAL only */
        acked_a_unshipped += 20;
    }

    /* 2. A paused past its lease */
    kill_writer(&wa, SIGSTOP);
    double t0 = mono();
    while (etcd_has("/epoch/default/fc", NULL, 0) && mono() - t0 < 15)
        usleep(100000);
    ASSERT(!etcd_has("/epoch/default/fc", NULL, 0));
    ASSERT(!etcd_has("/node/wa", NULL, 0));

    /* 3. writer B takes over from the committed manifest */
    spawn(&wb);
    unsigned char present[MAXI];
    ASSERT_EQ(ids_of(&wb, present), 200);
    top5(&wb, got, sizeof got);
    ASSERT(strcmp(want, got) == 0);
    for (int b = 0; b < 5; b++)
        ASSERT_EQ(insert(&wb, 1000 + b * 20, 20), 1);
    flush(&wb);
    ASSERT(etcd_has("/manifest/default/fc", p2, sizeof p2));
    ASSERT(strcmp(p1, p2) != 0);
    char epoch_b[64];
    ASSERT(etcd_has("/epoch/default/fc", epoch_b, sizeof epoch_b));
    ASSERT(strcmp(epoch_b, "wb") == 0);

    /* 4. A wakes: its writes are refused, it exits fenced */
    kill_writer(&wa, SIGCONT);
    int r = insert(&wa, 2000, 20);
    ASSERT(r != 1);
    int st = wait_exit(&wa, 15);
    ASSERT(st != -1);
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    /* the pointer is B's (B's index build may have committed again since P2) */
    ASSERT(etcd_has("/manifest/default/fc", cur, sizeof cur));
    char e_cur[512], e_p2[512];
    epoch_dir(cur, e_cur, sizeof e_cur);
    epoch_dir(p2, e_p2, sizeof e_p2);
    ASSERT(strcmp(e_cur, e_p2) == 0);
    snprintf(path, sizeof path, "%s/%s", store, cur);
    ASSERT(file_exists(path));

    /* 5. A restarted: stale copy moved aside, P2 opened from the store, writes refused */
    spawn(&wa);
    snprintf(path, sizeof path, "%s/cluster/stale", wa.dir);
    ASSERT(file_exists(path));
    ASSERT_EQ(ids_of(&wa, present), 300);
    use(&wa);
    char *body = insert_body(2100, 5);
    th_post("/v2/vectordb/entities/insert", body, NULL);
    free(body);
    if (th_code() == 0 || !th_last.text || !strstr(th_last.text, "held by writer wb"))
        FAILF("a write to the stale writer: %s", th_last.text ? th_last.text : "(no answer)");
    kill_writer(&wa, SIGTERM);

    /* 6. kill -9 of B with acknowledged, unshipped rows; restart on its directory */
    ASSERT_EQ(insert(&wb, 1100, 20), 1);
    kill_writer(&wb, SIGKILL);
    spawn(&wb);
    int ok = 0;
    t0 = mono();
    while (ok == 0 && mono() - t0 < 15) {
        if (insert(&wb, 1200 + ok * 0, 10) == 1)
            ok = 1;
        else
            usleep(200000); /* the dead process's lease still holds the epoch */
    }
    ASSERT_EQ(ok, 1);

    /* 7. the etcd leader dies while B is written to */
    int leader = -1;
    for (int i = 0; i < ec.n && leader < 0; i++) {
        uint64_t me, l;
        if (sx__etcd_member_status(E, (size_t)i, &me, &l) == SX_OK && me == l)
            leader = i;
    }
    ASSERT(leader >= 0);
    th_etcd_kill(&ec, leader, SIGKILL);
    int n_ok = 0;
    for (int b = 0; b < 10; b++) {
        if (insert(&wb, 1300 + b * 10, 10) == 1)
            n_ok++;
        usleep(100000);
    }
    ASSERT(n_ok >= 5); /* most go through: an election takes about a second */
    flush(&wb);        /* the commit goes through the new leader */
    ASSERT_EQ(th_etcd_restart(&ec, leader), 0);
    ASSERT(etcd_has("/manifest/default/fc", cur, sizeof cur));
    ASSERT(strcmp(cur, p2) != 0);

    /* 8. check */
    int n = ids_of(&wb, present);
    int missing_allowed = 0, acked = 0;
    for (int id = 0; id < MAXI; id++) {
        if (fate[id] == 0 && present[id])
            FAILF("id %d is present but no writer was asked to write it", id);
        if (fate[id] == 1 && !present[id]) {
            if (!lost_ok[id])
                FAILF("id %d was acknowledged and is missing", id);
            missing_allowed++;
        }
        if (fate[id] == 1 && lost_ok[id] && present[id])
            FAILF("id %d of the fenced writer's unshipped tail is present", id);
        if (id >= 2000 && id < 2100 && present[id])
            FAILF("id %d was written to the fenced writer and is present", id);
        acked += fate[id] == 1;
    }
    ASSERT_EQ(missing_allowed, acked_a_unshipped);
    /* a fresh directory opened from the committed pointer has the same rows */
    writer wc = { .id = "wc", .pid = -1 };
    snprintf(wc.dir, sizeof wc.dir, "%s/wc", tmp);
    snprintf(wc.log, sizeof wc.log, "%s/wc.log", tmp);
    wc.port = (unsigned)th_free_port();
    spawn(&wc);
    unsigned char present2[MAXI];
    ASSERT_EQ(ids_of(&wc, present2), n);
    ASSERT(memcmp(present, present2, MAXI) == 0);
    kill_writer(&wc, SIGTERM);
    kill_writer(&wb, SIGTERM);
    fprintf(stderr,
            "cluster writers: %d rows present, %d acknowledged, %d acknowledged by the fenced "
            "writer and not shipped (the documented recovery point); history %s/history.jsonl\n",
            n, acked, missing_allowed, tmp);
}

/* A writer cut off from etcd (its only endpoint is a proxy that stops answering: requests are
 * read and never answered) past its lease: it stops acknowledging before another writer can take
 * over, the other writer takes the collection from the committed manifest, and once the cut
 * heals the first learns its lease is gone and exits fenced. Times are CLOCK_MONOTONIC of this
 * host, so "the last write A acknowledged" and "the first write B acknowledged" compare. */
/* What test_partition and test_partition_netns share, once pa and pb are set up: A creates
 * collection `coll` and commits 100 rows; set_link(ctx, false) cuts A from etcd while A keeps
 * being written to (it must stop acknowledging by itself, within 0.9 x TTL of its last
 * keep-alive); once A's epoch key expired, B takes the collection over (A's last
 * acknowledgement precedes B's first); set_link(ctx, true) heals, and A exits fenced (3). B then
 * has every acknowledged row except A's after its last commit (the recovery point), and nothing
 * nobody wrote. what: the cut, for the measurement line. */
static void partition_case(
    writer *pa, writer *pb, bool (*set_link)(void *ctx, bool up), void *ctx, const char *what)
{
    memset(fate, 0, sizeof fate);
    memset(lost_ok, 0, sizeof lost_ok);
    spawn(pa);
    char body[160], key[160];
    snprintf(body, sizeof body, "{\"collectionName\":\"%s\",\"dimension\":4,\"metricType\":\"L2\"}",
             coll);
    th_post("/v2/vectordb/collections/create", body, auth());
    ASSERT_EQ(th_code(), 0);
    for (int b = 0; b < 5; b++)
        ASSERT_EQ(insert(pa, b * 20, 20), 1);
    flush(pa);

    ASSERT(set_link(ctx, false));
    double cut = mono(), last_a_ok = 0;
    int id = 100, refused = 0;
    while (mono() - cut < 12 && refused < 5) {
        int r = insert(pa, id, 1);
        if (r == 1) {
            last_a_ok = mono();
            lost_ok[id] = 1; /* acknowledged after the last commit: lost to a takeover */
        } else {
            refused++;
        }
        id++;
        usleep(50000);
    }
    ASSERT(refused >= 5);
    ASSERT(last_a_ok - cut < 2.0); /* within 0.9 x TTL of its last keep-alive */
    snprintf(key, sizeof key, "/epoch/default/%s", coll);
    double t0 = mono();
    while (etcd_has(key, NULL, 0) && mono() - t0 < 15)
        usleep(100000);
    ASSERT(!etcd_has(key, NULL, 0));

    /* B takes over */
    spawn(pb);
    double first_b_ok = 0;
    t0 = mono();
    while (!first_b_ok && mono() - t0 < 15) {
        if (insert(pb, 1000, 10) == 1)
            first_b_ok = mono();
        else
            usleep(100000);
    }
    ASSERT(first_b_ok > 0);
    ASSERT(last_a_ok < first_b_ok); /* never two writers acknowledging at once */
    flush(pb);

    /* heal: A learns its lease is gone and exits fenced */
    ASSERT(set_link(ctx, true));
    int st = wait_exit(pa, 30);
    ASSERT(st != -1);
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 3);

    unsigned char present[MAXI];
    int n = ids_of(pb, present);
    int lost = 0;
    for (int i = 0; i < MAXI; i++) {
        if (fate[i] == 1 && !present[i]) {
            if (!lost_ok[i])
                FAILF("id %d was acknowledged and is missing", i);
            lost++;
        }
        if (fate[i] == 0 && present[i])
            FAILF("id %d is present but was never written", i);
    }
    ASSERT_EQ(n, 110);
    fprintf(stderr,
            "%s: writer A acknowledged its last write %.2f s after the cut, B its first %.2f s "
            "after it; %d rows acknowledged by A after its last commit are lost (the recovery "
            "point)\n",
            what, last_a_ok - cut, first_b_ok - cut, lost);
    kill_writer(pb, SIGTERM);
}

/* the cut of test_partition: A's only etcd endpoint, a relay, stops answering */
static bool stall_link(void *ctx, bool up)
{
    faultproxy *fp = ctx;
    if (up)
        fp_clear(fp);
    else
        fp_set_persistent(fp, FP_STALL);
    return true;
}

static void test_partition(void)
{
    static faultproxy fp; /* static: a failed test's relay threads touch no later test's */
    ASSERT_EQ(fp_start(&fp, ec.cport[0]), 0);
    fp.stall_ms = 1500;
    writer pa = { .id = "pa", .pid = -1 }, pb = { .id = "pb", .pid = -1 };
    snprintf(pa.etcd, sizeof pa.etcd, "http://127.0.0.1:%d", fp.port);
    snprintf(pa.dir, sizeof pa.dir, "%s/pa", tmp);
    snprintf(pa.log, sizeof pa.log, "%s/pa.log", tmp);
    snprintf(pb.dir, sizeof pb.dir, "%s/pb", tmp);
    snprintf(pb.log, sizeof pb.log, "%s/pb.log", tmp);
    pa.port = (unsigned)th_free_port();
    pb.port = (unsigned)th_free_port();
    coll = "pc";
    partition_case(&pa, &pb, stall_link, &fp, "partition");
    fp_stop(&fp);
}

/* A writer on S3 (s3rver) through the fault proxy: random 500 / 503 / SlowDown / resets / lost
 * responses on half the requests while rows are written and flushed. Every flush succeeds or
 * fails with the store named, and the writer still acknowledges (the rows are in its WAL);
 * after every flush the committed pointer names a manifest object the bucket has. Once the
 * faults stop a flush succeeds, and a second writer (after the first stopped and gave its lease
 * back) opens the collection from the bucket alone with every acknowledged row. Skipped
 * without node / s3rver. */
static void test_s3_faults(void)
{
    th_s3rver srv;
    char sdir[700];
    snprintf(sdir, sizeof sdir, "%s/s3", tmp);
    int rc = th_s3rver_start(sdir, &srv);
    if (rc == 77)
        SKIPF("no s3rver (node and tests/e2e/node/node_modules)");
    ASSERT_EQ(rc, 0);
    static faultproxy fp; /* static: a failed test's relay threads touch no later test's */
    ASSERT_EQ(fp_start(&fp, srv.port), 0);
    setenv("AWS_ACCESS_KEY_ID", TH_S3RVER_ACCESS, 1);
    setenv("AWS_SECRET_ACCESS_KEY", TH_S3RVER_SECRET, 1);
    setenv("SEXTANT_S3_TIMEOUT_MS", "2000", 1);
    setenv("SEXTANT_S3_RETRIES", "2", 1); /* few retries: some flushes must fail */
    sx__s3_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.endpoint = srv.endpoint;
    cfg.bucket = "clb";
    sx__s3 *S = NULL;
    ASSERT_OK(sx__s3_new(&cfg, &S));
    ASSERT_OK(sx__s3_create_bucket(S));
    writer sa = { .id = "sa", .pid = -1 }, sb = { .id = "sb", .pid = -1 };
    snprintf(sa.store, sizeof sa.store, "s3://clb/c2");
    snprintf(sa.s3, sizeof sa.s3, "http://127.0.0.1:%d", fp.port);
    snprintf(sa.dir, sizeof sa.dir, "%s/sa", tmp);
    snprintf(sa.log, sizeof sa.log, "%s/sa.log", tmp);
    sa.port = (unsigned)th_free_port();
    sb = sa;
    sb.id = "sb";
    snprintf(sb.s3, sizeof sb.s3, "%s", srv.endpoint);
    snprintf(sb.dir, sizeof sb.dir, "%s/sb", tmp);
    snprintf(sb.log, sizeof sb.log, "%s/sb.log", tmp);
    sb.port = (unsigned)th_free_port();
    sb.pid = -1;
    coll = "sc";
    memset(fate, 0, sizeof fate);
    memset(lost_ok, 0, sizeof lost_ok);
    /* another store: another cluster UUID would be refused, so this one is etcd's */
    spawn(&sa);
    th_post("/v2/vectordb/collections/create",
            "{\"collectionName\":\"sc\",\"dimension\":4,\"metricType\":\"L2\"}", NULL);
    ASSERT_EQ(th_code(), 0);
    ASSERT_EQ(insert(&sa, 0, 50), 1);
    flush(&sa);
    fp_set_random(&fp, 0.5,
                  (1u << FP_500) | (1u << FP_503) | (1u << FP_SLOWDOWN) | (1u << FP_RESET) |
                      (1u << FP_LOST),
                  20261206);
    int failed = 0, ok = 0;
    for (int round = 0; round < 8; round++) {
        ASSERT_EQ(insert(&sa, 100 + round * 25, 25), 1); /* acknowledged: local WAL */
        if (round == 4) /* one flush against a store that answers 503 to everything */
            fp_set_persistent(&fp, FP_503);
        use(&sa);
        th_post("/v2/vectordb/collections/flush", "{\"collectionName\":\"sc\"}", NULL);
        if (round == 4) {
            if (th_code() == 0)
                FAILF("a flush succeeded while the store answered 503 to everything");
            fp_set_persistent(&fp, FP_PASS);
        }
        if (th_code() == 0) {
            ok++;
        } else {
            failed++;
            if (!th_last.text || !strstr(th_last.text, "object store"))
                FAILF("a failed flush should name the store: %s", th_last.text);
        }
        char ptr[512];
        ASSERT(etcd_has("/manifest/default/sc", ptr, sizeof ptr));
        char key[600];
        snprintf(key, sizeof key, "c2/%s", ptr);
        uint64_t size = 0;
        if (sx__s3_head(S, key, &size) != SX_OK)
            FAILF("the committed pointer names %s, which the bucket lacks", key);
    }
    fp_clear(&fp);
    flush(&sa);
    kill_writer(&sa, SIGTERM); /* gives its lease back */
    spawn(&sb);
    unsigned char present[MAXI];
    ASSERT_EQ(ids_of(&sb, present), 250);
    for (int i = 0; i < MAXI; i++)
        if ((fate[i] == 1) != (present[i] == 1))
            FAILF("id %d: acknowledged %d, present %d", i, fate[i] == 1, present[i]);
    fprintf(stderr, "s3 faults: %d flushes failed and %d succeeded under faults, %ld faults\n",
            failed, ok, fp_faults_total(&fp));
    kill_writer(&sb, SIGTERM);
    sx__s3_free(S);
    fp_stop(&fp);
    th_s3rver_stop(&srv);
    unsetenv("SEXTANT_S3_TIMEOUT_MS");
    unsetenv("SEXTANT_S3_RETRIES");
}

/* A slow link between a writer and etcd (a relay that delays every request): below the lease's
 * margin the writer works on (no false fencing: every write acknowledged, the flush's commit goes
 * through, the epoch key unchanged); past the TTL it stops acknowledging by itself within
 * 0.9 x TTL of its last keep-alive, and once the link is fast again it exits fenced (3): etcd's
 * answer says the lease is gone; restarted on its directory with the link fast again, every row it
 * acknowledged is there (its WAL, no other writer having committed). */
static void test_delays(void)
{
    static faultproxy fp; /* static: a failed test's relay threads touch no later test's */
    ASSERT_EQ(fp_start(&fp, ec.cport[0]), 0);
    fp.delay_ms = 150;
    writer pd = { .id = "da", .pid = -1 };
    snprintf(pd.etcd, sizeof pd.etcd, "http://127.0.0.1:%d", fp.port);
    snprintf(pd.dir, sizeof pd.dir, "%s/da", tmp);
    snprintf(pd.log, sizeof pd.log, "%s/da.log", tmp);
    pd.port = (unsigned)th_free_port();
    coll = "dc";
    memset(fate, 0, sizeof fate);
    memset(lost_ok, 0, sizeof lost_ok);
    spawn(&pd);
    use(&pd);
    th_post("/v2/vectordb/collections/create",
            "{\"collectionName\":\"dc\",\"dimension\":4,\"metricType\":\"L2\"}", NULL);
    ASSERT_EQ(th_code(), 0);
    char ep0[128] = "", ep1[128] = "";
    double t0 = mono();
    for (int b = 0; b < 20; b++) {
        ASSERT_EQ(insert(&pd, b * 10, 10), 1); /* 150 ms per etcd request: still acknowledged */
        if (b == 0)
            ASSERT(etcd_has("/epoch/default/dc", ep0, sizeof ep0));
        usleep(100000);
    }
    flush(&pd);
    double slow_s = mono() - t0;
    ASSERT(etcd_has("/epoch/default/dc", ep1, sizeof ep1));
    ASSERT(strcmp(ep0, "da") == 0 && strcmp(ep1, "da") == 0); /* held throughout */

    /* past the TTL: every etcd request takes 3 s */
    fp_lock(&fp);
    fp.delay_ms = 3000;
    fp_unlock(&fp);
    double cut = mono(), last_ok = 0;
    int id = 200, refused = 0;
    while (mono() - cut < 12 && refused < 5) {
        int r = insert(&pd, id, 1);
        if (r == 1)
            last_ok = mono();
        else
            refused++;
        id++;
        usleep(50000);
    }
    ASSERT(refused >= 5);
    ASSERT(last_ok == 0 || last_ok - cut < 2.0);
    /* its etcd requests time out before the 3 s: it keeps refusing; the link fast again, the
     * next keep-alive's answer says the lease is gone, and it exits fenced */
    fp_lock(&fp);
    fp.delay_ms = 0;
    fp_unlock(&fp);
    int st = wait_exit(&pd, 30);
    if (st == -1)
        kill_writer(&pd, SIGKILL);
    ASSERT(st != -1);
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 3);

    /* restarted on its directory: every acknowledged row */
    spawn(&pd);
    unsigned char present[MAXI];
    int n = ids_of(&pd, present); /* reads need no epoch: served from its replayed copy */
    for (int i = 0; i < MAXI; i++) {
        if (fate[i] == 1 && !present[i])
            FAILF("id %d was acknowledged and is missing after the restart", i);
        if (fate[i] == 0 && present[i])
            FAILF("id %d is present but was never written", i);
    }
    fprintf(stderr,
            "delays: 20 inserts and a flush through a link adding 150 ms per etcd request took "
            "%.2f s, all acknowledged; at 3 s per request the last acknowledgement came %.2f s "
            "after the change (0: none), then the writer exited fenced; %d rows present after "
            "its restart\n",
            slow_s, last_ok > 0 ? last_ok - cut : 0.0, n);
    kill_writer(&pd, SIGTERM);
    fp_stop(&fp);
}

/* ---------------------------------------------------------------- partition in a namespace */

/* The network of test_partition_netns: namespace ns holding writer A, two veth pairs to the
 * host: pair 1 carries A's etcd traffic (host 10.231.K.1, A 10.231.K.2), pair 2 the client's
 * requests (host 10.232.K.1, A 10.232.K.2). Setting pair 1's host end down cuts A from etcd in
 * the kernel (packets are dropped, connections hang: no reset, no refusal) while the test keeps
 * talking to A over pair 2. */
static char ns[32], v1[16], v2[16];
static int nk;

static int shf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int shf(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char full[600];
    snprintf(full, sizeof full, "%s >/dev/null 2>&1", cmd);
    int st = system(full);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void netns_down(void)
{
    if (!ns[0])
        return;
    (void)shf("ip netns del %s", ns); /* deletes the namespace's veth ends, so the pairs */
    (void)shf("ip link del %sa", v1);
    (void)shf("ip link del %sa", v2);
    ns[0] = '\0';
}

static bool netns_up(void)
{
    nk = (int)(getpid() % 250) + 1;
    snprintf(ns, sizeof ns, "sxcw%d", (int)getpid());
    snprintf(v1, sizeof v1, "sxe%d", (int)getpid() % 1000000);
    snprintf(v2, sizeof v2, "sxf%d", (int)getpid() % 1000000);
    if (shf("ip netns add %s", ns) != 0) {
        ns[0] = '\0';
        return false;
    }
    const char *pv[2] = { v1, v2 };
    for (int i = 0; i < 2; i++) {
        int net = 231 + i;
        if (shf("ip link add %sa type veth peer name %sb", pv[i], pv[i]) != 0 ||
            shf("ip link set %sb netns %s", pv[i], ns) != 0 ||
            shf("ip addr add 10.%d.%d.1/30 dev %sa", net, nk, pv[i]) != 0 ||
            shf("ip link set %sa up", pv[i]) != 0 ||
            shf("ip netns exec %s ip addr add 10.%d.%d.2/30 dev %sb", ns, net, nk, pv[i]) != 0 ||
            shf("ip netns exec %s ip link set %sb up", ns, pv[i]) != 0) {
            netns_down();
            return false;
        }
    }
    if (shf("ip netns exec %s ip link set lo up", ns) != 0) {
        netns_down();
        return false;
    }
    return true;
}

/* test_partition with a real cut: writer A in its own network namespace reaches etcd through
 * the relay on pair 1 (a TCP forwarder on the host's end of the pair to the first member); the
 * cut sets that pair's host end down. A must stop acknowledging within 0.9 x TTL of its last
 * keep-alive, B (on the host) takes the collection only after the lease expired, no two writers
 * acknowledge at once, and A, healed, exits fenced (3). */
/* the cut of test_partition_netns: pair 1's host end down (up again to heal) */
static bool veth_link(void *ctx, bool up)
{
    (void)ctx;
    return shf("ip link set %sa %s", v1, up ? "up" : "down") == 0;
}

static void test_partition_netns(void)
{
    if (geteuid() != 0)
        SKIPF("needs root (network namespaces)");
    if (!netns_up())
        SKIPF("`ip netns add` / veth pairs are not available here");
    static faultproxy fp; /* static: a failed test's relay threads touch no later test's */
    char ip1[32];
    snprintf(ip1, sizeof ip1, "10.231.%d.1", nk);
    if (fp_start_on(&fp, ip1, ec.cport[0]) != 0) {
        netns_down();
        FAILF("relay on %s", ip1);
    }
    writer pa = { .id = "na", .pid = -1 }, pb = { .id = "nb", .pid = -1 };
    snprintf(pa.etcd, sizeof pa.etcd, "http://%s:%d", ip1, fp.port);
    snprintf(pa.netns, sizeof pa.netns, "%s", ns);
    snprintf(pa.host, sizeof pa.host, "10.232.%d.2", nk);
    snprintf(pa.dir, sizeof pa.dir, "%s/na", tmp);
    snprintf(pa.log, sizeof pa.log, "%s/na.log", tmp);
    snprintf(pb.dir, sizeof pb.dir, "%s/nb", tmp);
    snprintf(pb.log, sizeof pb.log, "%s/nb.log", tmp);
    pa.port = (unsigned)th_free_port();
    pb.port = (unsigned)th_free_port();
    coll = "nc";
    partition_case(&pa, &pb, veth_link, NULL, "netns partition");
    fp_stop(&fp);
    netns_down();
}

int main(int argc, char **argv)
{
    bin = getenv("SX_SEXTANT_BIN");
    if (!bin || access(bin, X_OK) != 0) {
        fprintf(stderr, "SKIP: SX_SEXTANT_BIN not set (run through ctest)\n");
        return 77;
    }
    snprintf(tmp, sizeof tmp, "%s", test_tmpdir("cluster_writer"));
    char edir[700];
    snprintf(edir, sizeof edir, "%s/etcd", tmp);
    int rc = th_etcd_start(edir, 3, &ec);
    if (rc != 0)
        return rc;
    if (sx__etcd_new(ec.endpoints, 0, &E) != SX_OK) {
        th_etcd_stop(&ec);
        return 1;
    }
    snprintf(store, sizeof store, "%s/store", tmp);
    mkdir(store, 0755);
    snprintf(store_url, sizeof store_url, "file://%s", store);
    snprintf(wa.dir, sizeof wa.dir, "%s/wa", tmp);
    snprintf(wa.log, sizeof wa.log, "%s/wa.log", tmp);
    snprintf(wb.dir, sizeof wb.dir, "%s/wb", tmp);
    snprintf(wb.log, sizeof wb.log, "%s/wb.log", tmp);
    wa.port = (unsigned)th_free_port();
    wb.port = (unsigned)th_free_port();
    char hp[800];
    snprintf(hp, sizeof hp, "%s/history.jsonl", tmp);
    hist = fopen(hp, "w");
    if (!hist)
        return 1;
    if (argc > 1 && strcmp(argv[1], "netns") == 0) { /* ctest test_cluster_netns */
        RUN(test_partition_netns);
        netns_down();
    } else {
        RUN(test_writers);
        RUN(test_partition);
        RUN(test_delays);
        RUN(test_s3_faults);
    }
    if (wa.pid > 0) {
        kill(wa.pid, SIGCONT);
        kill_writer(&wa, SIGKILL);
    }
    kill_writer(&wb, SIGKILL);
    fclose(hist);
    sx__etcd_free(E);
    th_etcd_stop(&ec);
    return TEST_DONE();
}
