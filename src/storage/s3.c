/*
 * s3.c: the S3 client (see s3.h) on libcurl easy handles, SigV4 signed by libcurl
 * (CURLOPT_AWS_SIGV4 "aws:amz:REGION:s3"), XML parsed with expat, SHA-256 from OpenSSL libcrypto.
 *
 * Request life cycle (perform): build the URL and payload hash (req_prepare); per turn take an
 * easy handle from the pool, run one attempt and classify the outcome (ok / retryable / final;
 * req_attempt); either return, or sleep a backoff and run the next attempt, up to
 * 1 + max_retries attempts; a final failure is counted and described by req_failed.
 * mp_complete uses the same three pieces with a check between attempts (invariant 5). Every
 * successful request calls sx__io_record(SX__IO_OBJSTORE, ...) once with its payload bytes and
 * bumps sx__s3_stats; a request that finally fails bumps `failures` once (not for a 404).
 *
 * Invariants:
 *  1. Every request carries x-amz-content-sha256 = hex SHA-256 of the exact payload (the empty
 *     hash for GET/HEAD/DELETE); libcurl 7.86+ uses the header's value as the signed payload
 *     hash, so the signature covers the body. UNSIGNED-PAYLOAD is never sent.
 *  2. Query strings are built here already canonical: parameters sorted by name, every value
 *     present ("uploads=", never "uploads") and URI-encoded with the S3 rules. libcurl 7.88 signs
 *     the query exactly as written (it neither sorts nor re-encodes), so what is sent is what is
 *     signed. Keys are encoded the same way except that '/' is kept; CURLOPT_PATH_AS_IS stops
 *     libcurl from squashing "/./" or "//" in keys.
 *  3. A 2xx response counts only when its body is complete: bytes received equal Content-Length,
 *     and a ranged read returned every byte asked for (unless Content-Range shows the object
 *     itself ends earlier). A short body is retried like a connection reset.
 *  4. Retried: transport errors (reset, refused, partial body, empty reply, timeouts, stalls),
 *     HTTP 5xx and 429, and the S3 codes SlowDown / RequestTimeout / InternalError /
 *     ServiceUnavailable / Throttling. Not retried: other 4xx (403 SignatureDoesNotMatch, 404).
 *     Backoff before retry n (0-based): uniform in [0, min(5 s, 100 ms * 2^n)] ("full jitter").
 *  5. A multipart upload is either completed or aborted (best effort) before put_file returns;
 *     CompleteMultipartUpload's "200 with an <Error> body" is a failure (retried when its code
 *     is retryable). Complete cannot simply be repeated, so it does not go through perform's
 *     retry loop: mp_complete runs one attempt per turn, and after an attempt whose
 *     outcome is unknown (no answer or one cut short, a timeout, a 5xx, or 404 NoSuchUpload;
 *     complete_unknown) it asks with a HEAD on the key whether the object is now there with
 *     the upload's size, and the AWS multipart ETag when the server uses that form
 *     (completed_by_us): then an earlier attempt completed it and the put succeeds; else the
 *     next attempt follows. Why: once one attempt completed the upload, the upload is gone
 *     and a further Complete can fail (AWS: 404 NoSuchUpload; s3rver: 500, its upload
 *     directory is gone), so a plain retry loop burns all 1 + max_retries attempts with
 *     backoff and counts a failure for a put that succeeded (the test_s3 random-faults
 *     failure for SX_SEED=1796193625: the first Complete response was truncated, the 12
 *     retries all failed (s3rver's 500, some faulted again); a HEAD after the last one found
 *     the object, but the statistics counted a failure).
 *     Rejected: a HEAD before the first attempt (one more request on every upload, and the
 *     key is new); settling with a HEAD only after the last attempt (the old way: right
 *     result, but up to ~30 s of backoff and a failure in the statistics).
 *  6. get_file writes PATH.tmp, fsyncs it, renames it over PATH and fsyncs the directory; a
 *     retried download truncates the tmp file first; on failure the tmp file is removed.
 *
 * Timeouts: each attempt has a total limit of timeout_ms plus 1 ms per KiB of request/response
 * payload (a 1 MB/s floor, so a 16 MiB part is not cut at 30 s on a slow link), and a stall
 * detector (the progress callback) aborts an attempt that moved no byte for timeout_ms. Either
 * is reported as a timeout: retried, and SX_ETIMEDOUT when the last attempt timed out.
 *
 * Threading: one sx__s3 is shared by any number of threads. Connection reuse comes from a pool
 * of easy handles (a LIFO free list guarded by `mu`): a request takes a handle, curl_easy_reset
 * clears its options but keeps its connection cache, and the handle goes back afterwards, so a
 * thread's next request usually finds a warm keep-alive connection. At most POOL_MAX idle
 * handles are kept. Rejected: a CURLSH share of the connection cache (its lock callbacks are
 * taken on every transfer step and only curl >= 7.57 shares connections; the pool is simpler
 * and as effective for synchronous calls); per-thread handles in TLS (no way to free them when
 * the sx__s3 goes away before the thread). Statistics are relaxed atomics (counters only).
 * The multipart upload runs parallel_parts worker threads of its own; each worker reads its
 * parts through its own file handle and reports the first failure (status and message) to the
 * caller's thread through the shared state under its mutex.
 *
 * Secrets: the secret key only lives in `userpwd` (zeroed on free); no message names it.
 *
 * XML: every response body goes through xml_parse (expat; element paths, text capped at
 * XMLTEXT_MAX, nesting past 64 levels ignored) and a per-response callback; the page parsers
 * (list_parse, create_parse, uploads_parse) are shared with sx__s3_xml_parse, the entry point of
 * tests/fuzz/fuzz_s3_xml.c.
 */
#include "storage/s3.h"

#include <curl/curl.h>
#include <errno.h>
#include <expat.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "platform/fs.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/err.h"

#define POOL_MAX        32
#define ERRBODY_MAX     ((size_t)64 << 10)  /* error bodies kept for parsing */
#define XMLTEXT_MAX     ((size_t)256 << 10) /* one element's text */
#define BACKOFF_BASE_MS 100u
#define BACKOFF_CAP_MS  5000u
#define MIN_PART_SIZE   (5ull << 20)
#define MAX_PARTS       10000ull
#define EMPTY_SHA256    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct sx__s3 {
    char *endpoint; /* no trailing '/' */
    char *base;     /* URL prefix before "/key": endpoint/bucket or scheme://bucket.host */
    char *region;
    char *bucket;
    char *userpwd;   /* "access:secret" (secret: zeroed on free) */
    char *sigv4;     /* "aws:amz:REGION:s3" */
    char *token_hdr; /* "x-amz-security-token: ..." or NULL */
    uint32_t timeout_ms, connect_timeout_ms, max_retries, parallel_parts;
    uint64_t multipart_threshold, part_size;

    pthread_mutex_t mu;
    CURL *pool[POOL_MAX]; /* guarded by mu */
    size_t n_pool;        /* guarded by mu */

    /* statistics: relaxed atomics */
    _Atomic uint64_t puts, gets, heads, deletes, lists, parts;
    _Atomic uint64_t bytes_up, bytes_down, retries, failures;
};

/* ---------------------------------------------------------------- small helpers */

typedef struct membuf {
    uint8_t *p;
    size_t len, cap;
} membuf;

static bool mb_reserve(membuf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2)
            return false;
        cap *= 2;
    }
    uint8_t *p = sx__realloc(b->p, cap);
    if (!p)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

static bool mb_put(membuf *b, const void *p, size_t n)
{
    if (!mb_reserve(b, n))
        return false;
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = 0;
    return true;
}

static bool mb_puts(membuf *b, const char *s)
{
    return mb_put(b, s, strlen(s));
}

static void mb_free(membuf *b)
{
    sx__free(b->p);
    memset(b, 0, sizeof *b);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static _Thread_local uint64_t rng_state;

static uint64_t rng_next(void)
{
    if (!rng_state) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        rng_state =
            ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&rng_state;
        if (!rng_state)
            rng_state = 0x9e3779b97f4a7c15ull;
    }
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

/* Full jitter: uniform in [0, min(cap, base * 2^n)] (invariant 4). */
static void backoff_sleep(uint32_t n)
{
    uint64_t ceil_ms = BACKOFF_BASE_MS;
    for (uint32_t i = 0; i < n && ceil_ms < BACKOFF_CAP_MS; i++)
        ceil_ms *= 2;
    if (ceil_ms > BACKOFF_CAP_MS)
        ceil_ms = BACKOFF_CAP_MS;
    uint64_t ms = rng_next() % (ceil_ms + 1);
    struct timespec ts = { (time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void sha256_hex(const void *data, size_t len, char out[65])
{
    static const char hx[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) {
        /* Cannot happen with libcrypto's built-in SHA-256; a wrong hash makes the request fail
         * its signature check rather than go out unsigned. */
        memset(out, '0', 64);
        out[64] = 0;
        return;
    }
    for (size_t i = 0; i < 32; i++) {
        out[2 * i] = hx[md[i] >> 4];
        out[2 * i + 1] = hx[md[i] & 15];
    }
    out[64] = 0;
}

/* S3 URI encoding: everything but unreserved (and '/' when keep_slash) as %XX (invariant 2). */
static bool uri_encode(membuf *b, const char *s, bool keep_slash)
{
    static const char hx[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned c = *p;
        bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                     c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/');
        if (plain) {
            char ch = (char)c;
            if (!mb_put(b, &ch, 1))
                return false;
        } else {
            char e[3] = { '%', hx[c >> 4], hx[c & 15] };
            if (!mb_put(b, e, 3))
                return false;
        }
    }
    return true;
}

typedef struct qparam {
    const char *name;
    const char *value; /* NULL: empty value ("uploads=") */
} qparam;

static int qparam_cmp(const void *a, const void *b)
{
    return strcmp(((const qparam *)a)->name, ((const qparam *)b)->name);
}

/* Canonical query (invariant 2): sorted by name, "name=value" with encoded values. Names are
 * fixed ASCII identifiers. Returns an owned string or NULL (ENOMEM). */
static char *build_query(qparam *q, size_t n)
{
    membuf b = { 0 };
    qsort(q, n, sizeof *q, qparam_cmp);
    bool ok = mb_reserve(&b, 64);
    for (size_t i = 0; ok && i < n; i++) {
        ok = (i == 0 || mb_puts(&b, "&")) && mb_puts(&b, q[i].name) && mb_puts(&b, "=") &&
             uri_encode(&b, q[i].value ? q[i].value : "", false);
    }
    if (!ok) {
        mb_free(&b);
        return NULL;
    }
    return (char *)b.p;
}

/* ---------------------------------------------------------------- XML (expat) */

typedef struct xml_walk xml_walk;
typedef void (*xml_end_fn)(xml_walk *w, const char *path, const char *text);

struct xml_walk {
    XML_Parser p;
    membuf path;        /* "Root/Child/Leaf" */
    size_t stack[64];   /* path lengths before each open element */
    unsigned depth;     /* elements open */
    unsigned deep_skip; /* elements open beyond the stack (ignored) */
    membuf text;        /* text of the innermost open element */
    bool oom;
    char root[64];
    xml_end_fn on_end;
    void *ud;
};

static void XMLCALL xml_start(void *ud, const XML_Char *name, const XML_Char **atts)
{
    (void)atts;
    xml_walk *w = ud;
    if (w->depth >= sizeof w->stack / sizeof w->stack[0] || w->deep_skip) {
        w->deep_skip++;
        return;
    }
    if (w->depth == 0)
        snprintf(w->root, sizeof w->root, "%s", name);
    w->stack[w->depth++] = w->path.len;
    if (!((w->path.len == 0 || mb_puts(&w->path, "/")) && mb_puts(&w->path, name)))
        w->oom = true;
    w->text.len = 0;
}

static void XMLCALL xml_end(void *ud, const XML_Char *name)
{
    (void)name;
    xml_walk *w = ud;
    if (w->deep_skip) {
        w->deep_skip--;
        return;
    }
    if (!w->depth)
        return;
    if (!w->oom && w->on_end)
        w->on_end(w, w->path.p ? (const char *)w->path.p : "",
                  w->text.p ? (const char *)w->text.p : "");
    w->depth--;
    w->path.len = w->stack[w->depth];
    if (w->path.p)
        w->path.p[w->path.len] = 0;
    w->text.len = 0;
    if (w->text.p)
        w->text.p[0] = 0;
}

static void XMLCALL xml_chars(void *ud, const XML_Char *s, int len)
{
    xml_walk *w = ud;
    if (w->deep_skip || len <= 0 || w->text.len + (size_t)len > XMLTEXT_MAX)
        return;
    if (!mb_put(&w->text, s, (size_t)len))
        w->oom = true;
}

/* Parses a whole response body, calling on_end(path, text) at each element's end. Returns
 * SX_EREMOTE (malformed) or SX_ENOMEM; `root` receives the root element's name. */
static sx_status xml_parse(const void *data, size_t len, xml_end_fn on_end, void *ud, char root[64])
{
    xml_walk w;
    memset(&w, 0, sizeof w);
    w.on_end = on_end;
    w.ud = ud;
    w.p = XML_ParserCreate("UTF-8");
    if (!w.p)
        return sx__err(SX_ENOMEM, "s3: cannot create an XML parser");
    XML_SetUserData(w.p, &w);
    XML_SetElementHandler(w.p, xml_start, xml_end);
    XML_SetCharacterDataHandler(w.p, xml_chars);
    sx_status st = SX_OK;
    if (len > (size_t)INT32_MAX) {
        st = sx__err(SX_EREMOTE, "s3: XML response too large (%zu bytes)", len);
    } else if (XML_Parse(w.p, data, (int)len, 1) != XML_STATUS_OK) {
        st = sx__err(SX_EREMOTE, "s3: malformed XML response: %s at line %lu",
                     XML_ErrorString(XML_GetErrorCode(w.p)),
                     (unsigned long)XML_GetCurrentLineNumber(w.p));
    } else if (w.oom) {
        st = sx__err(SX_ENOMEM, "s3: out of memory parsing an XML response");
    }
    if (root)
        snprintf(root, 64, "%s", w.root);
    XML_ParserFree(w.p);
    mb_free(&w.path);
    mb_free(&w.text);
    return st;
}

typedef struct s3_error {
    char code[64];
    char message[256];
} s3_error;

static void err_end(xml_walk *w, const char *path, const char *text)
{
    s3_error *e = w->ud;
    if (!strcmp(path, "Error/Code"))
        snprintf(e->code, sizeof e->code, "%s", text);
    else if (!strcmp(path, "Error/Message"))
        snprintf(e->message, sizeof e->message, "%s", text);
}

/* Best effort: an unparseable error body leaves code/message empty. */
static void parse_error_body(const membuf *body, s3_error *e)
{
    e->code[0] = e->message[0] = 0;
    if (!body->len)
        return;
    char root[64];
    sx_status st = xml_parse(body->p, body->len, err_end, e, root);
    sx__ignore(st);
    sx__err_clear();
}

/* ---------------------------------------------------------------- requests */

typedef enum kind { K_PUT, K_GET, K_HEAD, K_DELETE, K_LIST, K_PART } kind;

typedef enum sink_kind { SINK_NONE, SINK_MEM, SINK_BUF, SINK_FILE } sink_kind;

typedef struct xfer {
    /* request */
    const char *op;     /* for messages: "PUT", "ListObjectsV2", ... */
    const char *method; /* GET PUT POST DELETE HEAD */
    const char *key;    /* NULL: the bucket */
    const char *query;  /* canonical query or NULL */
    kind kind;
    const uint8_t *body; /* PUT/POST payload */
    size_t body_len;
    const char *content_type;
    bool has_range;
    uint64_t range_off, range_len; /* range_len 0: to the end */
    /* response sink (2xx bodies); non-2xx bodies go to errbody */
    sink_kind sink;
    membuf *mem;
    uint8_t *buf;
    size_t buf_cap;
    sx__file *file;

    /* per attempt */
    long status;
    bool has_cl, has_cr, body_started;
    bool headers_done; /* the blank line ending the final response's headers was seen */
    uint64_t content_length, cr_first, cr_last, cr_total;
    uint64_t wire;      /* 2xx body bytes received */
    uint64_t got;       /* bytes delivered to the sink */
    uint64_t skip_left; /* server ignored Range: bytes before range_off to drop */
    uint64_t limit;     /* ... and the most to keep (0: no limit) */
    size_t read_pos;
    char etag[160];
    membuf errbody;
    sx_status sink_st;
    bool stalled;
    uint64_t last_move_ms;
    curl_off_t last_dl, last_ul;
    uint32_t stall_ms;
    char curl_err[CURL_ERROR_SIZE];
    char sha[65]; /* payload hash, computed once per request (invariant 1) */
} xfer;

typedef struct outcome {
    sx_status st;
    bool retry;
    bool timed_out;
    long status;
    uint32_t attempts; /* set by perform */
    s3_error err;
    char detail[320];
} outcome;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_OK;

static void curl_init_once(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static CURL *pool_get(sx__s3 *s)
{
    CURL *h = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->n_pool)
        h = s->pool[--s->n_pool];
    pthread_mutex_unlock(&s->mu);
    if (h) {
        curl_easy_reset(h); /* keeps the connection cache */
        return h;
    }
    return curl_easy_init();
}

static void pool_put(sx__s3 *s, CURL *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&s->mu);
    if (s->n_pool < POOL_MAX) {
        s->pool[s->n_pool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    if (h)
        curl_easy_cleanup(h);
}

static bool hdr_is(const char *line, size_t n, const char *name, const char **val, size_t *vlen)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return false;
    const char *v = line + k + 1;
    const char *e = line + n;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *val = v;
    *vlen = (size_t)(e - v);
    return true;
}

static bool parse_u64(const char *v, size_t n, uint64_t *out)
{
    uint64_t x = 0;
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9' || x > (UINT64_MAX - 9) / 10)
            return false;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    *out = x;
    return true;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ud)
{
    xfer *x = ud;
    size_t n = sz * nm;
    const char *v;
    size_t vl;
    if (n > 5 && !strncmp(p, "HTTP/", 5)) {
        /* a new response (after 100 Continue, too): reset what the headers tell */
        const char *sp = memchr(p, ' ', n);
        uint64_t code = 0;
        if (sp && (size_t)(p + n - sp) > 3)
            sx__ignore(parse_u64(sp + 1, 3, &code) ? SX_OK : SX_EINVAL);
        x->status = (long)code;
        x->has_cl = x->has_cr = x->headers_done = false;
        x->etag[0] = 0;
        return n;
    }
    if ((n == 2 && p[0] == '\r' && p[1] == '\n') || (n == 1 && p[0] == '\n')) {
        x->headers_done = true;
        return n;
    }
    if (hdr_is(p, n, "content-length", &v, &vl)) {
        x->has_cl = parse_u64(v, vl, &x->content_length);
    } else if (hdr_is(p, n, "etag", &v, &vl)) {
        if (vl < sizeof x->etag) {
            memcpy(x->etag, v, vl);
            x->etag[vl] = 0;
        }
    } else if (hdr_is(p, n, "content-range", &v, &vl)) {
        /* "bytes FIRST-LAST/TOTAL", digits only; anything else is ignored (a "*" total was; a
         * sign or a number past 64 bits was undefined behaviour of sscanf's %llu) */
        if (vl > 5 && memcmp(v, "bytes", 5) == 0) {
            const char *e = v + vl, *a = v + 5;
            while (a < e && (*a == ' ' || *a == '\t'))
                a++;
            const char *dash = memchr(a, '-', (size_t)(e - a));
            const char *slash = dash ? memchr(dash, '/', (size_t)(e - dash)) : NULL;
            uint64_t f, l, t;
            if (slash && parse_u64(a, (size_t)(dash - a), &f) &&
                parse_u64(dash + 1, (size_t)(slash - dash - 1), &l) &&
                parse_u64(slash + 1, (size_t)(e - slash - 1), &t)) {
                x->has_cr = true;
                x->cr_first = f;
                x->cr_last = l;
                x->cr_total = t;
            }
        }
    }
    return n;
}

static size_t on_body(char *p, size_t sz, size_t nm, void *ud)
{
    xfer *x = ud;
    size_t n = sz * nm;
    if (x->status < 200 || x->status >= 300) {
        if (x->errbody.len + n <= ERRBODY_MAX && !mb_put(&x->errbody, p, n))
            return 0; /* CURLE_WRITE_ERROR; sink_st set below */
        return n;
    }
    if (!x->body_started) {
        x->body_started = true;
        if (x->has_range && x->status == 200) { /* Range ignored: cut it out ourselves */
            x->skip_left = x->range_off;
            x->limit = x->range_len;
        } else if (x->has_range) {
            x->limit = x->range_len;
        }
        if (x->sink == SINK_MEM && x->has_cl && !x->limit && !x->skip_left &&
            !mb_reserve(x->mem, (size_t)x->content_length)) {
            x->sink_st = sx__err(SX_ENOMEM, "s3 %s: cannot buffer %" PRIu64 " bytes", x->op,
                                 x->content_length);
            return 0;
        }
    }
    x->wire += n;
    const char *q = p;
    size_t m = n;
    if (x->skip_left) {
        size_t d = x->skip_left < m ? (size_t)x->skip_left : m;
        q += d;
        m -= d;
        x->skip_left -= d;
    }
    if (x->limit && x->got + m > x->limit)
        m = (size_t)(x->limit - x->got);
    if (!m)
        return n;
    switch (x->sink) {
    case SINK_MEM:
        if (!mb_put(x->mem, q, m)) {
            x->sink_st = sx__err(SX_ENOMEM, "s3 %s: out of memory buffering the body", x->op);
            return 0;
        }
        break;
    case SINK_BUF:
        if (x->got + m > x->buf_cap)
            m = (size_t)(x->buf_cap - x->got);
        memcpy(x->buf + x->got, q, m);
        break;
    case SINK_FILE: {
        sx_status st = sx__file_append(x->file, q, m);
        if (st != SX_OK) {
            x->sink_st = st;
            return 0;
        }
        break;
    }
    case SINK_NONE:
        break;
    }
    x->got += m;
    return n;
}

static size_t on_read(char *p, size_t sz, size_t nm, void *ud)
{
    xfer *x = ud;
    size_t n = sz * nm;
    size_t left = x->body_len - x->read_pos;
    if (n > left)
        n = left;
    if (n)
        memcpy(p, x->body + x->read_pos, n);
    x->read_pos += n;
    return n;
}

static int on_seek(void *ud, curl_off_t off, int origin)
{
    xfer *x = ud;
    if (origin != SEEK_SET || off < 0 || (uint64_t)off > x->body_len)
        return CURL_SEEKFUNC_CANTSEEK;
    x->read_pos = (size_t)off;
    return CURL_SEEKFUNC_OK;
}

/* Stall detector: abort an attempt that moved no byte in either direction for stall_ms. */
static int on_progress(void *ud, curl_off_t dlt, curl_off_t dln, curl_off_t ult, curl_off_t uln)
{
    (void)dlt;
    (void)ult;
    xfer *x = ud;
    uint64_t t = now_ms();
    if (dln != x->last_dl || uln != x->last_ul) {
        x->last_dl = dln;
        x->last_ul = uln;
        x->last_move_ms = t;
        return 0;
    }
    if (t - x->last_move_ms > x->stall_ms) {
        x->stalled = true;
        return 1;
    }
    return 0;
}

static char *build_url(const sx__s3 *s, const char *key, const char *query)
{
    membuf b = { 0 };
    /* bucket-level requests: no trailing '/' ("/bucket?list-type=2"), as S3 canonicalizes it */
    bool ok = mb_puts(&b, s->base) && (!key || (mb_puts(&b, "/") && uri_encode(&b, key, true))) &&
              (!query || (mb_puts(&b, "?") && mb_puts(&b, query)));
    if (!ok) {
        mb_free(&b);
        return NULL;
    }
    return (char *)b.p;
}

static bool retryable_code(const char *c)
{
    return !strcmp(c, "SlowDown") || !strcmp(c, "RequestTimeout") || !strcmp(c, "InternalError") ||
           !strcmp(c, "ServiceUnavailable") || !strcmp(c, "Throttling") ||
           !strcmp(c, "ThrottlingException") || !strcmp(c, "RequestTimeTooSkewed");
}

static bool retryable_curl(CURLcode cc)
{
    switch (cc) {
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_BAD_CONTENT_ENCODING:
        return true;
    default:
        return false;
    }
}

static void reset_attempt(xfer *x)
{
    x->status = 0;
    x->has_cl = x->has_cr = x->body_started = x->headers_done = false;
    x->content_length = x->cr_first = x->cr_last = x->cr_total = 0;
    x->wire = x->got = x->skip_left = x->limit = 0;
    x->read_pos = 0;
    x->etag[0] = 0;
    x->errbody.len = 0;
    x->sink_st = SX_OK;
    x->stalled = false;
    x->last_dl = x->last_ul = 0;
    x->curl_err[0] = 0;
}

/* Empties the sink before a retry. */
static sx_status reset_sink(xfer *x)
{
    if (x->sink == SINK_MEM)
        x->mem->len = 0;
    if (x->sink == SINK_FILE)
        return sx__file_truncate(x->file, 0);
    return SX_OK;
}

/* One attempt: fills *o (st SX_OK on success). */
static void attempt(sx__s3 *s, CURL *h, xfer *x, const char *url, outcome *o)
{
    memset(o, 0, sizeof *o);
    reset_attempt(x);
    char hdr_sha[100], hdr_range[96], hdr_ct[128];
    snprintf(hdr_sha, sizeof hdr_sha, "x-amz-content-sha256: %s", x->sha);
    struct curl_slist *hl = NULL, *t;
    bool ok = true;
#define ADDH(line)                   \
 do {                                \
  t = curl_slist_append(hl, (line)); \
  if (t)                             \
   hl = t;                           \
  else                               \
   ok = false;                       \
 } while (0)
    ADDH(hdr_sha);
    if (s->token_hdr)
        ADDH(s->token_hdr);
    if (x->has_range) {
        if (x->range_len)
            snprintf(hdr_range, sizeof hdr_range, "Range: bytes=%" PRIu64 "-%" PRIu64, x->range_off,
                     x->range_off + x->range_len - 1);
        else
            snprintf(hdr_range, sizeof hdr_range, "Range: bytes=%" PRIu64 "-", x->range_off);
        ADDH(hdr_range);
    }
    if (x->content_type) {
        snprintf(hdr_ct, sizeof hdr_ct, "Content-Type: %s", x->content_type);
        ADDH(hdr_ct);
    }
#undef ADDH
    if (!ok) {
        curl_slist_free_all(hl);
        o->st = sx__err(SX_ENOMEM, "s3 %s: out of memory building headers", x->op);
        return;
    }
    /* Total limit: timeout_ms plus 1 ms per KiB of known payload; a download of unknown size
     * (no Range length) has only the stall detector. */
    uint64_t payload = x->body_len + (x->has_range ? x->range_len : 0);
    bool unknown = !strcmp(x->method, "GET") && x->key && !(x->has_range && x->range_len);
    long total_ms = unknown ? 0L : (long)(s->timeout_ms + payload / 1024u);
    x->stall_ms = s->timeout_ms;
    x->last_move_ms = now_ms();

    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, s->sigv4);
    curl_easy_setopt(h, CURLOPT_USERPWD, s->userpwd);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)s->connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, total_ms);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->curl_err);
    if (!strcmp(x->method, "HEAD")) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (!strcmp(x->method, "PUT")) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, x);
        curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(h, CURLOPT_SEEKDATA, x);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->body_len);
    } else if (!strcmp(x->method, "POST")) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, x->body ? (const char *)x->body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body_len);
    } else if (strcmp(x->method, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, x->method);
    }

    CURLcode cc = curl_easy_perform(h);
    curl_slist_free_all(hl);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    o->status = x->status;

    if (x->sink_st != SX_OK) {
        o->st = x->sink_st;
        snprintf(o->detail, sizeof o->detail, "%s", sx_errmsg());
        return;
    }
    if (cc != CURLE_OK) {
        bool timed =
            cc == CURLE_OPERATION_TIMEDOUT || (cc == CURLE_ABORTED_BY_CALLBACK && x->stalled);
        if (cc == CURLE_WRITE_ERROR) { /* our sink refused without a status: out of memory */
            o->st = SX_ENOMEM;
            snprintf(o->detail, sizeof o->detail, "out of memory buffering the response");
            return;
        }
        o->st = timed ? SX_ETIMEDOUT : SX_EREMOTE;
        o->retry = timed || retryable_curl(cc);
        o->timed_out = timed;
        if (x->stalled)
            snprintf(o->detail, sizeof o->detail, "no progress for %u ms (stalled)", s->timeout_ms);
        else
            snprintf(o->detail, sizeof o->detail, "%s%s%s", curl_easy_strerror(cc),
                     x->curl_err[0] ? ": " : "", x->curl_err);
        return;
    }
    if (x->status >= 200 && x->status < 300) {
        bool is_head = !strcmp(x->method, "HEAD");
        if (!x->headers_done) {
            /* libcurl 7.88 accepts a body-less response cut inside its headers */
            o->st = SX_EREMOTE;
            o->retry = true;
            snprintf(o->detail, sizeof o->detail, "response headers cut short (HTTP %ld)",
                     x->status);
            return;
        }
        if (x->kind == K_PART && !x->etag[0]) {
            o->st = SX_EREMOTE;
            o->retry = true;
            snprintf(o->detail, sizeof o->detail, "no ETag in the UploadPart response");
            return;
        }
        if (!is_head && x->has_cl && x->wire != x->content_length) {
            o->st = SX_EREMOTE;
            o->retry = true;
            snprintf(o->detail, sizeof o->detail,
                     "truncated body: %" PRIu64 " of %" PRIu64 " bytes (HTTP %ld)", x->wire,
                     x->content_length, x->status);
            return;
        }
        if (x->has_range && x->range_len && x->got < x->range_len) {
            /* What the object can give: from Content-Range's total, or (Range ignored, 200)
             * from Content-Length. A legitimately short object is the caller's business. */
            uint64_t total = x->has_cr ? x->cr_total : x->has_cl ? x->content_length : UINT64_MAX;
            uint64_t avail = total > x->range_off ? total - x->range_off : 0;
            if (avail > x->range_len)
                avail = x->range_len;
            if (x->got == avail) {
                o->st = SX_OK;
                return;
            }
            o->st = SX_EREMOTE;
            o->retry = true;
            snprintf(o->detail, sizeof o->detail,
                     "short ranged read: %" PRIu64 " of %" PRIu64 " bytes at %" PRIu64, x->got,
                     x->range_len, x->range_off);
            return;
        }
        o->st = SX_OK;
        return;
    }
    parse_error_body(&x->errbody, &o->err);
    if (x->status == 404) {
        o->st = strcmp(o->err.code, "NoSuchBucket") ? SX_ENOTFOUND : SX_EREMOTE;
        return;
    }
    o->st = SX_EREMOTE;
    o->retry = x->status >= 500 || x->status == 429 || retryable_code(o->err.code);
    if (x->status == 416)
        o->st = SX_EINVAL;
}

static void count_ok(sx__s3 *s, const xfer *x)
{
    _Atomic uint64_t *c = NULL;
    switch (x->kind) {
    case K_PUT:
        c = &s->puts;
        break;
    case K_GET:
        c = &s->gets;
        break;
    case K_HEAD:
        c = &s->heads;
        break;
    case K_DELETE:
        c = &s->deletes;
        break;
    case K_LIST:
        c = &s->lists;
        break;
    case K_PART:
        c = &s->parts;
        break;
    }
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
    bool is_write = x->kind == K_PUT || x->kind == K_PART || x->kind == K_DELETE;
    uint64_t bytes = is_write ? x->body_len : x->got;
    if (is_write)
        atomic_fetch_add_explicit(&s->bytes_up, x->body_len, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&s->bytes_down, x->got, memory_order_relaxed);
    sx__io_record(SX__IO_OBJSTORE, is_write, bytes);
}

/* ---------------------------------------------------------------- the request runner
 *
 * perform = req_prepare, then req_attempt once per turn while the outcome is retryable and
 * turns are left, then req_failed. mp_complete drives the same three pieces itself, because
 * between two attempts it has to ask whether the last one completed the upload (invariant 5). */

/* Builds x's URL (*url owned: free with sx__free) and payload hash (invariant 1), once per
 * request. Errors: SX_ENOMEM. */
static sx_status req_prepare(sx__s3 *s, xfer *x, char **url)
{
    *url = build_url(s, x->key, x->query);
    if (!*url)
        return sx__err(SX_ENOMEM, "s3 %s: out of memory", x->op);
    if (x->body)
        sha256_hex(x->body, x->body_len, x->sha);
    else
        snprintf(x->sha, sizeof x->sha, "%s", EMPTY_SHA256);
    return SX_OK;
}

/* Attempt a (0-based) of x. A retry (a > 0) is counted, waits the backoff of retry a-1 and
 * empties the sink first; a success is counted (count_ok). Fills *o; o->retry false for an
 * outcome no retry can change (including no handle or a sink that cannot be emptied). */
static void req_attempt(sx__s3 *s, xfer *x, const char *url, uint32_t a, outcome *o)
{
    memset(o, 0, sizeof *o);
    if (a > 0) {
        atomic_fetch_add_explicit(&s->retries, 1, memory_order_relaxed);
        backoff_sleep(a - 1);
        sx_status rs = reset_sink(x);
        if (rs != SX_OK) {
            o->st = rs;
            snprintf(o->detail, sizeof o->detail, "%s", sx_errmsg());
            return;
        }
    }
    CURL *h = pool_get(s);
    if (!h) {
        o->st = SX_ENOMEM;
        snprintf(o->detail, sizeof o->detail, "cannot create a curl handle");
        return;
    }
    attempt(s, h, x, url, o);
    pool_put(s, h);
    if (o->st == SX_OK)
        count_ok(s, x);
}

/* x failed after `attempts` attempts, the last one *o: counts the failure (not a 404) and sets
 * the message, which names the operation, the object, the HTTP status, the S3 code and message,
 * and the number of attempts. Returns o->st. */
static sx_status req_failed(sx__s3 *s, const xfer *x, const outcome *o, uint32_t attempts)
{
    uint32_t a = attempts;
    if (o->st != SX_ENOTFOUND)
        atomic_fetch_add_explicit(&s->failures, 1, memory_order_relaxed);
    const char *k = x->key ? x->key : "";
    if (o->st == SX_ENOTFOUND)
        return sx__err(SX_ENOTFOUND, "s3 %s %s/%s: not found (HTTP 404%s%s)", x->op, s->bucket, k,
                       o->err.code[0] ? " " : "", o->err.code);
    if (o->status && !(o->status >= 200 && o->status < 300))
        return sx__err(o->st, "s3 %s %s/%s: HTTP %ld %s%s%s (%u attempt%s)", x->op, s->bucket, k,
                       o->status, o->err.code[0] ? o->err.code : "(no S3 error code)",
                       o->err.message[0] ? ": " : "", o->err.message, a, a == 1 ? "" : "s");
    return sx__err(o->st, "s3 %s %s/%s: %s (%u attempt%s)", x->op, s->bucket, k, o->detail, a,
                   a == 1 ? "" : "s");
}

/* Runs x with retries (invariant 4). On failure the message names the operation, the object,
 * the HTTP status, the S3 code and message, and the number of attempts. *last (optional): the
 * last attempt's outcome. */
static sx_status perform(sx__s3 *s, xfer *x, outcome *last)
{
    char *url = NULL;
    sx_status st = req_prepare(s, x, &url);
    if (st != SX_OK)
        return st;
    outcome o;
    uint32_t attempts = s->max_retries + 1, a = 0;
    do {
        req_attempt(s, x, url, a++, &o);
    } while (o.st != SX_OK && o.retry && a < attempts);
    sx__free(url);
    o.attempts = a;
    if (last)
        *last = o;
    return o.st == SX_OK ? SX_OK : req_failed(s, x, &o, a);
}

static void xfer_init(xfer *x, const char *op, const char *method, kind k, const char *key)
{
    memset(x, 0, sizeof *x);
    x->op = op;
    x->method = method;
    x->kind = k;
    x->key = key;
}

static void xfer_fini(xfer *x)
{
    mb_free(&x->errbody);
}

/* ---------------------------------------------------------------- credentials */

/* Finds `name` in section [profile] of an ini-style credentials file. Owned copy or NULL. */
static char *ini_get(const char *text, size_t len, const char *profile, const char *name)
{
    bool in_section = false;
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && text[j] != '\n')
            j++;
        const char *a = text + i, *e = text + j;
        i = j + 1;
        while (a < e && (*a == ' ' || *a == '\t'))
            a++;
        while (e > a && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (a == e || *a == '#' || *a == ';')
            continue;
        if (*a == '[') {
            const char *c = memchr(a, ']', (size_t)(e - a));
            in_section = c && (size_t)(c - a - 1) == strlen(profile) &&
                         !strncmp(a + 1, profile, strlen(profile));
            continue;
        }
        if (!in_section)
            continue;
        const char *eq = memchr(a, '=', (size_t)(e - a));
        if (!eq)
            continue;
        const char *ke = eq;
        while (ke > a && (ke[-1] == ' ' || ke[-1] == '\t'))
            ke--;
        const char *v = eq + 1;
        while (v < e && (*v == ' ' || *v == '\t'))
            v++;
        if ((size_t)(ke - a) == strlen(name) && !strncasecmp(a, name, (size_t)(ke - a)))
            return sx__strndup(v, (size_t)(e - v));
    }
    return NULL;
}

typedef struct creds {
    char *access, *secret, *token; /* owned */
} creds;

static void creds_free(creds *c)
{
    if (c->secret)
        explicit_bzero(c->secret, strlen(c->secret));
    sx__free(c->access);
    sx__free(c->secret);
    sx__free(c->token);
    memset(c, 0, sizeof *c);
}

static const char *nonempty(const char *s)
{
    return s && *s ? s : NULL;
}

static sx_status load_creds(const sx__s3_config *cfg, creds *c)
{
    memset(c, 0, sizeof *c);
    const char *ak = nonempty(cfg->access_key), *sk = nonempty(cfg->secret_key);
    const char *tk = nonempty(cfg->session_token);
    if (!ak || !sk) {
        ak = nonempty(getenv("AWS_ACCESS_KEY_ID"));
        sk = nonempty(getenv("AWS_SECRET_ACCESS_KEY"));
        if (!tk)
            tk = nonempty(getenv("AWS_SESSION_TOKEN"));
    }
    if (ak && sk) {
        c->access = sx__strdup(ak);
        c->secret = sx__strdup(sk);
        c->token = tk ? sx__strdup(tk) : NULL;
        if (!c->access || !c->secret || (tk && !c->token)) {
            creds_free(c);
            return sx__err(SX_ENOMEM, "s3: out of memory");
        }
        return SX_OK;
    }
    char path[1024];
    const char *file = nonempty(getenv("SEXTANT_S3_CREDENTIALS"));
    if (!file) {
        const char *home = nonempty(getenv("HOME"));
        if (!home)
            return sx__err(SX_EINVAL, "s3: no credentials (set AWS_ACCESS_KEY_ID and "
                                      "AWS_SECRET_ACCESS_KEY, or SEXTANT_S3_CREDENTIALS)");
        snprintf(path, sizeof path, "%s/.aws/credentials", home);
        file = path;
    }
    void *text = NULL;
    size_t len = 0;
    sx_status st = sx__fs_read_all(file, 1u << 20, &text, &len);
    if (st != SX_OK)
        return sx__err(SX_EINVAL, "s3: no credentials in the environment and cannot read %s", file);
    const char *profile = nonempty(getenv("AWS_PROFILE"));
    if (!profile)
        profile = "default";
    c->access = ini_get(text, len, profile, "aws_access_key_id");
    c->secret = ini_get(text, len, profile, "aws_secret_access_key");
    c->token = tk ? sx__strdup(tk) : ini_get(text, len, profile, "aws_session_token");
    explicit_bzero(text, len);
    sx__free(text);
    if (!nonempty(c->access) || !nonempty(c->secret)) {
        creds_free(c);
        return sx__err(SX_EINVAL, "s3: %s has no aws_access_key_id / aws_secret_access_key in [%s]",
                       file, profile);
    }
    return SX_OK;
}

/* ---------------------------------------------------------------- life cycle */

/* a + b + c + d, owned. */
static char *concat4(const char *a, const char *b, const char *c, const char *d)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + strlen(d) + 1;
    char *p = sx__malloc(n);
    if (p)
        snprintf(p, n, "%s%s%s%s", a, b, c, d);
    return p;
}

sx_status sx__s3_new(const sx__s3_config *cfg, sx__s3 **out)
{
    if (!cfg || !nonempty(cfg->bucket) || !nonempty(cfg->endpoint))
        return sx__err(SX_EINVAL, "s3: endpoint and bucket are required");
    const char *ep = cfg->endpoint;
    const char *sep = strstr(ep, "://");
    if (!sep || (strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0))
        return sx__err(SX_EINVAL, "s3: endpoint '%s' must start with http:// or https://", ep);
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_rc != CURLE_OK)
        return sx__err(SX_EREMOTE, "s3: curl_global_init failed: %s",
                       curl_easy_strerror(curl_init_rc));
    creds c;
    sx_status st = load_creds(cfg, &c);
    if (st != SX_OK)
        return st;
    sx__s3 *s = sx__calloc(1, sizeof *s);
    if (!s) {
        creds_free(&c);
        return sx__err(SX_ENOMEM, "s3: out of memory");
    }
    s->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 30000;
    s->connect_timeout_ms = cfg->connect_timeout_ms ? cfg->connect_timeout_ms : 5000;
    s->max_retries = cfg->max_retries ? cfg->max_retries : 6;
    s->multipart_threshold = cfg->multipart_threshold ? cfg->multipart_threshold : (64ull << 20);
    s->part_size = cfg->part_size ? cfg->part_size : (16ull << 20);
    if (s->part_size < MIN_PART_SIZE)
        s->part_size = MIN_PART_SIZE;
    s->parallel_parts = cfg->parallel_parts ? cfg->parallel_parts : 4;
    if (s->parallel_parts > 64)
        s->parallel_parts = 64;
    size_t eplen = strlen(ep);
    while (eplen > (size_t)(sep - ep) + 3 && ep[eplen - 1] == '/')
        eplen--;
    s->endpoint = sx__strndup(ep, eplen);
    s->region = sx__strdup(nonempty(cfg->region) ? cfg->region : "us-east-1");
    s->bucket = sx__strdup(cfg->bucket);
    bool ok = s->endpoint && s->region && s->bucket;
    if (ok && cfg->virtual_host) {
        size_t pre = (size_t)(sep - ep) + 3;
        size_t n = eplen + strlen(cfg->bucket) + 2;
        s->base = sx__malloc(n);
        if (s->base)
            snprintf(s->base, n, "%.*s%s.%s", (int)pre, s->endpoint, s->bucket, s->endpoint + pre);
    } else if (ok) {
        s->base = concat4(s->endpoint, "/", s->bucket, "");
    }
    s->sigv4 = ok ? concat4("aws:amz:", s->region, ":s3", "") : NULL;
    s->userpwd = concat4(c.access, ":", c.secret, "");
    if (c.token)
        s->token_hdr = concat4("x-amz-security-token: ", c.token, "", "");
    ok = ok && s->base && s->sigv4 && s->userpwd && (!c.token || s->token_hdr);
    creds_free(&c);
    if (!ok || pthread_mutex_init(&s->mu, NULL) != 0) {
        if (s->userpwd)
            explicit_bzero(s->userpwd, strlen(s->userpwd));
        sx__free(s->endpoint);
        sx__free(s->base);
        sx__free(s->region);
        sx__free(s->bucket);
        sx__free(s->userpwd);
        sx__free(s->sigv4);
        sx__free(s->token_hdr);
        sx__free(s);
        return sx__err(SX_ENOMEM, "s3: out of memory");
    }
    *out = s;
    return SX_OK;
}

void sx__s3_free(sx__s3 *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_pool; i++)
        curl_easy_cleanup(s->pool[i]);
    pthread_mutex_destroy(&s->mu);
    explicit_bzero(s->userpwd, strlen(s->userpwd));
    if (s->token_hdr)
        explicit_bzero(s->token_hdr, strlen(s->token_hdr));
    sx__free(s->endpoint);
    sx__free(s->base);
    sx__free(s->region);
    sx__free(s->bucket);
    sx__free(s->userpwd);
    sx__free(s->sigv4);
    sx__free(s->token_hdr);
    sx__free(s);
}

void sx__s3_stats_get(sx__s3 *s, sx__s3_stats *out)
{
    out->puts = atomic_load_explicit(&s->puts, memory_order_relaxed);
    out->gets = atomic_load_explicit(&s->gets, memory_order_relaxed);
    out->heads = atomic_load_explicit(&s->heads, memory_order_relaxed);
    out->deletes = atomic_load_explicit(&s->deletes, memory_order_relaxed);
    out->lists = atomic_load_explicit(&s->lists, memory_order_relaxed);
    out->multipart_parts = atomic_load_explicit(&s->parts, memory_order_relaxed);
    out->bytes_up = atomic_load_explicit(&s->bytes_up, memory_order_relaxed);
    out->bytes_down = atomic_load_explicit(&s->bytes_down, memory_order_relaxed);
    out->retries = atomic_load_explicit(&s->retries, memory_order_relaxed);
    out->failures = atomic_load_explicit(&s->failures, memory_order_relaxed);
}

/* ---------------------------------------------------------------- simple operations */

sx_status sx__s3_create_bucket(sx__s3 *s)
{
    xfer x;
    outcome o;
    xfer_init(&x, "CreateBucket", "PUT", K_PUT, NULL);
    sx_status st = perform(s, &x, &o);
    if (st == SX_EREMOTE && o.status == 409 &&
        (!strcmp(o.err.code, "BucketAlreadyOwnedByYou") ||
         !strcmp(o.err.code, "BucketAlreadyExists"))) {
        sx__err_clear();
        st = SX_OK;
    }
    xfer_fini(&x);
    return st;
}

static sx_status check_key(const char *op, const char *key)
{
    if (!key || !*key || strlen(key) > 1024)
        return sx__err(SX_EINVAL, "s3 %s: key must be 1..1024 bytes", op);
    return SX_OK;
}

sx_status sx__s3_put(sx__s3 *s, const char *key, const void *data, size_t len)
{
    sx_status st = check_key("PUT", key);
    if (st != SX_OK)
        return st;
    xfer x;
    xfer_init(&x, "PUT", "PUT", K_PUT, key);
    x.body = data ? data : (const void *)"";
    x.body_len = len;
    st = perform(s, &x, NULL);
    xfer_fini(&x);
    return st;
}

sx_status sx__s3_get(sx__s3 *s, const char *key, uint64_t off, uint64_t len, void **data, size_t *n)
{
    sx_status st = check_key("GET", key);
    if (st != SX_OK)
        return st;
    membuf b = { 0 };
    xfer x;
    xfer_init(&x, "GET", "GET", K_GET, key);
    x.sink = SINK_MEM;
    x.mem = &b;
    if (off || len) {
        x.has_range = true;
        x.range_off = off;
        x.range_len = len;
        if (len && !mb_reserve(&b, (size_t)len)) {
            xfer_fini(&x);
            return sx__err(SX_ENOMEM, "s3 GET %s: cannot buffer %" PRIu64 " bytes", key, len);
        }
    }
    st = perform(s, &x, NULL);
    xfer_fini(&x);
    if (st != SX_OK) {
        mb_free(&b);
        return st;
    }
    if (!b.p && !mb_reserve(&b, 0)) /* an empty object: still a valid pointer */
        return sx__err(SX_ENOMEM, "s3 GET %s: out of memory", key);
    *data = b.p;
    *n = b.len;
    return SX_OK;
}

sx_status sx__s3_get_range(sx__s3 *s, const char *key, uint64_t off, size_t len, void *buf)
{
    sx_status st = check_key("GET", key);
    if (st != SX_OK)
        return st;
    if (!len)
        return SX_OK;
    xfer x;
    xfer_init(&x, "GET", "GET", K_GET, key);
    x.sink = SINK_BUF;
    x.buf = buf;
    x.buf_cap = len;
    x.has_range = true;
    x.range_off = off;
    x.range_len = len;
    st = perform(s, &x, NULL);
    if (st == SX_OK && x.got != len)
        st = sx__err(SX_EREMOTE,
                     "s3 GET %s/%s: range [%" PRIu64 ", +%zu) beyond the end of the object "
                     "(%" PRIu64 " bytes)",
                     s->bucket, key, off, len, x.cr_total);
    xfer_fini(&x);
    return st;
}

static char *parent_dir(const char *path)
{
    const char *sl = strrchr(path, '/');
    if (!sl)
        return sx__strdup(".");
    if (sl == path)
        return sx__strdup("/");
    return sx__strndup(path, (size_t)(sl - path));
}

sx_status sx__s3_get_file(sx__s3 *s, const char *key, const char *path)
{
    sx_status st = check_key("GET", key);
    if (st != SX_OK)
        return st;
    size_t tl = strlen(path) + sizeof ".tmp";
    char *tmp = sx__malloc(tl);
    char *dir = parent_dir(path);
    if (!tmp || !dir) {
        sx__free(tmp);
        sx__free(dir);
        return sx__err(SX_ENOMEM, "s3: out of memory");
    }
    snprintf(tmp, tl, "%s.tmp", path);
    sx__file *f = NULL;
    st = sx__file_open(tmp, SX__F_WRITE | SX__F_CREATE | SX__F_TRUNC, &f);
    if (st == SX_OK) {
        xfer x;
        xfer_init(&x, "GET", "GET", K_GET, key);
        x.sink = SINK_FILE;
        x.file = f;
        st = perform(s, &x, NULL);
        xfer_fini(&x);
        if (st == SX_OK)
            st = sx__file_sync(f);
        sx_status cs = sx__file_close(f);
        if (st == SX_OK)
            st = cs;
        if (st == SX_OK)
            st = sx__fs_rename(tmp, path);
        if (st == SX_OK)
            st = sx__fs_sync_dir(dir);
        if (st != SX_OK) {
            /* keep the first error's message */
            char msg[512];
            snprintf(msg, sizeof msg, "%s", sx_errmsg());
            sx__ignore(sx__fs_unlink(tmp));
            sx__ignore(sx__err(st, "%s", msg));
        }
    }
    sx__free(tmp);
    sx__free(dir);
    return st;
}

/* HEAD: size and ETag (etag may be NULL; up to 159 bytes, quotes included). */
static sx_status head_info(sx__s3 *s, const char *key, uint64_t *size, char *etag, size_t etag_n)
{
    sx_status st = check_key("HEAD", key);
    if (st != SX_OK)
        return st;
    xfer x;
    xfer_init(&x, "HEAD", "HEAD", K_HEAD, key);
    st = perform(s, &x, NULL);
    if (st == SX_OK && !x.has_cl)
        st =
            sx__err(SX_EREMOTE, "s3 HEAD %s/%s: no Content-Length in the response", s->bucket, key);
    if (st == SX_OK) {
        *size = x.content_length;
        if (etag)
            snprintf(etag, etag_n, "%s", x.etag);
    }
    xfer_fini(&x);
    return st;
}

sx_status sx__s3_head(sx__s3 *s, const char *key, uint64_t *size)
{
    return head_info(s, key, size, NULL, 0);
}

sx_status sx__s3_delete(sx__s3 *s, const char *key)
{
    sx_status st = check_key("DELETE", key);
    if (st != SX_OK)
        return st;
    xfer x;
    xfer_init(&x, "DELETE", "DELETE", K_DELETE, key);
    st = perform(s, &x, NULL);
    if (st == SX_ENOTFOUND) {
        sx__err_clear();
        st = SX_OK;
    }
    xfer_fini(&x);
    return st;
}

/* ---------------------------------------------------------------- listing */

typedef struct list_state {
    char **keys;
    uint64_t *sizes;
    size_t n, cap;
    char *pend_key;
    uint64_t pend_size;
    bool truncated;
    char *next_token;
    bool oom;
} list_state;

static void list_end(xml_walk *w, const char *path, const char *text)
{
    list_state *l = w->ud;
    if (!strcmp(path, "ListBucketResult/Contents/Key")) {
        sx__free(l->pend_key);
        l->pend_key = sx__strdup(text);
        if (!l->pend_key)
            l->oom = true;
    } else if (!strcmp(path, "ListBucketResult/Contents/Size")) {
        l->pend_size = strtoull(text, NULL, 10);
    } else if (!strcmp(path, "ListBucketResult/Contents")) {
        if (!l->pend_key)
            return;
        if (l->n == l->cap) {
            size_t cap = l->cap ? l->cap * 2 : 256;
            char **k = sx__realloc(l->keys, cap * sizeof *k);
            if (k)
                l->keys = k;
            uint64_t *z = k ? sx__realloc(l->sizes, cap * sizeof *z) : NULL;
            if (z)
                l->sizes = z;
            if (!k || !z) {
                l->oom = true;
                return;
            }
            l->cap = cap;
        }
        l->keys[l->n] = l->pend_key;
        l->sizes[l->n] = l->pend_size;
        l->n++;
        l->pend_key = NULL;
        l->pend_size = 0;
    } else if (!strcmp(path, "ListBucketResult/IsTruncated")) {
        l->truncated = !strcmp(text, "true");
    } else if (!strcmp(path, "ListBucketResult/NextContinuationToken")) {
        sx__free(l->next_token);
        l->next_token = sx__strdup(text);
        if (!l->next_token)
            l->oom = true;
    }
}

/* One ListObjectsV2 page: keys appended to l, truncated / next_token replaced. */
static sx_status list_parse(list_state *l, const void *xml, size_t len, const char *bucket)
{
    l->truncated = false;
    sx__free(l->next_token);
    l->next_token = NULL;
    char root[64];
    sx_status st = xml_parse(xml, len, list_end, l, root);
    if (st == SX_OK && strcmp(root, "ListBucketResult") != 0)
        st = sx__err(SX_EREMOTE, "s3 ListObjectsV2 %s: unexpected <%s> response", bucket, root);
    if (st == SX_OK && l->oom)
        st = sx__err(SX_ENOMEM, "s3 ListObjectsV2: out of memory");
    return st;
}

sx_status sx__s3_list(sx__s3 *s, const char *prefix, char ***keys, uint64_t **sizes, size_t *n)
{
    list_state l;
    memset(&l, 0, sizeof l);
    char *token = NULL;
    sx_status st = SX_OK;
    for (unsigned page = 0;; page++) {
        qparam q[4];
        size_t nq = 0;
        q[nq++] = (qparam){ "list-type", "2" };
        q[nq++] = (qparam){ "max-keys", "1000" };
        if (prefix && *prefix)
            q[nq++] = (qparam){ "prefix", prefix };
        if (token)
            q[nq++] = (qparam){ "continuation-token", token };
        char *query = build_query(q, nq);
        if (!query) {
            st = sx__err(SX_ENOMEM, "s3 ListObjectsV2: out of memory");
            break;
        }
        membuf body = { 0 };
        xfer x;
        xfer_init(&x, "ListObjectsV2", "GET", K_LIST, NULL);
        x.query = query;
        x.sink = SINK_MEM;
        x.mem = &body;
        st = perform(s, &x, NULL);
        xfer_fini(&x);
        sx__free(query);
        if (st == SX_OK)
            st = list_parse(&l, body.p, body.len, s->bucket);
        mb_free(&body);
        if (st != SX_OK)
            break;
        if (!l.truncated)
            break;
        if (!l.next_token || !*l.next_token || (token && !strcmp(token, l.next_token))) {
            st = sx__err(SX_EREMOTE,
                         "s3 ListObjectsV2 %s: truncated page without a new continuation token",
                         s->bucket);
            break;
        }
        sx__free(token);
        token = l.next_token;
        l.next_token = NULL;
    }
    sx__free(token);
    sx__free(l.next_token);
    sx__free(l.pend_key);
    if (st != SX_OK) {
        for (size_t i = 0; i < l.n; i++)
            sx__free(l.keys[i]);
        sx__free(l.keys);
        sx__free(l.sizes);
        return st;
    }
    *keys = l.keys;
    *n = l.n;
    if (sizes)
        *sizes = l.sizes;
    else
        sx__free(l.sizes);
    return SX_OK;
}

/* ---------------------------------------------------------------- multipart */

typedef struct mp_upload {
    char *key, *upload_id, *initiated;
} mp_upload;

typedef struct text_pick {
    const char *path;
    char *value; /* owned */
} text_pick;

static void pick_end(xml_walk *w, const char *path, const char *text)
{
    text_pick *p = w->ud;
    if (!strcmp(path, p->path) && !p->value)
        p->value = sx__strdup(text);
}

/* A CreateMultipartUpload response: *upload_id (owned) on success. */
static sx_status
create_parse(const void *xml, size_t len, const char *bucket, const char *key, char **upload_id)
{
    text_pick p = { "InitiateMultipartUploadResult/UploadId", NULL };
    char root[64];
    sx_status st = xml_parse(xml, len, pick_end, &p, root);
    if (st == SX_OK && (!p.value || !*p.value))
        st = sx__err(SX_EREMOTE, "s3 CreateMultipartUpload %s/%s: no UploadId in <%s>", bucket, key,
                     root);
    if (st != SX_OK) {
        sx__free(p.value);
        return st;
    }
    *upload_id = p.value;
    return SX_OK;
}

static sx_status mp_create(sx__s3 *s, const char *key, char **upload_id)
{
    qparam q[1] = { { "uploads", NULL } };
    char *query = build_query(q, 1);
    if (!query)
        return sx__err(SX_ENOMEM, "s3: out of memory");
    membuf body = { 0 };
    xfer x;
    xfer_init(&x, "CreateMultipartUpload", "POST", K_PUT, key);
    x.query = query;
    x.content_type = "application/octet-stream";
    x.sink = SINK_MEM;
    x.mem = &body;
    sx_status st = perform(s, &x, NULL);
    xfer_fini(&x);
    sx__free(query);
    if (st == SX_OK)
        st = create_parse(body.p, body.len, s->bucket, key, upload_id);
    mb_free(&body);
    return st;
}

static sx_status mp_abort(sx__s3 *s, const char *key, const char *upload_id)
{
    qparam q[1] = { { "uploadId", upload_id } };
    char *query = build_query(q, 1);
    if (!query)
        return sx__err(SX_ENOMEM, "s3: out of memory");
    xfer x;
    xfer_init(&x, "AbortMultipartUpload", "DELETE", K_DELETE, key);
    x.query = query;
    sx_status st = perform(s, &x, NULL);
    if (st == SX_ENOTFOUND) { /* NoSuchUpload: already gone */
        sx__err_clear();
        st = SX_OK;
    }
    xfer_fini(&x);
    sx__free(query);
    return st;
}

typedef struct mp_job {
    sx__s3 *s;
    sx_io_phase phase; /* the caller's I/O phase, taken on by the workers */
    const char *key, *path, *upload_id;
    uint64_t size, part_size;
    uint32_t n_parts;
    pthread_mutex_t mu;
    uint32_t next; /* guarded by mu */
    sx_status st;  /* guarded by mu: the first failure */
    char msg[512]; /* guarded by mu */
    char **etags;  /* [n_parts], each written by the one worker that uploads the part */
} mp_job;

static void mp_fail(mp_job *j, sx_status st)
{
    pthread_mutex_lock(&j->mu);
    if (j->st == SX_OK) {
        j->st = st;
        snprintf(j->msg, sizeof j->msg, "%s", sx_errmsg());
    }
    pthread_mutex_unlock(&j->mu);
}

static void *mp_worker(void *arg)
{
    mp_job *j = arg;
    sx__file *f = NULL;
    uint8_t *buf = NULL;
    sx_io_phase prev = sx_io_phase_set(j->phase);
    sx_status st = sx__file_open(j->path, SX__F_READ, &f);
    if (st == SX_OK) {
        buf = sx__malloc((size_t)j->part_size);
        if (!buf)
            st = sx__err(SX_ENOMEM, "s3 UploadPart: cannot allocate a %" PRIu64 "-byte part",
                         j->part_size);
    }
    while (st == SX_OK) {
        pthread_mutex_lock(&j->mu);
        uint32_t i = j->next;
        bool stop = j->st != SX_OK || i >= j->n_parts;
        if (!stop)
            j->next++;
        pthread_mutex_unlock(&j->mu);
        if (stop)
            break;
        uint64_t off = (uint64_t)i * j->part_size;
        size_t len = (size_t)(j->size - off < j->part_size ? j->size - off : j->part_size);
        size_t done = 0;
        while (st == SX_OK && done < len) {
            size_t got = 0;
            st = sx__file_pread(f, buf + done, len - done, off + done, &got);
            if (st == SX_OK && got == 0)
                st = sx__err(SX_EIO, "s3 UploadPart: %s shrank while uploading", j->path);
            done += got;
        }
        if (st != SX_OK)
            break;
        char pn[16];
        snprintf(pn, sizeof pn, "%u", i + 1);
        qparam q[2] = { { "partNumber", pn }, { "uploadId", j->upload_id } };
        char *query = build_query(q, 2);
        if (!query) {
            st = sx__err(SX_ENOMEM, "s3: out of memory");
            break;
        }
        xfer x;
        xfer_init(&x, "UploadPart", "PUT", K_PART, j->key);
        x.query = query;
        x.body = buf;
        x.body_len = len;
        st = perform(j->s, &x, NULL);
        if (st == SX_OK && !x.etag[0])
            st = sx__err(SX_EREMOTE, "s3 UploadPart %s part %u: no ETag in the response", j->key,
                         i + 1);
        if (st == SX_OK) {
            j->etags[i] = sx__strdup(x.etag);
            if (!j->etags[i])
                st = sx__err(SX_ENOMEM, "s3: out of memory");
        }
        xfer_fini(&x);
        sx__free(query);
    }
    if (st != SX_OK)
        mp_fail(j, st);
    sx__free(buf);
    sx__ignore(sx__file_close(f));
    sx_io_phase_set(prev);
    return NULL;
}

static bool xml_escape(membuf *b, const char *s)
{
    bool ok = true;
    for (; *s && ok; s++) {
        switch (*s) {
        case '&':
            ok = mb_puts(b, "&amp;");
            break;
        case '<':
            ok = mb_puts(b, "&lt;");
            break;
        case '>':
            ok = mb_puts(b, "&gt;");
            break;
        default:
            ok = mb_put(b, s, 1);
            break;
        }
    }
    return ok;
}

typedef struct complete_state {
    s3_error err;
    bool is_error;
} complete_state;

static void complete_end(xml_walk *w, const char *path, const char *text)
{
    complete_state *c = w->ud;
    if (!strcmp(path, "Error/Code"))
        snprintf(c->err.code, sizeof c->err.code, "%s", text);
    else if (!strcmp(path, "Error/Message"))
        snprintf(c->err.message, sizeof c->err.message, "%s", text);
}

/* The AWS ETag of a completed multipart upload: hex MD5 of the parts' binary MD5s, "-N".
 * Returns false when a part ETag is not a plain MD5 (SSE-KMS, other servers). */
static bool multipart_etag(const mp_job *j, char *out, size_t n)
{
    static const char hx[] = "0123456789abcdef";
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_md5(), NULL) == 1;
    for (uint32_t i = 0; ok && i < j->n_parts; i++) {
        const char *e = j->etags[i];
        if (*e == '"')
            e++;
        unsigned char d[16];
        for (int b = 0; ok && b < 16; b++) {
            int v = 0;
            for (int h = 0; h < 2; h++) {
                char c = e[2 * b + h];
                int x = c >= '0' && c <= '9'   ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                               : -1;
                if (x < 0)
                    ok = false;
                v = v * 16 + (x < 0 ? 0 : x);
            }
            d[b] = (unsigned char)v;
        }
        ok = ok && (e[32] == '"' || e[32] == 0) && EVP_DigestUpdate(ctx, d, 16) == 1;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int ml = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, md, &ml) == 1 && ml == 16 && n >= 48;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return false;
    for (size_t i = 0; i < 16; i++) {
        out[2 * i] = hx[md[i] >> 4];
        out[2 * i + 1] = hx[md[i] & 15];
    }
    snprintf(out + 32, n - 32, "-%u", j->n_parts);
    return true;
}

/* After a Complete whose outcome is unknown: is the object the one this upload made? The size
 * must match, and so must the ETag when the server uses AWS's multipart form ("<md5>-N").
 * XXX: a server with plain-MD5 multipart ETags (s3rver) is trusted on the size alone, so a stale
 * object of the same size under the same key would pass; Sextant never reuses object keys. */
static bool completed_by_us(sx__s3 *s, const mp_job *j)
{
    uint64_t size = 0;
    char etag[160] = "", want[64];
    sx_status st = head_info(s, j->key, &size, etag, sizeof etag);
    if (st != SX_OK || size != j->size)
        return false;
    const char *e = etag[0] == '"' ? etag + 1 : etag;
    if (strchr(e, '-') && multipart_etag(j, want, sizeof want))
        return !strncmp(e, want, strlen(want)) && (e[strlen(want)] == '"' || !e[strlen(want)]);
    return true;
}

/* Whether a failed Complete attempt may have completed the upload all the same (invariant 5):
 * no HTTP answer or one cut short (the request may have been delivered and acted on), a 5xx (a
 * server can fail after acting, and a proxy's 5xx says nothing about the server behind it), or a
 * 404 (NoSuchUpload: an earlier attempt, or libcurl's own resend on a dead keep-alive connection,
 * completed it, or it was aborted). A complete 4xx answer other than 404 is a refusal. */
static bool complete_unknown(const outcome *o)
{
    return o->status < 400 || o->status >= 500 || o->st == SX_ENOTFOUND;
}

/* Turns a 2xx Complete attempt into its real outcome: "200 with an <Error> body" is a failure
 * the server reports (retried when its code is retryable, known: *unknown false); a body that is
 * neither that nor a CompleteMultipartUploadResult is a failure of unknown outcome. */
static void complete_check(const membuf *body, outcome *o, bool *unknown)
{
    complete_state c;
    memset(&c, 0, sizeof c);
    char root[64] = "";
    sx_status st = xml_parse(body->p, body->len, complete_end, &c, root);
    if (st == SX_OK && !strcmp(root, "CompleteMultipartUploadResult"))
        return;
    o->st = SX_EREMOTE;
    if (st == SX_OK && !strcmp(root, "Error")) {
        o->retry = retryable_code(c.err.code);
        o->err = c.err;
        *unknown = false;
        snprintf(o->detail, sizeof o->detail, "HTTP 200 with error %s: %s", c.err.code,
                 c.err.message);
        return;
    }
    o->retry = true;
    *unknown = true;
    if (st == SX_OK)
        snprintf(o->detail, sizeof o->detail, "HTTP %ld with unexpected <%s>", o->status, root);
    else
        snprintf(o->detail, sizeof o->detail, "HTTP %ld with a malformed body: %s", o->status,
                 sx_errmsg());
}

/* CompleteMultipartUpload, one attempt per turn (invariant 5): after an attempt whose outcome
 * is unknown, a HEAD tells whether the upload completed (then this is a success) before the next
 * attempt is made; up to 1 + max_retries attempts. Errors: SX_EREMOTE, SX_ETIMEDOUT, SX_ENOMEM
 * (the message names the last attempt's answer and the number of attempts). */
static sx_status mp_complete(sx__s3 *s, const mp_job *j)
{
    membuf xml = { 0 };
    bool ok = mb_puts(&xml, "<CompleteMultipartUpload>");
    for (uint32_t i = 0; ok && i < j->n_parts; i++) {
        char pn[48];
        snprintf(pn, sizeof pn, "<Part><PartNumber>%u</PartNumber><ETag>", i + 1);
        ok = mb_puts(&xml, pn) && xml_escape(&xml, j->etags[i]) && mb_puts(&xml, "</ETag></Part>");
    }
    ok = ok && mb_puts(&xml, "</CompleteMultipartUpload>");
    qparam q[1] = { { "uploadId", j->upload_id } };
    char *query = ok ? build_query(q, 1) : NULL;
    if (!query) {
        mb_free(&xml);
        return sx__err(SX_ENOMEM, "s3: out of memory");
    }
    membuf body = { 0 };
    xfer x;
    xfer_init(&x, "CompleteMultipartUpload", "POST", K_PUT, j->key);
    x.query = query;
    x.body = xml.p;
    x.body_len = xml.len;
    x.content_type = "application/xml";
    x.sink = SINK_MEM;
    x.mem = &body;
    char *url = NULL;
    sx_status st = req_prepare(s, &x, &url);
    uint32_t attempts = s->max_retries + 1, a = 0;
    outcome o;
    bool unknown = false;
    while (st == SX_OK) {
        req_attempt(s, &x, url, a++, &o);
        unknown = o.st != SX_OK && complete_unknown(&o);
        if (o.st == SX_OK)
            complete_check(&body, &o, &unknown);
        if (o.st == SX_OK)
            break;
        if (unknown && completed_by_us(s, j)) {
            sx__err_clear();
            break;
        }
        if (!o.retry || a >= attempts) {
            if (o.st == SX_ENOTFOUND) /* NoSuchUpload, and the object is not ours */
                o.st = SX_EREMOTE;
            st = req_failed(s, &x, &o, a);
            if (unknown) {
                char msg[512];
                snprintf(msg, sizeof msg, "%s", sx_errmsg());
                st = sx__err(st, "%s; and a HEAD did not find the uploaded object", msg);
            }
        }
    }
    sx__free(url);
    xfer_fini(&x);
    mb_free(&body);
    sx__free(query);
    mb_free(&xml);
    return st;
}

static sx_status put_multipart(sx__s3 *s, const char *key, const char *path, uint64_t size)
{
    uint64_t part = s->part_size;
    if ((size + part - 1) / part > MAX_PARTS) {
        part = (size + MAX_PARTS - 1) / MAX_PARTS;
        part = (part + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
    }
    mp_job j;
    memset(&j, 0, sizeof j);
    j.s = s;
    j.phase = sx_io_phase_set(SX_IO_PHASE_OTHER);
    sx_io_phase_set(j.phase);
    j.key = key;
    j.path = path;
    j.size = size;
    j.part_size = part;
    j.n_parts = (uint32_t)((size + part - 1) / part);
    char *upload_id = NULL;
    sx_status st = mp_create(s, key, &upload_id);
    if (st != SX_OK)
        return st;
    j.upload_id = upload_id;
    j.etags = sx__calloc(j.n_parts, sizeof *j.etags);
    if (!j.etags || pthread_mutex_init(&j.mu, NULL) != 0) {
        sx__free(j.etags);
        sx__ignore(mp_abort(s, key, upload_id));
        sx__free(upload_id);
        return sx__err(SX_ENOMEM, "s3: out of memory");
    }
    uint32_t nt = s->parallel_parts < j.n_parts ? s->parallel_parts : j.n_parts;
    pthread_t th[64];
    uint32_t started = 0;
    for (; started < nt; started++)
        if (pthread_create(&th[started], NULL, mp_worker, &j) != 0)
            break;
    if (started == 0)
        mp_worker(&j); /* no thread could start: upload on this one */
    for (uint32_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    st = j.st;
    if (st == SX_OK)
        st = mp_complete(s, &j);
    else
        sx__ignore(sx__err(st, "%s", j.msg));
    if (st != SX_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", sx_errmsg());
        sx__ignore(mp_abort(s, key, upload_id)); /* best effort; a failure leaves an orphan for
                                                  * sx__s3_abort_orphans */
        sx__ignore(sx__err(st, "%s", msg));
    }
    for (uint32_t i = 0; i < j.n_parts; i++)
        sx__free(j.etags[i]);
    sx__free(j.etags);
    pthread_mutex_destroy(&j.mu);
    sx__free(upload_id);
    return st;
}

sx_status sx__s3_put_file(sx__s3 *s, const char *key, const char *path)
{
    sx_status st = check_key("PUT", key);
    if (st != SX_OK)
        return st;
    sx__file *f = NULL;
    uint64_t size = 0;
    st = sx__file_open(path, SX__F_READ, &f);
    if (st == SX_OK)
        st = sx__file_size(f, &size);
    sx__ignore(sx__file_close(f));
    if (st != SX_OK)
        return st;
    if (size <= s->multipart_threshold) {
        void *data = NULL;
        size_t len = 0;
        st = sx__fs_read_all(path, s->multipart_threshold, &data, &len);
        if (st == SX_OK)
            st = sx__s3_put(s, key, data, len);
        sx__free(data);
        return st;
    }
    return put_multipart(s, key, path, size);
}

/* ---------------------------------------------------------------- orphans */

typedef struct uploads_state {
    mp_upload *u;
    size_t n, cap;
    mp_upload pend;
    bool truncated, oom;
    char *next_key, *next_id;
} uploads_state;

static void set_str(char **dst, const char *text, bool *oom)
{
    sx__free(*dst);
    *dst = sx__strdup(text);
    if (!*dst)
        *oom = true;
}

static void uploads_end(xml_walk *w, const char *path, const char *text)
{
    uploads_state *u = w->ud;
    if (!strcmp(path, "ListMultipartUploadsResult/Upload/Key")) {
        set_str(&u->pend.key, text, &u->oom);
    } else if (!strcmp(path, "ListMultipartUploadsResult/Upload/UploadId")) {
        set_str(&u->pend.upload_id, text, &u->oom);
    } else if (!strcmp(path, "ListMultipartUploadsResult/Upload/Initiated")) {
        set_str(&u->pend.initiated, text, &u->oom);
    } else if (!strcmp(path, "ListMultipartUploadsResult/Upload")) {
        if (u->n == u->cap) {
            size_t cap = u->cap ? u->cap * 2 : 64;
            mp_upload *p = sx__realloc(u->u, cap * sizeof *p);
            if (!p) {
                u->oom = true;
                return;
            }
            u->u = p;
            u->cap = cap;
        }
        u->u[u->n++] = u->pend;
        memset(&u->pend, 0, sizeof u->pend);
    } else if (!strcmp(path, "ListMultipartUploadsResult/IsTruncated")) {
        u->truncated = !strcmp(text, "true");
    } else if (!strcmp(path, "ListMultipartUploadsResult/NextKeyMarker")) {
        set_str(&u->next_key, text, &u->oom);
    } else if (!strcmp(path, "ListMultipartUploadsResult/NextUploadIdMarker")) {
        set_str(&u->next_id, text, &u->oom);
    }
}

/* "2026-11-30T21:49:56.000Z" -> seconds since the epoch; 0 when unparseable. strptime, not
 * sscanf's %d, which had undefined behaviour on a number past int. */
static int64_t parse_iso8601(const char *t)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (!t || !strptime(t, "%Y-%m-%dT%H:%M:%S", &tm))
        return 0;
    return (int64_t)timegm(&tm);
}

static void uploads_clear(uploads_state *u)
{
    for (size_t i = 0; i < u->n; i++) {
        sx__free(u->u[i].key);
        sx__free(u->u[i].upload_id);
        sx__free(u->u[i].initiated);
    }
    u->n = 0;
    sx__free(u->pend.key);
    sx__free(u->pend.upload_id);
    sx__free(u->pend.initiated);
    memset(&u->pend, 0, sizeof u->pend);
}

/* One ListMultipartUploads page: uploads appended to u, truncated / markers replaced. */
static sx_status uploads_parse(uploads_state *u, const void *xml, size_t len, const char *bucket)
{
    u->truncated = false;
    sx__free(u->next_key);
    sx__free(u->next_id);
    u->next_key = u->next_id = NULL;
    char root[64];
    sx_status st = xml_parse(xml, len, uploads_end, u, root);
    if (st == SX_OK && u->oom)
        st = sx__err(SX_ENOMEM, "s3: out of memory");
    if (st == SX_OK && strcmp(root, "ListMultipartUploadsResult") != 0)
        st = sx__err(SX_EREMOTE, "s3 ListMultipartUploads %s: unexpected <%s>", bucket, root);
    return st;
}

sx_status
sx__s3_abort_orphans(sx__s3 *s, const char *prefix, uint64_t older_than_s, size_t *n_aborted)
{
    uploads_state u;
    memset(&u, 0, sizeof u);
    char *key_marker = NULL, *id_marker = NULL;
    size_t aborted = 0;
    int64_t cutoff = (int64_t)time(NULL) - (int64_t)older_than_s;
    sx_status st = SX_OK;
    for (;;) {
        qparam q[4];
        size_t nq = 0;
        q[nq++] = (qparam){ "uploads", NULL };
        if (prefix && *prefix)
            q[nq++] = (qparam){ "prefix", prefix };
        if (key_marker)
            q[nq++] = (qparam){ "key-marker", key_marker };
        if (id_marker)
            q[nq++] = (qparam){ "upload-id-marker", id_marker };
        char *query = build_query(q, nq);
        if (!query) {
            st = sx__err(SX_ENOMEM, "s3: out of memory");
            break;
        }
        membuf body = { 0 };
        xfer x;
        xfer_init(&x, "ListMultipartUploads", "GET", K_LIST, NULL);
        x.query = query;
        x.sink = SINK_MEM;
        x.mem = &body;
        st = perform(s, &x, NULL);
        xfer_fini(&x);
        sx__free(query);
        if (st == SX_OK)
            st = uploads_parse(&u, body.p, body.len, s->bucket);
        mb_free(&body);
        for (size_t i = 0; st == SX_OK && i < u.n; i++) {
            const mp_upload *up = &u.u[i];
            if (!up->key || !up->upload_id)
                continue;
            int64_t t = parse_iso8601(up->initiated);
            if (t == 0 || t > cutoff)
                continue;
            st = mp_abort(s, up->key, up->upload_id);
            if (st == SX_OK)
                aborted++;
        }
        uploads_clear(&u);
        if (st != SX_OK || !u.truncated)
            break;
        if (!u.next_key || (key_marker && !strcmp(key_marker, u.next_key) && u.next_id &&
                            id_marker && !strcmp(id_marker, u.next_id))) {
            st = sx__err(SX_EREMOTE, "s3 ListMultipartUploads %s: truncated page without markers",
                         s->bucket);
            break;
        }
        sx__free(key_marker);
        sx__free(id_marker);
        key_marker = u.next_key;
        id_marker = u.next_id;
        u.next_key = u.next_id = NULL;
    }
    sx__free(key_marker);
    sx__free(id_marker);
    sx__free(u.next_key);
    sx__free(u.next_id);
    sx__free(u.u);
    if (st == SX_OK)
        *n_aborted = aborted;
    return st;
}

/* ---------------------------------------------------------------- for tests and fuzzers */

sx_status sx__s3_xml_parse(int which, const void *xml, size_t len, sx__s3_xml_result *out)
{
    sx__s3_xml_result r;
    memset(&r, 0, sizeof r);
    sx_status st = SX_OK;
    switch (which) {
    case SX__S3_XML_ERROR: {
        s3_error e;
        membuf body = { (uint8_t *)xml, len, len }; /* read only: parse_error_body writes none */
        parse_error_body(&body, &e);
        snprintf(r.code, sizeof r.code, "%s", e.code);
        snprintf(r.value, sizeof r.value, "%s", e.message);
        break;
    }
    case SX__S3_XML_LIST: {
        list_state l;
        memset(&l, 0, sizeof l);
        st = list_parse(&l, xml, len, "fuzz");
        r.n = l.n;
        r.truncated = l.truncated;
        if (l.next_token)
            snprintf(r.value, sizeof r.value, "%s", l.next_token);
        for (size_t i = 0; i < l.n; i++)
            sx__free(l.keys[i]);
        sx__free(l.keys);
        sx__free(l.sizes);
        sx__free(l.pend_key);
        sx__free(l.next_token);
        break;
    }
    case SX__S3_XML_CREATE_MP: {
        char *id = NULL;
        st = create_parse(xml, len, "fuzz", "key", &id);
        if (st == SX_OK)
            snprintf(r.value, sizeof r.value, "%s", id);
        sx__free(id);
        break;
    }
    case SX__S3_XML_COMPLETE_MP: {
        complete_state c;
        memset(&c, 0, sizeof c);
        char root[64];
        st = xml_parse(xml, len, complete_end, &c, root);
        if (st == SX_OK && !strcmp(root, "Error"))
            st = sx__err(SX_EREMOTE, "s3 CompleteMultipartUpload: HTTP 200 with error %s: %s",
                         c.err.code, c.err.message);
        else if (st == SX_OK && strcmp(root, "CompleteMultipartUploadResult") != 0)
            st = sx__err(SX_EREMOTE, "s3 CompleteMultipartUpload: unexpected <%s>", root);
        snprintf(r.code, sizeof r.code, "%s", c.err.code);
        snprintf(r.value, sizeof r.value, "%s", c.err.message);
        break;
    }
    case SX__S3_XML_LIST_MP: {
        uploads_state u;
        memset(&u, 0, sizeof u);
        st = uploads_parse(&u, xml, len, "fuzz");
        r.n = u.n;
        r.truncated = u.truncated;
        if (u.next_key)
            snprintf(r.value, sizeof r.value, "%s", u.next_key);
        uploads_clear(&u);
        sx__free(u.next_key);
        sx__free(u.next_id);
        sx__free(u.u);
        break;
    }
    default:
        st = sx__err(SX_EINVAL, "s3: unknown XML response kind %d", which);
        break;
    }
    if (out)
        *out = r;
    return st;
}
