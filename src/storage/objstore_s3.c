/*
 * objstore_s3.c: the S3 object store (`--storage s3://BUCKET[/PREFIX]`), a thin adapter from
 * objstore.h to the S3 client (storage/s3.h): keys get "PREFIX/" prepended, list strips it.
 *
 * Endpoint: the config's s3_endpoint, else $SEXTANT_S3_ENDPOINT, else
 * https://s3.<region>.amazonaws.com. Region: the config's, else $AWS_REGION, else us-east-1.
 * Credentials: the S3 client's rules (environment, then $SEXTANT_S3_CREDENTIALS or
 * ~/.aws/credentials). $SEXTANT_S3_TIMEOUT_MS and $SEXTANT_S3_RETRIES override the client's
 * per-attempt timeout and retry count (0 keeps the client's default). Retries, backoff, timeouts
 * and multipart uploads are the client's; the contract of objstore.h holds because S3 PUTs (single
 * or completed multipart) are atomic and S3 is strongly read-after-write consistent (also MinIO,
 * Ceph RGW, s3rver). Thread-safety: as the S3 client: any number of threads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/objstore.h"
#include "storage/s3.h"
#include "util/alloc.h"
#include "util/err.h"

typedef struct s3store {
    sx__objstore base;
    sx__s3 *s3;
    char *prefix; /* owned: "" or "some/prefix/" */
} s3store;

static sx_status full_key(const s3store *s, const char *key, char *buf, size_t n)
{
    int w = snprintf(buf, n, "%s%s", s->prefix, key);
    if (w < 0 || (size_t)w >= n)
        return sx__err(SX_EINVAL, "object store: key too long: %s", key);
    return SX_OK;
}

static sx_status s3_put(sx__objstore *o, const char *key, const void *data, size_t len)
{
    s3store *s = (s3store *)o;
    char k[2048];
    sx_status st = full_key(s, key, k, sizeof k);
    return st == SX_OK ? sx__s3_put(s->s3, k, data, len) : st;
}

static sx_status s3_put_file(sx__objstore *o, const char *key, const char *path)
{
    s3store *s = (s3store *)o;
    char k[2048];
    sx_status st = full_key(s, key, k, sizeof k);
    return st == SX_OK ? sx__s3_put_file(s->s3, k, path) : st;
}

static sx_status s3_get(sx__objstore *o, const char *key, void **data, size_t *len)
{
    s3store *s = (s3store *)o;
    char k[2048];
    sx_status st = full_key(s, key, k, sizeof k);
    return st == SX_OK ? sx__s3_get(s->s3, k, 0, 0, data, len) : st;
}

static sx_status s3_get_file(sx__objstore *o, const char *key, const char *path)
{
    s3store *s = (s3store *)o;
    char k[2048];
    sx_status st = full_key(s, key, k, sizeof k);
    return st == SX_OK ? sx__s3_get_file(s->s3, k, path) : st;
}

static sx_status s3_get_range(sx__objstore *o, const char *key, uint64_t off, size_t len, void *buf)
{
    s3store *s = (s3store *)o;
    char k[2048];
    sx_status st = full_key(s, key, k, sizeof k);
    return st == SX_OK ? sx__s3_get_range(s->s3, k, off, len, buf) : st;
}

static sx_status s3_head(sx__objstore *o, const char *key, uint64_t *size)
{
    s3store *s = (s3store *)o;
    char k[2048];
    sx_status st = full_key(s, key, k, sizeof k);
    return st == SX_OK ? sx__s3_head(s->s3, k, size) : st;
}

static sx_status s3_del(sx__objstore *o, const char *key)
{
    s3store *s = (s3store *)o;
    char k[2048];
    sx_status st = full_key(s, key, k, sizeof k);
    return st == SX_OK ? sx__s3_delete(s->s3, k) : st;
}

static sx_status
s3_list(sx__objstore *o, const char *prefix, char ***keys, uint64_t **sizes, size_t *n)
{
    s3store *s = (s3store *)o;
    char k[2048];
    sx_status st = full_key(s, prefix, k, sizeof k);
    if (st != SX_OK)
        return st;
    char **v = NULL;
    uint64_t *z = NULL;
    size_t cnt = 0;
    st = sx__s3_list(s->s3, k, &v, &z, &cnt);
    if (st != SX_OK)
        return st;
    size_t pl = strlen(s->prefix), kept = 0;
    for (size_t i = 0; i < cnt; i++) {
        if (strncmp(v[i], s->prefix, pl) != 0 || !v[i][pl]) {
            sx__free(v[i]); /* not under our prefix (cannot happen with a correct server) */
            continue;
        }
        memmove(v[i], v[i] + pl, strlen(v[i] + pl) + 1);
        v[kept] = v[i];
        if (z)
            z[kept] = z[i];
        kept++;
    }
    *keys = v;
    *n = kept;
    if (sizes)
        *sizes = z;
    else
        sx__free(z);
    return SX_OK;
}

static void s3_free(sx__objstore *o)
{
    s3store *s = (s3store *)o;
    sx__s3_free(s->s3);
    sx__free(s->prefix);
    sx__free(s->base.url);
    sx__free(s);
}

static const sx__objstore_ops s3_ops = {
    .scheme = "s3",
    .put = s3_put,
    .put_file = s3_put_file,
    .get = s3_get,
    .get_file = s3_get_file,
    .get_range = s3_get_range,
    .head = s3_head,
    .del = s3_del,
    .list = s3_list,
    .free = s3_free,
};

sx_status sx__objstore_s3_open(const char *url, const sx__objstore_config *cfg, sx__objstore **out)
{
    const char *rest = url + 5; /* after "s3://" */
    const char *slash = strchr(rest, '/');
    size_t blen = slash ? (size_t)(slash - rest) : strlen(rest);
    if (blen == 0 || blen > 63)
        return sx__err(SX_EINVAL, "storage URL %s: expected s3://BUCKET[/PREFIX]", url);
    s3store *s = sx__calloc(1, sizeof *s);
    if (!s)
        return sx__err(SX_ENOMEM, "object store");
    s->base.ops = &s3_ops;
    s->base.url = sx__strdup(url);
    char bucket[64];
    memcpy(bucket, rest, blen);
    bucket[blen] = '\0';
    /* prefix: the path without leading/trailing '/', then one '/' appended */
    const char *p = slash ? slash : "";
    while (*p == '/')
        p++;
    size_t plen = strlen(p);
    while (plen && p[plen - 1] == '/')
        plen--;
    s->prefix = sx__malloc(plen + 2);
    if (!s->base.url || !s->prefix) {
        s3_free(&s->base);
        return sx__err(SX_ENOMEM, "object store");
    }
    memcpy(s->prefix, p, plen);
    s->prefix[plen] = '\0';
    if (plen) {
        s->prefix[plen] = '/';
        s->prefix[plen + 1] = '\0';
    }
    if (strstr(s->prefix, "//") || strstr(s->prefix, "..")) {
        s3_free(&s->base);
        return sx__err(SX_EINVAL, "storage URL %s: bad prefix", url);
    }
    const char *region = cfg->s3_region && *cfg->s3_region ? cfg->s3_region : getenv("AWS_REGION");
    if (!region || !*region)
        region = "us-east-1";
    const char *endpoint =
        cfg->s3_endpoint && *cfg->s3_endpoint ? cfg->s3_endpoint : getenv("SEXTANT_S3_ENDPOINT");
    char aws[256];
    if (!endpoint || !*endpoint) {
        (void)snprintf(aws, sizeof aws, "https://s3.%s.amazonaws.com", region);
        endpoint = aws;
    }
    sx__s3_config sc;
    memset(&sc, 0, sizeof sc);
    sc.endpoint = endpoint;
    sc.region = region;
    sc.bucket = bucket;
    /* operational overrides (tests, slow links): per-attempt timeout and retry budget */
    const char *t = getenv("SEXTANT_S3_TIMEOUT_MS"), *r = getenv("SEXTANT_S3_RETRIES");
    if (t && *t)
        sc.timeout_ms = (uint32_t)strtoul(t, NULL, 10);
    if (r && *r)
        sc.max_retries = (uint32_t)strtoul(r, NULL, 10);
    sx_status st = sx__s3_new(&sc, &s->s3);
    if (st == SX_OK && cfg->create_bucket)
        st = sx__s3_create_bucket(s->s3);
    if (st != SX_OK) {
        s3_free(&s->base);
        return st;
    }
    *out = &s->base;
    return SX_OK;
}
