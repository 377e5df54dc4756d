/*
 * http.h: HTTP helpers for the server tests (libcurl client, jansson parsing, in-process server).
 *
 *   th_server_start(dir, &opts)  starts sx_server on an ephemeral loopback port (quiet)
 *   th_post(path, body, auth)    POSTs to the last started server; returns status + parsed body
 *   th_request(method, ...)      any method, extra headers, raw response text
 *   th_send(..., with_headers)   th_request, the response's headers before its body in text
 *   th_postf(path, fmt, ...)     POSTs a printf-formatted body where ` stands for "; fails the
 *                                test unless the answer is HTTP 200 JSON; returns the parsed body
 *   th_post_ok(path, body)       the same (body as is, ` for "), and code 0: returns "data"
 *   th_expect(path, body, code, part)  the answer's code is `code` and its message has `part`
 *
 * Include after harness.h. Every response body is kept in th_last (freed on the next call).
 */
#ifndef SX_TEST_HTTP_H
#define SX_TEST_HTTP_H
#include <curl/curl.h>
#include <jansson.h>
#include <poll.h>
#include <stdarg.h>
#include <sys/socket.h>

#include "sextant_server.h"

typedef struct th_resp {
    long status;
    char *text; /* raw body, NUL-terminated (owned by th_last) */
    size_t len;
    json_t *json; /* parsed body, or NULL if not JSON */
} th_resp;

static th_resp th_last;
static char th_base[128] = "http://127.0.0.1:19530";

static inline size_t th_write_cb(char *p, size_t sz, size_t nm, void *ud)
{
    th_resp *r = ud;
    size_t n = sz * nm;
    char *t = realloc(r->text, r->len + n + 1);
    if (!t)
        return 0;
    memcpy(t + r->len, p, n);
    r->len += n;
    t[r->len] = 0;
    r->text = t;
    return n;
}

static inline void th_reset(void)
{
    free(th_last.text);
    json_decref(th_last.json);
    memset(&th_last, 0, sizeof th_last);
}

/* Sends one request. method: "GET", "POST", ...; body may be NULL; headers: NULL-terminated
 * array of "Name: value" lines (NULL for none); with_headers: the response's headers lead
 * th_last.text (then it is not parsed as JSON). Returns &th_last; status 0 = transport error. */
static inline th_resp *th_send(const char *method,
                               const char *path,
                               const char *body,
                               size_t body_len,
                               const char *const *headers,
                               bool with_headers)
{
    th_reset();
    CURL *c = curl_easy_init();
    if (!c)
        return &th_last;
    char url[512];
    snprintf(url, sizeof url, "%s%s", th_base, path);
    struct curl_slist *hl = NULL;
    hl = curl_slist_append(hl, "Expect:");
    for (size_t i = 0; headers && headers[i]; i++)
        hl = curl_slist_append(hl, headers[i]);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, th_write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &th_last);
    if (with_headers)
        curl_easy_setopt(c, CURLOPT_HEADER, 1L);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &th_last.status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    if (th_last.text && !with_headers)
        th_last.json = json_loads(th_last.text, 0, NULL);
    return &th_last;
}

static inline th_resp *th_request(const char *method,
                                  const char *path,
                                  const char *body,
                                  size_t body_len,
                                  const char *const *headers)
{
    return th_send(method, path, body, body_len, headers, false);
}

/* POST with a JSON body (string). auth: NULL for none, else the Authorization value. */
static inline th_resp *th_post(const char *path, const char *body, const char *auth)
{
    char h[512];
    const char *hs[2] = { NULL, NULL };
    if (auth) {
        snprintf(h, sizeof h, "Authorization: %s", auth);
        hs[0] = h;
    }
    return th_request("POST", path, body, body ? strlen(body) : 0, hs);
}

/* The Milvus `code` of the last JSON response (-1 if none). */
static inline long long th_code(void)
{
    json_t *c = th_last.json ? json_object_get(th_last.json, "code") : NULL;
    return json_is_integer(c) ? (long long)json_integer_value(c) : -1;
}

/* Starts an in-process server on an ephemeral port and points th_base at it. */
static inline sx_server *th_server_start(const char *dir, sx_server_options *o)
{
    sx_server_options def = { 0 };
    if (!o)
        o = &def;
    o->data_dir = dir;
    o->quiet = true;
    sx_server *s = NULL;
    sx_status st = sx_server_start(o, &s);
    if (st != SX_OK) {
        fprintf(stderr, "sx_server_start: %s: %s\n", sx_status_str(st), sx_errmsg());
        return NULL;
    }
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", (unsigned)sx_server_port(s));
    return s;
}

/* Reads from a raw socket until EOF, `cap` bytes or timeout_ms without data. Returns the bytes
 * read (out is NUL-terminated). */
static inline size_t th_raw_read(int fd, char *out, size_t cap, int timeout_ms)
{
    size_t n = 0;
    while (n + 1 < cap) {
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll(&p, 1, timeout_ms) <= 0)
            break;
        ssize_t r = recv(fd, out + n, cap - 1 - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    out[n] = 0;
    return n;
}

static inline json_t *th_postf(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static inline json_t *th_postf(const char *path, const char *fmt, ...)
{
    static char body[1 << 17];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    for (char *p = body; *p; p++)
        if (*p == '`')
            *p = '"';
    th_resp *r = th_post(path, body, NULL);
    ASSERT(r != NULL);
    ASSERT_EQ(r->status, 200);
    if (!r->json)
        FAILF("%s: not JSON: %s", path, r->text);
    return r->json;
}

static inline json_t *th_post_ok(const char *path, const char *body)
{
    json_t *j = th_postf(path, "%s", body);
    if (th_code() != 0)
        FAILF("%s %.300s: %s", path, body, th_last.text);
    return json_object_get(j, "data");
}

static inline void th_expect(const char *path, const char *body, long long code, const char *part)
{
    json_t *j = th_postf(path, "%s", body);
    const char *m = json_string_value(json_object_get(j, "message"));
    if (th_code() != code || !m || !strstr(m, part))
        FAILF("%s %.300s: want %lld \"%s\", got %s", path, body, code, part, th_last.text);
}

#endif /* SX_TEST_HTTP_H */
