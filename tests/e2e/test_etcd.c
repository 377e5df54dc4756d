/*
 * test_etcd.c: the etcd v3 gateway client (src/cluster/etcd.c) against a real 3-member etcd
 * (Debian's etcd-server; tests/harness/etcd.h). Skipped (77) when /usr/bin/etcd is absent.
 *
 *   kv: put / get / range by prefix / delete (one key, a prefix) with revisions, values with
 *     bytes JSON would mangle, a key absent -> SX_ENOTFOUND.
 *   txn: create-if-absent succeeds once and the loser reads the winner; compare on mod_revision
 *     (the fencing token) refuses a commit once the key was written again; VALUE and VERSION
 *     compares.
 *   leases: a key put with a 2 s lease stays while kept alive and is gone after the TTL without
 *     keep-alives; keepalive on the expired lease -> SX_ENOTFOUND; revoke deletes at once.
 *   members: a read on a follower sees a write made through another member (linearizable
 *     reads); kill -9 of a follower and then of the leader: writes and txns go on through the
 *     client's failover (2 of 3 up), and the killed members rejoin on their data.
 *   errors: a client whose first endpoints are dead fails over; one with no live endpoint
 *     answers SX_EREMOTE naming the endpoint; bad endpoint strings are refused.
 *   identity (sx__cluster_uuid): a new cluster writes its UUID to etcd and the store; another
 *     store gets etcd's; an emptied etcd with a store that names a cluster is refused (never
 *     started empty), so is an etcd of another cluster; eight nodes bootstrapping at once (each
 *     pausing between its two reads, starts staggered) agree on one UUID.
 */
#include <pthread.h>
#include <sextant.h>
#include <signal.h>
#include <stdlib.h>

#include "cluster/etcd.h"
#include "cluster/fence.h"
#include "etcd.h"
#include "harness.h"
#include "util/alloc.h"

static th_etcd ec;
static sx__etcd *E;

static void test_kv(void)
{
    int64_t r1 = 0, r2 = 0;
    ASSERT_OK(sx__etcd_put(E, "/t/kv/a", "one", 0, &r1));
    ASSERT_OK(sx__etcd_put(E, "/t/kv/b", "{\"x\":\"\\u00e9\\n\"}", 0, &r2));
    ASSERT(r2 > r1);
    ASSERT_OK(sx__etcd_put(E, "/t/kw", "outside", 0, NULL));
    sx__etcd_kv kv;
    ASSERT_OK(sx__etcd_get(E, "/t/kv/a", &kv, NULL));
    ASSERT(strcmp(kv.value, "one") == 0 && kv.value_len == 3);
    ASSERT_EQ(kv.mod_revision, r1);
    ASSERT_EQ(kv.create_revision, r1);
    ASSERT_EQ(kv.version, 1);
    sx__free(kv.key);
    sx__free(kv.value);
    sx__etcd_kv *kvs;
    size_t n;
    int64_t rev;
    ASSERT_OK(sx__etcd_range(E, "/t/kv/", &kvs, &n, &rev));
    ASSERT_EQ(n, 2);
    ASSERT(strcmp(kvs[0].key, "/t/kv/a") == 0 && strcmp(kvs[1].key, "/t/kv/b") == 0);
    ASSERT(strcmp(kvs[1].value, "{\"x\":\"\\u00e9\\n\"}") == 0);
    ASSERT(rev >= r2);
    sx__etcd_kvs_free(kvs, n);
    ASSERT_STATUS(sx__etcd_get(E, "/t/kv/none", &kv, NULL), SX_ENOTFOUND);
    int64_t del = 0;
    ASSERT_OK(sx__etcd_del(E, "/t/kv/", true, &del));
    ASSERT_EQ(del, 2);
    ASSERT_OK(sx__etcd_range(E, "/t/kv/", &kvs, &n, NULL));
    ASSERT_EQ(n, 0);
    ASSERT_OK(sx__etcd_get(E, "/t/kw", &kv, NULL)); /* outside the prefix: kept */
    sx__free(kv.key);
    sx__free(kv.value);
    ASSERT_OK(sx__etcd_del(E, "/t/kw", false, &del));
    ASSERT_EQ(del, 1);
}

static void test_txn(void)
{
    /* create-if-absent: two contenders, one wins */
    sx__etcd_cmp absent = { "/t/epoch", SX__ETCD_CREATE, 0, NULL };
    sx__etcd_op put_a = { SX__ETCD_PUT, "/t/epoch", "writer-a", 0 };
    sx__etcd_op put_b = { SX__ETCD_PUT, "/t/epoch", "writer-b", 0 };
    sx__etcd_op get = { SX__ETCD_GET, "/t/epoch", NULL, 0 };
    sx__etcd_txn_result ra, rb;
    ASSERT_OK(sx__etcd_txn(E, &absent, 1, &put_a, 1, &get, 1, &ra));
    ASSERT(ra.succeeded);
    int64_t token = ra.revision;
    sx__etcd_txn_result_fini(&ra);
    ASSERT_OK(sx__etcd_txn(E, &absent, 1, &put_b, 1, &get, 1, &rb));
    ASSERT(!rb.succeeded);
    ASSERT_EQ(rb.n_kvs, 1);
    ASSERT(strcmp(rb.kvs[0].value, "writer-a") == 0);
    ASSERT_EQ(rb.kvs[0].mod_revision, token);
    sx__etcd_txn_result_fini(&rb);

    /* a fenced commit holds while the epoch key is unchanged */
    sx__etcd_cmp fence = { "/t/epoch", SX__ETCD_MOD, token, NULL };
    sx__etcd_op commit1 = { SX__ETCD_PUT, "/t/manifest", "m1", 0 };
    sx__etcd_txn_result r;
    ASSERT_OK(sx__etcd_txn(E, &fence, 1, &commit1, 1, NULL, 0, &r));
    ASSERT(r.succeeded);
    sx__etcd_txn_result_fini(&r);
    /* another writer takes the epoch (the key is rewritten: new mod_revision) */
    int64_t token2 = 0;
    ASSERT_OK(sx__etcd_put(E, "/t/epoch", "writer-b", 0, &token2));
    ASSERT(token2 > token);
    sx__etcd_op commit2 = { SX__ETCD_PUT, "/t/manifest", "stale", 0 };
    sx__etcd_op read_m = { SX__ETCD_GET, "/t/manifest", NULL, 0 };
    ASSERT_OK(sx__etcd_txn(E, &fence, 1, &commit2, 1, &read_m, 1, &r));
    ASSERT(!r.succeeded); /* the old token is refused */
    ASSERT_EQ(r.n_kvs, 1);
    ASSERT(strcmp(r.kvs[0].value, "m1") == 0);
    sx__etcd_txn_result_fini(&r);

    /* VALUE and VERSION compares */
    sx__etcd_cmp val = { "/t/epoch", SX__ETCD_VALUE, 0, "writer-b" };
    sx__etcd_cmp ver = { "/t/epoch", SX__ETCD_VERSION, 2, NULL };
    sx__etcd_cmp both[2] = { val, ver };
    ASSERT_OK(sx__etcd_txn(E, both, 2, NULL, 0, NULL, 0, &r));
    ASSERT(r.succeeded);
    sx__etcd_txn_result_fini(&r);
    val.value = "writer-a";
    ASSERT_OK(sx__etcd_txn(E, &val, 1, NULL, 0, NULL, 0, &r));
    ASSERT(!r.succeeded);
    sx__etcd_txn_result_fini(&r);
    ASSERT_OK(sx__etcd_del(E, "/t/", true, NULL));
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static void test_lease(void)
{
    int64_t id = 0, ttl = 0;
    ASSERT_OK(sx__etcd_lease_grant(E, 2, &id));
    ASSERT(id != 0);
    ASSERT_OK(sx__etcd_put(E, "/t/lease/k", "v", id, NULL));
    sx__etcd_kv kv;
    ASSERT_OK(sx__etcd_get(E, "/t/lease/k", &kv, NULL));
    ASSERT_EQ(kv.lease, id);
    sx__free(kv.key);
    sx__free(kv.value);
    for (int i = 0; i < 6; i++) { /* 3 s, past the TTL: kept alive */
        sleep_ms(500);
        ASSERT_OK(sx__etcd_lease_keepalive(E, id, &ttl));
        ASSERT(ttl >= 1);
    }
    ASSERT_OK(sx__etcd_get(E, "/t/lease/k", &kv, NULL));
    sx__free(kv.key);
    sx__free(kv.value);
    /* no keep-alives: gone after the TTL (etcd expires within TTL + its check interval) */
    sx_status st = SX_OK;
    for (int i = 0; i < 100 && st == SX_OK; i++) {
        sleep_ms(100);
        st = sx__etcd_get(E, "/t/lease/k", &kv, NULL);
        if (st == SX_OK) {
            sx__free(kv.key);
            sx__free(kv.value);
        }
    }
    ASSERT_EQ(st, SX_ENOTFOUND);
    ASSERT_STATUS(sx__etcd_lease_keepalive(E, id, &ttl), SX_ENOTFOUND);
    ASSERT_STATUS(sx__etcd_put(E, "/t/lease/k", "v", id, NULL), SX_ENOTFOUND);
    /* revoke: at once */
    ASSERT_OK(sx__etcd_lease_grant(E, 60, &id));
    ASSERT_OK(sx__etcd_put(E, "/t/lease/r", "v", id, NULL));
    ASSERT_OK(sx__etcd_lease_revoke(E, id));
    ASSERT_STATUS(sx__etcd_get(E, "/t/lease/r", &kv, NULL), SX_ENOTFOUND);
}

static int leader_index(void)
{
    for (int i = 0; i < ec.n; i++) {
        uint64_t me, leader;
        if (ec.pid[i] > 0 && sx__etcd_member_status(E, (size_t)i, &me, &leader) == SX_OK &&
            me == leader)
            return i;
    }
    return -1;
}

/* a write through member w is seen by a read on member r (linearizable reads) */
static void read_after_write(int w, int r, const char *key, const char *val)
{
    sx__etcd *cw, *cr;
    ASSERT_OK(sx__etcd_new(ec.ep[w], 0, &cw));
    ASSERT_OK(sx__etcd_new(ec.ep[r], 0, &cr));
    ASSERT_OK(sx__etcd_put(cw, key, val, 0, NULL));
    sx__etcd_kv kv;
    ASSERT_OK(sx__etcd_get(cr, key, &kv, NULL));
    ASSERT(strcmp(kv.value, val) == 0);
    sx__free(kv.key);
    sx__free(kv.value);
    sx__etcd_free(cw);
    sx__etcd_free(cr);
}

static void test_members(void)
{
    int L = leader_index();
    ASSERT(L >= 0);
    int F = (L + 1) % 3, G = (L + 2) % 3;
    read_after_write(L, F, "/t/m/1", "a");
    read_after_write(F, G, "/t/m/2", "b");

    /* kill -9 a follower: the client goes on */
    th_etcd_kill(&ec, F, SIGKILL);
    for (int i = 0; i < 20; i++) {
        char k[32];
        snprintf(k, sizeof k, "/t/m/f%d", i);
        ASSERT_OK(sx__etcd_put(E, k, "x", 0, NULL));
    }
    /* kill -9 the leader as well? No: 1 of 3 has no quorum. Bring F back, then kill the leader. */
    ASSERT_EQ(th_etcd_restart(&ec, F), 0);
    ASSERT_EQ(leader_index(), L);
    th_etcd_kill(&ec, L, SIGKILL);
    /* writes succeed again once the two survivors elect a leader (client retries/fails over) */
    int ok = 0;
    for (int i = 0; i < 50 && ok < 20; i++) {
        char k[32];
        snprintf(k, sizeof k, "/t/m/l%d", ok);
        if (sx__etcd_put(E, k, "y", 0, NULL) == SX_OK)
            ok++;
        else
            sleep_ms(200);
    }
    ASSERT_EQ(ok, 20);
    int L2 = leader_index();
    ASSERT(L2 >= 0 && L2 != L);
    sx__etcd_kv *kvs;
    size_t n;
    ASSERT_OK(sx__etcd_range(E, "/t/m/", &kvs, &n, NULL));
    ASSERT_EQ(n, 42); /* 2 + 20 + 20: nothing acknowledged was lost across both kills */
    sx__etcd_kvs_free(kvs, n);
    ASSERT_EQ(th_etcd_restart(&ec, L), 0);
    read_after_write(L2, L, "/t/m/back", "c"); /* the old leader rejoined and caught up */
    ASSERT_OK(sx__etcd_del(E, "/t/", true, NULL));
}

static void test_errors(void)
{
    sx__etcd *c;
    ASSERT_STATUS(sx__etcd_new("", 0, &c), SX_EINVAL);
    ASSERT_STATUS(sx__etcd_new("127.0.0.1:2379", 0, &c), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "not an http") != NULL);
    /* two dead endpoints first: fails over to the live ones */
    char eps[700];
    int dead1 = th_free_port(), dead2 = th_free_port();
    snprintf(eps, sizeof eps, "http://127.0.0.1:%d,http://127.0.0.1:%d,%s", dead1, dead2,
             ec.endpoints);
    ASSERT_OK(sx__etcd_new(eps, 500, &c));
    ASSERT_OK(sx__etcd_put(c, "/t/e", "v", 0, NULL));
    ASSERT(strstr(sx__etcd_endpoint(c), "127.0.0.1") != NULL);
    sx__etcd_free(c);
    char one[64];
    snprintf(one, sizeof one, "http://127.0.0.1:%d", dead1);
    ASSERT_OK(sx__etcd_new(one, 300, &c));
    ASSERT_STATUS(sx__etcd_put(c, "/t/e", "v", 0, NULL), SX_EREMOTE);
    ASSERT(strstr(sx_errmsg(), one) != NULL);
    sx__etcd_free(c);
    ASSERT_OK(sx__etcd_del(E, "/t/", true, NULL));
}

typedef struct boot {
    const char *store;
    long delay_ms; /* start after this */
    sx_status st;
    char uuid[40];
} boot;

static void *boot_main(void *arg)
{
    boot *b = arg;
    struct timespec ts = { b->delay_ms / 1000, (b->delay_ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
    b->st = sx__cluster_uuid(ec.endpoints, b->store, NULL, b->uuid);
    return NULL;
}

/* the cluster identity: etcd's /sextant/uuid and the store's CLUSTER-UUID must agree */
static void test_identity(void)
{
    char s1[700], s2[700], u1[40], u2[40];
    snprintf(s1, sizeof s1, "file://%s", test_tmpdir("etcd_store1"));
    snprintf(s2, sizeof s2, "file://%s", test_tmpdir("etcd_store2"));
    ASSERT_OK(sx__etcd_del(E, "/sextant/uuid", false, NULL));
    ASSERT_OK(sx__cluster_uuid(ec.endpoints, s1, NULL, u1)); /* new: written to both */
    ASSERT_EQ(strlen(u1), 36);
    char *data;
    size_t len;
    ASSERT_OK(sx_store_object_get(s1, NULL, "CLUSTER-UUID", &data, &len));
    ASSERT(strncmp(data, u1, 36) == 0);
    sx_free_bytes(data);
    ASSERT_OK(sx__cluster_uuid(ec.endpoints, s1, NULL, u2)); /* again: the same */
    ASSERT(strcmp(u1, u2) == 0);
    ASSERT_OK(sx__cluster_uuid(ec.endpoints, s2, NULL, u2)); /* etcd's, copied to a new store */
    ASSERT(strcmp(u1, u2) == 0);
    /* etcd reset (Milvus #36094): the store's cluster is not started empty */
    ASSERT_OK(sx__etcd_del(E, "/sextant/uuid", false, NULL));
    ASSERT_STATUS(sx__cluster_uuid(ec.endpoints, s1, NULL, u2), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "refusing to start empty") != NULL);
    ASSERT(strstr(sx_errmsg(), u1) != NULL);
    /* another cluster's etcd */
    ASSERT_OK(sx__etcd_put(E, "/sextant/uuid", "00000000-0000-4000-8000-000000000000", 0, NULL));
    ASSERT_STATUS(sx__cluster_uuid(ec.endpoints, s1, NULL, u2), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "refusing to start") != NULL);
    ASSERT_OK(sx__etcd_del(E, "/sextant/uuid", false, NULL));
    /* nodes starting together on an empty etcd and an empty store agree on one UUID: with a
     * 60 ms pause between each node's two reads and starts 25 ms apart, the first node
     * bootstraps (etcd, then the store) inside the second's pause, which must not take that
     * for a reset etcd */
    atomic_store(&sx__cluster_uuid_pause_ms, 60);
    for (int round = 0; round < 3; round++) {
        char s3[700];
        snprintf(s3, sizeof s3, "file://%s", test_tmpdir("etcd_store3"));
        ASSERT_OK(sx__etcd_del(E, "/sextant/uuid", false, NULL));
        boot bs[8];
        pthread_t t[8];
        for (int i = 0; i < 8; i++) {
            bs[i].store = s3;
            bs[i].delay_ms = 25L * i;
            ASSERT_EQ(pthread_create(&t[i], NULL, boot_main, &bs[i]), 0);
        }
        for (int i = 0; i < 8; i++)
            pthread_join(t[i], NULL);
        for (int i = 0; i < 8; i++) {
            if (bs[i].st != SX_OK)
                FAILF("round %d node %d: %s", round, i, sx_status_str(bs[i].st));
            ASSERT(strcmp(bs[i].uuid, bs[0].uuid) == 0);
        }
    }
    atomic_store(&sx__cluster_uuid_pause_ms, 0);
    ASSERT_OK(sx__etcd_del(E, "/sextant/uuid", false, NULL));
    /* a dead store: an error naming it, nothing written to etcd */
    ASSERT(sx__cluster_uuid(ec.endpoints, "s3://nobucket/x", NULL, u2) != SX_OK);
}

int main(void)
{
    const char *dir = test_tmpdir("etcd");
    int rc = th_etcd_start(dir, 3, &ec);
    if (rc != 0)
        return rc;
    if (sx__etcd_new(ec.endpoints, 0, &E) != SX_OK) {
        th_etcd_stop(&ec);
        return 1;
    }
    RUN(test_kv);
    RUN(test_txn);
    RUN(test_lease);
    RUN(test_errors);
    RUN(test_identity);
    RUN(test_members);
    sx__etcd_free(E);
    th_etcd_stop(&ec);
    return TEST_DONE();
}
