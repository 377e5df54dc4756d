/*
 * http.c: the server's HTTP layer on libmicrohttpd: start/stop, connection admission and
 * deadlines, body limits, the JSON memory budget, routing, auth, CORS, the health and metrics
 * routes, and the graceful stop.
 *
 * Request flow (one MHD access-handler invocation sequence per request):
 *   1. first call (headers only): a per-request context is allocated, the in-flight counter is
 *      raised, and a declared Content-Length over max_body_bytes is answered 413 at once. Queuing
 *      a response on the first call makes MHD skip "100 Continue" and close the connection, so a
 *      client that asked for 100-continue never sends the body, and one that did not is cut off.
 *      While the server is stopping, a request other than GET/HEAD on a health path is answered
 *      503 (code 1) on the first call.
 *   2. upload calls: bytes are appended to a growing buffer (hard cap: max_body_bytes). A
 *      chunked body that crosses the limit is discarded from then on and answered 413 on the
 *      final call; past DISCARD_MAX bytes more the connection is dropped (a client that
 *      streams forever cannot pin a worker).
 *   3. final call: OPTIONS -> 204 (CORS); GET/HEAD /livez /readyz /healthz /metrics; otherwise a
 *      POST on a route from sx__server_routes() (exact path, one trailing slash tolerated), else
 *      404 "404 page not found" text/plain (what Milvus's gin router answers). Then auth (401
 *      code 1800, 403 code 1401 for read-only users on write routes), the JSON depth pre-scan
 *      and parse (1801), db name resolution, the handler, the envelope.
 *   4. the completion callback frees the context and lowers the in-flight counter.
 *
 * Threads. MHD runs an internal thread pool (epoll); handlers run on those threads, any number
 * at once. Server state read by handlers (options, credentials, catalog, metrics, merger) is
 * immutable after sx_server_start; `stopping` is atomic; the in-flight counter is guarded by mu.
 * One more thread, the reaper, enforces the connection deadlines below. Locks: mu and conn_mu
 * are never held together; conn_mu is a leaf (no MHD call, no allocation under it).
 *
 * Connections. MHD's own connection timeout (idle_timeout_s) is an idle timer that every byte
 * resets, and at its connection limit MHD stops accepting, so 2,000 idle sockets kept /livez in
 * the backlog for the idle timeout and a byte every 2 s kept a connection forever. Admission is
 * therefore partly ours:
 *   - per client address (max_connections_per_ip, default half of max_connections): past it,
 *     a new connection closes that address's longest-waiting idle connection, or is itself
 *     closed when all the address's others hold a request (conn_limit_addr). Not MHD's
 *     MHD_OPTION_PER_IP_CONNECTION_LIMIT: it refuses the new connection, so a health check
 *     from a flooding address (loopback, a shared proxy) would never get in;
 *   - MHD's limit is max_connections + CONN_RESERVE. Each connection gets a `conn` record
 *     (MHD_OPTION_NOTIFY_CONNECTION; socket_context) with its fd and a phase:
 *        accept -> PH_HEADERS (on_connection STARTED)
 *        first access-handler call (headers in) -> PH_BODY; final call -> PH_BUSY
 *        request completed (on_completed) -> PH_IDLE; request line of the next one (on_uri,
 *        MHD_OPTION_URI_LOG_CALLBACK) -> PH_HEADERS
 *     Past max_connections open, the connection longest in PH_IDLE or PH_HEADERS (idle
 *     keep-alive, or never sent a complete request) is shut down at once, at accept
 *     (conn_shed), so a new connection, a health check among them, always gets a slot while
 *     others only idle. Connections with a request in progress are never shed.
 *   - the reaper (reap_pass, every REAP_TICK_MS) shuts down: PH_HEADERS past header_timeout_s
 *     (from the accept for a first request, from the request line on a kept-alive connection);
 *     PH_IDLE past idle_timeout_s, not reset by bytes; PH_BODY when a window of
 *     header_timeout_s delivered under min_upload_bytes_per_s. Times are counted less the time
 *     the connection's worker thread spent inside handlers (struct worker): a worker busy with
 *     a long search reads none of its other connections, and they must not pay for it.
 *   - cutting is shutdown(fd, SHUT_RDWR) under conn_mu: MHD sees the end of the stream and
 *     closes the connection itself. MHD calls NOTIFY_CLOSED before it closes the fd (daemon.c,
 *     MHD_cleanup_connections and the failed-add path, 0.9.75), and that callback takes conn_mu
 *     and marks the record closed (fd -1), so the fd shut down is never a reused one.
 *   XXX: the request line of a kept-alive connection is not seen until it is complete, so it
 *   may trickle for idle_timeout_s (not header_timeout_s). Responses read slowly are bounded by
 *   MHD's idle timeout only.
 *
 * Stop. sx_server_stop sets `stopping` and stop_ns; the daemon keeps accepting, so /readyz on a
 * new connection answers 503 at once (quiescing first left it in the backlog), other new
 * requests get 503. Requests being handled finish; the reaper cuts uploads and headers still
 * arriving shutdown_grace_s after the stop began (headers: once they have had a second). The stop
 * waits on `idle` until the in-flight counter is 0 (bounded by grace + idle timeout + 5 s for a
 * handler that never returns), then quiesces and stops the daemon (joins its threads), stops the
 * reaper, and closes the catalog, which flushes every collection.
 *
 * JSON memory. jansson's DOM of a body like [0,0,...] takes ~25 bytes per input byte (a json_t
 * per number, an array slot, malloc's header): a 40 MB body cost 845 MB, three 60 MB bodies at
 * once 2.6 GB. Bodies are parsed under a budget: jansson's allocator (json_set_alloc_funcs,
 * installed once per process) counts, during a body's parse only (tl_json), every block's cost
 * against the request's max_json_bytes (default 256 MiB: a 64 MiB body of ~10-byte numbers)
 * and against max_json_total_bytes across all requests in flight (default 512 MiB), held until
 * the request's DOM is freed. Over the first: code 1102 naming --max-json-mb; over the second:
 * code 1807 naming --max-json-total-mb. After a big DOM is freed, malloc_trim returns the pages.
 * Rejected: a streaming parse into columns (jansson has none; the handlers take a DOM, and
 * they are shared with the other request kinds).
 *
 * Credentials. The token and every users-file entry are kept as SHA-256 digests of
 * "user:password" (or the bare token); a presented credential is hashed and compared with every
 * digest with an XOR loop over all 32 bytes and all entries, no early exit, so timing reveals
 * neither the matching prefix nor which entry matched. A non-loopback bind without any
 * credentials is refused at start.
 *
 * JSON depth. jansson parses recursively (its own limit is 2048 levels, enough to exhaust a
 * small thread stack in other builds), so the raw bytes are scanned first without recursion:
 * '[' and '{' outside strings raise the depth, ']' and '}' lower it; over max_json_depth the
 * request is refused before jansson sees it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/rbac.h"
#include "server/server.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/err.h"

#define DEFAULT_MAX_BODY   (64ull << 20)
#define DEFAULT_MAX_CONN   1024u
#define DEFAULT_IDLE_S     60u
#define DEFAULT_MAX_NQ     16384u
#define DEFAULT_JSON_DEPTH 64u
#define MAX_ROUTES         256
#define MAX_USERS          4096
#define CRED_MAX           1024
#define PREALLOC_MAX       ((size_t)4 << 20)
#define DISCARD_MAX        ((uint64_t)16 << 20)
#define MAX_TIMEOUT_S      3600.0 /* the longest Request-Timeout a request may ask for */
#define DEFAULT_HEADER_S   10u
#define DEFAULT_MIN_RATE   1024u
#define DEFAULT_GRACE_S    5u
#define DEFAULT_JSON_BYTES ((uint64_t)256 << 20)
#define DEFAULT_JSON_TOTAL ((uint64_t)512 << 20)
#define CONN_RESERVE       16u  /* MHD slots over max_connections: room to shed idle ones */
#define REAP_TICK_MS       200u /* how often the reaper looks at the connections */
#define NS_PER_S           1000000000ull

const char *const sx__open_paths[] = { "/livez", "/readyz", "/healthz", NULL };

/* ------------------------------------------------------------------ SHA-256 (FIPS 180-4) */

typedef struct sha256 {
    uint32_t h[8];
    uint8_t block[64];
    size_t n;      /* bytes in block */
    uint64_t bits; /* total message bits */
} sha256;

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
};

static uint32_t ror32(uint32_t x, unsigned r)
{
    return (x >> r) | (x << (32 - r));
}

static void sha256_block(sha256 *s, const uint8_t *p)
{
    uint32_t w[64];
    for (size_t i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3];
    uint32_t e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 =
            h + (ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
        uint32_t t2 = (ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    s->h[0] += a;
    s->h[1] += b;
    s->h[2] += c;
    s->h[3] += d;
    s->h[4] += e;
    s->h[5] += f;
    s->h[6] += g;
    s->h[7] += h;
}

static void sha256_digest(const void *data, size_t len, uint8_t out[32])
{
    static const uint32_t iv[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
    sha256 s;
    memcpy(s.h, iv, sizeof iv);
    s.n = 0;
    s.bits = (uint64_t)len * 8;
    const uint8_t *p = data;
    while (len >= 64) {
        sha256_block(&s, p);
        p += 64;
        len -= 64;
    }
    memcpy(s.block, p, len);
    s.n = len;
    s.block[s.n++] = 0x80;
    if (s.n > 56) {
        memset(s.block + s.n, 0, 64 - s.n);
        sha256_block(&s, s.block);
        s.n = 0;
    }
    memset(s.block + s.n, 0, 56 - s.n);
    for (int i = 0; i < 8; i++)
        s.block[56 + i] = (uint8_t)(s.bits >> (56 - 8 * i));
    sha256_block(&s, s.block);
    for (size_t i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s.h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s.h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s.h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s.h[i];
    }
}

/* ------------------------------------------------------------------ server state */

typedef struct cred {
    uint8_t digest[32]; /* SHA-256 of "user:password" or of the token */
    bool read_only;
} cred;

/* One MHD worker thread: how long it has spent inside the access handler. While a handler runs
 * (a search waiting in the merger, a big insert), the worker reads none of its other
 * connections, so that time is not held against their header deadline or upload rate. Writer:
 * the worker (busy_since, then stall_ns on the way out: stall first, then busy_since = 0);
 * reader: the reaper (worker_stall). seq_cst: every interleaving the reader can see errs towards
 * a larger stall (a cut comes later, never earlier). */
typedef struct worker {
    _Atomic uint64_t stall_ns;   /* total ns inside the access handler */
    _Atomic uint64_t busy_since; /* monotonic ns of the current call, 0 outside */
} worker;

/* Where a connection is, as far as the deadlines go (transitions in the comment at the top). */
typedef enum conn_phase {
    PH_IDLE,    /* kept alive between requests, no request line yet: idle_timeout_s */
    PH_HEADERS, /* accepted or request line seen, headers incomplete: header_timeout_s */
    PH_BODY,    /* headers in, body arriving: min_upload_bytes_per_s per window */
    PH_BUSY     /* the request is being handled or answered: no deadline of ours */
} conn_phase;

/* One accepted connection (MHD's socket_context), from NOTIFY_STARTED to NOTIFY_CLOSED. */
typedef struct conn {
    struct conn *prev, *next;    /* guarded by: conn_mu */
    int fd;                      /* guarded by: conn_mu; -1 once MHD announced the close */
    worker *w;                   /* the worker thread that owns the connection; immutable */
    conn_phase phase;            /* guarded by: conn_mu */
    uint64_t since_ns;           /* guarded by: conn_mu; start of the phase (or rate window) */
    uint64_t stall_at_ns;        /* guarded by: conn_mu; worker_stall(w) at since_ns */
    uint64_t bytes_at;           /* guarded by: conn_mu; body_bytes at since_ns */
    uint8_t addr[17];            /* client address: family byte, 4 or 16 bytes; immutable */
    bool cut;                    /* guarded by: conn_mu; shutdown() done, MHD closes it next */
    _Atomic uint64_t body_bytes; /* relaxed: a counter the reaper samples under conn_mu */
} conn;

struct sx_server {
    sx_server_options opts; /* copy; strings below are owned copies */
    sx__svc svc;            /* this server as the gRPC front end's service */
    char *data_dir;
    char *bind_addr;
    char *import_root; /* owned copy of opts.import_root, or NULL */
    uint64_t max_body;
    uint32_t json_depth;
    bool auth_on;
    cred *creds; /* token first (if any), then users-file entries */
    size_t n_creds;
    sx__rbac *rbac; /* users and roles made through the API (rbac.c) */
    sx__catalog *cat;
    sx__metrics *metrics;
    sx__merger *merger;
    struct MHD_Daemon *d;
    int listen_fd;  /* ours: the front door (grpc.c) accepts and hands HTTP/1 to MHD */
    sx__grpc *grpc; /* the front door and the gRPC transport */
    uint16_t port;
    atomic_bool stopping; /* seq_cst: rare writes, read per readyz */
    /* a query node: every row acknowledged before this wall-clock time (ms) is in its answers
     * (sx_server_set_fresh_ms; 0 unknown), sent as X-Sextant-Fresh-Ms */
    _Atomic int64_t fresh_ms;
    pthread_mutex_t mu;
    pthread_cond_t idle;
    uint64_t inflight; /* guarded by: mu */
    /* connections (see "Connections" at the top) */
    pthread_mutex_t conn_mu; /* leaf lock: nothing else is taken under it */
    pthread_cond_t reap_cv;  /* CLOCK_MONOTONIC; wakes the reaper (stop) */
    conn *conns;             /* guarded by: conn_mu */
    uint32_t n_conns;        /* guarded by: conn_mu; tracked connections */
    uint32_t n_cut;          /* guarded by: conn_mu; of those, shut down and not yet closed */
    uint64_t stop_ns;        /* guarded by: conn_mu; when sx_server_stop began, 0 before */
    bool reap_stop;          /* guarded by: conn_mu */
    bool reaper_on;
    pthread_t reaper;
    worker *workers; /* n_workers_cap entries, claimed once per thread (this_worker) */
    uint32_t n_workers_cap;
    atomic_uint n_workers; /* seq_cst; claimed entries */
    uint64_t header_ns, idle_ns, grace_ns;
    uint32_t min_rate; /* bytes per second */
    /* JSON budget */
    uint64_t json_max;
    uint64_t json_total_max;
    _Atomic uint64_t json_inflight; /* seq_cst; DOM bytes of the requests in flight */
};

/* Per-request context (MHD's con_cls). */
typedef struct req_ctx {
    double t0;
    conn *conn; /* the connection's record, NULL if untracked */
    char *body; /* owned, sx__free */
    size_t len;
    size_t cap;
    uint64_t seen; /* body bytes received, kept or discarded */
    bool too_big;
    bool early; /* a response was queued on the first call */
} req_ctx;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ connections */

/* The worker entry of the calling MHD thread. A thread serves one daemon for its whole life
 * (MHD starts new threads per daemon), so the claim is made once per thread. NULL when the
 * table is full (then that thread's stalls are not discounted). */
static _Thread_local worker *tl_worker;
static _Thread_local const sx_server *tl_worker_srv;

static worker *this_worker(sx_server *s)
{
    if (tl_worker_srv != s) {
        unsigned i = atomic_fetch_add(&s->n_workers, 1u);
        tl_worker = i < s->n_workers_cap ? &s->workers[i] : NULL;
        tl_worker_srv = s;
    }
    return tl_worker;
}

/* The stall time of w up to `now`, including a handler call in progress. */
static uint64_t worker_stall(worker *w, uint64_t now)
{
    if (!w)
        return 0;
    for (;;) {
        uint64_t b1 = atomic_load(&w->busy_since);
        uint64_t st = atomic_load(&w->stall_ns);
        uint64_t b2 = atomic_load(&w->busy_since);
        if (b1 == b2)
            return st + (b1 && now > b1 ? now - b1 : 0);
    }
}

/* Time in the current phase, less the time its worker spent in handlers meanwhile. */
static uint64_t conn_elapsed(const conn *k, uint64_t now)
{
    uint64_t wall = now > k->since_ns ? now - k->since_ns : 0;
    uint64_t st = worker_stall(k->w, now);
    st = st > k->stall_at_ns ? st - k->stall_at_ns : 0;
    return wall > st ? wall - st : 0;
}

/* Starts a phase (or a new rate window) at `now`. Caller holds conn_mu. */
static void conn_enter(conn *k, conn_phase ph, uint64_t now)
{
    k->phase = ph;
    k->since_ns = now;
    k->stall_at_ns = worker_stall(k->w, now);
    k->bytes_at = atomic_load_explicit(&k->body_bytes, memory_order_relaxed);
}

/* Shuts the socket down; MHD sees the end of the stream on its next poll and closes it (and
 * only then the fd: NOTIFY_CLOSED, which takes conn_mu, comes before MHD's close(), so the fd
 * cannot be another connection's here). Caller holds conn_mu. */
static void conn_cut(sx_server *s, conn *k)
{
    if (k->cut || k->fd < 0)
        return;
    (void)shutdown(k->fd, SHUT_RDWR); /* ENOTCONN if the peer left: MHD closes it anyway */
    k->cut = true;
    s->n_cut++;
}

/* Holds no request: a candidate for shedding. */
static bool conn_idle(const conn *k)
{
    return !k->cut && (k->phase == PH_IDLE || k->phase == PH_HEADERS);
}

/* Over max_connections_per_ip connections from the address of `k` (just accepted): shuts down
 * that address's longest-waiting idle one, or `k` itself when all the others hold a request.
 * Shedding the address's own idle connection rather than refusing the new one lets a health
 * check from a flooding address (a shared proxy, loopback) still in. Caller holds conn_mu. */
static void conn_limit_addr(sx_server *s, conn *k)
{
    uint32_t n = 0;
    conn *old = NULL;
    for (conn *o = s->conns; o; o = o->next) {
        if (o->cut || memcmp(o->addr, k->addr, sizeof k->addr) != 0)
            continue;
        n++;
        if (o != k && conn_idle(o) && (!old || o->since_ns < old->since_ns))
            old = o;
    }
    if (n > s->opts.max_connections_per_ip)
        conn_cut(s, old ? old : k);
}

/* The client address of c as a conn key. */
static void conn_addr(struct MHD_Connection *c, uint8_t key[17])
{
    memset(key, 0, 17);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        key[0] = 4;
        memcpy(key + 1, &in->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        key[0] = 6;
        memcpy(key + 1, &in6->sin6_addr, 16);
    }
}

/* While more than max_connections connections are open, shuts down the longest-waiting one
 * that holds no request (idle keep-alive, or headers not complete), never `keep`. Caller holds
 * conn_mu. */
static void conn_shed(sx_server *s, const conn *keep)
{
    while (s->n_conns - s->n_cut > s->opts.max_connections) {
        conn *old = NULL;
        for (conn *k = s->conns; k; k = k->next) {
            if (k == keep || !conn_idle(k))
                continue;
            if (!old || k->since_ns < old->since_ns)
                old = k;
        }
        if (!old)
            return;
        conn_cut(s, old);
    }
}

/* The record of connection c (on MHD's thread for c). */
static conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void conn_set(sx_server *s, conn *k, conn_phase ph)
{
    if (!k)
        return;
    uint64_t now = mono_ns();
    pthread_mutex_lock(&s->conn_mu);
    if (ph != PH_HEADERS || k->phase == PH_IDLE) /* headers of the first request: from accept */
        conn_enter(k, ph, now);
    pthread_mutex_unlock(&s->conn_mu);
}

/* MHD_OPTION_NOTIFY_CONNECTION: both calls run on the connection's worker thread. */
static void on_connection(void *cls,
                          struct MHD_Connection *c,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    sx_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        *socket_context = NULL;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn *k = ci ? sx__calloc(1, sizeof *k) : NULL;
        if (!k)
            return; /* untracked: only MHD's idle timeout applies */
        k->fd = ci->connect_fd;
        k->w = this_worker(s);
        conn_addr(c, k->addr);
        atomic_init(&k->body_bytes, 0);
        pthread_mutex_lock(&s->conn_mu);
        conn_enter(k, PH_HEADERS, mono_ns());
        k->next = s->conns;
        if (s->conns)
            s->conns->prev = k;
        s->conns = k;
        s->n_conns++;
        conn_limit_addr(s, k);
        conn_shed(s, k);
        pthread_mutex_unlock(&s->conn_mu);
        *socket_context = k;
        return;
    }
    conn *k = *socket_context;
    if (!k)
        return;
    *socket_context = NULL;
    pthread_mutex_lock(&s->conn_mu);
    if (k->prev)
        k->prev->next = k->next;
    else
        s->conns = k->next;
    if (k->next)
        k->next->prev = k->prev;
    if (k->cut)
        s->n_cut--;
    s->n_conns--;
    k->fd = -1;
    pthread_mutex_unlock(&s->conn_mu);
    sx__free(k);
}

/* MHD_OPTION_URI_LOG_CALLBACK: the request line is in. Returns NULL (the request context is
 * made on the first access-handler call). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)uri;
    conn_set(cls, conn_of(c), PH_HEADERS);
    return NULL;
}

/* One pass of the reaper over every connection. Caller holds conn_mu. */
static void reap_pass(sx_server *s, uint64_t now)
{
    bool grace_over = s->stop_ns != 0 && now - s->stop_ns >= s->grace_ns;
    for (conn *k = s->conns; k; k = k->next) {
        if (k->cut || k->fd < 0)
            continue;
        uint64_t el = conn_elapsed(k, now);
        switch (k->phase) {
        case PH_IDLE:
            if (el >= s->idle_ns)
                conn_cut(s, k);
            break;
        case PH_HEADERS: /* after the grace, a second: a health check accepted just now */
            if ((grace_over && el >= NS_PER_S) || el >= s->header_ns)
                conn_cut(s, k);
            break;
        case PH_BODY:
            if (grace_over) {
                conn_cut(s, k);
            } else if (el >= s->header_ns) {
                uint64_t got =
                    atomic_load_explicit(&k->body_bytes, memory_order_relaxed) - k->bytes_at;
                double need = (double)s->min_rate * ((double)el / (double)NS_PER_S);
                if ((double)got < need)
                    conn_cut(s, k);
                else
                    conn_enter(k, PH_BODY, now); /* next window */
            }
            break;
        case PH_BUSY:
            break;
        }
    }
    conn_shed(s, NULL);
}

static void *reaper_main(void *arg)
{
    sx_server *s = arg;
    pthread_mutex_lock(&s->conn_mu);
    while (!s->reap_stop) {
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        dl.tv_nsec += (long)REAP_TICK_MS * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&s->reap_cv, &s->conn_mu, &dl); /* a tick or a stop */
        if (!s->reap_stop)
            reap_pass(s, mono_ns());
    }
    pthread_mutex_unlock(&s->conn_mu);
    return NULL;
}

/* ------------------------------------------------------------------ JSON budget */

/* jansson's allocator (json_set_alloc_funcs, installed once per process by the first
 * sx_server_start). Outside a parse of a request body (tl_json NULL) it is sx__malloc/sx__free;
 * during one it counts the usable size of every block against the request's budget and the
 * server's total, and fails the allocation (so the parse) past either. Blocks jansson had before
 * the install came from malloc() and go to free(): the same heap, so they mix. */
typedef struct json_acct {
    uint64_t bytes; /* live bytes allocated during this parse */
    uint64_t peak;  /* the most `bytes` reached */
    uint64_t limit;
    _Atomic uint64_t *total;
    uint64_t total_limit;
    int over; /* 0; 1: the request's budget; 2: the server's total */
} json_acct;

static _Thread_local json_acct *tl_json;

/* What a heap block costs: its usable size and malloc's header (one size_t in glibc), which for
 * jansson's 24-byte numbers is a quarter of the total. */
static uint64_t block_bytes(void *p)
{
    return (uint64_t)malloc_usable_size(p) + sizeof(size_t);
}

static void *json_alloc(size_t n)
{
    void *p = sx__malloc(n);
    json_acct *a = tl_json;
    if (!p || !a)
        return p;
    uint64_t sz = block_bytes(p);
    if (a->bytes + sz > a->limit) {
        a->over = 1;
        sx__free(p);
        return NULL;
    }
    if (atomic_fetch_add(a->total, sz) + sz > a->total_limit) {
        atomic_fetch_sub(a->total, sz);
        a->over = 2;
        sx__free(p);
        return NULL;
    }
    a->bytes += sz;
    if (a->bytes > a->peak)
        a->peak = a->bytes;
    return p;
}

static void json_free(void *p)
{
    json_acct *a = tl_json;
    if (p && a) {
        uint64_t sz = block_bytes(p);
        if (sz > a->bytes)
            sz = a->bytes;
        a->bytes -= sz;
        atomic_fetch_sub(a->total, sz);
    }
    sx__free(p);
}

static pthread_once_t json_alloc_once = PTHREAD_ONCE_INIT;

/* After a big DOM is freed: glibc keeps freed small blocks in the arena of the thread that
 * freed them, so requests on different workers would each keep a budget's worth of RSS;
 * malloc_trim returns the free pages of every arena to the kernel. A few ms, only past
 * TRIM_AFTER bytes of DOM. */
#define TRIM_AFTER ((uint64_t)64 << 20)

static void json_release(sx_server *s, const json_acct *a)
{
    atomic_fetch_sub(&s->json_inflight, a->bytes);
#ifdef __GLIBC__
    if (a->peak >= TRIM_AFTER)
        (void)malloc_trim(0);
#endif
}

static void json_alloc_install(void)
{
    json_set_alloc_funcs(json_alloc, json_free);
}

/* ------------------------------------------------------------------ routes */

static sx__route all_routes[MAX_ROUTES];
static size_t n_all_routes;
static pthread_once_t routes_once = PTHREAD_ONCE_INIT;

static void routes_build(void)
{
    const sx__route *tables[] = { sx__routes_collections, sx__routes_indexes, sx__routes_admin,
                                  sx__routes_entities,    sx__routes_import,  sx__routes_rbac,
                                  sx__routes_console };
    size_t n = 0;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
        for (const sx__route *r = tables[t]; r && r->path; r++) {
            if (n + 1 < MAX_ROUTES)
                all_routes[n++] = *r;
        }
    }
    all_routes[n].path = NULL;
    n_all_routes = n;
}

const sx__route *sx__server_routes(size_t *n)
{
    pthread_once(&routes_once, routes_build);
    *n = n_all_routes;
    return all_routes;
}

static const sx__route *route_find(const char *path)
{
    size_t n;
    const sx__route *rt = sx__server_routes(&n);
    size_t len = strlen(path);
    if (len > 1 && path[len - 1] == '/')
        len--;
    for (size_t i = 0; i < n; i++) {
        if (strlen(rt[i].path) == len && memcmp(rt[i].path, path, len) == 0)
            return &rt[i];
    }
    return NULL;
}

/* Returns the open (health) path `path` names (trailing slash tolerated), or NULL. */
static const char *health_path(const char *path)
{
    size_t len = strlen(path);
    if (len > 1 && path[len - 1] == '/')
        len--;
    static const char *const all[] = { "/livez", "/readyz", "/healthz", "/metrics" };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strlen(all[i]) == len && memcmp(all[i], path, len) == 0)
            return all[i];
    }
    return NULL;
}

static bool is_open_path(const char *p)
{
    for (size_t i = 0; sx__open_paths[i]; i++) {
        if (strcmp(sx__open_paths[i], p) == 0)
            return true;
    }
    return false;
}

/* ------------------------------------------------------------------ responses */

/* The answer being sent by this thread's request: its server's fresh_ms (handle_request). */
static _Thread_local int64_t tl_fresh_ms;

static void add_cors(struct MHD_Response *r)
{
    if (tl_fresh_ms > 0) {
        char v[32];
        (void)snprintf(v, sizeof v, "%lld", (long long)tl_fresh_ms);
        MHD_add_response_header(r, "X-Sextant-Fresh-Ms", v);
    }
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    MHD_add_response_header(r, "Access-Control-Allow-Headers",
                            "Authorization, Content-Type, DB-Name, Accept-Type-Allow-Int64, "
                            "Request-Timeout");
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "POST, GET, OPTIONS");
}

static void free_cb(void *p)
{
    sx__free(p);
}

/* Queues `len` bytes of `data` (copied) with a content type. Returns MHD's result. */
static enum MHD_Result send_bytes(
    struct MHD_Connection *c, unsigned status, const char *ctype, const char *data, size_t len)
{
    char *copy = sx__malloc(len ? len : 1);
    if (!copy)
        return MHD_NO;
    memcpy(copy, data, len);
    struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback(len, copy, free_cb);
    if (!r) {
        sx__free(copy);
        return MHD_NO;
    }
    add_cors(r);
    if (ctype)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static int dump_cb(const char *buf, size_t size, void *data)
{
    sx__wbuf *w = data;
    sx__wbuf_put(w, buf, size);
    return w->failed ? -1 : 0;
}

static const char *JSON_CT = "application/json; charset=utf-8";

/* Queues a JSON text; takes ownership of `text` (sx__malloc'd). */
static enum MHD_Result
send_text(struct MHD_Connection *c, unsigned status, uint8_t *text, size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer_with_free_callback(len, (char *)text, free_cb);
    if (!r) {
        sx__free(text);
        return MHD_NO;
    }
    add_cors(r);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, JSON_CT);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Queues a JSON body (not consumed). */
static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, const json_t *body)
{
    sx__wbuf w;
    sx__wbuf_init(&w);
    if (json_dump_callback(body, dump_cb, &w, JSON_COMPACT) != 0 || !sx__wbuf_ok(&w)) {
        sx__wbuf_fini(&w);
        static const char oom[] = "{\"code\":65535,\"message\":\"out of memory\"}";
        return send_bytes(c, MHD_HTTP_INTERNAL_SERVER_ERROR, JSON_CT, oom, sizeof oom - 1);
    }
    uint8_t *data = w.data; /* ownership moves to the response (a JSON text is never empty) */
    w.data = NULL;
    return send_text(c, status, data, w.len);
}

/* Queues {"code":code,"message":msg}. */
static enum MHD_Result
send_err(struct MHD_Connection *c, unsigned status, int code, const char *msg)
{
    json_t *b = json_pack("{s:i,s:s}", "code", code, "message", msg);
    if (!b)
        return MHD_NO;
    enum MHD_Result ret = send_json(c, status, b);
    json_decref(b);
    return ret;
}

/* ------------------------------------------------------------------ auth */

static int b64val(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+' || ch == '-')
        return 62;
    if (ch == '/' || ch == '_')
        return 63;
    return -1;
}

/* Decodes base64 (padding optional) into out (cap bytes). Returns the length or -1. */
static long b64_decode(const char *s, char *out, size_t cap);

long sx__b64_decode(const char *s, char *out, size_t cap)
{
    return b64_decode(s, out, cap);
}

static long b64_decode(const char *s, char *out, size_t cap)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0;
    for (; *s && *s != '='; s++) {
        int v = b64val((unsigned char)*s);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n + 1 >= cap)
                return -1;
            out[n++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[n] = 0;
    return (long)n;
}

/* AUTH_OK_USER: "user:password" of a user of the API's users and roles (rbac.c), checked by its
 * roles' privileges. */
typedef enum auth_result { AUTH_NONE, AUTH_OK, AUTH_OK_RO, AUTH_OK_USER } auth_result;

static auth_result
auth_credential(const sx_server *s, const char *credential, size_t clen, sx__principal *who);

/* Checks the Authorization header against the configured credentials. Every digest is compared
 * in full; the result is selected without branching on secret bytes inside the loop. */
static auth_result auth_check(const sx_server *s, struct MHD_Connection *c, sx__principal *who)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h)
        return AUTH_NONE;
    while (*h == ' ')
        h++;
    char cred_buf[CRED_MAX];
    const char *credential = NULL;
    size_t clen = 0;
    if (strncasecmp(h, "Bearer ", 7) == 0) {
        credential = h + 7;
        while (*credential == ' ')
            credential++;
        clen = strlen(credential);
    } else if (strncasecmp(h, "Basic ", 6) == 0) {
        const char *b = h + 6;
        while (*b == ' ')
            b++;
        long n = b64_decode(b, cred_buf, sizeof cred_buf);
        if (n < 0)
            return AUTH_NONE;
        credential = cred_buf;
        clen = (size_t)n;
    } else {
        return AUTH_NONE;
    }
    return auth_credential(s, credential, clen, who);
}

/* The API's users: "user:password" verified by rbac.c (argon2id, then a cached digest). */
static auth_result
auth_api_user(const sx_server *s, const char *credential, size_t clen, sx__principal *who)
{
    const char *colon = memchr(credential, ':', clen);
    size_t ul = colon ? (size_t)(colon - credential) : 0;
    if (!s->rbac || !colon || ul == 0 || ul > SX__RBAC_NAME_MAX)
        return AUTH_NONE;
    char user[SX__RBAC_NAME_MAX + 1];
    memcpy(user, credential, ul);
    user[ul] = '\0';
    if (sx__rbac_verify(s->rbac, user, colon + 1, clen - ul - 1) != 1)
        return AUTH_NONE;
    who->kind = SX__WHO_USER;
    memcpy(who->user, user, ul + 1);
    return AUTH_OK_USER;
}

/* Checks one presented credential ("user:password" or a token) against every digest, then
 * against the API's users. *who: the principal on success. */
static auth_result
auth_credential(const sx_server *s, const char *credential, size_t clen, sx__principal *who)
{
    while (clen > 0 && (credential[clen - 1] == ' ' || credential[clen - 1] == '\t'))
        clen--;
    if (clen == 0)
        return AUTH_NONE;
    uint8_t dg[32];
    sha256_digest(credential, clen, dg);
    unsigned ok = 0, ok_rw = 0;
    for (size_t i = 0; i < s->n_creds; i++) {
        uint8_t diff = 0;
        for (int j = 0; j < 32; j++)
            diff |= (uint8_t)(dg[j] ^ s->creds[i].digest[j]);
        unsigned match = (unsigned)(((unsigned)diff - 1u) >> 8) & 1u; /* 1 iff diff == 0 */
        ok |= match;
        ok_rw |= match & (unsigned)!s->creds[i].read_only;
    }
    memset(who, 0, sizeof *who);
    if (ok) { /* the name of a "user:password" credential, for display (sx__req.login) */
        const char *colon = memchr(credential, ':', clen);
        size_t ul = colon ? (size_t)(colon - credential) : 0;
        if (ul > 0 && ul < sizeof who->user) {
            memcpy(who->user, credential, ul);
            who->user[ul] = '\0';
        }
    }
    if (ok_rw)
        return AUTH_OK;
    if (ok) {
        who->kind = SX__WHO_RO;
        return AUTH_OK_RO;
    }
    return auth_api_user(s, credential, clen, who);
}

static sx_status cred_add(sx_server *s, const char *text, size_t len, bool ro)
{
    if (s->n_creds >= MAX_USERS)
        return sx__err(SX_EINVAL, "server: more than %d credentials", MAX_USERS);
    cred *n = sx__realloc(s->creds, (s->n_creds + 1) * sizeof *n);
    if (!n)
        return sx__err(SX_ENOMEM, "server: out of memory");
    s->creds = n;
    sha256_digest(text, len, s->creds[s->n_creds].digest);
    s->creds[s->n_creds].read_only = ro;
    s->n_creds++;
    return SX_OK;
}

static sx_status users_load(sx_server *s, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return sx__err_errno(errno, "server: cannot open users file %s", path);
    char line[CRED_MAX];
    sx_status st = SX_OK;
    unsigned lineno = 0;
    size_t before = s->n_creds;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            st = sx__err(SX_EINVAL, "server: %s:%u: line too long", path, lineno);
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' '))
            line[--len] = 0;
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        len = strlen(p);
        if (len == 0 || *p == '#')
            continue;
        const char *colon = strchr(p, ':');
        if (!colon || colon == p || colon[1] == 0) {
            st = sx__err(SX_EINVAL, "server: %s:%u: expected user:password or user:password:ro",
                         path, lineno);
            break;
        }
        bool ro = false;
        if (len > 3 && strcmp(p + len - 3, ":ro") == 0 && strchr(colon + 1, ':') != NULL) {
            ro = true;
            len -= 3;
        }
        st = cred_add(s, p, len, ro);
        if (st != SX_OK)
            break;
    }
    (void)fclose(f); /* read only */
    if (st == SX_OK && s->n_creds == before)
        st = sx__err(SX_EINVAL, "server: users file %s has no entries", path);
    return st;
}

/* ------------------------------------------------------------------ JSON */

/* Returns the maximum nesting depth of the JSON text, stopping early past `limit`. */
static size_t json_depth_scan(const char *p, size_t len, size_t limit)
{
    size_t depth = 0, max = 0;
    bool in_str = false, esc = false;
    for (size_t i = 0; i < len; i++) {
        char ch = p[i];
        if (in_str) {
            if (esc)
                esc = false;
            else if (ch == '\\')
                esc = true;
            else if (ch == '"')
                in_str = false;
            continue;
        }
        if (ch == '"') {
            in_str = true;
        } else if (ch == '[' || ch == '{') {
            if (++depth > max) {
                max = depth;
                if (max > limit)
                    return max;
            }
        } else if ((ch == ']' || ch == '}') && depth > 0) {
            depth--;
        }
    }
    return max;
}

static bool header_false(const char *v)
{
    return v && (strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0);
}

/* ------------------------------------------------------------------ the access handler */

static void access_log(const sx_server *s,
                       const char *method,
                       const char *path,
                       unsigned status,
                       int code,
                       double secs)
{
    if (s->opts.quiet)
        return;
    fprintf(stderr, "sextant: %s %s %u %d %.1fms\n", method, path, status, code, secs * 1e3);
}

static void finish(sx_server *s,
                   req_ctx *ctx,
                   const char *method,
                   const char *path,
                   const char *route,
                   unsigned status,
                   int code)
{
    double secs = now_s() - ctx->t0;
    sx__metrics_request(s->metrics, route, (int)status, code, secs);
    access_log(s, method, path, status, code, secs);
}

static enum MHD_Result answer_413(sx_server *s,
                                  struct MHD_Connection *c,
                                  req_ctx *ctx,
                                  const char *method,
                                  const char *url,
                                  uint64_t n)
{
    char msg[160];
    snprintf(msg, sizeof msg, "request body too large: %llu bytes > %llu", (unsigned long long)n,
             (unsigned long long)s->max_body);
    finish(s, ctx, method, url, "other", MHD_HTTP_CONTENT_TOO_LARGE, SX__MC_PARAM_TOO_LARGE);
    return send_err(c, MHD_HTTP_CONTENT_TOO_LARGE, SX__MC_PARAM_TOO_LARGE, msg);
}

static enum MHD_Result answer_health(sx_server *s,
                                     struct MHD_Connection *c,
                                     req_ctx *ctx,
                                     const char *method,
                                     const char *url,
                                     const char *hp)
{
    if (strcmp(hp, "/livez") == 0) {
        finish(s, ctx, method, url, hp, 200, 0);
        return send_bytes(c, 200, "text/plain; charset=utf-8", "ok", 2);
    }
    if (strcmp(hp, "/readyz") == 0) {
        bool ready = s->cat && !atomic_load(&s->stopping);
        unsigned st = ready ? 200 : 503;
        finish(s, ctx, method, url, hp, st, 0);
        return ready ? send_bytes(c, st, "text/plain; charset=utf-8", "ok", 2)
                     : send_bytes(c, st, "text/plain; charset=utf-8", "not ready", 9);
    }
    if (strcmp(hp, "/healthz") == 0) {
        finish(s, ctx, method, url, hp, 200, 0);
        static const char ok[] = "{\"status\":\"ok\"}";
        return send_bytes(c, 200, JSON_CT, ok, sizeof ok - 1);
    }
    /* /metrics */
    char *text = NULL;
    size_t len = 0;
    sx_status st = sx__metrics_render(s->metrics, s->cat, s->merger, &text, &len);
    if (st != SX_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "metrics: %s: %s", sx_status_str(st), sx_errmsg());
        finish(s, ctx, method, url, hp, 500, SX__MC_UNEXPECTED);
        return send_bytes(c, 500, "text/plain; charset=utf-8", msg, strlen(msg));
    }
    finish(s, ctx, method, url, hp, 200, 0);
    struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback(len, text, free_cb);
    if (!r) {
        sx__free(text);
        return MHD_NO;
    }
    add_cors(r);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* GET /webui...: the console's files (webui.c), without credentials. */
static enum MHD_Result answer_webui(
    sx_server *s, struct MHD_Connection *c, req_ctx *ctx, const char *method, const char *url)
{
    sx__webui_answer a;
    sx__webui_lookup(url, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "If-None-Match"), &a);
    finish(s, ctx, method, url, "/webui", a.status, 0);
    if (a.status == 404) {
        static const char nf[] = "404 page not found";
        return send_bytes(c, 404, "text/plain; charset=utf-8", nf, sizeof nf - 1);
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(
        a.status == 200 ? a.len : 0, a.status == 200 ? (void *)a.data : (void *)"",
        MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    if (a.location)
        MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, a.location);
    if (a.ctype)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, a.ctype);
    if (a.etag)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, a.etag);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, "Content-Security-Policy", SX__WEBUI_CSP);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    enum MHD_Result ret = MHD_queue_response(c, a.status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Cluster mode (a writer): opts.before_collection runs before a request that names a collection
 * (collectionName), with the collection's engine name (an alias or a renamed collection resolved
 * through the catalog; a name the catalog lacks as it is) and whether the route writes. False
 * with rs set when it refuses. */
static bool before_collection(
    sx_server *s, const sx__route *rt, const json_t *body, const char *db, sx__resp *rs)
{
    if (!s->opts.before_collection)
        return true;
    const char *name = json_string_value(sx__jget(body, "collectionName"));
    if (!name || !*name || strlen(name) > SX_MAX_NAME)
        return true;
    char ename[SX_MAX_NAME + 1];
    bool local = sx__cat_engine_name(s->cat, db, name, ename, sizeof ename);
    if (!local)
        (void)snprintf(ename, sizeof ename, "%s", name);
    sx_status st =
        s->opts.before_collection(s->opts.before_collection_ud, s, db, ename, rt->is_write, local);
    if (st == SX_OK)
        return true;
    sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "collection");
    return false;
}

static enum MHD_Result answer_route(sx_server *s,
                                    struct MHD_Connection *c,
                                    req_ctx *ctx,
                                    const char *method,
                                    const char *url,
                                    const sx__route *rt,
                                    const sx__principal *who)
{
    char msg[512];
    if (ctx->len == 0) {
        finish(s, ctx, method, url, rt->path, 200, SX__MC_BAD_JSON);
        return send_err(c, 200, SX__MC_BAD_JSON,
                        "can only accept json format request, error: EOF (empty request body)");
    }
    size_t depth = json_depth_scan(ctx->body, ctx->len, s->json_depth);
    if (depth > s->json_depth) {
        snprintf(msg, sizeof msg,
                 "can only accept json format request, error: JSON nesting deeper than %u levels",
                 s->json_depth);
        finish(s, ctx, method, url, rt->path, 200, SX__MC_BAD_JSON);
        return send_err(c, 200, SX__MC_BAD_JSON, msg);
    }
    json_error_t jerr;
    json_acct acct = { 0, 0, s->json_max, &s->json_inflight, s->json_total_max, 0 };
    tl_json = &acct;
    json_t *body = json_loadb(ctx->body, ctx->len, JSON_DECODE_ANY, &jerr);
    tl_json = NULL;
    if (!body && acct.over) {
        int code = acct.over == 1 ? SX__MC_PARAM_TOO_LARGE : SX__MC_LIMITED;
        if (acct.over == 1)
            snprintf(msg, sizeof msg,
                     "request body too large to parse: its JSON needs more than %llu MiB of "
                     "memory (--max-json-mb); send fewer rows per request",
                     (unsigned long long)(s->json_max >> 20));
        else
            snprintf(msg, sizeof msg,
                     "server busy: the JSON of the requests in flight uses the %llu MiB budget "
                     "(--max-json-total-mb); retry later",
                     (unsigned long long)(s->json_total_max >> 20));
        json_release(s, &acct);
        finish(s, ctx, method, url, rt->path, 200, code);
        return send_err(c, 200, code, msg);
    }
    if (json_is_null(body)) {
        /* `null` is an empty request, as Go's json.Unmarshal into Milvus's request structs
         * takes it (Milvus's own REST tests send it to collections/list in every teardown) */
        json_decref(body);
        body = json_object();
    }
    if (!body || !json_is_object(body)) {
        if (body)
            snprintf(msg, sizeof msg,
                     "can only accept json format request, error: the request body must be a "
                     "JSON object");
        else if (strstr(jerr.text, "JSON_ALLOW_NUL")) /* jansson names its flag */
            snprintf(msg, sizeof msg,
                     "can only accept json format request, error: strings must not contain NUL "
                     "(\\u0000) (line %d, column %d)",
                     jerr.line, jerr.column);
        else
            snprintf(msg, sizeof msg,
                     "can only accept json format request, error: %s (line %d, column %d)",
                     jerr.text, jerr.line, jerr.column);
        json_decref(body);
        json_release(s, &acct);
        finish(s, ctx, method, url, rt->path, 200, SX__MC_BAD_JSON);
        return send_err(c, 200, SX__MC_BAD_JSON, msg);
    }

    sx__req rq;
    memset(&rq, 0, sizeof rq);
    rq.srv = s;
    rq.cat = s->cat;
    rq.metrics = s->metrics;
    rq.merger = s->merger;
    rq.opts = &s->opts;
    rq.body = body;
    rq.read_only_user = who->kind == SX__WHO_RO;
    rq.user = who->kind == SX__WHO_USER ? who->user : NULL;
    rq.login = who->user[0] ? who->user : NULL;
    rq.db_name = "default";
    const char *dbh = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "DB-Name");
    if (dbh && *dbh)
        rq.db_name = dbh;
    json_t *dbv = sx__jget(body, "dbName");
    if (json_is_string(dbv) && json_string_length(dbv) > 0)
        rq.db_name = json_string_value(dbv);
    rq.int64_as_string =
        header_false(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept-Type-Allow-Int64"));
    rq.timeout_s = s->opts.request_timeout_s ? (double)s->opts.request_timeout_s : 30.0;
    const char *to = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Request-Timeout");
    if (to) {
        char *end = NULL;
        double v = strtod(to, &end);
        if (end && end != to && *end == 0 && v > 0 && v <= MAX_TIMEOUT_S)
            rq.timeout_s = v;
    }

    /* an API user: its roles' privileges on the route's object (rbac.c) */
    if (who->kind == SX__WHO_USER &&
        !sx__rbac_allowed(s->rbac, who, rt->path, rq.db_name, body, msg, sizeof msg)) {
        json_decref(body);
        json_release(s, &acct);
        finish(s, ctx, method, url, rt->path, 403, SX__MC_PRIV_DENIED);
        return send_err(c, 403, SX__MC_PRIV_DENIED, msg);
    }
    sx__resp rs = { 200, NULL, NULL, 0 };
    /* The request's deadline, for the engine reads the handler makes (sx_deadline_set is per
     * thread: this worker's, restored after). A merged search batch runs under the deadline of
     * the request whose thread runs it. */
    int64_t prev_deadline = sx_deadline_set(sx_clock_ns() + (int64_t)(rq.timeout_s * 1e9));
    if (before_collection(s, rt, rq.body, rq.db_name, &rs))
        rt->fn(&rq, &rs);
    (void)sx_deadline_set(prev_deadline);
    if (rs.body) {
        sx__free(rs.text); /* a failure after the text was made */
        rs.text = NULL;
    }
    if (!rs.body && !rs.text)
        sx__ok(&rs, NULL);
    int code = rs.text ? SX__MC_OK : SX__MC_UNEXPECTED;
    json_t *cv = rs.body ? json_object_get(rs.body, "code") : NULL;
    if (json_is_integer(cv))
        code = (int)json_integer_value(cv);
    unsigned status = rs.http_status > 0 ? (unsigned)rs.http_status : 200;
    finish(s, ctx, method, url, rt->path, status, code);
    enum MHD_Result ret;
    if (rs.text)
        ret = send_text(c, status, rs.text, rs.text_len);
    else if (rs.body)
        ret = send_json(c, status, rs.body);
    else
        ret = send_err(c, 500, SX__MC_UNEXPECTED, "out of memory");
    json_decref(rs.body);
    json_decref(body);
    json_release(s, &acct); /* the DOM is gone */
    return ret;
}

static enum MHD_Result handle_request(sx_server *s,
                                      struct MHD_Connection *c,
                                      const char *url,
                                      const char *method,
                                      const char *upload_data,
                                      size_t *upload_data_size,
                                      void **con_cls)
{
    req_ctx *ctx = *con_cls;
    if (!ctx) {
        ctx = sx__calloc(1, sizeof *ctx);
        if (!ctx)
            return MHD_NO;
        ctx->t0 = now_s();
        ctx->conn = conn_of(c);
        *con_cls = ctx;
        pthread_mutex_lock(&s->mu);
        s->inflight++;
        pthread_mutex_unlock(&s->mu);
        conn_set(s, ctx->conn, PH_BODY);
        bool get =
            strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
        if (atomic_load(&s->stopping) && !(get && health_path(url))) {
            /* stopping: health routes still answer (readyz 503), nothing new starts */
            ctx->early = true;
            conn_set(s, ctx->conn, PH_BUSY);
            finish(s, ctx, method, url, "other", 503, SX__MC_NOT_READY);
            return send_err(c, 503, SX__MC_NOT_READY, "server is shutting down");
        }
        const char *cl =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end = NULL;
            errno = 0;
            unsigned long long n = strtoull(cl, &end, 10);
            if (errno == ERANGE || (end && end != cl && *end == 0 && n > s->max_body)) {
                ctx->early = true;
                conn_set(s, ctx->conn, PH_BUSY);
                return answer_413(s, c, ctx, method, url, errno == ERANGE ? UINT64_MAX : n);
            }
            if (end && end != cl && *end == 0 && n > 0) {
                /* reserve what was declared, up to PREALLOC_MAX: a client that declares much
                 * and sends little must not make every connection hold the limit */
                size_t cap = (size_t)n + 1 < PREALLOC_MAX ? (size_t)n + 1 : PREALLOC_MAX;
                ctx->body = sx__malloc(cap);
                if (!ctx->body)
                    return MHD_NO;
                ctx->cap = cap;
            }
        }
        return MHD_YES;
    }
    if (ctx->early) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        ctx->seen += n;
        if (ctx->conn)
            atomic_fetch_add_explicit(&ctx->conn->body_bytes, n, memory_order_relaxed);
        if (ctx->too_big || ctx->seen > s->max_body) {
            ctx->too_big = true;
            sx__free(ctx->body);
            ctx->body = NULL;
            ctx->len = ctx->cap = 0;
            /* Discarded so the 413 can be read; past DISCARD_MAX more the connection is
             * dropped. XXX: that client is cut off without an answer. */
            return ctx->seen - s->max_body > DISCARD_MAX ? MHD_NO : MHD_YES;
        }
        if (ctx->len + n + 1 > ctx->cap) {
            size_t cap = ctx->cap ? ctx->cap : 4096;
            while (cap < ctx->len + n + 1)
                cap *= 2;
            if (cap > s->max_body + 1)
                cap = (size_t)s->max_body + 1;
            char *nb = sx__realloc(ctx->body, cap);
            if (!nb)
                return MHD_NO;
            ctx->body = nb;
            ctx->cap = cap;
        }
        memcpy(ctx->body + ctx->len, upload_data, n);
        ctx->len += n;
        return MHD_YES;
    }

    /* final call: the whole request is here */
    conn_set(s, ctx->conn, PH_BUSY);
    if (ctx->too_big)
        return answer_413(s, c, ctx, method, url, ctx->seen);
    if (strcmp(method, MHD_HTTP_METHOD_OPTIONS) == 0) {
        finish(s, ctx, method, url, "other", 204, 0);
        return send_bytes(c, 204, NULL, "", 0);
    }
    bool is_get =
        strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    if (is_get && sx__webui_path(url))
        return answer_webui(s, c, ctx, method, url);
    const char *hp = is_get ? health_path(url) : NULL;
    const sx__route *rt = NULL;
    if (hp) {
        if (!s->auth_on || is_open_path(hp))
            return answer_health(s, c, ctx, method, url, hp);
    } else if (strcmp(method, MHD_HTTP_METHOD_POST) == 0) {
        rt = route_find(url);
    }
    if (!hp && !rt) {
        finish(s, ctx, method, url, "other", 404, 0);
        static const char nf[] = "404 page not found";
        return send_bytes(c, 404, "text/plain; charset=utf-8", nf, sizeof nf - 1);
    }
    sx__principal who = { SX__WHO_SUPER, "" };
    if (s->auth_on) {
        auth_result a = auth_check(s, c, &who);
        const char *label = rt ? rt->path : hp;
        if (a == AUTH_NONE) {
            finish(s, ctx, method, url, label, 401, SX__MC_UNAUTHENTICATED);
            return send_err(c, 401, SX__MC_UNAUTHENTICATED, "user hasn't authenticated");
        }
        if (a == AUTH_OK_RO && rt && rt->is_write) {
            finish(s, ctx, method, url, label, 403, SX__MC_PRIV_DENIED);
            return send_err(c, 403, SX__MC_PRIV_DENIED, "permission deny: the user is read-only");
        }
        if (!rt)
            return answer_health(s, c, ctx, method, url, hp);
    }
    if (!rt) /* unreachable: hp with auth off was answered above */
        return answer_health(s, c, ctx, method, url, hp);
    /* read before the handler runs: the answer is at least this fresh */
    tl_fresh_ms = atomic_load(&s->fresh_ms);
    enum MHD_Result res = answer_route(s, c, ctx, method, url, rt, &who);
    tl_fresh_ms = 0;
    return res;
}

/* MHD's access handler: handle_request, with the time spent in it counted as the worker's
 * stall (see struct worker). */
static enum MHD_Result on_request(void *cls,
                                  struct MHD_Connection *c,
                                  const char *url,
                                  const char *method,
                                  const char *version,
                                  const char *upload_data,
                                  size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    sx_server *s = cls;
    worker *w = this_worker(s);
    uint64_t t0 = mono_ns();
    if (w)
        atomic_store(&w->busy_since, t0 ? t0 : 1);
    enum MHD_Result r = handle_request(s, c, url, method, upload_data, upload_data_size, con_cls);
    if (w) {
        uint64_t t1 = mono_ns();
        atomic_fetch_add(&w->stall_ns, t1 > t0 ? t1 - t0 : 0);
        atomic_store(&w->busy_since, 0);
    }
    return r;
}

static void on_completed(void *cls,
                         struct MHD_Connection *c,
                         void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    sx_server *s = cls;
    conn_set(s, conn_of(c), PH_IDLE); /* kept alive, or about to close */
    req_ctx *ctx = *con_cls;
    if (!ctx)
        return;
    *con_cls = NULL;
    sx__free(ctx->body);
    sx__free(ctx);
    pthread_mutex_lock(&s->mu);
    if (s->inflight > 0)
        s->inflight--;
    if (s->inflight == 0)
        pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
}

__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    fprintf(stderr, "sextant: http: ");
    (void)vfprintf(stderr, fmt, ap);
}

/* ------------------------------------------------------------------ start / stop */

static bool addr_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
            return true;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            return in6->sin6_addr.s6_addr[12] == 127;
    }
    return false;
}

static int bind_to(int fd, const struct sockaddr *sa, socklen_t len)
{
    return bind(fd, sa, len);
}

static void server_free(sx_server *s)
{
    if (!s)
        return;
    sx__merger_free(s->merger);
    sx__metrics_free(s->metrics);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->reap_cv);
    pthread_mutex_destroy(&s->conn_mu);
    sx__free(s->workers);
    sx__free(s->creds);
    sx__rbac_close(s->rbac);
    sx__free(s->data_dir);
    sx__free(s->bind_addr);
    sx__free(s->import_root);
    sx__free(s);
}

/* Opens the listening socket (ours: the front door in grpc.c accepts on it) and starts MHD
 * without one. On failure s->listen_fd may be open (the caller closes it). */
static sx_status start_listening(sx_server *s,
                                 const struct sockaddr *sa,
                                 const char *bind,
                                 const sx_server_options *opts)
{
    sx_status st = SX_OK;
    /* The port is ours (the front door in grpc.c accepts, gRPC stays there, HTTP/1 goes to
     * MHD): MHD runs without a listening socket. */
    s->listen_fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    socklen_t salen = sa->sa_family == AF_INET6 ? (socklen_t)sizeof(struct sockaddr_in6)
                                                : (socklen_t)sizeof(struct sockaddr_in);
    if (s->listen_fd < 0 ||
        setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind_to(s->listen_fd, sa, salen) != 0 || listen(s->listen_fd, 1024) != 0) {
        st = sx__err(SX_EIO, "server: cannot listen on %s:%u (%s)", bind, (unsigned)opts->port,
                     strerror(errno));
        return st;
    }
    struct sockaddr_storage bound;
    memset(&bound, 0, sizeof bound);
    socklen_t bl = sizeof bound;
    if (getsockname(s->listen_fd, (struct sockaddr *)&bound, &bl) != 0) {
        st = sx__err_errno(errno, "server: cannot read the bound port");
        return st;
    }
    s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                : ((struct sockaddr_in *)&bound)->sin_port);
    unsigned flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC | MHD_USE_NO_LISTEN_SOCKET;
    if (sa->sa_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (!s->opts.quiet)
        flags |= MHD_USE_ERROR_LOG;
    unsigned mhd_limit = s->opts.max_connections + CONN_RESERVE;
    s->d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)s->opts.http_threads, MHD_OPTION_CONNECTION_LIMIT,
        mhd_limit, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->opts.idle_timeout_s,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        s, MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_END);
    if (!s->d) {
        st = sx__err(SX_EIO, "server: cannot start the HTTP server on %s:%u", bind,
                     (unsigned)opts->port);
        return st;
    }
    return SX_OK;
}

/* The single-node service under the gRPC front end (server.h, sx__svc): the route handlers and
 * the catalog of this process. */
static json_t *svc_call(void *ctx,
                        const char *route,
                        const json_t *body,
                        const char *db,
                        const sx__principal *who,
                        const char *authz,
                        double timeout_s,
                        const char *log_name)
{
    (void)authz; /* checked by the transport already (svc_auth) */
    return sx__server_call_who(ctx, route, body, db, who, timeout_s, log_name);
}

static sx_status
svc_coll_get(void *ctx, const char *authz, const char *db, const char *name, sx__coll_meta *meta)
{
    (void)authz;
    return sx__cat_coll_get(((sx_server *)ctx)->cat, db, name, NULL, meta);
}

static sx_status
svc_coll_list(void *ctx, const char *authz, const char *db, char ***names, size_t *n)
{
    (void)authz;
    return sx__cat_coll_list(((sx_server *)ctx)->cat, db, names, n);
}

static sx_status svc_db_list(void *ctx, const char *authz, char ***names, size_t *n)
{
    (void)authz;
    return sx__cat_db_list(((sx_server *)ctx)->cat, names, n);
}

static sx_status
svc_db_describe(void *ctx, const char *authz, const char *db, json_t **props, int64_t *db_id)
{
    (void)authz;
    return sx__cat_db_describe(((sx_server *)ctx)->cat, db, props, db_id);
}

static bool svc_db_exists(void *ctx, const char *authz, const char *db)
{
    (void)authz;
    return sx__cat_db_exists(((sx_server *)ctx)->cat, db);
}

static bool svc_stopping(void *ctx)
{
    return sx__server_stopping(ctx);
}

static int svc_auth(void *ctx, const char *authz, sx__principal *who)
{
    return sx__server_auth_who(ctx, authz, who);
}

static void svc_add_http(void *ctx, int fd, const struct sockaddr *addr, socklen_t len)
{
    sx__server_add_http(ctx, fd, addr, len);
}

static const sx__svc_ops SERVER_SVC = {
    svc_call,      svc_coll_get, svc_coll_list, svc_db_list,  svc_db_describe,
    svc_db_exists, svc_stopping, svc_auth,      svc_add_http,
};

sx_status sx_server_start(const sx_server_options *opts, sx_server **out)
{
    if (!opts || !out)
        return sx__err(SX_EINVAL, "server: options and out are required");
    if (!opts->data_dir || !*opts->data_dir)
        return sx__err(SX_EINVAL, "server: data_dir is required");
    const char *bind = opts->bind_addr && *opts->bind_addr ? opts->bind_addr : "127.0.0.1";
    bool has_token = opts->auth_token && *opts->auth_token;
    bool has_users = opts->users_file && *opts->users_file;

    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%u", (unsigned)opts->port);
    int gai = getaddrinfo(bind, portstr, &hints, &ai);
    if (gai != 0 || !ai)
        return sx__err(SX_EINVAL, "server: bad bind address '%s': %s", bind, gai_strerror(gai));
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    memcpy(&ss, ai->ai_addr, ai->ai_addrlen < sizeof ss ? ai->ai_addrlen : sizeof ss);
    freeaddrinfo(ai);
    const struct sockaddr *sa = (const struct sockaddr *)&ss;
    if (!has_token && !has_users && !addr_is_loopback(sa))
        return sx__err(SX_EINVAL,
                       "server: refusing to listen on non-loopback address %s without "
                       "credentials: configure --auth-token TOKEN (or SEXTANT_AUTH_TOKEN) or "
                       "--users FILE",
                       bind);

    sx_server *s = sx__calloc(1, sizeof *s);
    if (!s)
        return sx__err(SX_ENOMEM, "server: out of memory");
    s->listen_fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->idle, NULL);
    pthread_mutex_init(&s->conn_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->reap_cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&s->stopping, false);
    atomic_init(&s->n_workers, 0u);
    atomic_init(&s->json_inflight, 0);
    pthread_once(&json_alloc_once, json_alloc_install);
    s->opts = *opts;
    s->data_dir = sx__strdup(opts->data_dir);
    s->bind_addr = sx__strdup(bind);
    sx_status st = SX_OK;
    if (!s->data_dir || !s->bind_addr) {
        st = sx__err(SX_ENOMEM, "server: out of memory");
        goto fail;
    }
    s->opts.data_dir = s->data_dir;
    s->opts.bind_addr = s->bind_addr;
    if (opts->import_root) {
        s->import_root = sx__strdup(opts->import_root);
        if (!s->import_root) {
            st = sx__err(SX_ENOMEM, "server: out of memory");
            goto fail;
        }
    }
    s->opts.import_root = s->import_root;
    s->opts.auth_token = NULL; /* only the digest is kept */
    s->opts.users_file = NULL;
    if (!s->opts.max_body_bytes)
        s->opts.max_body_bytes = DEFAULT_MAX_BODY;
    if (!s->opts.max_connections)
        s->opts.max_connections = DEFAULT_MAX_CONN;
    if (!s->opts.idle_timeout_s)
        s->opts.idle_timeout_s = DEFAULT_IDLE_S;
    if (!s->opts.http_threads) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        s->opts.http_threads = nc > 4 ? (uint32_t)(4 * nc) : 16; /* handlers block in the merger */
        if (s->opts.http_threads > 256)
            s->opts.http_threads = 256;
    }
    if (!s->opts.max_nq)
        s->opts.max_nq = DEFAULT_MAX_NQ;
    if (!s->opts.max_json_depth)
        s->opts.max_json_depth = DEFAULT_JSON_DEPTH;
    if (!s->opts.merge_wait_us)
        s->opts.merge_wait_us = 50000;
    if (!s->opts.merge_max_nq)
        s->opts.merge_max_nq = 256;
    s->max_body = s->opts.max_body_bytes;
    if (s->max_body > SIZE_MAX / 4)
        s->max_body = SIZE_MAX / 4;
    s->json_depth = s->opts.max_json_depth;
    if (!s->opts.max_connections_per_ip)
        s->opts.max_connections_per_ip =
            s->opts.max_connections > 1 ? s->opts.max_connections / 2 : 1;
    if (!s->opts.header_timeout_s)
        s->opts.header_timeout_s = DEFAULT_HEADER_S;
    if (!s->opts.min_upload_bytes_per_s)
        s->opts.min_upload_bytes_per_s = DEFAULT_MIN_RATE;
    if (!s->opts.shutdown_grace_s)
        s->opts.shutdown_grace_s = DEFAULT_GRACE_S;
    if (!s->opts.max_json_bytes)
        s->opts.max_json_bytes = DEFAULT_JSON_BYTES;
    if (!s->opts.max_json_total_bytes)
        s->opts.max_json_total_bytes = DEFAULT_JSON_TOTAL;
    s->header_ns = (uint64_t)s->opts.header_timeout_s * NS_PER_S;
    s->idle_ns = (uint64_t)s->opts.idle_timeout_s * NS_PER_S;
    s->grace_ns = (uint64_t)s->opts.shutdown_grace_s * NS_PER_S;
    s->min_rate = s->opts.min_upload_bytes_per_s;
    s->json_max = s->opts.max_json_bytes;
    s->json_total_max = s->opts.max_json_total_bytes;
    s->n_workers_cap = s->opts.http_threads + 2;
    s->workers = sx__calloc(s->n_workers_cap, sizeof *s->workers);
    if (!s->workers) {
        st = sx__err(SX_ENOMEM, "server: out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < s->n_workers_cap; i++) {
        atomic_init(&s->workers[i].stall_ns, 0);
        atomic_init(&s->workers[i].busy_since, 0);
    }

    if (has_token) {
        st = cred_add(s, opts->auth_token, strlen(opts->auth_token), false);
        if (st != SX_OK)
            goto fail;
    }
    if (has_users) {
        st = users_load(s, opts->users_file);
        if (st != SX_OK)
            goto fail;
    }
    s->auth_on = s->n_creds > 0;

    st = sx__metrics_new(&s->metrics);
    if (st != SX_OK)
        goto fail;
    if (!s->opts.merge_disable) {
        st = sx__merger_new(&s->opts, &s->merger);
        if (st != SX_OK)
            goto fail;
    }
    st = sx__rbac_open(s->data_dir, &s->rbac);
    if (st != SX_OK)
        goto fail;
    st = sx__cat_open(s->data_dir, &s->opts.db, &s->cat);
    if (st != SX_OK)
        goto fail;

    st = start_listening(s, sa, bind, opts);
    if (st != SX_OK)
        goto fail_cat;
    if (pthread_create(&s->reaper, NULL, reaper_main, s) != 0) {
        st = sx__err(SX_EIO, "server: cannot start the connection reaper thread");
        MHD_stop_daemon(s->d);
        s->d = NULL;
        goto fail_cat;
    }
    s->reaper_on = true;
    s->svc = (sx__svc){ &SERVER_SVC,
                        s,
                        s->opts.header_timeout_s,
                        s->opts.idle_timeout_s,
                        s->opts.max_connections,
                        s->opts.max_connections_per_ip,
                        s->opts.http_threads,
                        s->opts.max_body_bytes };
    st = sx__grpc_start(&s->svc, s->listen_fd, &s->grpc);
    if (st != SX_OK) {
        pthread_mutex_lock(&s->conn_mu);
        s->reap_stop = true;
        pthread_cond_signal(&s->reap_cv);
        pthread_mutex_unlock(&s->conn_mu);
        pthread_join(s->reaper, NULL);
        s->reaper_on = false;
        MHD_stop_daemon(s->d);
        s->d = NULL;
        goto fail_cat;
    }
    *out = s;
    return SX_OK;

fail_cat:
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    s->listen_fd = -1;
fail:
    if (s->cat) {
        sx__ignore(sx__cat_close(s->cat));
        s->cat = NULL;
    }
    server_free(s);
    return st;
}

/* ------------------------------------------------------------------ for the gRPC side */

const sx__svc *sx__server_svc(const sx_server *s)
{
    return &s->svc;
}

sx__catalog *sx__server_catalog(sx_server *s)
{
    return s->cat;
}

bool sx__server_stopping(const sx_server *s)
{
    return atomic_load(&s->stopping);
}

sx__rbac *sx__server_rbac(sx_server *s)
{
    return s->rbac;
}

int sx__server_auth_who(const sx_server *s, const char *meta, sx__principal *who)
{
    memset(who, 0, sizeof *who);
    who->kind = SX__WHO_SUPER;
    if (!s->auth_on)
        return 0;
    if (!meta || !*meta)
        return -1;
    while (*meta == ' ')
        meta++;
    char buf[CRED_MAX];
    const char *presented = NULL;
    size_t clen = 0;
    if (strncasecmp(meta, "Bearer ", 7) == 0) {
        presented = meta + 7;
        clen = strlen(presented);
    } else {
        /* the SDKs send base64("user:password") or base64(token), with or without "Basic " */
        const char *b = strncasecmp(meta, "Basic ", 6) == 0 ? meta + 6 : meta;
        long n = b64_decode(b, buf, sizeof buf);
        if (n < 0)
            return -1;
        presented = buf;
        clen = (size_t)n;
    }
    auth_result r = auth_credential(s, presented, clen, who);
    if (r == AUTH_NONE) {
        who->kind = SX__WHO_SUPER;
        return -1;
    }
    return 0;
}

void sx__server_add_http(sx_server *s, int fd, const struct sockaddr *addr, socklen_t len)
{
    /* MHD owns the socket from here: it closes it itself when it cannot take it */
    if (MHD_add_connection(s->d, fd, addr, len) != MHD_YES && !s->opts.quiet)
        fprintf(stderr, "sextant: HTTP connection refused (connection limit or memory)\n");
}

json_t *sx__server_call(sx_server *s,
                        const char *route,
                        const json_t *body,
                        const char *db,
                        bool read_only,
                        double timeout_s,
                        const char *log_name)
{
    sx__principal who = { read_only ? SX__WHO_RO : SX__WHO_SUPER, "" };
    return sx__server_call_who(s, route, body, db, &who, timeout_s, log_name);
}

json_t *sx__server_call_who(sx_server *s,
                            const char *route,
                            const json_t *body,
                            const char *db,
                            const sx__principal *who,
                            double timeout_s,
                            const char *log_name)
{
    double t0 = now_s();
    const sx__route *rt = route_find(route);
    bool read_only = who->kind == SX__WHO_RO;
    if (!rt)
        return json_pack("{s:i,s:s}", "code", SX__MC_UNEXPECTED, "message", "no such route");
    if (read_only && rt->is_write)
        return json_pack("{s:i,s:s}", "code", SX__MC_PRIV_DENIED, "message",
                         "permission denied: read-only user");
    char why[512];
    if (who->kind == SX__WHO_USER &&
        !sx__rbac_allowed(s->rbac, who, rt->path, db && *db ? db : "default", body, why,
                          sizeof why))
        return json_pack("{s:i,s:s}", "code", SX__MC_PRIV_DENIED, "message", why);
    json_t *ans = NULL;
    pthread_mutex_lock(&s->mu);
    s->inflight++;
    pthread_mutex_unlock(&s->mu);
    sx__req rq;
    memset(&rq, 0, sizeof rq);
    rq.srv = s;
    rq.cat = s->cat;
    rq.metrics = s->metrics;
    rq.merger = s->merger;
    rq.opts = &s->opts;
    rq.body = (json_t *)body; /* handlers only read it */
    rq.read_only_user = read_only;
    rq.user = who->kind == SX__WHO_USER ? who->user : NULL;
    rq.login = who->user[0] ? who->user : NULL;
    rq.db_name = db && *db ? db : "default";
    rq.int64_as_string = false;
    rq.timeout_s = s->opts.request_timeout_s ? (double)s->opts.request_timeout_s : 30.0;
    if (timeout_s > 0 && timeout_s <= MAX_TIMEOUT_S * 24)
        rq.timeout_s = timeout_s;
    sx__resp rs = { 200, NULL, NULL, 0 };
    int64_t prev_deadline = sx_deadline_set(sx_clock_ns() + (int64_t)(rq.timeout_s * 1e9));
    if (before_collection(s, rt, rq.body, rq.db_name, &rs))
        rt->fn(&rq, &rs);
    (void)sx_deadline_set(prev_deadline);
    if (rs.body) {
        sx__free(rs.text);
        rs.text = NULL;
    }
    if (!rs.body && !rs.text)
        sx__ok(&rs, NULL);
    ans = sx__resp_json(&rs);
    if (!ans)
        ans = json_pack("{s:i,s:s}", "code", SX__MC_UNEXPECTED, "message", "out of memory");
    json_t *cv = ans ? json_object_get(ans, "code") : NULL;
    int code = json_is_integer(cv) ? (int)json_integer_value(cv) : SX__MC_UNEXPECTED;
    double secs = now_s() - t0;
    sx__metrics_request(s->metrics, rt->path, 200, code, secs);
    access_log(s, "GRPC", log_name ? log_name : rt->path, 200, code, secs);
    pthread_mutex_lock(&s->mu);
    if (--s->inflight == 0)
        pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
    return ans;
}

uint16_t sx_server_port(const sx_server *s)
{
    return s ? s->port : 0;
}

sx_status sx_server_refresh(sx_server *s, size_t *changed)
{
    sx__err_clear();
    size_t ch = 0;
    sx_status st = s ? sx__cat_refresh(s->cat, &ch) : sx__err(SX_EINVAL, "no server");
    if (changed)
        *changed = ch;
    return st;
}

sx_status sx_server_follow_databases(sx_server *s, const char *const *names, size_t n)
{
    sx__err_clear();
    if (!s)
        return sx__err(SX_EINVAL, "no server");
    sx_status first = SX_OK;
    for (size_t i = 0; i < n; i++) {
        sx_status st = sx__cat_db_follow(s->cat, names[i]);
        if (st != SX_OK && first == SX_OK)
            first = st;
    }
    return first;
}

typedef struct sync_ctx {
    size_t flushed;
    sx_status first;
    char msg[512];
} sync_ctx;

static int sync_one(void *ctx, const char *db, const sx__coll_meta *meta, sx_collection *h)
{
    sync_ctx *x = ctx;
    if (!sx_collection_unsynced(h))
        return 0;
    sx_status st = sx_flush(h);
    if (st == SX_OK) {
        x->flushed++;
    } else if (st == SX_ESTALE) {
        /* cluster mode: a copy another writer took over since (rows this writer acknowledged
         * in an epoch that is over are lost, never committed): nothing owed here */
        sx__err_clear();
    } else if (x->first == SX_OK) {
        x->first = st;
        (void)snprintf(x->msg, sizeof x->msg, "%s.%s: %s", db, meta->name, sx_errmsg());
    }
    return 0;
}

sx_status sx_server_sync(sx_server *s, size_t *flushed)
{
    sx__err_clear();
    if (flushed)
        *flushed = 0;
    if (!s || s->opts.db.read_only)
        return sx__err(SX_EINVAL, "sx_server_sync: a writable server");
    sync_ctx x = { 0, SX_OK, "" };
    sx_status st = sx__cat_foreach(s->cat, sync_one, &x);
    if (flushed)
        *flushed = x.flushed;
    if (st != SX_OK)
        return st;
    return x.first == SX_OK ? SX_OK : sx__err(x.first, "%s", x.msg);
}

sx_status sx_server_adopt_collection(sx_server *s,
                                     const char *db,
                                     const char *collection,
                                     const char *keep_dir)
{
    sx__err_clear();
    if (!s || !db || !collection)
        return sx__err(SX_EINVAL, "sx_server_adopt_collection: server, database and collection");
    return sx__cat_coll_adopt(s->cat, db, collection, keep_dir);
}

bool sx_server_has_collection(sx_server *s, const char *db, const char *collection)
{
    return s && db && collection && sx__cat_has_coll(s->cat, db, collection);
}

void sx_server_set_fresh_ms(sx_server *s, int64_t wall_ms)
{
    if (s)
        atomic_store(&s->fresh_ms, wall_ms);
}

sx_status sx_server_stop(sx_server *s)
{
    if (!s)
        return SX_OK;
    atomic_store(&s->stopping, true);
    pthread_mutex_lock(&s->conn_mu);
    s->stop_ns = mono_ns();
    pthread_mutex_unlock(&s->conn_mu);
    sx__grpc_quiesce(s->grpc); /* GOAWAY to gRPC clients; new calls UNAVAILABLE */
    /* Still accepting: /readyz answers 503, other new requests 503. Requests being handled
     * finish; uploads and headers still arriving after the grace are cut by the reaper. The
     * bound covers a handler that never returns. */
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)s->opts.shutdown_grace_s + (time_t)s->opts.idle_timeout_s + 5;
    pthread_mutex_lock(&s->mu);
    while (s->inflight > 0) {
        if (pthread_cond_timedwait(&s->idle, &s->mu, &dl) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&s->mu);
    sx__grpc_stop(s->grpc); /* the front door closes; gRPC calls still out finish */
    s->grpc = NULL;
    close(s->listen_fd);
    s->listen_fd = -1;
    MHD_stop_daemon(s->d);
    s->d = NULL;
    pthread_mutex_lock(&s->conn_mu);
    s->reap_stop = true;
    pthread_cond_signal(&s->reap_cv);
    pthread_mutex_unlock(&s->conn_mu);
    if (s->reaper_on)
        pthread_join(s->reaper, NULL);
    sx_status st = sx__cat_close(s->cat);
    s->cat = NULL;
    server_free(s);
    return st;
}
