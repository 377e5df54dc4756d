/*
 * faultproxy.h: a fault-injecting HTTP/1.1 forwarding proxy for the S3 tests. It runs threads in
 * the test process, listens on 127.0.0.1 (ephemeral port; fp_start_on: another local address)
 * and forwards to an upstream on 127.0.0.1 (s3rver, etcd). The client under test uses
 * http://127.0.0.1:PROXYPORT as its endpoint;
 * the Host header is forwarded untouched, so SigV4 signatures still verify upstream.
 *
 * Per request the proxy applies, in this order of precedence: a canned rule (method + substring
 * of the target: answer status/body without forwarding; emulates APIs s3rver lacks), the
 * persistent fault, the next queued fault (queued faults and the persistent one apply only to
 * requests matching the filter set with fp_filter), a random fault with probability `prob`,
 * else pass. Fault kinds:
 *   FP_500 / FP_503 / FP_SLOWDOWN   an S3 XML error (InternalError / ServiceUnavailable /
 *                                   SlowDown), not forwarded; the connection stays open
 *   FP_RESET                        request read, then an RST, nothing forwarded
 *   FP_LOST                         forwarded (the server acted), then an RST without response
 *   FP_RESET_MIDBODY                forwarded, headers + half the body, then an RST
 *   FP_TRUNCATE                     forwarded, headers with the full Content-Length + half the
 *                                   body, then a clean close (half the headers for an empty body)
 *   FP_STALL                        nothing sent for stall_ms, then close
 * delay_ms (set under the lock, any time) delays every request by that much before any of the
 * above: a slow link rather than a fault.
 *
 * HTTP handling: request line + headers + Content-Length body (chunked requests are not
 * supported: the S3 client always sends Content-Length); "Expect: 100-continue" is answered by
 * the proxy. Upstream gets one request per connection ("Connection: close") and the proxy reads
 * its response to EOF; the client side is kept alive when the response is delimited, so the
 * client's connection reuse is visible in fp->connections.
 * The proxy also checks every x-amz-content-sha256 against the body it carries (sha_checked /
 * sha_bad), which s3rver itself does not do.
 *
 * Thread-safety: counters and the fault script are guarded by fp->mu; read them with fp_lock /
 * fp_unlock or after fp_stop.
 */
#ifndef SX_TEST_FAULTPROXY_H
#define SX_TEST_FAULTPROXY_H
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef enum fp_kind {
    FP_PASS = 0,
    FP_500,
    FP_503,
    FP_SLOWDOWN,
    FP_RESET,
    FP_LOST,
    FP_RESET_MIDBODY,
    FP_TRUNCATE,
    FP_STALL,
    FP_CANNED,
    FP_KIND_COUNT
} fp_kind;

static const char *const fp_kind_name[FP_KIND_COUNT] = { "pass",          "500",      "503",
                                                         "slowdown",      "reset",    "lost",
                                                         "reset_midbody", "truncate", "stall",
                                                         "canned" };

typedef struct fp_rule {
    char method[8];
    char match[160];
    int status;
    char body[4096];
    long times; /* answers left; -1: forever */
    long hits;
} fp_rule;

#define FP_LOG_MAX 8192

typedef struct faultproxy {
    int lfd, port, upstream_port;
    pthread_t acceptor;
    pthread_mutex_t mu;
    /* guarded by mu */
    fp_kind queue[1024];
    int qhead, qtail;
    char f_method[8];
    char f_match[160];
    fp_kind persistent;
    double prob;
    unsigned prob_mask; /* bit per fp_kind */
    uint64_t rng;
    /* random faults in a row for one request (method + target, i.e. one operation and its
     * retries): past max_run the next attempt passes (0 = no limit; fp_set_random_max_run) */
    int max_run;

    struct {
        char key[200];
        int run;
    } runs[64];

    int n_runs;
    int stall_ms;
    int delay_ms; /* added before each request is handled (a slow network); 0: none */
    fp_rule rules[8];
    int n_rules;
    long requests, connections, faults[FP_KIND_COUNT], sha_checked, sha_bad;
    char (*log)[200]; /* "METHOD target" per request */
    long n_log;
    int fds[512];
    int n_fds;
    int active;
    atomic_int stop;
} faultproxy;

static inline void fp_lock(faultproxy *p)
{
    pthread_mutex_lock(&p->mu);
}

static inline void fp_unlock(faultproxy *p)
{
    pthread_mutex_unlock(&p->mu);
}

/* Queued faults and the persistent fault apply only to requests whose method equals `method`
 * (NULL/"" any) and whose target contains `match` (NULL/"" any). */
static inline void fp_filter(faultproxy *p, const char *method, const char *match)
{
    fp_lock(p);
    snprintf(p->f_method, sizeof p->f_method, "%s", method ? method : "");
    snprintf(p->f_match, sizeof p->f_match, "%s", match ? match : "");
    fp_unlock(p);
}

static inline void fp_push(faultproxy *p, fp_kind k, int times)
{
    fp_lock(p);
    for (int i = 0; i < times && p->qtail - p->qhead < 1024; i++)
        p->queue[p->qtail++ % 1024] = k;
    fp_unlock(p);
}

static inline void fp_set_persistent(faultproxy *p, fp_kind k)
{
    fp_lock(p);
    p->persistent = k;
    fp_unlock(p);
}

static inline void fp_set_random(faultproxy *p, double prob, unsigned mask, uint64_t seed)
{
    fp_lock(p);
    p->prob = prob;
    p->prob_mask = mask;
    p->rng = seed ? seed : 88172645463325252ull;
    fp_unlock(p);
}

/* Random faults never hit one request (same method and target: an operation and its retries)
 * more than `n` times in a row, so a client that tries n + 1 times always gets through and
 * "no failure" can be asserted whatever the seed (0: no limit). */
static inline void fp_set_random_max_run(faultproxy *p, int n)
{
    fp_lock(p);
    p->max_run = n;
    p->n_runs = 0;
    fp_unlock(p);
}

/* Clears the script (queue, persistent, random, filter, rules); keeps the counters. */
static inline void fp_clear(faultproxy *p)
{
    fp_lock(p);
    p->n_rules = 0;
    p->qhead = p->qtail = 0;
    p->persistent = FP_PASS;
    p->prob = 0;
    p->max_run = 0;
    p->n_runs = 0;
    p->f_method[0] = p->f_match[0] = 0;
    fp_unlock(p);
}

/* Canned answer for requests with this method whose target contains match: `times` times
 * (-1: forever). Rules are tried in the order added. */
static inline void fp_add_rule(
    faultproxy *p, const char *method, const char *match, int status, const char *body, long times)
{
    fp_lock(p);
    if (p->n_rules < 8) {
        fp_rule *r = &p->rules[p->n_rules++];
        memset(r, 0, sizeof *r);
        snprintf(r->method, sizeof r->method, "%s", method);
        snprintf(r->match, sizeof r->match, "%s", match);
        r->status = status;
        r->times = times;
        snprintf(r->body, sizeof r->body, "%s", body ? body : "");
    }
    fp_unlock(p);
}

static inline long fp_faults_total(faultproxy *p)
{
    long n = 0;
    fp_lock(p);
    for (int k = FP_500; k < FP_CANNED; k++)
        n += p->faults[k];
    fp_unlock(p);
    return n;
}

/* Requests seen whose "METHOD target" line contains all of a and b (NULL: any). */
static inline long fp_count(faultproxy *p, const char *a, const char *b)
{
    long n = 0;
    fp_lock(p);
    long m = p->n_log < FP_LOG_MAX ? p->n_log : FP_LOG_MAX;
    for (long i = 0; i < m; i++)
        if ((!a || strstr(p->log[i], a)) && (!b || strstr(p->log[i], b)))
            n++;
    fp_unlock(p);
    return n;
}

static inline void fp_print(faultproxy *p, const char *tag)
{
    fp_lock(p);
    fprintf(stderr, "proxy[%s]: %ld requests on %ld connections; faults:", tag, p->requests,
            p->connections);
    for (int k = FP_500; k < FP_KIND_COUNT; k++)
        if (p->faults[k])
            fprintf(stderr, " %s=%ld", fp_kind_name[k], p->faults[k]);
    fprintf(stderr, "; sha256 checked %ld, bad %ld\n", p->sha_checked, p->sha_bad);
    fp_unlock(p);
}

static inline void fp_sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static inline int fp_send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static inline void fp_rst_close(int fd)
{
    struct linger lg = { 1, 0 };
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

typedef struct fp_buf {
    char *p;
    size_t len, cap;
} fp_buf;

static inline int fp_buf_put(fp_buf *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q)
            return -1;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

/* Header value (case-insensitive name) within head[0..hlen), copied into out; 0 if absent. */
static inline int fp_header(const char *head, size_t hlen, const char *name, char *out, size_t n)
{
    size_t k = strlen(name);
    const char *e = head + hlen;
    const char *l = memchr(head, '\n', hlen);
    while (l && l + 1 < e) {
        const char *s = l + 1;
        const char *nl = memchr(s, '\n', (size_t)(e - s));
        if (!nl)
            nl = e;
        if ((size_t)(nl - s) > k && !strncasecmp(s, name, k) && s[k] == ':') {
            const char *v = s + k + 1;
            while (v < nl && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = nl;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' '))
                ve--;
            size_t m = (size_t)(ve - v) < n - 1 ? (size_t)(ve - v) : n - 1;
            memcpy(out, v, m);
            out[m] = 0;
            return 1;
        }
        l = nl < e ? nl : NULL;
    }
    return 0;
}

/* Rebuilds a head without the listed hop-by-hop headers, plus `extra` lines. */
static inline void fp_rewrite_head(
    const char *head, size_t hlen, const char *const *drop, const char *extra, fp_buf *out)
{
    const char *e = head + hlen;
    const char *l = memchr(head, '\n', hlen);
    fp_buf_put(out, head, (size_t)(l - head) + 1);
    const char *s = l + 1;
    while (s < e) {
        const char *nl = memchr(s, '\n', (size_t)(e - s));
        nl = nl ? nl + 1 : e;
        int keep = !(nl - s <= 2 && (s[0] == '\r' || s[0] == '\n'));
        for (size_t i = 0; keep && drop[i]; i++) {
            size_t k = strlen(drop[i]);
            if ((size_t)(nl - s) > k && !strncasecmp(s, drop[i], k) && s[k] == ':')
                keep = 0;
        }
        if (keep)
            fp_buf_put(out, s, (size_t)(nl - s));
        s = nl;
    }
    if (extra)
        fp_buf_put(out, extra, strlen(extra));
    fp_buf_put(out, "\r\n", 2);
}

static inline fp_kind
fp_choose(faultproxy *p, const char *method, const char *target, fp_rule **rule)
{
    fp_kind k = FP_PASS;
    *rule = NULL;
    fp_lock(p);
    p->requests++;
    if (p->n_log < FP_LOG_MAX && p->log)
        snprintf(p->log[p->n_log], sizeof p->log[0], "%s %s", method, target);
    p->n_log++;
    for (int i = 0; i < p->n_rules; i++) {
        if (p->rules[i].times != 0 && !strcmp(p->rules[i].method, method) &&
            strstr(target, p->rules[i].match)) {
            if (p->rules[i].times > 0)
                p->rules[i].times--;
            p->rules[i].hits++;
            *rule = &p->rules[i];
            p->faults[FP_CANNED]++;
            fp_unlock(p);
            return FP_CANNED;
        }
    }
    int match = (!p->f_method[0] || !strcmp(p->f_method, method)) &&
                (!p->f_match[0] || strstr(target, p->f_match));
    if (match && p->persistent != FP_PASS) {
        k = p->persistent;
    } else if (match && p->qhead < p->qtail) {
        k = p->queue[p->qhead++ % 1024];
    } else if (p->prob > 0 && p->prob_mask) {
        p->rng ^= p->rng >> 12;
        p->rng ^= p->rng << 25;
        p->rng ^= p->rng >> 27;
        uint64_t r = p->rng * 2685821657736338717ull;
        if ((double)(r >> 11) / 9007199254740992.0 < p->prob) {
            int kinds[FP_KIND_COUNT], nk = 0;
            for (int i = FP_500; i < FP_CANNED; i++)
                if (p->prob_mask & (1u << i))
                    kinds[nk++] = i;
            if (nk)
                k = (fp_kind)kinds[(r >> 3) % (uint64_t)nk];
        }
        if (p->max_run > 0) {
            char key[200];
            snprintf(key, sizeof key, "%s %s", method, target);
            int e = -1;
            for (int i = 0; i < p->n_runs && e < 0; i++)
                if (!strcmp(p->runs[i].key, key))
                    e = i;
            if (e < 0) { /* a new request: a free slot, else the oldest one's */
                e = p->n_runs < 64 ? p->n_runs++ : (int)(p->rng % 64);
                snprintf(p->runs[e].key, sizeof p->runs[e].key, "%s", key);
                p->runs[e].run = 0;
            }
            if (k != FP_PASS && p->runs[e].run >= p->max_run)
                k = FP_PASS;
            p->runs[e].run = k != FP_PASS ? p->runs[e].run + 1 : 0;
        }
    }
    if (k != FP_PASS)
        p->faults[k]++;
    fp_unlock(p);
    return k;
}

static inline int fp_is_hex64(const char *s)
{
    if (strlen(s) != 64)
        return 0;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

static inline void
fp_check_sha(faultproxy *p, const char *head, size_t hlen, const char *body, size_t n)
{
    char want[80];
    if (!fp_header(head, hlen, "x-amz-content-sha256", want, sizeof want) || !fp_is_hex64(want))
        return;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int ml = 0;
    char got[65];
    EVP_Digest(body, n, md, &ml, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++)
        snprintf(got + 2 * i, 3, "%02x", md[i]);
    fp_lock(p);
    p->sha_checked++;
    if (strcmp(got, want) != 0)
        p->sha_bad++;
    fp_unlock(p);
}

/* One request upstream; the whole response (to EOF) in *resp. 0 ok. */
static inline int fp_forward(
    faultproxy *p, const char *head, size_t hlen, const char *body, size_t blen, fp_buf *resp)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)p->upstream_port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = { 120, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    static const char *const drop[] = { "connection", "expect", "keep-alive", "proxy-connection",
                                        NULL };
    fp_buf h = { 0 };
    fp_rewrite_head(head, hlen, drop, "Connection: close\r\n", &h);
    int rc = fp_send_all(fd, h.p, h.len);
    free(h.p);
    if (rc == 0 && blen)
        rc = fp_send_all(fd, body, blen);
    char tmp[65536];
    while (rc == 0) {
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            rc = -1;
        if (r <= 0)
            break;
        fp_buf_put(resp, tmp, (size_t)r);
    }
    close(fd);
    return rc;
}

static inline void fp_send_error(
    int fd, const char *method, int status, const char *reason, const char *code, const char *msg)
{
    char body[512], head[512];
    int bl = snprintf(body, sizeof body,
                      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code>"
                      "<Message>%s</Message><RequestId>faultproxy</RequestId></Error>",
                      code, msg);
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n"
                      "\r\n",
                      status, reason, bl);
    fp_send_all(fd, head, (size_t)hl);
    if (strcmp(method, "HEAD") != 0)
        fp_send_all(fd, body, (size_t)bl);
}

typedef struct fp_conn_arg {
    faultproxy *p;
    int fd;
} fp_conn_arg;

/* Serves one client connection; returns when it is closed. */
static inline void fp_serve(faultproxy *p, int fd)
{
    fp_buf in = { 0 };
    char tmp[65536];
    int rst = 0;
    for (;;) {
        /* request head */
        char *end = NULL;
        while (!(end = in.p ? strstr(in.p, "\r\n\r\n") : NULL)) {
            if (atomic_load(&p->stop) || in.len > (1u << 20))
                goto done;
            ssize_t r = recv(fd, tmp, sizeof tmp, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                goto done;
            fp_buf_put(&in, tmp, (size_t)r);
        }
        size_t hlen = (size_t)(end - in.p) + 4;
        char method[16] = "", target[2048] = "";
        if (sscanf(in.p, "%15s %2047s", method, target) != 2)
            goto done;
        char v[128];
        size_t clen = 0;
        if (fp_header(in.p, hlen, "content-length", v, sizeof v))
            clen = (size_t)strtoull(v, NULL, 10);
        if (fp_header(in.p, hlen, "expect", v, sizeof v) && !strcasecmp(v, "100-continue") &&
            in.len < hlen + clen) {
            static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
            if (fp_send_all(fd, cont, sizeof cont - 1) != 0)
                goto done;
        }
        while (in.len < hlen + clen) {
            ssize_t r = recv(fd, tmp, sizeof tmp, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                goto done;
            fp_buf_put(&in, tmp, (size_t)r);
        }
        fp_check_sha(p, in.p, hlen, in.p + hlen, clen);
        fp_lock(p);
        int delay = p->delay_ms;
        fp_unlock(p);
        for (int t = 0; t < delay && !atomic_load(&p->stop); t += 10)
            usleep(10000);
        fp_rule *rule = NULL;
        fp_kind k = fp_choose(p, method, target, &rule);
        int is_head = !strcmp(method, "HEAD");
        int keep = 1;
        switch (k) {
        case FP_CANNED: {
            char head[256];
            int hl = snprintf(head, sizeof head,
                              "HTTP/1.1 %d Canned\r\nContent-Type: application/xml\r\n"
                              "Content-Length: %zu\r\n\r\n",
                              rule->status, strlen(rule->body));
            fp_send_all(fd, head, (size_t)hl);
            if (!is_head)
                fp_send_all(fd, rule->body, strlen(rule->body));
            break;
        }
        case FP_500:
            fp_send_error(fd, method, 500, "Internal Server Error", "InternalError",
                          "We encountered an internal error. Please try again. (injected)");
            break;
        case FP_503:
            fp_send_error(fd, method, 503, "Service Unavailable", "ServiceUnavailable",
                          "Service is unable to handle request. (injected)");
            break;
        case FP_SLOWDOWN:
            fp_send_error(fd, method, 503, "Slow Down", "SlowDown",
                          "Please reduce your request rate. (injected)");
            break;
        case FP_RESET:
            rst = 1;
            goto done;
        case FP_STALL: {
            int ms;
            fp_lock(p);
            ms = p->stall_ms;
            fp_unlock(p);
            for (int t = 0; t < ms && !atomic_load(&p->stop); t += 20)
                fp_sleep_ms(20);
            keep = 0;
            break;
        }
        default: { /* forwarded kinds */
            fp_buf resp = { 0 };
            if (fp_forward(p, in.p, hlen, in.p + hlen, clen, &resp) != 0 || !resp.p ||
                !strstr(resp.p, "\r\n\r\n")) {
                fp_send_error(fd, method, 502, "Bad Gateway", "BadGateway", "upstream failed");
                free(resp.p);
                keep = 0;
                break;
            }
            size_t rh = (size_t)(strstr(resp.p, "\r\n\r\n") - resp.p) + 4;
            size_t rb = resp.len - rh;
            if (k == FP_LOST) {
                free(resp.p);
                rst = 1;
                goto done;
            }
            char cl[64], te[64];
            int has_cl = fp_header(resp.p, rh, "content-length", cl, sizeof cl);
            int chunked =
                fp_header(resp.p, rh, "transfer-encoding", te, sizeof te) && strstr(te, "chunked");
            int status = (int)strtol(resp.p + 9, NULL, 10);
            int delimited = has_cl || chunked || is_head || status == 204 || status == 304;
            static const char *const drop[] = { "connection", "keep-alive", NULL };
            fp_buf out = { 0 };
            fp_rewrite_head(resp.p, rh, drop, delimited ? NULL : "Connection: close\r\n", &out);
            keep = delimited;
            if (k == FP_TRUNCATE || k == FP_RESET_MIDBODY) {
                if (rb > 0 && !is_head) {
                    fp_send_all(fd, out.p, out.len);
                    fp_send_all(fd, resp.p + rh, rb / 2);
                } else {
                    fp_send_all(fd, out.p, out.len / 2);
                }
                free(out.p);
                free(resp.p);
                if (k == FP_RESET_MIDBODY)
                    rst = 1;
                else
                    shutdown(fd, SHUT_RDWR);
                goto done;
            }
            fp_send_all(fd, out.p, out.len);
            if (rb && !is_head)
                fp_send_all(fd, resp.p + rh, rb);
            free(out.p);
            free(resp.p);
            break;
        }
        }
        if (!keep)
            goto done;
        /* keep what follows the body (pipelined bytes) for the next request */
        size_t used = hlen + clen;
        memmove(in.p, in.p + used, in.len - used);
        in.len -= used;
        in.p[in.len] = 0;
    }
done:
    free(in.p);
    fp_lock(p); /* forget fd before closing it, so fp_stop never shuts a reused descriptor */
    for (int i = 0; i < p->n_fds; i++)
        if (p->fds[i] == fd) {
            p->fds[i] = p->fds[--p->n_fds];
            break;
        }
    fp_unlock(p);
    if (rst)
        fp_rst_close(fd);
    else
        close(fd);
}

static inline void *fp_conn_main(void *arg)
{
    fp_conn_arg a = *(fp_conn_arg *)arg;
    free(arg);
    fp_serve(a.p, a.fd);
    fp_lock(a.p);
    a.p->active--;
    fp_unlock(a.p);
    return NULL;
}

static inline void *fp_accept_main(void *arg)
{
    faultproxy *p = arg;
    while (!atomic_load(&p->stop)) {
        int fd = accept(p->lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fp_conn_arg *a = malloc(sizeof *a);
        pthread_t t;
        fp_lock(p);
        p->connections++;
        p->active++;
        if (p->n_fds < 512)
            p->fds[p->n_fds++] = fd;
        fp_unlock(p);
        if (!a) {
            close(fd);
            continue;
        }
        a->p = p;
        a->fd = fd;
        if (pthread_create(&t, NULL, fp_conn_main, a) != 0) {
            free(a);
            close(fd);
            fp_lock(p);
            p->active--;
            fp_unlock(p);
            continue;
        }
        pthread_detach(t);
    }
    return NULL;
}

/* Starts a proxy to 127.0.0.1:upstream_port. Returns 0 or -1. */
/* Starts the proxy listening on bind_ip (IPv4 text) on an ephemeral port (p->port), relaying
 * to 127.0.0.1:upstream_port. */
static inline int fp_start_on(faultproxy *p, const char *bind_ip, int upstream_port)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    p->upstream_port = upstream_port;
    p->stall_ms = 3000;
    p->log = calloc(FP_LOG_MAX, sizeof *p->log);
    p->lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (p->lfd < 0)
        return -1;
    int one = 1;
    setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    if (inet_pton(AF_INET, bind_ip, &a.sin_addr) != 1) {
        close(p->lfd);
        return -1;
    }
    socklen_t al = sizeof a;
    if (bind(p->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(p->lfd, 128) != 0 ||
        getsockname(p->lfd, (struct sockaddr *)&a, &al) != 0) {
        close(p->lfd);
        return -1;
    }
    p->port = ntohs(a.sin_port);
    if (pthread_create(&p->acceptor, NULL, fp_accept_main, p) != 0) {
        close(p->lfd);
        return -1;
    }
    return 0;
}

static inline int fp_start(faultproxy *p, int upstream_port)
{
    return fp_start_on(p, "127.0.0.1", upstream_port);
}

/* Stops accepting, shuts every client connection, waits for the connection threads. */
static inline void fp_stop(faultproxy *p)
{
    atomic_store(&p->stop, 1);
    shutdown(p->lfd, SHUT_RDWR);
    pthread_join(p->acceptor, NULL);
    close(p->lfd);
    for (int i = 0; i < 500; i++) {
        fp_lock(p);
        for (int j = 0; j < p->n_fds; j++)
            shutdown(p->fds[j], SHUT_RDWR);
        int active = p->active;
        fp_unlock(p);
        if (!active)
            break;
        fp_sleep_ms(10);
    }
    free(p->log);
    p->log = NULL;
}
#endif
