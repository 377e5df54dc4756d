/*
 * grpc.c: the server's port (the front door) and the gRPC transport: HTTP/2 cleartext with prior
 * knowledge (h2c) on nghttp2, the gRPC framing, and the worker pool that runs the calls. The RPCs
 * themselves are grpc_milvus.c's.
 *
 * One port, two protocols (as Milvus serves REST and gRPC on 19530). http.c opens the listening
 * socket and starts libmicrohttpd with MHD_USE_NO_LISTEN_SOCKET; this file's loop thread accepts.
 * A new connection waits (pending) until its first bytes tell: the 24-byte HTTP/2 client preface
 * "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" (RFC 9113 3.4; grpc-js and grpcio send it at once on an
 * insecure channel) makes it a gRPC connection; any byte that is not a prefix of the preface hands
 * the socket to libmicrohttpd (the service's add_http: MHD_add_connection), which serves it as
 * before (admission, deadlines, limits: http.c). The bytes are read with MSG_PEEK, so MHD sees the
 * request from its first byte. A pending connection that sends nothing within header_timeout_s is
 * closed; at most max_connections wait at once (the oldest is closed past it).
 *
 * Threads.
 *   - the loop thread: epoll over the listening socket, the pending sockets, every gRPC
 *     connection and an eventfd. It owns every nghttp2 session (nghttp2 is not thread-safe: only
 *     this thread touches a session, a stream or a connection record).
 *   - workers (http_threads of them): take a complete call from the work queue, unpack and run it
 *     (grpc_milvus.c: protobuf-c, the service layer), put the answer on the done queue and write
 *     the eventfd. The loop thread sends it.
 *   Locks: q_mu guards both queues and `stop`; it is a leaf (nothing is called under it but
 *   pthread_cond_* and list operations).
 *
 * A call's life: HEADERS (path, grpc-timeout, authorization, dbname, grpc-encoding: on_header)
 * -> DATA (appended to the stream's buffer; when the 5-byte prefix is in, a declared length over
 * max_body_bytes is answered RESOURCE_EXHAUSTED at once and the rest discarded) -> END_STREAM ->
 * auth (UNAUTHENTICATED), framing checks (INTERNAL for a truncated or trailing message),
 * decompression (gzip/deflate through zlib) -> the work queue -> a worker -> the done queue ->
 * HEADERS (:status 200, content-type application/grpc), DATA (the framed answer), trailers
 * (grpc-status, grpc-message percent-encoded). Errors before an answer are Trailers-Only (one
 * HEADERS frame with END_STREAM). A stream reset by the client (RST_STREAM CANCEL) before its call
 * ran cancels it (the worker skips it); one already running finishes and its answer is dropped.
 * `grpc-timeout` becomes the call's deadline: a call still queued past it is answered
 * DEADLINE_EXCEEDED without running, a running one gets the remaining time as its engine deadline.
 *
 * Ownership. gconn: the loop thread's; freed when its socket is closed and no call of it is out
 * (n_out). gstream: nghttp2's stream user data, freed on stream close. gcall: created by the loop
 * thread, owned by the queue it is in, then by the worker, then by the done queue, freed by the
 * loop thread after the answer is submitted (or dropped).
 *
 * Stream resets: nghttp2's rapid-reset limit is raised to 10000 at once and 10000 per second
 * (conn_start_h2 says why). HTTP/2 settings sent at once (clients wait for them):
 * MAX_CONCURRENT_STREAMS 256, a 16 MiB stream window and a 64 MiB connection window (grpc-js starts
 * at 65,535 and inserts of many MiB would crawl), MAX_HEADER_LIST_SIZE 16 KiB (a larger header
 * block resets the stream). PINGs (grpc-js keepalive every 10 s) are answered by nghttp2. A
 * connection with no stream open and no byte received for idle_timeout_s gets GOAWAY and is closed.
 * Graceful stop: GOAWAY to every connection, calls in flight finish, queued ones run (they were
 * accepted), then the loop ends.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "server/rbac.h"
#include "server/server.h"
#include "util/alloc.h"
#include "util/err.h"

#define PREFACE          "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define PREFACE_LEN      24u
#define MAX_STREAMS      256u
#define STREAM_WINDOW    (16 << 20)
#define CONN_WINDOW      (64 << 20)
#define MAX_HEADER_BYTES (16u << 10)
#define TICK_MS          200
#define NS_PER_S         1000000000ull
#define MAX_GRPC_TIMEOUT (3600.0 * 24)

/* ------------------------------------------------------------------ records */

typedef struct gconn gconn;

/* A complete call on its way through the queues. */
typedef struct gcall {
    struct gcall *next;
    gconn *c;          /* borrowed: the connection outlives its calls (n_out) */
    int32_t stream_id; /* the stream it answers; the stream may be gone by then */
    atomic_bool cancelled;
    char method[96];
    char db[SX_MAX_NAME + 1];
    bool read_only;
    char user[SX__RBAC_NAME_MAX + 1]; /* an API user (rbac.c), "" for the others */
    char authz[CRED_B64_MAX];         /* the authorization metadata, "" when none */
    uint64_t deadline_ns;             /* monotonic; 0: none */
    uint8_t *msg;                     /* the request message (decompressed), owned */
    size_t len;
    sx__grpc_reply reply; /* filled by the worker */
} gcall;

typedef struct gstream {
    struct gstream *prev, *next; /* the connection's open streams */
    int32_t id;
    gconn *c;
    char path[160];
    char auth[CRED_B64_MAX];
    char db[SX_MAX_NAME + 1];
    char enc[16];
    bool bad_db;
    double timeout_s; /* 0: none */
    size_t header_bytes;
    uint8_t *buf; /* the request body as received (prefix + message), owned */
    size_t len, cap;
    bool refused; /* answered early (oversize): further DATA is discarded */
    gcall *call;  /* queued or running, NULL otherwise */
    /* the answer being sent */
    uint8_t *out;
    size_t out_len, out_off;
    int status;
    char message[SX__GRPC_MSG_MAX];
} gstream;

typedef enum conn_kind { CK_PENDING, CK_GRPC } conn_kind;

struct gconn {
    struct gconn *prev, *next; /* all connections of the loop (pending and gRPC) */
    sx__grpc *g;
    conn_kind kind;
    int fd;
    uint64_t since_ns; /* pending: accept time; gRPC: last byte received */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    nghttp2_session *h2;
    gstream *streams; /* open streams (nghttp2's stream user data), for freeing at the end */
    size_t n_streams;
    size_t n_out;  /* calls queued or running */
    bool want_out; /* EPOLLOUT registered */
    bool closed;   /* socket closed; freed once n_out == 0 */
    bool goaway;   /* GOAWAY submitted */
};

struct sx__grpc {
    sx__svc svc; /* the service (copied at start) */
    int listen_fd;
    int ep;
    int evfd;
    uint64_t header_ns, idle_ns;
    size_t max_msg;
    uint32_t max_pending;
    uint32_t max_per_ip;
    pthread_t loop;
    bool loop_on;
    pthread_t *workers;
    uint32_t n_workers;
    gconn *conns; /* loop thread only */
    uint32_t n_pending;
    atomic_bool stopping; /* seq_cst: set by sx__grpc_quiesce (GOAWAY), read by the loop */
    atomic_bool quit;     /* seq_cst: set by sx__grpc_stop: the loop ends */
    /* queues: guarded by q_mu */
    pthread_mutex_t q_mu;
    pthread_cond_t q_cv;
    gcall *work_head, *work_tail;
    gcall *done_head, *done_tail;
    uint64_t busy; /* guarded by: q_mu; calls queued or running */
    bool stop;     /* guarded by: q_mu; workers exit once the work queue is empty */
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ queues */

static void q_push(gcall **head, gcall **tail, gcall *c)
{
    c->next = NULL;
    if (*tail)
        (*tail)->next = c;
    else
        *head = c;
    *tail = c;
}

static gcall *q_pop(gcall **head, gcall **tail)
{
    gcall *c = *head;
    if (c) {
        *head = c->next;
        if (!*head)
            *tail = NULL;
        c->next = NULL;
    }
    return c;
}

static void call_free(gcall *k)
{
    if (!k)
        return;
    sx__free(k->msg);
    sx__free(k->reply.body);
    sx__free(k);
}

static void *worker_main(void *arg)
{
    sx__grpc *g = arg;
    for (;;) {
        pthread_mutex_lock(&g->q_mu);
        while (!g->work_head && !g->stop)
            pthread_cond_wait(&g->q_cv, &g->q_mu);
        gcall *k = q_pop(&g->work_head, &g->work_tail);
        pthread_mutex_unlock(&g->q_mu);
        if (!k)
            return NULL; /* stop, and nothing left */
        uint64_t now = mono_ns();
        if (atomic_load(&k->cancelled)) {
            k->reply.grpc_status = SX__GRPC_CANCELLED;
            snprintf(k->reply.message, sizeof k->reply.message, "cancelled by the client");
        } else if (k->deadline_ns && now >= k->deadline_ns) {
            k->reply.grpc_status = SX__GRPC_DEADLINE_EXCEEDED;
            snprintf(k->reply.message, sizeof k->reply.message,
                     "deadline exceeded before the call could run");
        } else {
            sx__grpc_call call = {
                k->method, k->msg, k->len, k->db, k->read_only, 0, k->user[0] ? k->user : NULL,
                k->authz
            };
            if (k->deadline_ns)
                call.timeout_s = (double)(k->deadline_ns - now) / 1e9;
            sx__grpc_milvus(&g->svc, &call, &k->reply);
        }
        pthread_mutex_lock(&g->q_mu);
        q_push(&g->done_head, &g->done_tail, k);
        pthread_mutex_unlock(&g->q_mu);
        uint64_t one = 1;
        ssize_t w = write(g->evfd, &one, sizeof one);
        (void)w; /* a full eventfd counter still wakes the loop */
    }
}

/* ------------------------------------------------------------------ answers */

static size_t pct_encode(const char *in, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p && n + 4 < cap; p++) {
        if (*p >= 0x20 && *p < 0x7f && *p != '%') {
            out[n++] = (char)*p;
        } else {
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    out[n] = 0;
    return n;
}

#define NV(n, v)                                                                 \
 {                                                                               \
  (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE \
 }

static int submit_trailers(nghttp2_session *h2, int32_t id, int status, const char *message)
{
    char st[16], enc[3 * SX__GRPC_MSG_MAX + 4];
    snprintf(st, sizeof st, "%d", status);
    pct_encode(message ? message : "", enc, sizeof enc);
    nghttp2_nv tr[2] = { NV("grpc-status", st), NV("grpc-message", enc) };
    return nghttp2_submit_trailer(h2, id, tr, enc[0] ? 2 : 1);
}

static ssize_t data_read(nghttp2_session *h2,
                         int32_t id,
                         uint8_t *buf,
                         size_t length,
                         uint32_t *flags,
                         nghttp2_data_source *src,
                         void *ud)
{
    (void)ud;
    gstream *st = src->ptr;
    size_t n = st->out_len - st->out_off;
    if (n > length)
        n = length;
    memcpy(buf, st->out + st->out_off, n);
    st->out_off += n;
    if (st->out_off == st->out_len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        if (submit_trailers(h2, id, st->status, st->message) != 0)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return (ssize_t)n;
}

/* Trailers-Only: one HEADERS frame with END_STREAM. */
static void answer_error(gstream *st, int status, const char *message)
{
    char sb[16], enc[3 * SX__GRPC_MSG_MAX + 4];
    snprintf(sb, sizeof sb, "%d", status);
    pct_encode(message ? message : "", enc, sizeof enc);
    nghttp2_nv hd[4] = { NV(":status", "200"), NV("content-type", "application/grpc"),
                         NV("grpc-status", sb), NV("grpc-message", enc) };
    if (nghttp2_submit_response(st->c->h2, st->id, hd, enc[0] ? 4 : 3, NULL) != 0)
        (void)nghttp2_submit_rst_stream(st->c->h2, NGHTTP2_FLAG_NONE, st->id,
                                        NGHTTP2_INTERNAL_ERROR);
}

/* Sends a worker's reply on its stream (the reply's body is taken). */
static void answer_reply(gstream *st, sx__grpc_reply *r)
{
    if (r->grpc_status != 0 || !r->body) {
        answer_error(st, r->grpc_status ? r->grpc_status : SX__GRPC_INTERNAL,
                     r->grpc_status ? r->message : "no answer");
        return;
    }
    size_t len = r->len;
    uint8_t *out = sx__malloc(len + 5);
    if (!out) {
        answer_error(st, SX__GRPC_RESOURCE_EXHAUSTED, "server out of memory for the answer");
        return;
    }
    out[0] = 0;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
    memcpy(out + 5, r->body, len);
    sx__free(st->out);
    st->out = out;
    st->out_len = len + 5;
    st->out_off = 0;
    st->status = 0;
    st->message[0] = 0;
    nghttp2_nv hd[3] = { NV(":status", "200"), NV("content-type", "application/grpc"),
                         NV("grpc-accept-encoding", "identity,deflate,gzip") };
    nghttp2_data_provider dp;
    dp.source.ptr = st;
    dp.read_callback = data_read;
    if (nghttp2_submit_response(st->c->h2, st->id, hd, 3, &dp) != 0)
        (void)nghttp2_submit_rst_stream(st->c->h2, NGHTTP2_FLAG_NONE, st->id,
                                        NGHTTP2_INTERNAL_ERROR);
}

/* ------------------------------------------------------------------ calls */

/* Inflates a gzip or deflate (zlib) message. Returns an owned buffer or NULL (msg says why). */
static uint8_t *inflate_msg(
    const uint8_t *in, size_t len, bool gzip, size_t max, size_t *out_len, char *msg, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, gzip ? 16 + MAX_WBITS : MAX_WBITS) != Z_OK) {
        snprintf(msg, cap, "cannot start decompression");
        return NULL;
    }
    size_t ocap = len * 4 + 64, olen = 0;
    if (ocap > max + 1)
        ocap = max + 1;
    uint8_t *o = sx__malloc(ocap);
    int rc = Z_OK;
    z.next_in = (Bytef *)in; /* zlib does not write it (z_const) */
    z.avail_in = (uInt)len;
    while (o) {
        z.next_out = o + olen;
        z.avail_out = (uInt)(ocap - olen);
        rc = inflate(&z, Z_NO_FLUSH);
        olen = ocap - z.avail_out;
        if (rc == Z_STREAM_END)
            break;
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            snprintf(msg, cap, "corrupt %s message", gzip ? "gzip" : "deflate");
            goto fail;
        }
        if (olen > max) {
            snprintf(msg, cap, "decompressed message larger than the limit of %zu bytes", max);
            goto fail;
        }
        if (z.avail_out == 0) {
            size_t ncap = ocap * 2 > max + 1 ? max + 1 : ocap * 2;
            uint8_t *no = sx__realloc(o, ncap);
            if (!no)
                goto fail;
            o = no;
            ocap = ncap;
        } else if (z.avail_in == 0) {
            snprintf(msg, cap, "truncated %s message", gzip ? "gzip" : "deflate");
            goto fail;
        }
    }
    if (!o)
        snprintf(msg, cap, "server out of memory");
    inflateEnd(&z);
    *out_len = olen;
    return o;
fail:
    inflateEnd(&z);
    sx__free(o);
    return NULL;
}

/* The stream's request is complete: check it and queue its call. */
static void stream_complete(sx__grpc *g, gstream *st)
{
    if (st->refused || st->call)
        return;
    const char *pfx = "/milvus.proto.milvus.MilvusService/";
    if (strncmp(st->path, pfx, strlen(pfx)) != 0) {
        answer_error(st, SX__GRPC_UNIMPLEMENTED, "unknown service");
        return;
    }
    if (g->svc.ops->stopping(g->svc.ctx)) {
        answer_error(st, SX__GRPC_UNAVAILABLE, "server is shutting down");
        return;
    }
    sx__principal who;
    int auth = g->svc.ops->auth(g->svc.ctx, st->auth, &who);
    if (auth < 0) {
        answer_error(st, SX__GRPC_UNAUTHENTICATED,
                     st->auth[0] ? "invalid credentials" : "missing credentials");
        return;
    }
    if (st->bad_db) {
        answer_error(st, SX__GRPC_INVALID_ARGUMENT, "dbname metadata too long");
        return;
    }
    if (st->len < 5) {
        answer_error(st, SX__GRPC_INTERNAL, "request has no gRPC message");
        return;
    }
    size_t mlen = ((size_t)st->buf[1] << 24) | ((size_t)st->buf[2] << 16) |
                  ((size_t)st->buf[3] << 8) | st->buf[4];
    if (mlen != st->len - 5) {
        answer_error(st, SX__GRPC_INTERNAL,
                     mlen > st->len - 5 ? "truncated gRPC message"
                                        : "more than one gRPC message in a unary call");
        return;
    }
    gcall *k = sx__calloc(1, sizeof *k);
    if (!k) {
        answer_error(st, SX__GRPC_RESOURCE_EXHAUSTED, "server out of memory");
        return;
    }
    atomic_init(&k->cancelled, false);
    snprintf(k->method, sizeof k->method, "%s", st->path + strlen(pfx));
    snprintf(k->db, sizeof k->db, "%s", st->db[0] ? st->db : "default");
    snprintf(k->authz, sizeof k->authz, "%s", st->auth);
    k->read_only = who.kind == SX__WHO_RO;
    if (who.kind == SX__WHO_USER)
        snprintf(k->user, sizeof k->user, "%s", who.user);
    if (st->timeout_s > 0)
        k->deadline_ns = mono_ns() + (uint64_t)(st->timeout_s * 1e9);
    if (st->buf[0]) {
        bool gz = strcasecmp(st->enc, "gzip") == 0;
        if (!gz && strcasecmp(st->enc, "deflate") != 0) {
            sx__free(k);
            answer_error(st, SX__GRPC_UNIMPLEMENTED,
                         "compressed message without a supported grpc-encoding");
            return;
        }
        char why[128];
        k->msg = inflate_msg(st->buf + 5, mlen, gz, g->max_msg, &k->len, why, sizeof why);
        if (!k->msg) {
            sx__free(k);
            answer_error(st, SX__GRPC_RESOURCE_EXHAUSTED, why);
            return;
        }
        sx__free(st->buf);
    } else {
        /* the message without its prefix, in place */
        memmove(st->buf, st->buf + 5, mlen);
        k->msg = st->buf;
        k->len = mlen;
    }
    st->buf = NULL;
    st->len = st->cap = 0;
    k->c = st->c;
    k->stream_id = st->id;
    st->call = k;
    st->c->n_out++;
    pthread_mutex_lock(&g->q_mu);
    q_push(&g->work_head, &g->work_tail, k);
    g->busy++;
    pthread_cond_signal(&g->q_cv);
    pthread_mutex_unlock(&g->q_mu);
}

/* ------------------------------------------------------------------ nghttp2 callbacks */

static ssize_t cb_send(nghttp2_session *h2, const uint8_t *data, size_t len, int flags, void *ud)
{
    (void)h2;
    (void)flags;
    gconn *c = ud;
    ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return NGHTTP2_ERR_WOULDBLOCK;
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return n;
}

static int cb_begin_headers(nghttp2_session *h2, const nghttp2_frame *f, void *ud)
{
    gconn *c = ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    gstream *st = sx__calloc(1, sizeof *st);
    if (!st)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    st->id = f->hd.stream_id;
    st->c = c;
    st->next = c->streams;
    if (c->streams)
        c->streams->prev = st;
    c->streams = st;
    c->n_streams++;
    nghttp2_session_set_stream_user_data(h2, f->hd.stream_id, st);
    return 0;
}

static double parse_timeout(const uint8_t *v, size_t n)
{
    if (n < 2 || n > 9)
        return 0;
    double x = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return 0;
        x = x * 10 + (v[i] - '0');
    }
    switch (v[n - 1]) {
    case 'H':
        x *= 3600;
        break;
    case 'M':
        x *= 60;
        break;
    case 'S':
        break;
    case 'm':
        x /= 1e3;
        break;
    case 'u':
        x /= 1e6;
        break;
    case 'n':
        x /= 1e9;
        break;
    default:
        return 0;
    }
    if (x > MAX_GRPC_TIMEOUT)
        x = MAX_GRPC_TIMEOUT;
    return x > 0 ? x : 1e-9;
}

static void copy_hdr(char *dst, size_t cap, const uint8_t *v, size_t n, bool *too_long)
{
    if (n >= cap) {
        if (too_long)
            *too_long = true;
        n = cap - 1;
    }
    memcpy(dst, v, n);
    dst[n] = 0;
}

static int cb_header(nghttp2_session *h2,
                     const nghttp2_frame *f,
                     const uint8_t *name,
                     size_t nlen,
                     const uint8_t *value,
                     size_t vlen,
                     uint8_t flags,
                     void *ud)
{
    (void)flags;
    (void)ud;
    gstream *st = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
    if (!st || f->hd.type != NGHTTP2_HEADERS)
        return 0;
    st->header_bytes += nlen + vlen + 32;
    if (st->header_bytes > MAX_HEADER_BYTES)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
#define IS(lit) (nlen == sizeof(lit) - 1 && memcmp(name, lit, nlen) == 0)
    if (IS(":path")) {
        copy_hdr(st->path, sizeof st->path, value, vlen, NULL);
    } else if (IS("grpc-timeout")) {
        st->timeout_s = parse_timeout(value, vlen);
    } else if (IS("authorization")) {
        bool too_long = false;
        copy_hdr(st->auth, sizeof st->auth, value, vlen, &too_long);
        if (too_long)
            st->auth[0] = '!'; /* never a valid credential */
    } else if (IS("dbname")) {
        copy_hdr(st->db, sizeof st->db, value, vlen, &st->bad_db);
    } else if (IS("grpc-encoding")) {
        copy_hdr(st->enc, sizeof st->enc, value, vlen, NULL);
    }
#undef IS
    return 0;
}

static int cb_data_chunk(
    nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *ud)
{
    (void)flags;
    gconn *c = ud;
    sx__grpc *g = c->g;
    gstream *st = nghttp2_session_get_stream_user_data(h2, id);
    if (!st || st->refused || st->call || len == 0)
        return 0;
    size_t had = st->len;
    /* The declared length is checked as soon as the prefix is in: an oversize message is
     * refused before its body is buffered. */
    if (had < 5 && had + len >= 5) {
        uint8_t pre[5];
        memcpy(pre, st->buf ? st->buf : pre, had);
        memcpy(pre + had, data, 5 - had);
        size_t mlen =
            ((size_t)pre[1] << 24) | ((size_t)pre[2] << 16) | ((size_t)pre[3] << 8) | pre[4];
        if (mlen > g->max_msg) {
            char m[SX__GRPC_MSG_MAX];
            snprintf(m, sizeof m,
                     "request message of %zu bytes is larger than the server's limit of %zu "
                     "bytes (--max-body-mb)",
                     mlen, g->max_msg);
            st->refused = true;
            sx__free(st->buf);
            st->buf = NULL;
            st->len = st->cap = 0;
            answer_error(st, SX__GRPC_RESOURCE_EXHAUSTED, m);
            return 0;
        }
    }
    if (st->len + len > g->max_msg + 5) {
        st->refused = true;
        sx__free(st->buf);
        st->buf = NULL;
        st->len = st->cap = 0;
        answer_error(st, SX__GRPC_RESOURCE_EXHAUSTED,
                     "request larger than the server's limit (--max-body-mb)");
        return 0;
    }
    if (!st->buf || st->len + len > st->cap) {
        size_t ncap = st->cap ? st->cap : 4096;
        while (ncap < st->len + len)
            ncap *= 2;
        /* grow to the declared size at once when it is known */
        if (st->len + len >= 5) {
            const uint8_t *p = st->len >= 5 ? st->buf : NULL;
            uint8_t pre[5];
            if (!p) {
                memcpy(pre, st->buf ? st->buf : pre, st->len);
                memcpy(pre + st->len, data, 5 - st->len);
                p = pre;
            }
            size_t want =
                (((size_t)p[1] << 24) | ((size_t)p[2] << 16) | ((size_t)p[3] << 8) | p[4]) + 5;
            if (want > ncap && want <= g->max_msg + 5)
                ncap = want;
        }
        uint8_t *nb = sx__realloc(st->buf, ncap);
        if (!nb) {
            st->refused = true;
            answer_error(st, SX__GRPC_RESOURCE_EXHAUSTED, "server out of memory for the request");
            return 0;
        }
        st->buf = nb;
        st->cap = ncap;
    }
    memcpy(st->buf + st->len, data, len);
    st->len += len;
    return 0;
}

static int cb_frame_recv(nghttp2_session *h2, const nghttp2_frame *f, void *ud)
{
    gconn *c = ud;
    if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        gstream *st = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
        if (st)
            stream_complete(c->g, st);
    }
    return 0;
}

static void stream_free(gconn *c, gstream *st)
{
    if (st->call) {
        atomic_store(&st->call->cancelled, true);
        st->call->stream_id = 0; /* nobody to answer */
    }
    if (st->prev)
        st->prev->next = st->next;
    else
        c->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    sx__free(st->buf);
    sx__free(st->out);
    sx__free(st);
    c->n_streams--;
}

static int cb_stream_close(nghttp2_session *h2, int32_t id, uint32_t code, void *ud)
{
    (void)code;
    gconn *c = ud;
    gstream *st = nghttp2_session_get_stream_user_data(h2, id);
    if (!st)
        return 0;
    nghttp2_session_set_stream_user_data(h2, id, NULL);
    stream_free(c, st);
    return 0;
}

/* ------------------------------------------------------------------ connections */

static void ep_set(sx__grpc *g, gconn *c, bool out, bool add)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN | (out ? EPOLLOUT : 0);
    ev.data.ptr = c;
    if (epoll_ctl(g->ep, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c->fd, &ev) == 0)
        c->want_out = out;
}

static void conn_unlink(sx__grpc *g, gconn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        g->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static void conn_free_if_done(gconn *c)
{
    if (c->closed && c->n_out == 0) {
        nghttp2_session *h2 = c->h2;
        c->h2 = NULL;
        nghttp2_session_del(h2);
        gstream *next;
        for (gstream *st = c->streams; st; st = next) { /* no call is out: none to cancel */
            next = st->next;
            sx__free(st->buf);
            sx__free(st->out);
            sx__free(st);
        }
        sx__free(c);
    }
}

/* Closes the socket; the record lives on while calls of it are out. */
static void conn_close(sx__grpc *g, gconn *c)
{
    if (c->closed)
        return;
    if (c->kind == CK_PENDING && g->n_pending > 0)
        g->n_pending--;
    (void)epoll_ctl(g->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->closed = true;
    conn_unlink(g, c);
    conn_free_if_done(c);
}

/* Writes what nghttp2 has to send; registers EPOLLOUT while it cannot. False: close it. */
static bool conn_flush(sx__grpc *g, gconn *c)
{
    int rv = nghttp2_session_send(c->h2);
    if (rv != 0)
        return false;
    bool out = nghttp2_session_want_write(c->h2) != 0;
    if (out != c->want_out)
        ep_set(g, c, out, false);
    if (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2))
        return false;
    return true;
}

static bool conn_start_h2(sx__grpc *g, gconn *c)
{
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return false;
    nghttp2_session_callbacks_set_send_callback(cb, cb_send);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, cb_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, cb_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, cb_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, cb_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, cb_stream_close);
    nghttp2_option *opt = NULL;
    if (nghttp2_option_new(&opt) != 0) {
        nghttp2_session_callbacks_del(cb);
        return false;
    }
    nghttp2_option_set_max_send_header_block_length(opt, 64u << 10);
    /* Rapid reset (CVE-2023-44487): nghttp2 ends a connection whose client resets streams
     * faster than the limit (default: a burst of 1000, then 33 per second). libcurl 7.88 sends
     * RST_STREAM(STREAM_CLOSED) after every completed call, so a client at a few thousand calls
     * per second on one connection was cut off after 1000 calls. A reset of a call that has not
     * run cancels it (the worker skips it), so resets cost little here: the limit is raised to
     * a burst of 10000 and 10000 per second, still bounded. */
    nghttp2_option_set_stream_reset_rate_limit(opt, 10000, 10000);
    int rv = nghttp2_session_server_new2(&c->h2, cb, c, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    if (rv != 0)
        return false;
    nghttp2_settings_entry iv[3] = {
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, MAX_STREAMS },
        { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW },
        { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_BYTES },
    };
    if (nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, 3) != 0 ||
        nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW) != 0)
        return false;
    c->kind = CK_GRPC;
    c->since_ns = mono_ns();
    if (g->n_pending > 0)
        g->n_pending--;
    int one = 1;
    (void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return conn_flush(g, c);
}

static void conn_read(sx__grpc *g, gconn *c)
{
    uint8_t buf[65536];
    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n == 0) {
            conn_close(g, c);
            return;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                conn_close(g, c);
                return;
            }
            break;
        }
        c->since_ns = mono_ns();
        ssize_t r = nghttp2_session_mem_recv(c->h2, buf, (size_t)n);
        if (r < 0) {
            /* a protocol error: nghttp2 queued GOAWAY; send it and close */
            (void)nghttp2_session_send(c->h2);
            conn_close(g, c);
            return;
        }
        if ((size_t)n < sizeof buf)
            break;
    }
    if (!conn_flush(g, c))
        conn_close(g, c);
}

/* A pending connection has bytes (or closed): decide what it is. */
static void pending_peek(sx__grpc *g, gconn *c)
{
    char b[PREFACE_LEN];
    ssize_t n = recv(c->fd, b, sizeof b, MSG_PEEK);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        conn_close(g, c);
        return;
    }
    if (n < 0)
        return;
    if (memcmp(b, PREFACE, (size_t)n) == 0) {
        if ((size_t)n < PREFACE_LEN)
            return; /* a prefix of the preface: wait for the rest */
        if (!conn_start_h2(g, c))
            conn_close(g, c);
        return;
    }
    /* HTTP/1.x: to libmicrohttpd, which owns the socket from here */
    (void)epoll_ctl(g->ep, EPOLL_CTL_DEL, c->fd, NULL);
    int fd = c->fd;
    c->fd = -1;
    c->closed = true;
    if (g->n_pending > 0)
        g->n_pending--;
    conn_unlink(g, c);
    g->svc.ops->add_http(g->svc.ctx, fd, (const struct sockaddr *)&c->addr, c->addrlen);
    sx__free(c);
}

static bool same_addr(const gconn *a, const gconn *b)
{
    if (a->addr.ss_family != b->addr.ss_family)
        return false;
    if (a->addr.ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)&a->addr)->sin_addr,
                      &((const struct sockaddr_in *)&b->addr)->sin_addr, 4) == 0;
    if (a->addr.ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)&a->addr)->sin6_addr,
                      &((const struct sockaddr_in6 *)&b->addr)->sin6_addr, 16) == 0;
    return true;
}

static void accept_all(sx__grpc *g)
{
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(g->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return; /* EAGAIN, or out of descriptors: try again at the next event */
        }
        gconn *c = sx__calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->g = g;
        c->fd = fd;
        c->kind = CK_PENDING;
        c->since_ns = mono_ns();
        memcpy(&c->addr, &ss, sizeof ss);
        c->addrlen = sl;
        c->next = g->conns;
        if (g->conns)
            g->conns->prev = c;
        g->conns = c;
        g->n_pending++;
        ep_set(g, c, false, true);
        /* Admission of connections that have not spoken yet (HTTP/1 ones are MHD's once they
         * do, http.c): past max_connections_per_ip from one address, or max_connections in
         * all, the oldest pending one goes (the list is newest first), so a flood of silent
         * sockets never keeps a health check out. */
        uint32_t same = 0;
        gconn *old_same = NULL, *old_any = NULL;
        for (gconn *x = g->conns; x; x = x->next) {
            if (x->kind != CK_PENDING)
                continue;
            old_any = x;
            if (same_addr(x, c)) {
                same++;
                old_same = x;
            }
        }
        if (same > g->max_per_ip && old_same)
            conn_close(g, old_same);
        else if (g->n_pending > g->max_pending && old_any)
            conn_close(g, old_any);
    }
}

/* Answers the calls the workers finished. */
static void drain_done(sx__grpc *g)
{
    uint64_t v;
    ssize_t r = read(g->evfd, &v, sizeof v);
    (void)r;
    pthread_mutex_lock(&g->q_mu);
    gcall *list = g->done_head;
    g->done_head = g->done_tail = NULL;
    pthread_mutex_unlock(&g->q_mu);
    while (list) {
        gcall *k = list;
        list = k->next;
        gconn *c = k->c;
        if (!c->closed && k->stream_id) {
            gstream *st = nghttp2_session_get_stream_user_data(c->h2, k->stream_id);
            if (st && st->call == k) {
                st->call = NULL;
                answer_reply(st, &k->reply);
                if (!conn_flush(g, c))
                    conn_close(g, c);
            }
        }
        call_free(k);
        pthread_mutex_lock(&g->q_mu);
        g->busy--;
        pthread_mutex_unlock(&g->q_mu);
        c->n_out--;
        conn_free_if_done(c);
    }
}

static void sweep(sx__grpc *g, uint64_t now, bool stopping)
{
    gconn *next;
    for (gconn *c = g->conns; c; c = next) {
        next = c->next;
        if (c->kind == CK_PENDING) {
            if (now - c->since_ns > g->header_ns)
                conn_close(g, c);
            continue;
        }
        if (stopping && !c->goaway) {
            c->goaway = true;
            (void)nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE,
                                        nghttp2_session_get_last_proc_stream_id(c->h2),
                                        NGHTTP2_NO_ERROR, NULL, 0);
            if (!conn_flush(g, c)) {
                conn_close(g, c);
                continue;
            }
        }
        if (c->n_streams == 0 && c->n_out == 0 && (stopping || now - c->since_ns > g->idle_ns)) {
            if (!c->goaway) {
                c->goaway = true;
                (void)nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE,
                                            nghttp2_session_get_last_proc_stream_id(c->h2),
                                            NGHTTP2_NO_ERROR, NULL, 0);
                (void)nghttp2_session_send(c->h2);
            }
            conn_close(g, c);
        }
    }
}

static void *loop_main(void *arg)
{
    sx__grpc *g = arg;
    struct epoll_event evs[64];
    uint64_t last_sweep = mono_ns();
    uint64_t stop_seen = 0;
    for (;;) {
        int n = epoll_wait(g->ep, evs, 64, TICK_MS);
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &g->listen_fd) {
                accept_all(g);
                continue;
            }
            if (p == &g->evfd) {
                drain_done(g);
                continue;
            }
            gconn *c = p;
            if (c->closed)
                continue;
            if (c->kind == CK_PENDING) {
                pending_peek(g, c);
                continue;
            }
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                conn_read(g, c);
            else if (evs[i].events & EPOLLOUT) {
                if (!conn_flush(g, c))
                    conn_close(g, c);
            }
        }
        uint64_t now = mono_ns();
        bool stopping = atomic_load(&g->stopping);
        if (now - last_sweep >= (uint64_t)TICK_MS * 1000000ull || (stopping && n == 0)) {
            last_sweep = now;
            sweep(g, now, stopping);
        }
        if (atomic_load(&g->quit)) {
            if (!stop_seen)
                stop_seen = now;
            /* done when no gRPC connection is left or the grace passed, and no call is out */
            bool any = false;
            for (gconn *c = g->conns; c; c = c->next)
                if (c->kind == CK_GRPC)
                    any = true;
            pthread_mutex_lock(&g->q_mu);
            uint64_t busy = g->busy;
            pthread_mutex_unlock(&g->q_mu);
            if (busy == 0 && (!any || now - stop_seen > 5 * NS_PER_S))
                break;
        }
    }
    while (g->conns)
        conn_close(g, g->conns);
    return NULL;
}

/* ------------------------------------------------------------------ start / stop */

sx_status sx__grpc_start(const sx__svc *svc, int listen_fd, sx__grpc **out)
{
    const sx__svc *o = svc;
    sx__grpc *g = sx__calloc(1, sizeof *g);
    if (!g)
        return sx__err(SX_ENOMEM, "server: out of memory");
    g->svc = *svc;
    g->listen_fd = listen_fd;
    g->ep = -1;
    g->evfd = -1;
    g->header_ns = (uint64_t)o->header_timeout_s * NS_PER_S;
    g->idle_ns = (uint64_t)o->idle_timeout_s * NS_PER_S;
    g->max_msg = (size_t)o->max_body_bytes;
    g->max_pending = o->max_connections;
    g->max_per_ip = o->max_connections_per_ip ? o->max_connections_per_ip : 1;
    atomic_init(&g->stopping, false);
    atomic_init(&g->quit, false);
    pthread_mutex_init(&g->q_mu, NULL);
    pthread_cond_init(&g->q_cv, NULL);
    sx_status st = SX_OK;
    g->ep = epoll_create1(EPOLL_CLOEXEC);
    g->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (g->ep < 0 || g->evfd < 0) {
        st = sx__err_errno(errno, "server: cannot create the event loop");
        goto fail;
    }
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.ptr = &g->listen_fd;
    if (epoll_ctl(g->ep, EPOLL_CTL_ADD, listen_fd, &ev) != 0) {
        st = sx__err_errno(errno, "server: cannot watch the listening socket");
        goto fail;
    }
    ev.data.ptr = &g->evfd;
    if (epoll_ctl(g->ep, EPOLL_CTL_ADD, g->evfd, &ev) != 0) {
        st = sx__err_errno(errno, "server: cannot watch the event fd");
        goto fail;
    }
    g->n_workers = o->threads ? o->threads : 16;
    g->workers = sx__calloc(g->n_workers, sizeof *g->workers);
    if (!g->workers) {
        st = sx__err(SX_ENOMEM, "server: out of memory");
        goto fail;
    }
    uint32_t started = 0;
    for (; started < g->n_workers; started++)
        if (pthread_create(&g->workers[started], NULL, worker_main, g) != 0)
            break;
    if (started < g->n_workers || pthread_create(&g->loop, NULL, loop_main, g) != 0) {
        pthread_mutex_lock(&g->q_mu);
        g->stop = true;
        pthread_cond_broadcast(&g->q_cv);
        pthread_mutex_unlock(&g->q_mu);
        for (uint32_t i = 0; i < started; i++)
            pthread_join(g->workers[i], NULL);
        st = sx__err(SX_EIO, "server: cannot start the gRPC threads");
        goto fail;
    }
    g->loop_on = true;
    *out = g;
    return SX_OK;
fail:
    if (g->ep >= 0)
        close(g->ep);
    if (g->evfd >= 0)
        close(g->evfd);
    pthread_cond_destroy(&g->q_cv);
    pthread_mutex_destroy(&g->q_mu);
    sx__free(g->workers);
    sx__free(g);
    return st;
}

void sx__grpc_quiesce(sx__grpc *g)
{
    if (g)
        atomic_store(&g->stopping, true);
}

void sx__grpc_stop(sx__grpc *g)
{
    if (!g)
        return;
    atomic_store(&g->stopping, true);
    atomic_store(&g->quit, true);
    if (g->loop_on)
        pthread_join(g->loop, NULL);
    pthread_mutex_lock(&g->q_mu);
    g->stop = true;
    pthread_cond_broadcast(&g->q_cv);
    pthread_mutex_unlock(&g->q_mu);
    for (uint32_t i = 0; i < g->n_workers; i++)
        pthread_join(g->workers[i], NULL);
    /* calls finished after the loop ended: their connections are closed already */
    gcall *k;
    while ((k = q_pop(&g->done_head, &g->done_tail)) != NULL) {
        gconn *c = k->c;
        c->n_out--;
        call_free(k);
        conn_free_if_done(c);
    }
    close(g->ep);
    close(g->evfd);
    pthread_cond_destroy(&g->q_cv);
    pthread_mutex_destroy(&g->q_mu);
    sx__free(g->workers);
    sx__free(g);
}
