/*
 * test_server_proc.c: the REST server as a process (`sextant serve`, $SX_SEXTANT_BIN) under
 * signals, on a free loopback port in $SX_TMPDIR.
 *
 *   test_sigterm_flushes  create a collection, insert rows (never flushed), SIGTERM: exit
 *                         status 0; restart: every row is there (count(*) and get).
 *   test_kill9_stream     rounds (SX_KILL_ROUNDS, default 50; reliability.md T1) of: a client
 *                         inserts batches of 50 rows with known ids, upserts earlier batches with
 *                         a new version (a dynamic field "ver"), deletes earlier batches by
 *                         filter, and records every acknowledged operation; a forked killer
 *                         sends SIGKILL to the server after a random delay; restart; every
 *                         acknowledged insert is present with at least its acknowledged upsert
 *                         version, every acknowledged delete stayed deleted, and every batch
 *                         (acknowledged or in flight) is present entirely or not at all, with one
 *                         version. Prints the recovery time (spawn to /readyz 200) of each round.
 *   test_sigterm_stalled_upload  an upload that stalls after its headers, then SIGTERM: /readyz
 *                         on a new connection answers 503 at once, and the server exits within
 *                         the shutdown grace (default 5 s) + 3 s (issue 13: it hung /readyz and
 *                         took 61 s, the idle timeout).
 *
 * The server runs with the default sync mode (full): an acknowledged insert is durable.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "http.h"

#define BATCH       50
#define MAX_BATCHES 2000 /* per round: more than the stream reaches before the kill */
#define WINDOW      300  /* batches per verification query: 15000 ids < the query limit 16384 */
#define DIM         4

static const char *bin;
static const char *tmp;
static char data_dir[600];
static char log_path[700];
static unsigned port;
static pid_t srv_pid = -1;

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        fprintf(stderr, "free_port: %s\n", strerror(errno));
        exit(2);
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* Spawns the server and waits for /readyz. Returns seconds from spawn to ready. */
static double spawn_server(void)
{
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%u", port);
    double t0 = mono();
    pid_t pid = fork();
    if (pid < 0)
        FAILF("fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execl(bin, bin, "serve", "--data", data_dir, "--port", portstr, "--quiet", (char *)NULL);
        _exit(127);
    }
    srv_pid = pid;
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", port);
    while (mono() - t0 < 60) {
        th_resp *r = th_request("GET", "/readyz", NULL, 0, NULL);
        if (r->status == 200)
            return mono() - t0;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            srv_pid = -1;
            FAILF("server exited during start (status 0x%x); log: %s", st, log_path);
        }
        usleep(20000);
    }
    FAILF("server not ready after 60 s; log: %s", log_path);
    return -1;
}

/* Sends sig to the server and waits for it; returns the wait status. */
static int signal_server(int sig)
{
    if (srv_pid <= 0)
        FAILF("no server");
    kill(srv_pid, sig);
    int st = 0;
    double t0 = mono();
    while (waitpid(srv_pid, &st, WNOHANG) == 0) {
        if (mono() - t0 > 60) {
            kill(srv_pid, SIGKILL);
            waitpid(srv_pid, &st, 0);
            srv_pid = -1;
            FAILF("server did not exit within 60 s of signal %d", sig);
        }
        usleep(10000);
    }
    srv_pid = -1;
    return st;
}

static void create_collection(const char *name)
{
    char body[256];
    snprintf(body, sizeof body,
             "{\"collectionName\":\"%s\",\"dimension\":%d,\"metricType\":\"L2\"}", name, DIM);
    th_post("/v2/vectordb/collections/create", body, NULL);
    if (th_code() != 0)
        FAILF("create %s: %s", name, th_last.text ? th_last.text : "(no answer)");
}

/* Builds an insert body for ids [first, first + n), with the dynamic field "ver" = ver. Returns
 * malloc'd text. */
static char *insert_body(const char *coll, int64_t first, int n, int ver)
{
    size_t cap = 128 + (size_t)n * 112;
    char *b = malloc(cap);
    if (!b)
        FAILF("oom");
    size_t k = (size_t)snprintf(b, cap, "{\"collectionName\":\"%s\",\"data\":[", coll);
    for (int i = 0; i < n; i++) {
        int64_t id = first + i;
        k += (size_t)snprintf(b + k, cap - k, "%s{\"id\":%lld,\"vector\":[%d,%d,%d,1],\"ver\":%d}",
                              i ? "," : "", (long long)id, (int)(id % 97), (int)(id % 13),
                              (int)(id % 7), ver);
    }
    snprintf(b + k, cap - k, "]}");
    return b;
}

static long long count_rows(const char *coll, const char *filter)
{
    char body[512];
    snprintf(body, sizeof body,
             "{\"collectionName\":\"%s\",\"filter\":\"%s\",\"outputFields\":[\"count(*)\"]}", coll,
             filter);
    th_post("/v2/vectordb/entities/query", body, NULL);
    if (th_code() != 0)
        FAILF("count(*) on %s: %s", coll, th_last.text ? th_last.text : "(no answer)");
    json_t *d = json_object_get(th_last.json, "data");
    json_t *row = json_array_get(d, 0);
    json_t *c = json_object_get(row, "count(*)");
    if (!json_is_integer(c))
        FAILF("count(*) answer: %s", th_last.text);
    return (long long)json_integer_value(c);
}

static void test_sigterm_flushes(void)
{
    snprintf(data_dir, sizeof data_dir, "%s/term", tmp);
    snprintf(log_path, sizeof log_path, "%s/term.log", tmp);
    spawn_server();
    create_collection("t1");
    for (int b = 0; b < 10; b++) {
        char *body = insert_body("t1", (int64_t)b * BATCH, BATCH, 0);
        th_post("/v2/vectordb/entities/insert", body, NULL);
        free(body);
        if (th_code() != 0)
            FAILF("insert: %s", th_last.text ? th_last.text : "(no answer)");
        json_t *ic = json_object_get(json_object_get(th_last.json, "data"), "insertCount");
        ASSERT_EQ(json_integer_value(ic), BATCH);
    }
    ASSERT_EQ(count_rows("t1", ""), 10 * BATCH);
    int st = signal_server(SIGTERM);
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 0);
    double rec = spawn_server();
    fprintf(stderr, "sigterm restart: ready after %.3f s\n", rec);
    ASSERT_EQ(count_rows("t1", ""), 10 * BATCH);
    ASSERT_EQ(count_rows("t1", "id >= 100 and id < 150"), 50);
    th_post("/v2/vectordb/entities/get", "{\"collectionName\":\"t1\",\"id\":[0,499,250]}", NULL);
    ASSERT_EQ(th_code(), 0);
    ASSERT_EQ(json_array_size(json_object_get(th_last.json, "data")), 3);
    /* SIGINT is a graceful stop too */
    st = signal_server(SIGINT);
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 0);
}

static void test_kill9_stream(void)
{
    snprintf(data_dir, sizeof data_dir, "%s/kill", tmp);
    snprintf(log_path, sizeof log_path, "%s/kill.log", tmp);
    const char *rs = getenv("SX_KILL_ROUNDS");
    int rounds = rs ? (int)strtol(rs, NULL, 10) : 50;
    if (rounds < 1)
        rounds = 1;
    uint64_t seed = test_seed();
    spawn_server();
    create_collection("k1");
    double worst = 0;
    int cut = 0;
    long n_upserts = 0, n_deletes = 0;
    long long total_acked = 0;
    for (int round = 0; round < rounds; round++) {
        int64_t base = (int64_t)round * 10000000;
        static bool acked[MAX_BATCHES];
        memset(acked, 0, sizeof acked);
        unsigned delay_ms = 30 + (unsigned)(test_rand(&seed) % 600);
        pid_t target = srv_pid;
        pid_t killer = fork();
        if (killer < 0)
            FAILF("fork: %s", strerror(errno));
        if (killer == 0) {
            usleep(delay_ms * 1000u);
            kill(target, SIGKILL);
            _exit(0);
        }
        /* state: 1 acked insert, 2 acked delete; doubt: the op cut by the kill (either outcome) */
        static signed char state[MAX_BATCHES];
        static int min_ver[MAX_BATCHES];
        memset(state, 0, sizeof state);
        memset(min_ver, 0, sizeof min_ver);
        int doubt_kind = 0, doubt_batch = -1; /* 1 insert, 2 upsert, 3 delete */
        for (int b = 0; b < MAX_BATCHES; b++) {
            char *body = insert_body("k1", base + (int64_t)b * BATCH, BATCH, 0);
            th_resp *r = th_post("/v2/vectordb/entities/insert", body, NULL);
            free(body);
            if (r->status == 0) { /* the server is gone: this batch is in doubt */
                doubt_kind = 1;
                doubt_batch = b;
                break;
            }
            if (th_code() != 0)
                FAILF("round %d batch %d: %s", round, b, th_last.text);
            acked[b] = true;
            state[b] = 1;
            int up = b - 2; /* never a delete target (those are x % 4 == 2) */
            if (b % 3 == 2 && up >= 0 && up % 4 != 2) {
                body = insert_body("k1", base + (int64_t)up * BATCH, BATCH, b);
                r = th_post("/v2/vectordb/entities/upsert", body, NULL);
                free(body);
                if (r->status == 0) {
                    doubt_kind = 2;
                    doubt_batch = up;
                    break;
                }
                if (th_code() != 0)
                    FAILF("round %d upsert %d: %s", round, up, th_last.text);
                min_ver[up] = b;
                n_upserts++;
            }
            if (b % 4 == 3) {
                char del[256];
                int64_t lo = base + (int64_t)(b - 1) * BATCH;
                snprintf(del, sizeof del,
                         "{\"collectionName\":\"k1\",\"filter\":\"id >= %lld and id < %lld\"}",
                         (long long)lo, (long long)(lo + BATCH));
                r = th_post("/v2/vectordb/entities/delete", del, NULL);
                if (r->status == 0) {
                    doubt_kind = 3;
                    doubt_batch = b - 1;
                    break;
                }
                if (th_code() != 0)
                    FAILF("round %d delete %d: %s", round, b - 1, th_last.text);
                state[b - 1] = 2;
                n_deletes++;
            }
        }
        int kst;
        waitpid(killer, &kst, 0); /* the SIGKILL has been sent once the killer is gone */
        int st = signal_server(SIGKILL);
        ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        int n_acked = 0;
        for (int b = 0; b < MAX_BATCHES; b++)
            n_acked += acked[b];
        double rec = spawn_server();
        if (rec > worst)
            worst = rec;
        /* presence of every id of the round, window by window */
        static int per_batch[MAX_BATCHES], batch_ver[MAX_BATCHES];
        memset(per_batch, 0, sizeof per_batch);
        for (int w = 0; w < MAX_BATCHES; w += WINDOW) {
            int64_t lo = base + (int64_t)w * BATCH, hi = lo + (int64_t)WINDOW * BATCH;
            char body[512];
            snprintf(body, sizeof body,
                     "{\"collectionName\":\"k1\",\"filter\":\"id >= %lld and id < %lld\","
                     "\"outputFields\":[\"id\",\"ver\"],\"limit\":16384}",
                     (long long)lo, (long long)hi);
            th_post("/v2/vectordb/entities/query", body, NULL);
            if (th_code() != 0)
                FAILF("query: %s", th_last.text);
            json_t *rows = json_object_get(th_last.json, "data");
            ASSERT(json_is_array(rows));
            size_t i;
            json_t *row;
            json_array_foreach(rows, i, row) {
                json_t *idv = json_object_get(row, "id");
                ASSERT(json_is_integer(idv));
                int64_t off = (int64_t)json_integer_value(idv) - base;
                ASSERT(off >= (int64_t)w * BATCH && off < (int64_t)(w + WINDOW) * BATCH);
                ASSERT(off < (int64_t)MAX_BATCHES * BATCH);
                json_t *vv = json_object_get(row, "ver");
                ASSERT(json_is_integer(vv));
                int vr = (int)json_integer_value(vv);
                int pb = (int)(off / BATCH);
                if (per_batch[pb] == 0)
                    batch_ver[pb] = vr;
                else if (batch_ver[pb] != vr)
                    FAILF("round %d: batch %d mixes versions %d and %d", round, pb, batch_ver[pb],
                          vr);
                per_batch[pb]++;
            }
        }
        int present = 0;
        for (int b = 0; b < MAX_BATCHES; b++) {
            if (per_batch[b] != 0 && per_batch[b] != BATCH)
                FAILF("round %d: batch %d is torn: %d of %d rows", round, b, per_batch[b], BATCH);
            bool in_doubt = b == doubt_batch;
            if (state[b] == 1 && per_batch[b] != BATCH && !(in_doubt && doubt_kind == 3))
                FAILF("round %d: acknowledged batch %d lost", round, b);
            if (state[b] == 2 && per_batch[b] != 0)
                FAILF("round %d: deleted batch %d came back", round, b);
            if (state[b] == 0 && per_batch[b] != 0 && !(in_doubt && doubt_kind == 1))
                FAILF("round %d: batch %d present but never inserted", round, b);
            if (per_batch[b] == BATCH && batch_ver[b] < min_ver[b])
                FAILF("round %d: acknowledged upsert of batch %d (version %d) rolled back to %d",
                      round, b, min_ver[b], batch_ver[b]);
            present += per_batch[b] == BATCH;
        }
        if (n_acked < MAX_BATCHES)
            cut++;
        total_acked += (long long)present * BATCH;
        ASSERT_EQ(count_rows("k1", ""), total_acked);
        fprintf(stderr,
                "round %d: kill after %u ms, %d batches acknowledged, %d present, recovery "
                "(spawn to ready) %.3f s\n",
                round, delay_ms, n_acked, present, rec);
    }
    fprintf(stderr,
            "kill -9: %d rounds (%d cut mid-stream), %lld rows acknowledged and present, %ld "
            "upserts and %ld deletes acknowledged, worst recovery %.3f s\n",
            rounds, cut, total_acked, n_upserts, n_deletes, worst);
    ASSERT(cut > 0);
    int st = signal_server(SIGTERM);
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* Outside a test (no harness jump target): kill and reap a leftover server. */
static int raw_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void test_sigterm_stalled_upload(void)
{
    snprintf(data_dir, sizeof data_dir, "%s/stall", tmp);
    snprintf(log_path, sizeof log_path, "%s/stall.log", tmp);
    spawn_server();
    int up = raw_connect();
    ASSERT(up >= 0);
    const char *part = "POST /v2/vectordb/collections/list HTTP/1.1\r\nHost: x\r\n"
                       "Content-Length: 1000\r\n\r\n{\"x\":\"aaaa";
    ASSERT(send(up, part, strlen(part), MSG_NOSIGNAL) == (ssize_t)strlen(part));
    usleep(300000);
    double t0 = mono();
    kill(srv_pid, SIGTERM);
    usleep(200000);
    /* /readyz on a new connection while the stop waits for the upload */
    int fd = raw_connect();
    ASSERT(fd >= 0);
    const char *rq = "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    ASSERT(send(fd, rq, strlen(rq), MSG_NOSIGNAL) == (ssize_t)strlen(rq));
    char out[1024] = { 0 };
    size_t n = 0;
    struct pollfd pf = { fd, POLLIN, 0 };
    while (n + 1 < sizeof out && poll(&pf, 1, 1500) > 0) {
        ssize_t r = recv(fd, out + n, sizeof out - 1 - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    int st = 0;
    while (waitpid(srv_pid, &st, WNOHANG) == 0 && mono() - t0 < 70)
        usleep(20000);
    double secs = mono() - t0;
    if (mono() - t0 >= 70) {
        kill(srv_pid, SIGKILL);
        waitpid(srv_pid, &st, 0);
    }
    srv_pid = -1;
    close(up);
    fprintf(stderr, "stalled upload: /readyz '%.12s', exit %.1f s after SIGTERM\n", out, secs);
    ASSERT(strncmp(out, "HTTP/1.1 503", 12) == 0);
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 0);
    ASSERT(secs < 8.0);
}

static void reap_leftover(void)
{
    if (srv_pid > 0) {
        kill(srv_pid, SIGKILL);
        waitpid(srv_pid, NULL, 0);
        srv_pid = -1;
    }
}

int main(void)
{
    bin = getenv("SX_SEXTANT_BIN");
    if (!bin || access(bin, X_OK) != 0) {
        fprintf(stderr, "skip: SX_SEXTANT_BIN not set or not executable\n");
        return 77;
    }
    (void)th_server_start; /* the harness's in-process start is not used here */
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_ALL);
    tmp = test_tmpdir("server_proc");
    port = free_port();
    RUN(test_sigterm_flushes);
    reap_leftover();
    port = free_port();
    RUN(test_sigterm_stalled_upload);
    reap_leftover();
    port = free_port();
    RUN(test_kill9_stream);
    reap_leftover();
    th_reset();
    curl_global_cleanup();
    return TEST_DONE();
}
