/*
 * test_s3.c: the S3 client (storage/s3.c) against s3rver (tests/harness/s3rver.h), directly and
 * through the fault-injecting proxy (tests/harness/faultproxy.h). Skipped (77) without node or
 * without tests/e2e/node/node_modules.
 *
 * Clients: `S` talks to s3rver directly; `P` goes through the proxy with a 1 s timeout and 6
 * retries; more are built per test. Data is checked byte for byte; the proxy also checks every
 * x-amz-content-sha256 against the payload it carries (sha_bad must stay 0).
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "faultproxy.h"
#include "harness.h"
#include "s3rver.h"
#include "storage/s3.h"
#include "util/alloc.h"

#define BUCKET "sxtest"

static th_s3rver srv;
static faultproxy fp;
static char proxy_ep[64];
static sx__s3 *S, *P;
static const char *tmp;
static uint64_t seed;

static sx__s3 *
client(const char *endpoint, const char *secret, uint32_t timeout_ms, uint32_t retries)
{
    sx__s3_config c;
    memset(&c, 0, sizeof c);
    c.endpoint = endpoint;
    c.bucket = BUCKET;
    c.access_key = TH_S3RVER_ACCESS;
    c.secret_key = secret;
    c.timeout_ms = timeout_ms;
    c.max_retries = retries;
    c.multipart_threshold = 8u << 20;
    c.part_size = 5u << 20;
    c.parallel_parts = 4;
    sx__s3 *s = NULL;
    sx_status st = sx__s3_new(&c, &s);
    if (st != SX_OK) {
        fprintf(stderr, "sx__s3_new: %s\n", sx_errmsg());
        exit(1);
    }
    return s;
}

static uint8_t *rand_bytes(size_t n, uint64_t *rs)
{
    uint8_t *p = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t r = test_rand(rs);
        memcpy(p + i, &r, n - i < 8 ? n - i : 8);
    }
    return p;
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    long sz = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    uint8_t *p = sz >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)sz + 1) : NULL;
    if (p)
        *n = fread(p, 1, (size_t)sz, f);
    (void)fclose(f); /* read only: nothing to lose */
    return p;
}

static void check_object(sx__s3 *s, const char *key, const void *want, size_t n)
{
    void *got = NULL;
    size_t gn = 0;
    ASSERT_OK(sx__s3_get(s, key, 0, 0, &got, &gn));
    ASSERT_EQ(gn, n);
    ASSERT(memcmp(got, want, n) == 0);
    sx__free(got);
}

static long fault_count(fp_kind k)
{
    fp_lock(&fp);
    long n = fp.faults[k];
    fp_unlock(&fp);
    return n;
}

/* ------------------------------------------------------------------ direct */

static void test_bucket_and_small(void)
{
    ASSERT_OK(sx__s3_create_bucket(S)); /* again: already ours */
    const char msg[] = "hello, object store";
    ASSERT_OK(sx__s3_put(S, "small/hello.txt", msg, sizeof msg - 1));
    check_object(S, "small/hello.txt", msg, sizeof msg - 1);
    void *p = NULL;
    size_t n = 0;
    ASSERT_OK(sx__s3_get(S, "small/hello.txt", 7, 6, &p, &n));
    ASSERT_EQ(n, 6);
    ASSERT(memcmp(p, "object", 6) == 0);
    sx__free(p);
    ASSERT_OK(sx__s3_get(S, "small/hello.txt", 14, 0, &p, &n)); /* to the end */
    ASSERT_EQ(n, 5);
    ASSERT(memcmp(p, "store", 5) == 0);
    sx__free(p);
    char b[5];
    ASSERT_OK(sx__s3_get_range(S, "small/hello.txt", 0, 5, b));
    ASSERT(memcmp(b, "hello", 5) == 0);
    ASSERT_STATUS(sx__s3_get_range(S, "small/hello.txt", 15, 10, b), SX_EREMOTE); /* past end */
    uint64_t size = 0;
    ASSERT_OK(sx__s3_head(S, "small/hello.txt", &size));
    ASSERT_EQ(size, sizeof msg - 1);
    ASSERT_STATUS(sx__s3_head(S, "small/missing", &size), SX_ENOTFOUND);
    ASSERT_STATUS(sx__s3_get(S, "small/missing", 0, 0, &p, &n), SX_ENOTFOUND);
    ASSERT(strstr(sx_errmsg(), "small/missing") != NULL);
    /* empty object */
    ASSERT_OK(sx__s3_put(S, "small/empty", "", 0));
    ASSERT_OK(sx__s3_head(S, "small/empty", &size));
    ASSERT_EQ(size, 0);
    ASSERT_OK(sx__s3_get(S, "small/empty", 0, 0, &p, &n));
    ASSERT_EQ(n, 0);
    sx__free(p);
    /* a key that needs URI encoding (space, +, =, %, ~, unicode). Not '&' or '<': s3rver escapes
     * them twice in listings (its bug; AWS escapes once). */
    const char *odd = "small/dir x/a b+c=d%e,f~g\xc3\xa9!.bin";
    ASSERT_OK(sx__s3_put(S, odd, msg, 5));
    check_object(S, odd, msg, 5);
    char **keys = NULL;
    uint64_t *sizes = NULL;
    size_t nk = 0;
    ASSERT_OK(sx__s3_list(S, "small/dir x/", &keys, &sizes, &nk));
    ASSERT_EQ(nk, 1);
    if (strcmp(keys[0], odd) != 0)
        FAILF("listed key '%s', want '%s'", keys[0], odd);
    ASSERT_EQ(sizes[0], 5);
    sx_strings_free(keys, nk);
    sx__free(sizes);
    ASSERT_OK(sx__s3_delete(S, odd));
    ASSERT_STATUS(sx__s3_head(S, odd, &size), SX_ENOTFOUND);
    ASSERT_OK(sx__s3_delete(S, odd)); /* absent: success */
}

static void test_multipart_40mib(void)
{
    uint64_t rs = seed ^ 0x40;
    size_t n = 40u << 20;
    uint8_t *data = rand_bytes(n, &rs);
    char src[600], dst[600];
    snprintf(src, sizeof src, "%s/big.bin", tmp);
    snprintf(dst, sizeof dst, "%s/big.back", tmp);
    write_file(src, data, n);
    sx__s3_stats before, after;
    sx__s3_stats_get(S, &before);
    sx_io_profile prof0, prof1;
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_BUILD);
    sx_io_profile_get(&prof0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ASSERT_OK(sx__s3_put_file(S, "mp/big.bin", src));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sx_io_profile_get(&prof1);
    sx_io_phase_set(prev);
    sx__s3_stats_get(S, &after);
    double up_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    ASSERT_EQ(after.multipart_parts - before.multipart_parts, 8); /* 40 MiB / 5 MiB */
    /* the object plus the CompleteMultipartUpload XML */
    ASSERT(after.bytes_up - before.bytes_up >= n && after.bytes_up - before.bytes_up < n + 4096);
    /* parts run on worker threads, attributed to the caller's phase */
    const sx_io_counter *c0 = &prof0.c[SX_IO_PHASE_BUILD][1], *c1 = &prof1.c[SX_IO_PHASE_BUILD][1];
    ASSERT_EQ(c1->write_bytes - c0->write_bytes, after.bytes_up - before.bytes_up);
    ASSERT(c1->write_ops - c0->write_ops >= 10); /* create + 8 parts + complete */
    uint64_t size = 0;
    ASSERT_OK(sx__s3_head(S, "mp/big.bin", &size));
    ASSERT_EQ(size, n);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ASSERT_OK(sx__s3_get_file(S, "mp/big.bin", dst));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double down_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    size_t bn = 0;
    uint8_t *back = read_file(dst, &bn);
    ASSERT(back != NULL);
    ASSERT_EQ(bn, n);
    ASSERT(memcmp(back, data, n) == 0);
    free(back);
    char tmpf[700];
    snprintf(tmpf, sizeof tmpf, "%s.tmp", dst);
    ASSERT(access(tmpf, F_OK) != 0);
    fprintf(stderr, "  multipart 40 MiB: put %.2f s (%.0f MB/s), get_file %.2f s (%.0f MB/s)\n",
            up_s, (double)n / up_s / 1e6, down_s, (double)n / down_s / 1e6);
    /* ranged reads at random offsets, some across part boundaries */
    uint8_t *buf = malloc(1u << 20);
    for (int i = 0; i < 24; i++) {
        size_t len = 1 + (size_t)(test_rand(&rs) % (1u << 20));
        uint64_t off = test_rand(&rs) % (n - len);
        if (i < 4) /* straddle the boundary between parts i+1 and i+2 */
            off = (uint64_t)(i + 1) * (5u << 20) - len / 2;
        ASSERT_OK(sx__s3_get_range(S, "mp/big.bin", off, len, buf));
        ASSERT(memcmp(buf, data + off, len) == 0);
    }
    free(buf);
    void *tail = NULL;
    size_t tn = 0;
    ASSERT_OK(sx__s3_get(S, "mp/big.bin", n - 12345, 0, &tail, &tn));
    ASSERT_EQ(tn, 12345);
    ASSERT(memcmp(tail, data + n - 12345, tn) == 0);
    sx__free(tail);
    /* below the threshold: one PUT */
    sx__s3_stats_get(S, &before);
    write_file(src, data, 3u << 20);
    ASSERT_OK(sx__s3_put_file(S, "mp/small.bin", src));
    sx__s3_stats_get(S, &after);
    ASSERT_EQ(after.multipart_parts - before.multipart_parts, 0);
    ASSERT_EQ(after.puts - before.puts, 1);
    check_object(S, "mp/small.bin", data, 3u << 20);
    free(data);
    unlink(src);
    unlink(dst);
}

typedef struct put_range {
    int from, to;
    int errors;
} put_range;

static void *put_keys(void *arg)
{
    put_range *r = arg;
    for (int i = r->from; i < r->to; i++) {
        char k[64], v[64];
        snprintf(k, sizeof k, "page/k%05d", i);
        int n = snprintf(v, sizeof v, "value %d", i);
        if (sx__s3_put(S, k, v, (size_t)n) != SX_OK)
            r->errors++;
    }
    return NULL;
}

static void test_list_pagination(void)
{
    enum { N = 1200, T = 4 };

    pthread_t th[T];
    put_range r[T];
    for (int t = 0; t < T; t++) {
        r[t] = (put_range){ t * N / T, (t + 1) * N / T, 0 };
        pthread_create(&th[t], NULL, put_keys, &r[t]);
    }
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        ASSERT_EQ(r[t].errors, 0);
    }
    sx__s3_stats before, after;
    sx__s3_stats_get(S, &before);
    char **keys = NULL;
    uint64_t *sizes = NULL;
    size_t n = 0;
    sx_status lst = sx__s3_list(S, "page/", &keys, &sizes, &n);
    if (lst != SX_OK) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "tail -40 '%s' >&2", srv.log);
        if (system(cmd) != 0)
            fprintf(stderr, "no log\n");
    }
    ASSERT_OK(lst);
    sx__s3_stats_get(S, &after);
    ASSERT_EQ(after.lists - before.lists, 2); /* 1000 + 200 */
    ASSERT_EQ(n, N);
    for (size_t i = 0; i < n; i++) {
        char k[64], v[64];
        snprintf(k, sizeof k, "page/k%05zu", i);
        ASSERT(strcmp(keys[i], k) == 0);
        ASSERT_EQ(sizes[i], (uint64_t)snprintf(v, sizeof v, "value %zu", i));
    }
    sx_strings_free(keys, n);
    sx__free(sizes);
    /* delete 201 of them (every sixth), list again */
    size_t deleted = 0;
    for (int i = 0; i < N; i += 6) {
        char k[64];
        snprintf(k, sizeof k, "page/k%05d", i);
        ASSERT_OK(sx__s3_delete(S, k));
        deleted++;
    }
    ASSERT_OK(sx__s3_list(S, "page/", &keys, NULL, &n));
    ASSERT_EQ(n, N - deleted);
    for (size_t i = 0; i < n; i++) {
        ASSERT(strtol(keys[i] + 6, NULL, 10) % 6 != 0);
        if (i)
            ASSERT(strcmp(keys[i - 1], keys[i]) < 0);
    }
    sx_strings_free(keys, n);
    ASSERT_OK(sx__s3_list(S, "page/nothing-here", &keys, NULL, &n));
    ASSERT_EQ(n, 0);
    sx_strings_free(keys, n);
}

static void test_wrong_secret(void)
{
    sx__s3 *bad = client(srv.endpoint, "WRONG-SECRET", 5000, 3);
    sx__s3_stats st;
    ASSERT_STATUS(sx__s3_put(bad, "small/denied", "x", 1), SX_EREMOTE);
    const char *m = sx_errmsg();
    fprintf(stderr, "  wrong secret: %s\n", m);
    ASSERT(strstr(m, "403") != NULL);
    ASSERT(strstr(m, "SignatureDoesNotMatch") != NULL);
    ASSERT(strstr(m, "WRONG-SECRET") == NULL); /* never log secrets */
    sx__s3_stats_get(bad, &st);
    ASSERT_EQ(st.retries, 0); /* 403 is final */
    ASSERT_EQ(st.failures, 1);
    uint64_t size;
    ASSERT_STATUS(sx__s3_head(bad, "small/hello.txt", &size), SX_EREMOTE);
    sx__s3_free(bad);
}

static void test_credentials(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/credentials", tmp);
    const char *ini = "# test\n[other]\naws_access_key_id = NOPE\naws_secret_access_key = NOPE\n"
                      "\n[default]\naws_access_key_id = S3RVER\naws_secret_access_key=S3RVER\n";
    write_file(path, ini, strlen(ini));
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_PROFILE");
    setenv("SEXTANT_S3_CREDENTIALS", path, 1);
    sx__s3_config c;
    memset(&c, 0, sizeof c);
    c.endpoint = srv.endpoint;
    c.bucket = BUCKET;
    sx__s3 *s = NULL;
    ASSERT_OK(sx__s3_new(&c, &s));
    ASSERT_OK(sx__s3_put(s, "small/creds", "ok", 2));
    sx__s3_free(s);
    setenv("AWS_PROFILE", "other", 1); /* the wrong pair: refused by the server */
    ASSERT_OK(sx__s3_new(&c, &s));
    ASSERT_STATUS(sx__s3_put(s, "small/creds", "ok", 2), SX_EREMOTE);
    sx__s3_free(s);
    unsetenv("AWS_PROFILE");
    setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1); /* environment first */
    setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
    setenv("SEXTANT_S3_CREDENTIALS", "/nonexistent", 1);
    ASSERT_OK(sx__s3_new(&c, &s));
    ASSERT_OK(sx__s3_put(s, "small/creds", "ok", 2));
    sx__s3_free(s);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    ASSERT_STATUS(sx__s3_new(&c, &s), SX_EINVAL);
    unsetenv("SEXTANT_S3_CREDENTIALS");
    c.bucket = NULL;
    ASSERT_STATUS(sx__s3_new(&c, &s), SX_EINVAL);
}

/* ------------------------------------------------------------------ through the proxy */

static const fp_kind transient[] = { FP_500,  FP_503,           FP_SLOWDOWN, FP_RESET,
                                     FP_LOST, FP_RESET_MIDBODY, FP_TRUNCATE, FP_STALL };
#define N_TRANSIENT (sizeof transient / sizeof transient[0])

static void test_connection_reuse(void)
{
    fp_clear(&fp);
    fp_lock(&fp);
    long c0 = fp.connections;
    fp_unlock(&fp);
    for (int i = 0; i < 30; i++) {
        uint64_t size;
        ASSERT_OK(sx__s3_head(P, "small/hello.txt", &size));
    }
    fp_lock(&fp);
    long used = fp.connections - c0;
    fp_unlock(&fp);
    fprintf(stderr, "  30 sequential requests used %ld new connection(s)\n", used);
    ASSERT(used <= 2);
}

/* Each transient fault once on a single PUT, GET, ranged GET, HEAD and LIST: the operation retries
 * and succeeds with exact data. */
static void test_faults_simple_ops(void)
{
    uint64_t rs = seed ^ 0x51;
    size_t n = 300000;
    uint8_t *data = rand_bytes(n, &rs);
    ASSERT_OK(sx__s3_put(S, "fault/obj", data, n));
    for (size_t i = 0; i < N_TRANSIENT; i++) {
        fp_kind k = transient[i];
        char key[64];
        snprintf(key, sizeof key, "fault/put-%s", fp_kind_name[k]);
        sx__s3_stats b, a;
        sx__s3_stats_get(P, &b);
        long f0 = fault_count(k);
        /* PUT */
        fp_clear(&fp);
        fp_filter(&fp, "PUT", "/fault/put-");
        fp_push(&fp, k, 1);
        ASSERT_OK(sx__s3_put(P, key, data, n));
        ASSERT_EQ(fault_count(k) - f0, 1);
        check_object(S, key, data, n);
        /* GET (whole object) */
        fp_clear(&fp);
        fp_filter(&fp, "GET", "/fault/obj");
        fp_push(&fp, k, 1);
        check_object(P, "fault/obj", data, n);
        ASSERT_EQ(fault_count(k) - f0, 2);
        /* ranged GET */
        fp_push(&fp, k, 1);
        uint8_t buf[70000];
        ASSERT_OK(sx__s3_get_range(P, "fault/obj", 12345, sizeof buf, buf));
        ASSERT(memcmp(buf, data + 12345, sizeof buf) == 0);
        ASSERT_EQ(fault_count(k) - f0, 3);
        /* HEAD */
        fp_clear(&fp);
        fp_filter(&fp, "HEAD", "/fault/obj");
        fp_push(&fp, k, 1);
        uint64_t size = 0;
        ASSERT_OK(sx__s3_head(P, "fault/obj", &size));
        ASSERT_EQ(size, n);
        ASSERT_EQ(fault_count(k) - f0, 4);
        /* LIST */
        fp_clear(&fp);
        fp_filter(&fp, "GET", "list-type=2");
        fp_push(&fp, k, 1);
        char **keys = NULL;
        size_t nk = 0;
        ASSERT_OK(sx__s3_list(P, "fault/put-", &keys, NULL, &nk));
        ASSERT_EQ(nk, i + 1);
        sx_strings_free(keys, nk);
        ASSERT_EQ(fault_count(k) - f0, 5);
        /* DELETE */
        fp_clear(&fp);
        fp_push(&fp, k, 1);
        char key2[64];
        snprintf(key2, sizeof key2, "fault/del-%s", fp_kind_name[k]);
        ASSERT_OK(sx__s3_put(S, key2, "x", 1));
        fp_filter(&fp, "DELETE", "/fault/del-");
        ASSERT_OK(sx__s3_delete(P, key2));
        ASSERT_STATUS(sx__s3_head(S, key2, &size), SX_ENOTFOUND);
        ASSERT_EQ(fault_count(k) - f0, 6);
        sx__s3_stats_get(P, &a);
        fprintf(stderr,
                "  %-13s on PUT/GET/range/HEAD/LIST/DELETE: 6 injected, %" PRIu64
                " client retries\n",
                fp_kind_name[k], a.retries - b.retries);
        /* A reset or lost response on a reused connection, before any byte came back, is
         * resent by libcurl itself; every other kind goes through the client's retry. */
        if (k != FP_RESET && k != FP_LOST)
            ASSERT(a.retries - b.retries >= 6);
        ASSERT_EQ(a.failures, b.failures);
    }
    fp_clear(&fp);
    free(data);
}

/* Each transient fault on two multipart parts, and on Create / Complete. */
static void test_faults_multipart(void)
{
    uint64_t rs = seed ^ 0x52;
    size_t n = (12u << 20) + 777; /* 3 parts: 5 + 5 + 2 MiB */
    uint8_t *data = rand_bytes(n, &rs);
    char src[600];
    snprintf(src, sizeof src, "%s/mp12.bin", tmp);
    write_file(src, data, n);
    for (size_t i = 0; i < N_TRANSIENT; i++) {
        fp_kind k = transient[i];
        char key[64];
        snprintf(key, sizeof key, "fault/mp-%s", fp_kind_name[k]);
        long f0 = fault_count(k);
        sx__s3_stats b, a;
        sx__s3_stats_get(P, &b);
        fp_clear(&fp);
        fp_filter(&fp, "PUT", "partNumber=");
        fp_push(&fp, k, 2);
        ASSERT_OK(sx__s3_put_file(P, key, src));
        ASSERT_EQ(fault_count(k) - f0, 2);
        sx__s3_stats_get(P, &a);
        ASSERT_EQ(a.multipart_parts - b.multipart_parts, 3);
        fprintf(stderr, "  %-13s on 2 of 3 parts: %" PRIu64 " client retries\n", fp_kind_name[k],
                a.retries - b.retries);
        if (k != FP_RESET && k != FP_LOST && a.retries - b.retries < 2)
            FAILF("%s: %" PRIu64 " retries", fp_kind_name[k], a.retries - b.retries);
        check_object(S, key, data, n);
    }
    /* CreateMultipartUpload and CompleteMultipartUpload. A Complete whose response is lost or
     * truncated was carried out (the proxy forwarded it): the upload is then gone and s3rver
     * answers any further Complete with 500, so the client must find the object with a HEAD
     * instead of retrying. At most 2 Completes go out (libcurl itself may resend a request
     * that died on a reused connection) and no failure is counted; retrying blindly sent 7
     * (1 + 6 retries) and counted one. */
    const fp_kind on_post[] = { FP_500, FP_SLOWDOWN, FP_RESET, FP_TRUNCATE, FP_LOST };
    for (size_t i = 0; i < sizeof on_post / sizeof on_post[0]; i++) {
        fp_kind k = on_post[i];
        for (int which = 0; which < 2; which++) {
            char key[64], target[96];
            snprintf(key, sizeof key, "fault/mpc-%s-%d", fp_kind_name[k], which);
            snprintf(target, sizeof target, "/%s?uploadId=", key);
            long f0 = fault_count(k), c0 = fp_count(&fp, "POST ", target);
            sx__s3_stats b, a;
            sx__s3_stats_get(P, &b);
            fp_clear(&fp);
            fp_filter(&fp, "POST", which ? "uploadId=" : "uploads=");
            fp_push(&fp, k, 1);
            sx_status st = sx__s3_put_file(P, key, src);
            if (st != SX_OK)
                FAILF("%s on %s: %s", fp_kind_name[k], which ? "Complete" : "Create", sx_errmsg());
            ASSERT_EQ(fault_count(k) - f0, 1);
            sx__s3_stats_get(P, &a);
            long completes = fp_count(&fp, "POST ", target) - c0;
            if (which)
                fprintf(stderr,
                        "  %-13s on Complete: %ld Complete request(s), %" PRIu64
                        " client retries\n",
                        fp_kind_name[k], completes, a.retries - b.retries);
            ASSERT(completes >= 1 && completes <= 2);
            ASSERT_EQ(a.failures - b.failures, 0);
            check_object(S, key, data, n);
        }
    }
    /* Complete answers 200 with an <Error> body: a failure, retried */
    fp_clear(&fp);
    fp_add_rule(&fp, "POST", "uploadId=", 200,
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InternalError</Code>"
                "<Message>We encountered an internal error. Please try again.</Message></Error>",
                1);
    ASSERT_OK(sx__s3_put_file(P, "fault/mp-200error", src));
    fp_lock(&fp);
    ASSERT_EQ(fp.rules[0].hits, 1);
    fp_unlock(&fp);
    check_object(S, "fault/mp-200error", data, n);
    /* ... and a non-retryable one fails the upload, which is then aborted */
    fp_clear(&fp);
    fp_add_rule(&fp, "POST", "uploadId=", 200,
                "<Error><Code>InvalidPart</Code><Message>One or more of the specified parts "
                "could not be found.</Message></Error>",
                1);
    long aborts0 = fp_count(&fp, "DELETE", "uploadId=");
    ASSERT_STATUS(sx__s3_put_file(P, "fault/mp-invalidpart", src), SX_EREMOTE);
    ASSERT(strstr(sx_errmsg(), "InvalidPart") != NULL);
    ASSERT_EQ(fp_count(&fp, "DELETE", "uploadId=") - aborts0, 1);
    fp_clear(&fp);
    free(data);
    unlink(src);
}

static void test_persistent_faults(void)
{
    sx__s3 *q = client(proxy_ep, TH_S3RVER_SECRET, 1000, 3);

    struct {
        fp_kind k;
        const char *want;
    } cases[] = { { FP_500, "HTTP 500 InternalError" },
                  { FP_503, "HTTP 503 ServiceUnavailable" },
                  { FP_SLOWDOWN, "HTTP 503 SlowDown" },
                  { FP_RESET, "(4 attempts)" },
                  { FP_TRUNCATE, "(4 attempts)" } };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fp_clear(&fp);
        fp_filter(&fp, "GET", "/fault/obj");
        fp_set_persistent(&fp, cases[i].k);
        long f0 = fault_count(cases[i].k);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        void *p = NULL;
        size_t n = 0;
        ASSERT_STATUS(sx__s3_get(q, "fault/obj", 0, 0, &p, &n), SX_EREMOTE);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        const char *m = sx_errmsg();
        fprintf(stderr, "  persistent %s: %.2f s: %s\n", fp_kind_name[cases[i].k], s, m);
        ASSERT(strstr(m, cases[i].want) != NULL);
        ASSERT(strstr(m, "fault/obj") != NULL);
        ASSERT(strstr(m, "4 attempts") != NULL);
        /* 1 + max_retries attempts; libcurl may resend once more itself after a reset */
        ASSERT(fault_count(cases[i].k) - f0 >= 4 && fault_count(cases[i].k) - f0 <= 8);
        /* backoff <= 100+200+400 ms plus the attempts; generous: CI machines are loaded */
        ASSERT(s < 15.0);
    }
    /* a persistent 500 on multipart parts: put_file fails and aborts its upload */
    uint64_t rs = seed ^ 0x53;
    size_t n = 11u << 20;
    uint8_t *data = rand_bytes(n, &rs);
    char src[600];
    snprintf(src, sizeof src, "%s/mp11.bin", tmp);
    write_file(src, data, n);
    fp_clear(&fp);
    fp_filter(&fp, "PUT", "partNumber=");
    fp_set_persistent(&fp, FP_500);
    long aborts0 = fp_count(&fp, "DELETE", "uploadId=");
    ASSERT_STATUS(sx__s3_put_file(q, "fault/mp-fail", src), SX_EREMOTE);
    fprintf(stderr, "  persistent 500 on parts: %s\n", sx_errmsg());
    ASSERT(strstr(sx_errmsg(), "UploadPart") != NULL);
    ASSERT(strstr(sx_errmsg(), "HTTP 500") != NULL);
    ASSERT_EQ(fp_count(&fp, "DELETE", "uploadId=") - aborts0, 1);
    uint64_t size;
    ASSERT_STATUS(sx__s3_head(S, "fault/mp-fail", &size), SX_ENOTFOUND);
    /* a persistent 500 on CompleteMultipartUpload (answered by the proxy: s3rver never sees a
     * Complete): each of the 4 attempts has an unknown outcome and is followed by a HEAD that
     * finds no object; then put_file fails and aborts the upload */
    const char *mc = "/fault/mp-complete-fail?uploadId=";
    fp_clear(&fp);
    fp_filter(&fp, "POST", mc);
    fp_set_persistent(&fp, FP_500);
    long c0 = fp_count(&fp, "POST ", mc), h0 = fp_count(&fp, "HEAD ", "/fault/mp-complete-fail");
    aborts0 = fp_count(&fp, "DELETE", "uploadId=");
    ASSERT_STATUS(sx__s3_put_file(q, "fault/mp-complete-fail", src), SX_EREMOTE);
    fprintf(stderr, "  persistent 500 on Complete: %s\n", sx_errmsg());
    ASSERT(strstr(sx_errmsg(), "CompleteMultipartUpload") != NULL);
    ASSERT(strstr(sx_errmsg(), "HTTP 500 InternalError") != NULL);
    ASSERT(strstr(sx_errmsg(), "(4 attempts)") != NULL);
    ASSERT(strstr(sx_errmsg(), "a HEAD did not find the uploaded object") != NULL);
    ASSERT_EQ(fp_count(&fp, "POST ", mc) - c0, 4);
    ASSERT_EQ(fp_count(&fp, "HEAD ", "/fault/mp-complete-fail") - h0, 4);
    ASSERT_EQ(fp_count(&fp, "DELETE", "uploadId=") - aborts0, 1);
    ASSERT_STATUS(sx__s3_head(S, "fault/mp-complete-fail", &size), SX_ENOTFOUND);
    /* not retried: 403 / 404 */
    fp_clear(&fp);
    sx__s3_stats b, a;
    sx__s3_stats_get(q, &b);
    ASSERT_STATUS(sx__s3_head(q, "fault/none", &size), SX_ENOTFOUND);
    sx__s3_stats_get(q, &a);
    ASSERT_EQ(a.retries, b.retries);
    fp_clear(&fp);
    sx__s3_free(q);
    free(data);
    unlink(src);
}

static void test_stall_timeout(void)
{
    /* one stall (3 s) longer than the timeout (1 s): the retry succeeds (covered above); here
     * every attempt stalls: SX_ETIMEDOUT */
    sx__s3 *q = client(proxy_ep, TH_S3RVER_SECRET, 500, 1);
    fp_clear(&fp);
    fp_lock(&fp);
    fp.stall_ms = 2500;
    fp_unlock(&fp);
    fp_filter(&fp, "GET", "/fault/obj");
    fp_set_persistent(&fp, FP_STALL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    void *p = NULL;
    size_t n = 0;
    ASSERT_STATUS(sx__s3_get(q, "fault/obj", 0, 0, &p, &n), SX_ETIMEDOUT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    fprintf(stderr, "  persistent stall: %.2f s: %s\n", s, sx_errmsg());
    ASSERT(s < 20.0); /* 2 attempts x 1 s timeout + backoff; generous for loaded CI machines */
    char buf[100];
    ASSERT_STATUS(sx__s3_get_range(q, "fault/obj", 10, sizeof buf, buf), SX_ETIMEDOUT);
    fp_clear(&fp);
    fp_lock(&fp);
    fp.stall_ms = 3000;
    fp_unlock(&fp);
    sx__s3_free(q);
}

/* get_file that fails leaves the old file alone and no .tmp behind */
static void test_get_file_atomic(void)
{
    char dst[600], tmpf[700];
    snprintf(dst, sizeof dst, "%s/keep.txt", tmp);
    snprintf(tmpf, sizeof tmpf, "%s.tmp", dst);
    write_file(dst, "old", 3);
    sx__s3 *q = client(proxy_ep, TH_S3RVER_SECRET, 1000, 2);
    fp_clear(&fp);
    fp_filter(&fp, "GET", "/fault/obj");
    fp_set_persistent(&fp, FP_TRUNCATE);
    ASSERT_STATUS(sx__s3_get_file(q, "fault/obj", dst), SX_EREMOTE);
    size_t n = 0;
    uint8_t *p = read_file(dst, &n);
    ASSERT(p != NULL);
    ASSERT_EQ(n, 3);
    ASSERT(memcmp(p, "old", 3) == 0);
    free(p);
    ASSERT(access(tmpf, F_OK) != 0);
    /* one truncation, then success: the retry restarts the file */
    fp_set_persistent(&fp, FP_PASS);
    fp_push(&fp, FP_TRUNCATE, 1);
    ASSERT_OK(sx__s3_get_file(q, "fault/obj", dst));
    void *want = NULL;
    size_t wn = 0;
    ASSERT_OK(sx__s3_get(S, "fault/obj", 0, 0, &want, &wn));
    p = read_file(dst, &n);
    ASSERT(p != NULL);
    ASSERT_EQ(n, wn);
    ASSERT(memcmp(p, want, n) == 0);
    free(p);
    sx__free(want);
    ASSERT_STATUS(sx__s3_get_file(q, "fault/absent", dst), SX_ENOTFOUND);
    ASSERT(access(tmpf, F_OK) != 0);
    fp_clear(&fp);
    sx__s3_free(q);
}

/* ListMultipartUploads / AbortMultipartUpload: s3rver implements neither, so the proxy answers
 * them (canned), and the test checks what the client sent. */
static void test_abort_orphans(void)
{
    fp_clear(&fp);
    const char *page2 = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListMultipartUploadsResult "
                        "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>sxtest</Bucket>"
                        "<KeyMarker>orph/b</KeyMarker><UploadIdMarker>old2</UploadIdMarker>"
                        "<IsTruncated>false</IsTruncated>"
                        "<Upload><Key>orph/c</Key><UploadId>old3</UploadId>"
                        "<Initiated>2021-01-02T03:04:05.000Z</Initiated></Upload>"
                        "</ListMultipartUploadsResult>";
    char page1[2048];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char recent[64];
    size_t recent_len = strftime(recent, sizeof recent, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
    ASSERT(recent_len > 0);
    snprintf(page1, sizeof page1,
             "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListMultipartUploadsResult "
             "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>sxtest</Bucket>"
             "<Prefix>orph/</Prefix><NextKeyMarker>orph/b</NextKeyMarker>"
             "<NextUploadIdMarker>old2</NextUploadIdMarker><IsTruncated>true</IsTruncated>"
             "<Upload><Key>orph/a b</Key><UploadId>old1</UploadId>"
             "<Initiated>2020-05-06T07:08:09.000Z</Initiated></Upload>"
             "<Upload><Key>orph/b</Key><UploadId>new1</UploadId><Initiated>%s</Initiated>"
             "</Upload>"
             "<Upload><Key>orph/b</Key><UploadId>old2</UploadId>"
             "<Initiated>2020-05-06T07:08:09.000Z</Initiated></Upload>"
             "</ListMultipartUploadsResult>",
             recent);
    fp_add_rule(&fp, "GET", "upload-id-marker=old2", 200, page2, -1);
    fp_add_rule(&fp, "GET", "uploads=", 200, page1, -1);
    fp_add_rule(&fp, "DELETE", "uploadId=", 204, "", -1);
    long d0 = fp_count(&fp, "DELETE", NULL);
    size_t n = 0;
    ASSERT_OK(sx__s3_abort_orphans(P, "orph/", 3600, &n));
    ASSERT_EQ(n, 3);
    ASSERT_EQ(fp_count(&fp, "DELETE", NULL) - d0, 3);
    ASSERT_EQ(fp_count(&fp, "DELETE /sxtest/orph/a%20b?uploadId=old1", NULL), 1);
    ASSERT_EQ(fp_count(&fp, "DELETE /sxtest/orph/b?uploadId=old2", NULL), 1);
    ASSERT_EQ(fp_count(&fp, "DELETE /sxtest/orph/c?uploadId=old3", NULL), 1);
    ASSERT_EQ(fp_count(&fp, "uploadId=new1", NULL), 0); /* too recent */
    ASSERT_EQ(fp_count(&fp, "GET /sxtest?prefix=orph%2F&uploads=", NULL), 1);
    ASSERT_EQ(fp_count(&fp,
                       "GET /sxtest?key-marker=orph%2Fb&prefix=orph%2F&upload-id-marker=old2"
                       "&uploads=",
                       NULL),
              1);
    /* older_than 0: the recent one too */
    ASSERT_OK(sx__s3_abort_orphans(P, "orph/", 0, &n));
    ASSERT_EQ(n, 4);
    /* a list error is reported */
    fp_clear(&fp);
    fp_add_rule(&fp, "GET", "uploads=", 501,
                "<Error><Code>NotImplemented</Code><Message>nope</Message></Error>", -1);
    ASSERT_STATUS(sx__s3_abort_orphans(P, "orph/", 0, &n), SX_EREMOTE);
    ASSERT(strstr(sx_errmsg(), "NotImplemented") != NULL);
    fp_clear(&fp);
    /* s3rver itself: the initiation works (signed "?uploads="), listing is not implemented */
}

/* Random faults of every kind but stalls on 20% of requests: everything still succeeds. */
static void test_random_faults(void)
{
    sx__s3 *q = client(proxy_ep, TH_S3RVER_SECRET, 1000, 12);
    uint64_t rs = seed ^ 0x54;
    fp_clear(&fp);
    unsigned mask = 0;
    for (int k = FP_500; k <= FP_TRUNCATE; k++)
        mask |= 1u << k;
    fp_set_random(&fp, 0.2, mask, seed | 1);
    /* q makes up to 13 attempts per request (1 + max_retries 12) and the proxy injects at most
     * 3 random faults in a row per request (method + target; the cap came after
     * SX_SEED=1796190298, where one request drew 4), so random faults alone cannot exhaust a
     * request: a failure is a client bug. A Complete whose response is lost has still
     * completed the upload and every later Complete fails at s3rver (500), so the client
     * settles it with a HEAD (s3.c, invariant 5); retrying it blindly failed
     * SX_SEED=1796193625. */
    fp_set_random_max_run(&fp, 3);
    long f0 = fp_faults_total(&fp);
    size_t n = 200000;
    uint8_t *data = rand_bytes(n, &rs);
    for (int i = 0; i < 20; i++) {
        char key[64];
        snprintf(key, sizeof key, "rand/o%02d", i);
        ASSERT_OK(sx__s3_put(q, key, data + i, n - (size_t)i));
        uint8_t buf[5000];
        ASSERT_OK(sx__s3_get_range(q, key, 1000, sizeof buf, buf));
        ASSERT(memcmp(buf, data + i + 1000, sizeof buf) == 0);
        check_object(q, key, data + i, n - (size_t)i);
    }
    char **keys = NULL;
    size_t nk = 0;
    ASSERT_OK(sx__s3_list(q, "rand/", &keys, NULL, &nk));
    ASSERT_EQ(nk, 20);
    sx_strings_free(keys, nk);
    size_t big = 11u << 20;
    uint8_t *bd = rand_bytes(big, &rs);
    char src[600];
    snprintf(src, sizeof src, "%s/rand.bin", tmp);
    write_file(src, bd, big);
    ASSERT_OK(sx__s3_put_file(q, "rand/big", src));
    fp_set_random(&fp, 0, 0, 0);
    check_object(S, "rand/big", bd, big);
    sx__s3_stats st;
    sx__s3_stats_get(q, &st);
    long injected = fp_faults_total(&fp) - f0;
    fprintf(stderr,
            "  random faults: %ld injected, client retries %" PRIu64 ", failures %" PRIu64 "\n",
            injected, st.retries, st.failures);
    ASSERT(injected > 5);
    ASSERT_EQ(st.failures, 0);
    fp_clear(&fp);
    free(bd);
    free(data);
    unlink(src);
    sx__s3_free(q);
}

int main(void)
{
    seed = test_seed();
    tmp = test_tmpdir("s3");
    int rc = th_s3rver_start(tmp, &srv);
    if (rc)
        return rc;
    if (fp_start(&fp, srv.port) != 0) {
        fprintf(stderr, "cannot start the fault proxy\n");
        th_s3rver_stop(&srv);
        return 1;
    }
    snprintf(proxy_ep, sizeof proxy_ep, "http://127.0.0.1:%d", fp.port);
    fprintf(stderr, "s3rver on %s, proxy on %s\n", srv.endpoint, proxy_ep);
    S = client(srv.endpoint, TH_S3RVER_SECRET, 30000, 6);
    P = client(proxy_ep, TH_S3RVER_SECRET, 1000, 6);
    if (sx__s3_create_bucket(S) != SX_OK) {
        fprintf(stderr, "create bucket: %s\n", sx_errmsg());
        return 1;
    }
    RUN(test_bucket_and_small);
    RUN(test_multipart_40mib);
    RUN(test_list_pagination);
    RUN(test_wrong_secret);
    RUN(test_credentials);
    RUN(test_connection_reuse);
    RUN(test_faults_simple_ops);
    RUN(test_faults_multipart);
    RUN(test_persistent_faults);
    RUN(test_stall_timeout);
    RUN(test_get_file_atomic);
    RUN(test_abort_orphans);
    RUN(test_random_faults);

    sx__s3_stats st;
    sx__s3_stats_get(P, &st);
    fprintf(stderr,
            "proxied client: puts %" PRIu64 " gets %" PRIu64 " heads %" PRIu64 " deletes %" PRIu64
            " lists %" PRIu64 " parts %" PRIu64 " up %" PRIu64 " down %" PRIu64 " retries %" PRIu64
            " failures %" PRIu64 "\n",
            st.puts, st.gets, st.heads, st.deletes, st.lists, st.multipart_parts, st.bytes_up,
            st.bytes_down, st.retries, st.failures);
    sx__s3_free(S);
    sx__s3_free(P);
    fp_stop(&fp);
    fp_print(&fp, "total");
    fp_lock(&fp);
    long bad = fp.sha_bad, checked = fp.sha_checked;
    fp_unlock(&fp);
    if (bad || !checked) {
        fprintf(stderr, "FAIL: x-amz-content-sha256 mismatches: %ld of %ld\n", bad, checked);
        h_fail++;
    }
    th_s3rver_stop(&srv);
    return TEST_DONE();
}
