/*
 * test_s3_cache.c: the cache of store-backed files (cache_limit_bytes) over S3 (s3rver,
 * tests/harness/s3rver.h): the scenario of tests/harness/cache_scenario.h, where DISKANN sectors
 * are read with ranged GETs, counted in the I/O profile (QUERY, object store, <= 4 KiB each) and
 * equal to the block cache's fetches. Skipped (77) without node or tests/e2e/node/node_modules.
 */
#include <sextant.h>
#include <stdlib.h>

#include "cache_scenario.h"
#include "harness.h"
#include "s3rver.h"
#include "storage/s3.h"

#define BUCKET "sxcache"

static th_s3rver srv;
static const char *tmp;

static void test_diskann_from_bucket(void)
{
    char a[600], b[600];
    snprintf(a, sizeof a, "%s", test_tmpdir("s3cache_a"));
    snprintf(b, sizeof b, "%s", test_tmpdir("s3cache_b"));
    cache_scenario("s3://" BUCKET "/cachetest", srv.endpoint, true, a, b);
}

int main(void)
{
    tmp = test_tmpdir("s3cache");
    int rc = th_s3rver_start(tmp, &srv);
    if (rc)
        return rc;
    setenv("AWS_ACCESS_KEY_ID", TH_S3RVER_ACCESS, 1);
    setenv("AWS_SECRET_ACCESS_KEY", TH_S3RVER_SECRET, 1);
    sx__s3_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.endpoint = srv.endpoint;
    cfg.bucket = BUCKET;
    sx__s3 *S = NULL;
    if (sx__s3_new(&cfg, &S) != SX_OK || sx__s3_create_bucket(S) != SX_OK) {
        fprintf(stderr, "S3 client / bucket: %s\n", sx_errmsg());
        sx__s3_free(S);
        th_s3rver_stop(&srv);
        return 1;
    }
    sx__s3_free(S);
    RUN(test_diskann_from_bucket);
    th_s3rver_stop(&srv);
    return TEST_DONE();
}
