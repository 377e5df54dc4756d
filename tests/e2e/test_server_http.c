/*
 * test_server_http.c: the HTTP layer of the REST server (src/server/http.c, metrics.c) against
 * an in-process server (tests/harness/http.h): routing and 404s, CORS, the JSON gate (empty,
 * invalid, non-object, 100k-deep nesting), body limits (413 before the body is read, for a
 * declared Content-Length and for chunked bodies), authentication on every route of the route
 * table (no / wrong token / wrong password / bad Basic -> 401 code 1800; read-only users -> 403
 * code 1401 on write routes), open health routes, the remote-bind refusal, the request headers
 * (DB-Name, Accept-Type-Allow-Int64), the graceful stop (an in-flight request completes,
 * /readyz answers 503 meanwhile), the Prometheus
 * exposition validated by promtool, and the connection defences (connection flood, slow
 * client cut by the idle timeout).
 *
 * Raw sockets are used where libcurl would hide what is tested (response headers, a request
 * that declares 10 GiB and sends nothing, partial headers).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
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
#include "server/server.h"

#define TOKEN "root:Milvus"

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
    sx_server *s = th_server_start(dir, o);
    if (!s)
        FAILF("server did not start");
    port = sx_server_port(s);
    return s;
}

static void stop(sx_server *s)
{
    ASSERT_OK(sx_server_stop(s));
}

static int raw_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends a raw request and returns the raw response (headers + body) in out. */
static size_t raw_exchange(const char *req, char *out, size_t cap)
{
    int fd = raw_connect();
    if (fd < 0)
        FAILF("connect: %s", strerror(errno));
    size_t len = strlen(req);
    if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len)
        FAILF("send: %s", strerror(errno));
    size_t n = th_raw_read(fd, out, cap, 5000);
    close(fd);
    return n;
}

/* Waits until the server closes fd (EOF or reset). Returns seconds waited, or -1 on timeout. */
static double wait_closed(int fd, double max_s)
{
    double t0 = mono();
    char b[256];
    while (mono() - t0 < max_s) {
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll(&p, 1, 100) > 0) {
            ssize_t r = recv(fd, b, sizeof b, MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
                return mono() - t0;
        }
    }
    return -1;
}

static bool livez_ok(void)
{
    th_resp *r = th_request("GET", "/livez", NULL, 0, NULL);
    return r->status == 200 && r->text && strcmp(r->text, "ok") == 0;
}

static const char *first_route(bool want_write)
{
    size_t n;
    const sx__route *rt = sx__server_routes(&n);
    for (size_t i = 0; i < n; i++) {
        if (rt[i].is_write == want_write)
            return rt[i].path;
    }
    return NULL;
}

/* ------------------------------------------------------------------ routing, CORS */

static void test_route_table(void)
{
    size_t n;
    const sx__route *rt = sx__server_routes(&n);
    ASSERT(rt != NULL);
    ASSERT(n > 30); /* every Milvus v2 route is registered: the auth walk below cannot be vacuous */
    ASSERT(rt[n].path == NULL);
    for (size_t i = 0; i < n; i++) {
        ASSERT(rt[i].fn != NULL);
        /* Milvus's routes, and Sextant's own (the web console's, handlers_console.c) */
        ASSERT(strncmp(rt[i].path, "/v2/vectordb/", 13) == 0 ||
               strncmp(rt[i].path, "/v2/sextant/", 12) == 0);
        for (size_t j = 0; j < i; j++)
            ASSERT(strcmp(rt[i].path, rt[j].path) != 0);
    }
    ASSERT(first_route(true) != NULL);
    ASSERT(first_route(false) != NULL);
}

static void test_not_found(void)
{
    sx_server *s = start(NULL, "nf");
    th_resp *r = th_post("/v2/vectordb/nope/list", "{}", NULL);
    ASSERT_EQ(r->status, 404);
    ASSERT(r->text && strcmp(r->text, "404 page not found") == 0);
    r = th_request("GET", "/", NULL, 0, NULL);
    ASSERT_EQ(r->status, 404);
    /* every route is POST only: GET on it is 404 */
    size_t n;
    const sx__route *rt = sx__server_routes(&n);
    for (size_t i = 0; i < n; i++) {
        r = th_request("GET", rt[i].path, NULL, 0, NULL);
        ASSERT_EQ(r->status, 404);
        ASSERT(strcmp(r->text, "404 page not found") == 0);
        r = th_request("PUT", rt[i].path, "{}", 2, NULL);
        ASSERT_EQ(r->status, 404);
    }
    /* POST on a health route is not a route either */
    r = th_post("/livez", "{}", NULL);
    ASSERT_EQ(r->status, 404);
    /* a trailing slash is tolerated */
    char p[256];
    snprintf(p, sizeof p, "%s/", "/v2/vectordb/collections/list");
    r = th_post(p, "{}", NULL);
    ASSERT_EQ(r->status, 200);
    ASSERT_EQ(th_code(), 0);
    ASSERT(json_is_array(json_object_get(r->json, "data")));
    /* the raw response: JSON content type and the CORS header on every answer */
    char out[8192];
    raw_exchange("POST /v2/vectordb/collections/list HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                 "Connection: close\r\n\r\n{}",
                 out, sizeof out);
    ASSERT(strncmp(out, "HTTP/1.1 200", 12) == 0);
    ASSERT(strstr(out, "Access-Control-Allow-Origin: *\r\n") != NULL);
    ASSERT(strstr(out, "Content-Type: application/json; charset=utf-8\r\n") != NULL);
    raw_exchange("GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", out, sizeof out);
    ASSERT(strncmp(out, "HTTP/1.1 404", 12) == 0);
    ASSERT(strstr(out, "Access-Control-Allow-Origin: *\r\n") != NULL);
    ASSERT(strstr(out, "Content-Type: text/plain") != NULL);
    ASSERT(strstr(out, "\r\n\r\n404 page not found") != NULL);
    stop(s);
}

static void test_options_cors(void)
{
    sx_server *s = start(NULL, "cors");
    th_resp *r = th_request("OPTIONS", "/v2/vectordb/collections/create", NULL, 0, NULL);
    ASSERT_EQ(r->status, 204);
    char out[8192];
    raw_exchange("OPTIONS /v2/vectordb/entities/search HTTP/1.1\r\nHost: x\r\n"
                 "Origin: http://example.com\r\nAccess-Control-Request-Method: POST\r\n"
                 "Connection: close\r\n\r\n",
                 out, sizeof out);
    ASSERT(strncmp(out, "HTTP/1.1 204", 12) == 0);
    ASSERT(strstr(out, "Access-Control-Allow-Origin: *\r\n") != NULL);
    ASSERT(strstr(out, "Access-Control-Allow-Methods: ") != NULL);
    ASSERT(strstr(out, "Access-Control-Allow-Headers: ") != NULL);
    ASSERT(strstr(out, "Authorization") != NULL);
    stop(s);
}

/* ------------------------------------------------------------------ the JSON gate */

static void expect_1801(const char *body, size_t len, const char *needle)
{
    th_resp *r = th_request("POST", "/v2/vectordb/collections/list", body, len, NULL);
    if (r->status != 200 || th_code() != 1801)
        FAILF("body '%.40s': status %ld code %lld (%s)", body ? body : "(none)", r->status,
              th_code(), r->text ? r->text : "");
    const char *msg = json_string_value(json_object_get(r->json, "message"));
    ASSERT(msg && strstr(msg, "can only accept json format request") != NULL);
    if (needle && !strstr(msg, needle))
        FAILF("message '%s' lacks '%s'", msg, needle);
}

static void test_bad_json(void)
{
    sx_server *s = start(NULL, "json");
    expect_1801(NULL, 0, NULL);
    expect_1801("", 0, NULL);
    expect_1801("{", 1, NULL);
    expect_1801("{\"dbName\":}", 11, NULL);
    expect_1801("not json", 8, NULL);
    expect_1801("[]", 2, NULL);
    expect_1801("[{}]", 4, NULL);
    expect_1801("42", 2, NULL);
    expect_1801("\"str\"", 5, NULL);
    expect_1801("{} {}", 5, NULL);
    /* the same request with a valid body works; `null` is an empty request, as Milvus takes it */
    th_resp *r = th_post("/v2/vectordb/collections/list", "{}", NULL);
    ASSERT_EQ(r->status, 200);
    ASSERT_EQ(th_code(), 0);
    r = th_post("/v2/vectordb/collections/list", "null", NULL);
    ASSERT_EQ(r->status, 200);
    ASSERT_EQ(th_code(), 0);
    ASSERT(json_is_array(json_object_get(r->json, "data")));
    r = th_post("/v2/vectordb/collections/describe", " null ", NULL); /* a required key missing */
    ASSERT_EQ(r->status, 200);
    ASSERT(th_code() != 0 && th_code() != 1801);
    /* Content-Type of the request is ignored */
    const char *hs[] = { "Content-Type: text/plain", NULL };
    r = th_request("POST", "/v2/vectordb/collections/list", "{}", 2, hs);
    ASSERT_EQ(th_code(), 0);
    stop(s);
}

static void test_deep_nesting(void)
{
    sx_server *s = start(NULL, "deep");
    size_t n = 100000;
    char *b = malloc(2 * n + 16);
    ASSERT(b);
    memset(b, '[', n);
    expect_1801(b, n, "nesting");
    ASSERT(livez_ok());
    /* balanced, inside an object */
    size_t k = 0;
    k += (size_t)snprintf(b, 16, "{\"a\":");
    memset(b + k, '[', n);
    memset(b + k + n, ']', n);
    b[k + 2 * n] = '}';
    expect_1801(b, k + 2 * n + 1, "nesting");
    /* brackets inside strings do not count */
    k = (size_t)snprintf(b, 2 * n, "{\"a\":\"");
    memset(b + k, '[', 1000);
    k += 1000;
    k += (size_t)snprintf(b + k, 16, "\"}");
    th_resp *r = th_request("POST", "/v2/vectordb/collections/list", b, k, NULL);
    ASSERT_EQ(r->status, 200);
    ASSERT_EQ(th_code(), 0);
    /* just over the limit (default 64) is refused, at the limit accepted */
    for (int levels = 64; levels <= 65; levels++) {
        int arrays = levels - 1; /* the object is one level */
        k = (size_t)snprintf(b, 16, "{\"a\":");
        memset(b + k, '[', (size_t)arrays);
        memset(b + k + (size_t)arrays, ']', (size_t)arrays);
        k += 2 * (size_t)arrays;
        b[k++] = '}';
        if (levels == 65) {
            expect_1801(b, k, "nesting");
        } else {
            r = th_request("POST", "/v2/vectordb/collections/list", b, k, NULL);
            ASSERT_EQ(th_code(), 0);
        }
    }
    free(b);
    ASSERT(livez_ok());
    stop(s);
}

/* ------------------------------------------------------------------ body limits */

typedef struct src {
    const char *p;
    size_t left;
} src;

static size_t read_cb(char *buf, size_t sz, size_t nm, void *ud)
{
    src *r = ud;
    size_t n = sz * nm < r->left ? sz * nm : r->left;
    if (n > 1000)
        n = 1000; /* many small chunks */
    memcpy(buf, r->p, n);
    r->p += n;
    r->left -= n;
    return n;
}

/* POST with curl's own Expect handling (100-continue), or chunked (no declared length). */
static long post_curl(const char *path, const char *body, size_t len, bool chunked, long *code)
{
    th_reset();
    CURL *c = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    struct curl_slist *hl = NULL;
    hl = curl_slist_append(hl, "Expect: 100-continue");
    src rd = { body, len };
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_EXPECT_100_TIMEOUT_MS, 10000L);
    if (chunked) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, read_cb);
        curl_easy_setopt(c, CURLOPT_READDATA, &rd);
    } else {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, th_write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &th_last);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &th_last.status);
    else
        fprintf(stderr, "curl: %s\n", curl_easy_strerror(rc));
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    if (th_last.text)
        th_last.json = json_loads(th_last.text, 0, NULL);
    *code = th_code();
    return th_last.status;
}

static void test_body_limit(void)
{
    sx_server_options o = { 0 };
    o.max_body_bytes = 4096;
    sx_server *s = start(&o, "limit");
    size_t big = 1 << 20;
    char *b = malloc(big + 1);
    ASSERT(b);
    memset(b, ' ', big);
    b[0] = '{';
    b[big - 1] = '}';
    b[big] = 0;
    long code = 0;
    /* declared 1 MiB with Expect: 100-continue: 413 instead of 100, body never sent */
    ASSERT_EQ(post_curl("/v2/vectordb/collections/list", b, big, false, &code), 413);
    ASSERT_EQ(code, 1102);
    const char *msg = json_string_value(json_object_get(th_last.json, "message"));
    ASSERT(msg && strstr(msg, "request body too large: 1048576 bytes > 4096") != NULL);
    /* chunked: no declared length, the limit is enforced while accumulating */
    ASSERT_EQ(post_curl("/v2/vectordb/collections/list", b, 64 * 1024, true, &code), 413);
    ASSERT_EQ(code, 1102);
    /* a client streaming far past the limit is cut off; the server stays up */
    size_t huge = (size_t)20 << 20;
    char *hb = malloc(huge);
    ASSERT(hb);
    memset(hb, ' ', huge);
    long st = post_curl("/v2/vectordb/collections/list", hb, huge, true, &code);
    ASSERT(st == 0 || st == 413);
    free(hb);
    ASSERT(livez_ok());
    /* Expect: 100-continue under the limit: the body is sent after the 100 and served */
    char small[3000];
    memset(small, ' ', sizeof small);
    small[0] = '{';
    small[sizeof small - 1] = '}';
    ASSERT_EQ(post_curl("/v2/vectordb/collections/list", small, sizeof small, false, &code), 200);
    ASSERT_EQ(code, 0);
    /* a small chunked body is fine */
    ASSERT_EQ(post_curl("/v2/vectordb/collections/list", "{}", 2, true, &code), 200);
    ASSERT_EQ(code, 0);
    /* just under the limit: accepted */
    b[4000 - 1] = '}';
    th_resp *r = th_request("POST", "/v2/vectordb/collections/list", b, 4000, NULL);
    ASSERT_EQ(r->status, 200);
    ASSERT_EQ(th_code(), 0);
    /* a header claiming 10 GiB and no body at all: answered at once */
    char out[4096];
    double t0 = mono();
    raw_exchange("POST /v2/vectordb/entities/insert HTTP/1.1\r\nHost: x\r\n"
                 "Content-Length: 10737418240\r\n\r\n",
                 out, sizeof out);
    ASSERT(mono() - t0 < 3);
    ASSERT(strncmp(out, "HTTP/1.1 413", 12) == 0);
    ASSERT(strstr(out, "\"code\":1102") != NULL);
    ASSERT(strstr(out, "10737418240 bytes > 4096") != NULL);
    /* an absurd length (overflows 64 bits) too */
    raw_exchange("POST /v2/vectordb/entities/insert HTTP/1.1\r\nHost: x\r\n"
                 "Content-Length: 99999999999999999999999\r\n\r\n",
                 out, sizeof out);
    ASSERT(strncmp(out, "HTTP/1.1 413", 12) == 0 || strncmp(out, "HTTP/1.1 400", 12) == 0);
    free(b);
    ASSERT(livez_ok());
    stop(s);
}

/* ------------------------------------------------------------------ auth */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void basic(const char *userpass, char *out, size_t cap)
{
    size_t n = strlen(userpass), k = (size_t)snprintf(out, cap, "Basic ");
    const unsigned char *p = (const unsigned char *)userpass;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        out[k++] = B64[(v >> 18) & 63];
        out[k++] = B64[(v >> 12) & 63];
        out[k++] = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        out[k++] = i + 2 < n ? B64[v & 63] : '=';
    }
    out[k] = 0;
}

static void expect_401(const char *path, const char *auth)
{
    th_resp *r = th_post(path, "{}", auth);
    if (r->status != 401 || th_code() != 1800)
        FAILF("%s with %s: status %ld code %lld", path, auth ? auth : "(no auth)", r->status,
              th_code());
    const char *msg = json_string_value(json_object_get(r->json, "message"));
    ASSERT(msg && strcmp(msg, "user hasn't authenticated") == 0);
}

static void test_auth_walk(void)
{
    char users[700];
    snprintf(users, sizeof users, "%s/users.txt", tmp);
    FILE *f = fopen(users, "w");
    ASSERT(f);
    fprintf(f, "# comment\n\nreader:rpass:ro\nwriter:wpass\n");
    fclose(f);
    sx_server_options o = { 0 };
    o.auth_token = TOKEN;
    o.users_file = users;
    sx_server *s = start(&o, "auth");
    size_t n;
    const sx__route *rt = sx__server_routes(&n);
    ASSERT(n > 30);
    char bw[128], bok[128], bro[128];
    basic("root:wrong", bw, sizeof bw);
    basic(TOKEN, bok, sizeof bok);
    basic("reader:rpass", bro, sizeof bro);
    size_t n_write = 0, n_read = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = rt[i].path;
        expect_401(p, NULL);
        expect_401(p, "Bearer wrong-token");
        expect_401(p, "Bearer root:wrong");
        expect_401(p, "Bearer ");
        expect_401(p, "Bearer root:Milvu");
        expect_401(p, "Bearer root:Milvus2");
        expect_401(p, bw);
        expect_401(p, "Basic !!!notbase64");
        expect_401(p, "Token root:Milvus");
        expect_401(p, "Bearer reader:wrong");
        th_resp *r = th_post(p, "{}", "Bearer " TOKEN);
        if (r->status == 401 || r->status == 403 || r->status == 0)
            FAILF("%s with the right token: status %ld", p, r->status);
        r = th_post(p, "{}", bok);
        ASSERT(r->status != 401 && r->status != 403 && r->status != 0);
        r = th_post(p, "{}", "Bearer writer:wpass");
        ASSERT(r->status != 401 && r->status != 403 && r->status != 0);
        r = th_post(p, "{}", bro);
        if (rt[i].is_write) {
            n_write++;
            if (r->status != 403 || th_code() != 1401)
                FAILF("%s (write) as read-only user: status %ld code %lld", p, r->status,
                      th_code());
        } else {
            n_read++;
            if (r->status == 401 || r->status == 403 || r->status == 0)
                FAILF("%s (read) as read-only user: status %ld", p, r->status);
        }
    }
    ASSERT(n_write > 10 && n_read > 10);
    /* health routes are open, /metrics is not */
    th_resp *r = th_request("GET", "/livez", NULL, 0, NULL);
    ASSERT_EQ(r->status, 200);
    r = th_request("GET", "/readyz", NULL, 0, NULL);
    ASSERT_EQ(r->status, 200);
    r = th_request("GET", "/healthz", NULL, 0, NULL);
    ASSERT_EQ(r->status, 200);
    ASSERT(strstr(r->text, "\"status\":\"ok\"") != NULL);
    r = th_request("GET", "/metrics", NULL, 0, NULL);
    ASSERT_EQ(r->status, 401);
    const char *hs[] = { "Authorization: Bearer " TOKEN, NULL };
    r = th_request("GET", "/metrics", NULL, 0, hs);
    ASSERT_EQ(r->status, 200);
    ASSERT(strstr(r->text, "sextant_http_requests_total{route=\"") != NULL);
    const char *hs2[] = { "Authorization: Bearer reader:rpass", NULL };
    r = th_request("GET", "/metrics", NULL, 0, hs2);
    ASSERT_EQ(r->status, 200);
    /* sx__open_paths lists exactly the routes that answered without credentials */
    size_t k = 0;
    while (sx__open_paths[k])
        k++;
    ASSERT_EQ(k, 3);
    stop(s);
    /* a users file with a bad line refuses to start */
    f = fopen(users, "w");
    ASSERT(f);
    fprintf(f, "nopassword\n");
    fclose(f);
    sx_server_options o2 = { 0 };
    o2.users_file = users;
    o2.data_dir = dir;
    o2.quiet = true;
    sx_server *s2 = NULL;
    ASSERT_STATUS(sx_server_start(&o2, &s2), SX_EINVAL);
    ASSERT(s2 == NULL);
}

static void test_remote_bind(void)
{
    snprintf(dir, sizeof dir, "%s/remote", tmp);
    mkdir(dir, 0755);
    sx_server_options o = { 0 };
    o.data_dir = dir;
    o.bind_addr = "0.0.0.0";
    o.quiet = true;
    sx_server *s = NULL;
    ASSERT_STATUS(sx_server_start(&o, &s), SX_EINVAL);
    ASSERT(s == NULL);
    ASSERT(strstr(sx_errmsg(), "--auth-token") != NULL);
    ASSERT(strstr(sx_errmsg(), "--users") != NULL);
    o.bind_addr = "::";
    ASSERT_STATUS(sx_server_start(&o, &s), SX_EINVAL);
    /* loopback spelled differently is fine; with credentials a remote bind is allowed */
    o.bind_addr = "127.0.0.2";
    ASSERT_OK(sx_server_start(&o, &s));
    ASSERT_OK(sx_server_stop(s));
    o.bind_addr = "0.0.0.0";
    o.auth_token = TOKEN;
    ASSERT_OK(sx_server_start(&o, &s));
    port = sx_server_port(s);
    ASSERT(port != 0);
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", (unsigned)port);
    th_resp *r = th_post("/v2/vectordb/collections/list", "{}", NULL);
    ASSERT_EQ(r->status, 401);
    /* the port is taken now: a second server on it fails with SX_EIO */
    char dir2[700];
    snprintf(dir2, sizeof dir2, "%s/remote2", tmp);
    mkdir(dir2, 0755);
    sx_server_options o2 = o;
    o2.data_dir = dir2;
    o2.port = port;
    sx_server *s2 = NULL;
    ASSERT_STATUS(sx_server_start(&o2, &s2), SX_EIO);
    ASSERT_OK(sx_server_stop(s));
    /* readyz answers 503 while stopping is covered by the process test; NULL stop is a no-op */
    ASSERT_OK(sx_server_stop(NULL));
}

/* ------------------------------------------------------------------ metrics */

static void test_metrics(void)
{
    if (access("/usr/bin/promtool", X_OK) != 0) {
        fprintf(stderr, "skip test_metrics: /usr/bin/promtool not found\n");
        return;
    }
    sx_server *s = start(NULL, "metrics");
    for (int i = 0; i < 7; i++)
        ASSERT(livez_ok());
    th_post("/nope", "{}", NULL);
    th_resp *r = th_post("/v2/vectordb/collections/create",
                         "{\"collectionName\":\"metc\",\"dimension\":4}", NULL);
    ASSERT_EQ(th_code(), 0);
    r = th_post("/v2/vectordb/entities/insert",
                "{\"collectionName\":\"metc\",\"data\":[{\"id\":1,\"vector\":[1,2,3,4]},"
                "{\"id\":2,\"vector\":[4,3,2,1]}]}",
                NULL);
    ASSERT_EQ(th_code(), 0);
    r = th_post(
        "/v2/vectordb/entities/search",
        "{\"collectionName\":\"metc\",\"data\":[[1,2,3,4],[1,1,1,1],[0,0,0,1]],\"limit\":1}", NULL);
    ASSERT_EQ(th_code(), 0);
    r = th_request("GET", "/metrics", NULL, 0, NULL);
    ASSERT_EQ(r->status, 200);
    char *text = strdup(r->text);
    ASSERT(text);
    char path[700], cmd[1500];
    snprintf(path, sizeof path, "%s/metrics.txt", tmp);
    FILE *f = fopen(path, "w");
    ASSERT(f);
    fputs(text, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "/usr/bin/promtool check metrics < '%s' > '%s.out' 2>&1", path, path);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "cat '%s.out' >&2", path);
        if (system(cmd) != 0)
            fprintf(stderr, "(no promtool output)\n");
        FAILF("promtool check metrics failed (%d)", rc);
    }
    static const char *const want[] = {
        "# TYPE sextant_http_requests_total counter\n",
        "sextant_http_requests_total{route=\"/livez\",status=\"200\",code=\"0\"} 7\n",
        "sextant_http_requests_total{route=\"other\",status=\"404\",code=\"0\"} 1\n",
        "sextant_http_requests_total{route=\"/v2/vectordb/entities/insert\",status=\"200\","
        "code=\"0\"} 1\n",
        "# TYPE sextant_http_request_duration_seconds histogram\n",
        "sextant_http_request_duration_seconds_bucket{route=\"/livez\",le=\"+Inf\"} 7\n",
        "sextant_http_request_duration_seconds_count{route=\"/livez\"} 7\n",
        "sextant_http_request_duration_seconds_sum{route=\"/livez\"} ",
        "sextant_rows_inserted_total 2\n",
        "sextant_rows_deleted_total 0\n",
        "sextant_search_queries_total 3\n",
        "sextant_search_merged_batches_total ",
        "sextant_search_merged_requests_total ",
        "sextant_io_read_bytes_total ",
        "sextant_io_write_bytes_total ",
        "sextant_io_read_ops_total ",
        "sextant_io_write_ops_total ",
        "sextant_io_fsyncs_total ",
        "sextant_up 1\n",
        "sextant_build_info{version=\"",
        "sextant_collection_rows{db=\"default\",collection=\"metc\"} 2\n",
        "sextant_collection_segments{db=\"default\",collection=\"metc\"} ",
        "sextant_collection_growing_rows{db=\"default\",collection=\"metc\"} ",
        "sextant_collection_memory_bytes{db=\"default\",collection=\"metc\"} ",
        "sextant_index_indexed_rows{db=\"default\",collection=\"metc\"",
        "sextant_index_total_rows{db=\"default\",collection=\"metc\"",
        "sextant_index_progress_ratio{db=\"default\",collection=\"metc\"",
        "sextant_index_state{db=\"default\",collection=\"metc\"",
        NULL
    };
    for (size_t i = 0; want[i]; i++) {
        if (!strstr(text, want[i]))
            FAILF("/metrics lacks: %s", want[i]);
    }
    /* histogram buckets are cumulative and end at +Inf == count */
    const char *p = strstr(text, "sextant_http_request_duration_seconds_bucket{route=\"/livez\"");
    long long prev = -1;
    while (p &&
           strncmp(p, "sextant_http_request_duration_seconds_bucket{route=\"/livez\"", 58) == 0) {
        const char *sp = strchr(p, '}');
        ASSERT(sp);
        long long v = strtoll(sp + 2, NULL, 10);
        ASSERT(v >= prev);
        prev = v;
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    ASSERT_EQ(prev, 7);
    /* the io counters reflect the WAL writes of the insert */
    const char *w = strstr(text, "\nsextant_io_write_bytes_total ");
    ASSERT(w && strtoull(w + 30, NULL, 10) > 0);
    w = strstr(text, "\nsextant_io_fsyncs_total ");
    ASSERT(w && strtoull(w + 25, NULL, 10) > 0);
    free(text);
    stop(s);
}

/* ------------------------------------------------------------------ connection defences */

static void test_connection_flood(void)
{
    sx_server_options o = { 0 };
    o.max_connections = 4;
    o.max_connections_per_ip = 4; /* one address may hold every slot here */
    o.http_threads = 2;
    o.idle_timeout_s = 2;
    sx_server *s = start(&o, "flood");

    enum { N = 16 };

    int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = raw_connect();
        ASSERT(fds[i] >= 0);
    }
    /* idle sockets over the limit are refused (closed at once) or wait in the backlog; those
     * accepted are dropped by the idle timeout; none is served forever */
    double t0 = mono();
    int closed = 0;
    for (int i = 0; i < N; i++) {
        double left = 12 - (mono() - t0);
        if (left > 0 && wait_closed(fds[i], left) >= 0)
            closed++;
    }
    ASSERT_EQ(closed, N);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    /* the server is still serving */
    ASSERT(livez_ok());
    /* hold every slot with live keep-alive requests and check a request still completes once
     * they are released */
    int hold[4];
    for (int i = 0; i < 4; i++) {
        hold[i] = raw_connect();
        ASSERT(hold[i] >= 0);
        const char *req = "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n";
        ASSERT(send(hold[i], req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req));
        char out[1024];
        th_raw_read(hold[i], out, sizeof out, 300);
        ASSERT(strncmp(out, "HTTP/1.1 200", 12) == 0);
    }
    for (int i = 0; i < 4; i++)
        close(hold[i]);
    double t1 = mono();
    bool ok = false;
    while (!ok && mono() - t1 < 5)
        ok = livez_ok();
    ASSERT(ok);
    stop(s);
}

static void test_slow_client(void)
{
    sx_server_options o = { 0 };
    o.idle_timeout_s = 1;
    sx_server *s = start(&o, "slow");
    /* partial header */
    int fd = raw_connect();
    ASSERT(fd >= 0);
    const char *part = "POST /v2/vectordb/collections/list HTTP/1.1\r\nHost: x\r\n";
    ASSERT(send(fd, part, strlen(part), MSG_NOSIGNAL) == (ssize_t)strlen(part));
    double w = wait_closed(fd, 5);
    close(fd);
    ASSERT(w >= 0.5 && w < 4);
    /* headers complete, body stalls */
    fd = raw_connect();
    ASSERT(fd >= 0);
    const char *req = "POST /v2/vectordb/collections/list HTTP/1.1\r\nHost: x\r\n"
                      "Content-Length: 100\r\n\r\n{\"a\":";
    ASSERT(send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req));
    w = wait_closed(fd, 5);
    close(fd);
    ASSERT(w >= 0.5 && w < 4);
    /* a trickle of one byte per 0.4 s stays alive past the timeout (activity resets it) */
    fd = raw_connect();
    ASSERT(fd >= 0);
    const char *full = "POST /v2/vectordb/collections/list HTTP/1.1\r\nHost: x\r\n"
                       "Content-Length: 2\r\nConnection: close\r\n\r\n{}";
    size_t len = strlen(full), i = 0;
    for (; i + 8 < len; i++) {
        ASSERT(send(fd, full + i, 1, MSG_NOSIGNAL) == 1);
        if (i % 10 == 0)
            usleep(400000);
    }
    ASSERT(send(fd, full + i, len - i, MSG_NOSIGNAL) == (ssize_t)(len - i));
    char out[4096];
    th_raw_read(fd, out, sizeof out, 3000);
    close(fd);
    ASSERT(strncmp(out, "HTTP/1.1 200", 12) == 0);
    ASSERT(livez_ok());
    stop(s);
}

/* DB-Name, dbName and Accept-Type-Allow-Int64 reach the handlers as server.h says. */
static void test_headers(void)
{
    sx_server *s = start(NULL, "headers");
    th_post("/v2/vectordb/databases/create", "{\"dbName\":\"hdb\"}", NULL);
    ASSERT_EQ(th_code(), 0);
    const char *h_db[] = { "DB-Name: hdb", NULL };
    const char *cb = "{\"collectionName\":\"hc\",\"dimension\":2}";
    th_request("POST", "/v2/vectordb/collections/create", cb, strlen(cb), h_db);
    ASSERT_EQ(th_code(), 0);
    /* listed in hdb (header), not in default */
    th_request("POST", "/v2/vectordb/collections/list", "{}", 2, h_db);
    ASSERT_EQ(th_code(), 0);
    json_t *d = json_object_get(th_last.json, "data");
    ASSERT(json_array_size(d) == 1 && strcmp(json_string_value(json_array_get(d, 0)), "hc") == 0);
    th_post("/v2/vectordb/collections/list", "{}", NULL);
    ASSERT_EQ(json_array_size(json_object_get(th_last.json, "data")), 0);
    /* the body's dbName wins over the header (any case of the key) */
    th_request("POST", "/v2/vectordb/collections/list", "{\"DBNAME\":\"default\"}", 20, h_db);
    ASSERT_EQ(th_code(), 0);
    ASSERT_EQ(json_array_size(json_object_get(th_last.json, "data")), 0);
    /* an empty dbName falls back to the header */
    th_request("POST", "/v2/vectordb/collections/list", "{\"dbName\":\"\"}", 13, h_db);
    ASSERT_EQ(json_array_size(json_object_get(th_last.json, "data")), 1);
    /* int64 as strings when the client says Accept-Type-Allow-Int64: false */
    const char *ib = "{\"collectionName\":\"hc\",\"data\":[{\"id\":9007199254740993,"
                     "\"vector\":[1,2]}]}";
    th_request("POST", "/v2/vectordb/entities/insert", ib, strlen(ib), h_db);
    ASSERT_EQ(th_code(), 0);
    const char *qb = "{\"collectionName\":\"hc\",\"filter\":\"id > 0\",\"outputFields\":[\"id\"]}";
    th_request("POST", "/v2/vectordb/entities/query", qb, strlen(qb), h_db);
    ASSERT_EQ(th_code(), 0);
    json_t *id = json_object_get(json_array_get(json_object_get(th_last.json, "data"), 0), "id");
    ASSERT(json_is_integer(id) && json_integer_value(id) == 9007199254740993LL);
    const char *h_str[] = { "DB-Name: hdb", "Accept-Type-Allow-Int64: false", NULL };
    th_request("POST", "/v2/vectordb/entities/query", qb, strlen(qb), h_str);
    ASSERT_EQ(th_code(), 0);
    id = json_object_get(json_array_get(json_object_get(th_last.json, "data"), 0), "id");
    ASSERT(json_is_string(id) && strcmp(json_string_value(id), "9007199254740993") == 0);
    stop(s);
}

typedef struct stopper {
    sx_server *s;
    sx_status st;
    volatile int done;
} stopper;

static void *stop_thread(void *arg)
{
    stopper *x = arg;
    x->st = sx_server_stop(x->s);
    x->done = 1;
    return NULL;
}

/* sx_server_stop waits for a request in flight, which completes; readyz answers 503 meanwhile. */
static void test_graceful_stop(void)
{
    sx_server_options o = { 0 };
    o.idle_timeout_s = 20;
    sx_server *s = start(&o, "graceful");
    int fd1 = raw_connect(), fd2 = raw_connect();
    ASSERT(fd1 >= 0 && fd2 >= 0);
    const char *part = "POST /v2/vectordb/collections/list HTTP/1.1\r\nHost: x\r\n"
                       "Content-Length: 2\r\nConnection: close\r\n\r\n{";
    ASSERT(send(fd1, part, strlen(part), MSG_NOSIGNAL) == (ssize_t)strlen(part));
    const char *live = "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n";
    char out[4096];
    ASSERT(send(fd2, live, strlen(live), MSG_NOSIGNAL) == (ssize_t)strlen(live));
    th_raw_read(fd2, out, sizeof out, 500);
    ASSERT(strncmp(out, "HTTP/1.1 200", 12) == 0);
    usleep(100000);
    stopper x = { s, SX_EIO, 0 };
    pthread_t t;
    ASSERT(pthread_create(&t, NULL, stop_thread, &x) == 0);
    usleep(400000);
    ASSERT(!x.done); /* waiting for fd1's request */
    ASSERT(send(fd2, live, strlen(live), MSG_NOSIGNAL) == (ssize_t)strlen(live));
    th_raw_read(fd2, out, sizeof out, 500);
    ASSERT(strncmp(out, "HTTP/1.1 503", 12) == 0);
    ASSERT(!x.done);
    ASSERT(send(fd1, "}", 1, MSG_NOSIGNAL) == 1);
    th_raw_read(fd1, out, sizeof out, 3000);
    ASSERT(strncmp(out, "HTTP/1.1 200", 12) == 0);
    ASSERT(strstr(out, "\"code\":0") != NULL);
    pthread_join(t, NULL);
    ASSERT(x.done);
    ASSERT_OK(x.st);
    close(fd1);
    close(fd2);
}

static void test_stop_flushes(void)
{
    sx_server *s = start(NULL, "stopflush");
    th_post("/v2/vectordb/collections/create", "{\"collectionName\":\"sf\",\"dimension\":2}", NULL);
    ASSERT_EQ(th_code(), 0);
    th_post("/v2/vectordb/entities/insert",
            "{\"collectionName\":\"sf\",\"data\":[{\"id\":5,\"vector\":[1,2]}]}", NULL);
    ASSERT_EQ(th_code(), 0);
    th_resp *r = th_request("GET", "/readyz", NULL, 0, NULL);
    ASSERT_EQ(r->status, 200);
    stop(s);
    /* reopened: the row is there */
    s = start(NULL, "stopflush");
    th_post("/v2/vectordb/entities/get", "{\"collectionName\":\"sf\",\"id\":[5]}", NULL);
    ASSERT_EQ(th_code(), 0);
    json_t *d = json_object_get(th_last.json, "data");
    ASSERT(json_is_array(d) && json_array_size(d) == 1);
    stop(s);
}

/* sx_server_has_collection: a collection by its name, not by an alias, nor a missing one */
static void test_has_collection(void)
{
    sx_server *s = start(NULL, "hascoll");
    th_post("/v2/vectordb/collections/create", "{\"collectionName\":\"hc\",\"dimension\":2}", NULL);
    ASSERT_EQ(th_code(), 0);
    th_post("/v2/vectordb/aliases/create", "{\"collectionName\":\"hc\",\"aliasName\":\"hca\"}",
            NULL);
    ASSERT_EQ(th_code(), 0);
    ASSERT(sx_server_has_collection(s, "default", "hc"));
    ASSERT(!sx_server_has_collection(s, "default", "hca"));
    ASSERT(!sx_server_has_collection(s, "default", "nope"));
    ASSERT(!sx_server_has_collection(s, "otherdb", "hc"));
    stop(s);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
    tmp = test_tmpdir("server_http");
    RUN(test_route_table);
    RUN(test_not_found);
    RUN(test_options_cors);
    RUN(test_bad_json);
    RUN(test_deep_nesting);
    RUN(test_body_limit);
    RUN(test_auth_walk);
    RUN(test_remote_bind);
    RUN(test_metrics);
    RUN(test_connection_flood);
    RUN(test_slow_client);
    RUN(test_headers);
    RUN(test_graceful_stop);
    RUN(test_stop_flushes);
    RUN(test_has_collection);
    th_reset();
    curl_global_cleanup();
    return TEST_DONE();
}
