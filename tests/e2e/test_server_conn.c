/*
 * test_server_conn.c: connection admission of the HTTP layer (issue 13, finding 5), against an
 * in-process server over raw loopback sockets. Attackers connect from 127.0.0.2 (any 127/8
 * address reaches a 127.0.0.1 listener on Linux), the health checks from 127.0.0.1, so the
 * per-address limit and the shedding of idle connections are told apart:
 *   - idle flood: 4 x max_connections idle sockets (per-address limit off) leave /livez
 *     answering at once (the oldest idle connections are shed to make room);
 *   - per-address limit: past it, that address's oldest idle connections are closed (the
 *     default is half of max_connections), and a flood from the health checker's own address
 *     leaves /livez answering;
 *   - slow headers: one byte every 300 ms is cut at the header deadline (MHD's idle timeout,
 *     reset by every byte, alone never cuts it);
 *   - slow body: a body under the minimum rate is cut after a window, a body above it is not;
 *   - stop with a stalled upload: /readyz answers 503 on a new connection at once, and
 *     sx_server_stop returns after the shutdown grace rather than the idle timeout.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "http.h"
#include "sextant_server.h"

static const char *tmp;
static char dir[600];
static uint16_t port;

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static sx_server *start(sx_server_options *o, const char *sub)
{
    snprintf(dir, sizeof dir, "%s/%s", tmp, sub);
    mkdir(dir, 0755);
    o->data_dir = dir;
    o->quiet = true;
    sx_server *s = NULL;
    if (sx_server_start(o, &s) != SX_OK)
        FAILF("server did not start: %s", sx_errmsg());
    port = sx_server_port(s);
    return s;
}

/* A TCP connection to the server from the source address 127.0.0.`src`. */
static int connect_from(int src)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)src);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* True when the server has closed fd (EOF or reset), without waiting. */
static bool is_closed(int fd)
{
    char b[256];
    struct pollfd p = { fd, POLLIN, 0 };
    if (poll(&p, 1, 0) <= 0)
        return false;
    ssize_t r = recv(fd, b, sizeof b, MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* GET `path` on a fresh connection from 127.0.0.1; returns the status line's code, 0 when no
 * answer came within timeout_ms. */
static int get_status(const char *path, int timeout_ms)
{
    int fd = connect_from(1);
    if (fd < 0)
        return 0;
    char req[256];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    int code = 0;
    if (send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req)) {
        char out[2048];
        th_raw_read(fd, out, sizeof out, timeout_ms);
        if (strncmp(out, "HTTP/1.1 ", 9) == 0)
            code = atoi(out + 9); /* NOLINT: test code, a 3-digit status */
    }
    close(fd);
    return code;
}

/* 4 x max_connections idle sockets: before, the slots filled and /livez waited in the backlog
 * for the idle timeout (60 s, renewable by the flood); now the oldest idle ones are shed. */
static void test_idle_flood(void)
{
    sx_server_options o = { 0 };
    o.max_connections = 32;
    o.max_connections_per_ip = 100000; /* the shedding alone */
    o.http_threads = 4;
    o.header_timeout_s = 60; /* no deadline helps within the test */
    o.idle_timeout_s = 60;
    sx_server *s = start(&o, "flood");

    enum { N = 128 };

    int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = connect_from(2);
        ASSERT(fds[i] >= 0);
    }
    usleep(300000);
    for (int k = 0; k < 3; k++) {
        double t0 = mono();
        int st = get_status("/livez", 2000);
        printf("  /livez under %d idle sockets: %d in %.0f ms\n", N, st, (mono() - t0) * 1e3);
        ASSERT_EQ(st, 200);
    }
    /* the newest idle sockets are the ones still held: at most max_connections of them */
    int open = 0;
    for (int i = 0; i < N; i++)
        open += !is_closed(fds[i]);
    printf("  idle sockets still open: %d of %d\n", open, N);
    ASSERT(open <= 32 + 16);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    ASSERT_OK(sx_server_stop(s));
}

/* Per client address: past the limit, the address's oldest idle connections are closed. */
static void test_per_ip_limit(void)
{
    sx_server_options o = { 0 };
    o.max_connections = 64; /* the default per-address limit: 32 */
    o.http_threads = 4;
    sx_server *s = start(&o, "perip");

    enum { N = 50 };

    int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = connect_from(3);
        ASSERT(fds[i] >= 0);
    }
    usleep(500000);
    int closed = 0;
    for (int i = 0; i < N; i++)
        closed += is_closed(fds[i]);
    printf("  from one address: %d of %d closed\n", closed, N);
    ASSERT_EQ(closed, N - 32);
    for (int i = 0; i < N - 32; i++) /* the oldest ones */
        ASSERT(is_closed(fds[i]) || fds[i] < 0);
    /* another address still gets in */
    ASSERT_EQ(get_status("/livez", 2000), 200);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    ASSERT_OK(sx_server_stop(s));
}

/* The case: the flood comes from the health checker's own address (loopback). The
 * per-address limit sheds the flood's oldest idle sockets, so /livez still gets in. */
static void test_same_address_flood(void)
{
    sx_server_options o = { 0 };
    o.max_connections = 32; /* per address: 16 */
    o.http_threads = 4;
    sx_server *s = start(&o, "sameaddr");

    enum { N = 128 };

    int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = connect_from(1);
        ASSERT(fds[i] >= 0);
    }
    usleep(300000);
    for (int k = 0; k < 3; k++) {
        double t0 = mono();
        int st = get_status("/livez", 2000);
        printf("  /livez from the flooding address: %d in %.0f ms\n", st, (mono() - t0) * 1e3);
        ASSERT_EQ(st, 200);
    }
    int open = 0;
    for (int i = 0; i < N; i++)
        open += !is_closed(fds[i]);
    printf("  idle sockets of that address still open: %d of %d\n", open, N);
    ASSERT(open <= 16);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    ASSERT_OK(sx_server_stop(s));
}

/* Slowloris: the request line, then one header byte every 300 ms. */
static void test_slow_headers(void)
{
    sx_server_options o = { 0 };
    o.idle_timeout_s = 5; /* the setting: never reached, every byte resets it */
    o.header_timeout_s = 2;
    o.http_threads = 4;
    sx_server *s = start(&o, "slowhdr");

    enum { N = 20 };

    int fds[N];
    double cut_at[N];
    const char *line = "POST /v2/vectordb/collections/list HTTP/1.1\r\nHost: x\r\nX-Pad: ";
    for (int i = 0; i < N; i++) {
        fds[i] = connect_from(4);
        ASSERT(fds[i] >= 0);
        ASSERT(send(fds[i], line, strlen(line), MSG_NOSIGNAL) == (ssize_t)strlen(line));
        cut_at[i] = -1;
    }
    double t0 = mono();
    int cut = 0;
    while (cut < N && mono() - t0 < 4.5) {
        usleep(300000);
        for (int i = 0; i < N; i++) {
            if (cut_at[i] >= 0)
                continue;
            if (is_closed(fds[i]) || send(fds[i], "a", 1, MSG_NOSIGNAL) != 1) {
                cut_at[i] = mono() - t0;
                cut++;
            }
        }
    }
    double lo = 1e9, hi = 0;
    for (int i = 0; i < N; i++) {
        if (cut_at[i] >= 0) {
            lo = cut_at[i] < lo ? cut_at[i] : lo;
            hi = cut_at[i] > hi ? cut_at[i] : hi;
        }
    }
    printf("  slow headers: %d of %d cut, after %.1f..%.1f s\n", cut, N, cut ? lo : 0.0, hi);
    ASSERT_EQ(cut, N);
    ASSERT(lo >= 1.5); /* not before the deadline */
    for (int i = 0; i < N; i++)
        close(fds[i]);
    ASSERT_EQ(get_status("/livez", 2000), 200);
    ASSERT_OK(sx_server_stop(s));
}

#define BODY_HEAD                                                                  \
 "POST /v2/vectordb/collections/list HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" \
 "Content-Length: %zu\r\n\r\n{\"x\":\""

/* Sends a {"x":"aaa..."} body of `len` bytes in pieces of `piece` every `gap_ms`; returns the
 * seconds it took or -1 when the server cut the connection; the response is left in out. */
static double send_body(size_t len, size_t piece, int gap_ms, char *out, size_t cap)
{
    int fd = connect_from(5);
    if (fd < 0)
        return -1;
    char head[256];
    snprintf(head, sizeof head, BODY_HEAD, len);
    size_t hl = strlen(head);
    ASSERT(send(fd, head, hl, MSG_NOSIGNAL) == (ssize_t)hl);
    size_t left = len - 6 - 2; /* {"x":" and "} */
    char *pad = malloc(piece);
    ASSERT(pad);
    memset(pad, 'a', piece);
    double t0 = mono(), took = -1;
    while (left > 0) {
        size_t n = left < piece ? left : piece;
        if (is_closed(fd) || send(fd, pad, n, MSG_NOSIGNAL) != (ssize_t)n)
            goto done;
        left -= n;
        usleep((useconds_t)gap_ms * 1000);
    }
    if (send(fd, "\"}", 2, MSG_NOSIGNAL) != 2)
        goto done;
    th_raw_read(fd, out, cap, 3000);
    took = mono() - t0;
done:
    if (took < 0)
        out[0] = 0;
    free(pad);
    close(fd);
    return took;
}

/* A body under min_upload_bytes_per_s is cut after a window; one above it completes. */
static void test_slow_body(void)
{
    sx_server_options o = { 0 };
    o.idle_timeout_s = 30;
    o.header_timeout_s = 1; /* also the rate window */
    o.min_upload_bytes_per_s = 1024;
    o.http_threads = 4;
    sx_server *s = start(&o, "slowbody");
    char out[4096];
    /* 100 bytes/s: cut within a couple of windows (else it would take 100 s) */
    double t0 = mono();
    double took = send_body(10000, 10, 100, out, sizeof out);
    printf("  body at 100 B/s: %s after %.1f s\n", took < 0 ? "cut" : "completed", mono() - t0);
    ASSERT(took < 0);
    ASSERT(mono() - t0 < 3.5);
    /* 20 KB/s for 2.5 s: completes and is answered */
    took = send_body(50000, 2000, 100, out, sizeof out);
    printf("  body at 20 KB/s: %s in %.1f s\n", took < 0 ? "cut" : "completed", took);
    ASSERT(took > 0);
    ASSERT(strncmp(out, "HTTP/1.1 200", 12) == 0);
    ASSERT_OK(sx_server_stop(s));
}

typedef struct stopper {
    sx_server *s;
    sx_status st;
    atomic_int done;
    double secs;
} stopper;

static void *stop_thread(void *arg)
{
    stopper *x = arg;
    double t0 = mono();
    x->st = sx_server_stop(x->s);
    x->secs = mono() - t0;
    atomic_store(&x->done, 1);
    return NULL;
}

/* A stalled upload at stop: before, /readyz on a new connection hung (the listener was
 * quiesced) and the stop waited for the idle timeout (+5 s). */
static void test_stop_stalled_upload(void)
{
    sx_server_options o = { 0 };
    o.idle_timeout_s = 30;
    o.header_timeout_s = 30; /* only the shutdown grace applies */
    o.shutdown_grace_s = 1;
    o.http_threads = 4;
    sx_server *s = start(&o, "stopstall");
    int fd = connect_from(6);
    ASSERT(fd >= 0);
    const char *part = "POST /v2/vectordb/collections/list HTTP/1.1\r\nHost: x\r\n"
                       "Content-Length: 1000\r\n\r\n{\"x\":\"aaaa";
    ASSERT(send(fd, part, strlen(part), MSG_NOSIGNAL) == (ssize_t)strlen(part));
    usleep(200000);
    stopper x = { s, SX_EIO, 0, 0 };
    atomic_init(&x.done, 0);
    pthread_t t;
    ASSERT(pthread_create(&t, NULL, stop_thread, &x) == 0);
    usleep(200000);
    double t0 = mono();
    int st = get_status("/readyz", 1500);
    printf("  /readyz while stopping: %d in %.0f ms\n", st, (mono() - t0) * 1e3);
    int st_api = 0;
    {
        int c2 = connect_from(1);
        ASSERT(c2 >= 0);
        const char *rq = "POST /v2/vectordb/collections/list HTTP/1.1\r\nHost: x\r\n"
                         "Content-Length: 2\r\n\r\n{}";
        ASSERT(send(c2, rq, strlen(rq), MSG_NOSIGNAL) == (ssize_t)strlen(rq));
        char out[2048];
        th_raw_read(c2, out, sizeof out, 1500);
        if (strncmp(out, "HTTP/1.1 ", 9) == 0)
            st_api = atoi(out + 9); /* NOLINT: test code */
        close(c2);
    }
    /* give the stop its bound before asserting, so a failure does not leave it running */
    double w0 = mono();
    while (!atomic_load(&x.done) && mono() - w0 < 45)
        usleep(50000);
    printf("  sx_server_stop with a stalled upload: %.1f s\n", x.secs);
    close(fd);
    ASSERT(atomic_load(&x.done));
    pthread_join(t, NULL);
    ASSERT_OK(x.st);
    ASSERT_EQ(st, 503);
    ASSERT_EQ(st_api, 503); /* new requests are refused while stopping */
    ASSERT(x.secs < 3.0);
}

int main(void)
{
    tmp = test_tmpdir("server_conn");
    RUN(test_idle_flood);
    RUN(test_per_ip_limit);
    RUN(test_same_address_flood);
    RUN(test_slow_headers);
    RUN(test_slow_body);
    RUN(test_stop_stalled_upload);
    return TEST_DONE();
}
