/*
 * test_server_json_mem.c: what parsing request bodies may cost (issue 13, finding 6, and the
 * NUL message of finding 8). jansson's DOM of `[0,0,...]` takes about 25 bytes per input byte
 * (a json_t per number, an array slot, malloc's overhead): a 40 MB body cost about 1 GB, three
 * 60 MB bodies at once 2.4 GB. The server now parses under a budget per request
 * (max_json_bytes, default 256 MiB) and one for all requests in flight (max_json_total_bytes,
 * default 512 MiB). Each scenario runs in a child process with an in-process server at the
 * defaults, so the peak is that of a fresh process: VmHWM after a reset through
 * /proc/self/clear_refs, minus VmRSS before the request (the bodies are built before):
 *   (a) one 40 MB insert body of zeros: refused (code 1102, naming --max-json-mb), peak growth
 *       under 400 MB (about 1 GB before);
 *   (b) three 60 MB bodies at once: each refused (1102 or 1807), peak growth under 850 MB (2.4 GB
 * before); (c) a body within the budget still parses (the insert reaches the handler); (d) "\u0000"
 * in a string: the message says so in words, not jansson's flag name. Under AddressSanitizer the
 * RSS bounds are printed, not asserted (its quarantine keeps freed blocks); where clear_refs is not
 * writable they are not asserted either.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sextant.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "http.h"

#if defined(__SANITIZE_ADDRESS__)
# define RSS_MEANINGFUL 0
#else
# define RSS_MEANINGFUL 1
#endif

#define MB 1000000ull

static const char *tmp;

/* An insert body of about `bytes` bytes: one row whose vector is [0,0,...]. */
static char *zeros_body(size_t bytes, size_t *len)
{
    const char *head = "{\"collectionName\":\"jm\",\"data\":[{\"id\":1,\"vector\":[0";
    const char *tail = "]}]}";
    size_t hl = strlen(head), tl = strlen(tail);
    size_t n = (bytes - hl - tl) / 2;
    char *b = malloc(hl + 2 * n + tl + 1);
    if (!b)
        return NULL;
    snprintf(b, hl + 1, "%s", head);
    char *p = b + hl;
    for (size_t i = 0; i < n; i++) {
        p[0] = ',';
        p[1] = '0';
        p += 2;
    }
    memcpy(p, tail, tl + 1);
    *len = (size_t)(p + tl - b);
    return b;
}

typedef struct post_job {
    char url[160];
    const char *body;
    size_t len;
    long long code; /* the answer's Milvus code, -1 if none */
    char msg[256];
} post_job;

static size_t job_write(char *p, size_t sz, size_t nm, void *ud)
{
    char **acc = ud;
    size_t n = sz * nm, have = *acc ? strlen(*acc) : 0;
    if (have > 65536)
        return n;
    char *t = realloc(*acc, have + n + 1);
    if (!t)
        return 0;
    memcpy(t + have, p, n);
    t[have + n] = 0;
    *acc = t;
    return n;
}

static void *post_thread(void *arg)
{
    post_job *j = arg;
    j->code = -1;
    CURL *c = curl_easy_init();
    if (!c)
        return NULL;
    char *resp = NULL;
    struct curl_slist *hl = curl_slist_append(NULL, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, j->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, j->body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->len);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, job_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp);
    if (curl_easy_perform(c) == CURLE_OK && resp) {
        json_t *r = json_loads(resp, 0, NULL);
        json_t *cv = json_object_get(r, "code");
        if (json_is_integer(cv))
            j->code = json_integer_value(cv);
        const char *m = json_string_value(json_object_get(r, "message"));
        snprintf(j->msg, sizeof j->msg, "%s", m ? m : "");
        json_decref(r);
    }
    free(resp);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    return NULL;
}

typedef struct result {
    long long codes[3];
    char msg[256];
    uint64_t growth_kb; /* VmHWM - VmRSS before */
    bool hwm_ok;
} result;

/* In a child: a server at the defaults, `n` bodies of `bytes` each posted at once. */
static void child_run(const char *sub, int n, size_t bytes, int wfd)
{
    result r;
    memset(&r, 0, sizeof r);
    curl_global_init(CURL_GLOBAL_ALL);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", tmp, sub);
    mkdir(dir, 0755);
    sx_server *s = th_server_start(dir, NULL);
    if (!s)
        _exit(3);
    th_post("/v2/vectordb/collections/create", "{\"collectionName\":\"jm\",\"dimension\":4}", NULL);
    post_job jobs[3];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < n; i++) {
        size_t len = 0;
        char *b = zeros_body(bytes, &len);
        if (!b)
            _exit(4);
        snprintf(jobs[i].url, sizeof jobs[i].url, "%s/v2/vectordb/entities/insert", th_base);
        jobs[i].body = b;
        jobs[i].len = len;
    }
    r.hwm_ok = test_reset_hwm();
    uint64_t base = test_vm_kb("VmRSS");
    pthread_t t[3];
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, post_thread, &jobs[i]);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    uint64_t peak = test_vm_kb("VmHWM");
    r.growth_kb = peak > base ? peak - base : 0;
    for (int i = 0; i < n; i++) {
        r.codes[i] = jobs[i].code;
        free((void *)jobs[i].body);
    }
    snprintf(r.msg, sizeof r.msg, "%s", jobs[0].msg);
    th_reset();
    if (sx_server_stop(s) != SX_OK)
        _exit(5);
    curl_global_cleanup();
    if (write(wfd, &r, sizeof r) != (ssize_t)sizeof r)
        _exit(6);
    _exit(0);
}

static result run_child(const char *sub, int n, size_t bytes)
{
    int p[2];
    result r;
    memset(&r, 0, sizeof r);
    if (pipe(p) != 0)
        FAILF("pipe: %s", strerror(errno));
    (void)fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        child_run(sub, n, bytes, p[1]);
    }
    close(p[1]);
    ssize_t got = read(p[0], &r, sizeof r);
    close(p[0]);
    int ws = 0;
    waitpid(pid, &ws, 0);
    if (got != (ssize_t)sizeof r || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        FAILF("child %s failed (status %d)", sub, ws);
    return r;
}

static void test_one_40mb(void)
{
    result r = run_child("one40", 1, 40 * MB);
    printf("  one 40 MB body of zeros: code %lld, peak RSS growth %llu MB\n  message: %s\n",
           r.codes[0], (unsigned long long)(r.growth_kb * 1024 / MB), r.msg);
    ASSERT_EQ(r.codes[0], 1102);
    ASSERT(strstr(r.msg, "--max-json-mb") != NULL);
    if (RSS_MEANINGFUL && r.hwm_ok)
        ASSERT(r.growth_kb * 1024 < 400 * MB);
}

static void test_three_60mb(void)
{
    result r = run_child("three60", 3, 60 * MB);
    printf("  three 60 MB bodies at once: codes %lld %lld %lld, peak RSS growth %llu MB\n",
           r.codes[0], r.codes[1], r.codes[2], (unsigned long long)(r.growth_kb * 1024 / MB));
    for (int i = 0; i < 3; i++)
        ASSERT(r.codes[i] == 1102 || r.codes[i] == 1807);
    if (RSS_MEANINGFUL && r.hwm_ok)
        ASSERT(r.growth_kb * 1024 < 850 * MB);
}

/* A body within the budget parses: a 1 MB body of zeros reaches the insert handler, which
 * refuses the dimension (the collection has dim 4), not the parser. */
static void test_within_budget(void)
{
    result r = run_child("small", 1, 1 * MB);
    printf("  1 MB body: code %lld (%s)\n", r.codes[0], r.msg);
    ASSERT(r.codes[0] != 1102 && r.codes[0] != 1807 && r.codes[0] != 1801 && r.codes[0] != -1);
}

static void test_nul_message(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/nul", tmp);
    mkdir(dir, 0755);
    sx_server *s = th_server_start(dir, NULL);
    ASSERT(s);
    const char body[] = "{\"collectionName\":\"a\\u0000b\"}";
    th_post("/v2/vectordb/collections/describe", body, NULL);
    const char *m = json_string_value(json_object_get(th_last.json, "message"));
    printf("  NUL in a string: %lld %s\n", th_code(), m ? m : "(none)");
    ASSERT_EQ(th_code(), 1801);
    ASSERT(m && strstr(m, "strings must not contain NUL") != NULL);
    ASSERT(strstr(m, "JSON_ALLOW_NUL") == NULL);
    th_reset();
    ASSERT_OK(sx_server_stop(s));
}

int main(void)
{
    tmp = test_tmpdir("server_json_mem");
    RUN(test_one_40mb);
    RUN(test_three_60mb);
    RUN(test_within_budget);
    curl_global_init(CURL_GLOBAL_ALL);
    RUN(test_nul_message);
    th_reset();
    curl_global_cleanup();
    return TEST_DONE();
}
