/*
 * test_server_rbac.c: users, roles and privileges over REST (src/server/rbac.c,
 * handlers_rbac.c) against an in-process server with a superuser token: users create / list /
 * describe / update_password / drop with bad names and passwords refused; an API user
 * authenticates with "user:password" (a wrong password is 401) and holds the public role only
 * (describe and list allowed, search / insert / create refused with 403 code 1401 naming the
 * privilege); a role with Search on one collection and Query on every collection lets it search
 * that collection only and query all, and nothing else; revoking takes it back; a role with grants
 * cannot be dropped; a user changes their own password (the old one then fails); the admin role
 * gives everything; the state survives a restart (the file holds argon2id hashes, never the
 * password); a corrupt file refuses to start; every route of the route table has a privilege (so
 * none is open to API users by omission); without authentication nothing is checked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "http.h"
#include "server/rbac.h"
#include "server/server.h"

#define TOKEN "Bearer sup3r-token"

static char dir[600];

static json_t *post_ok(const char *path, const char *body, const char *auth)
{
    th_resp *r = th_post(path, body, auth);
    if (r->status != 200 || th_code() != 0)
        FAILF("%s %s: status %ld code %lld: %s", path, body, r->status, th_code(),
              r->text ? r->text : "");
    return json_object_get(r->json, "data");
}

static void post_code(const char *path,
                      const char *body,
                      const char *auth,
                      long status,
                      long long code,
                      const char *needle)
{
    th_resp *r = th_post(path, body, auth);
    if (r->status != status || th_code() != code)
        FAILF("%s %s: status %ld code %lld, want %ld / %lld: %s", path, body, r->status, th_code(),
              status, code, r->text ? r->text : "");
    const char *m = json_string_value(json_object_get(r->json, "message"));
    if (needle && (!m || !strstr(m, needle)))
        FAILF("%s: message \"%s\" lacks \"%s\"", path, m ? m : "", needle);
}

static bool json_has_str(const json_t *a, const char *s)
{
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v)
        if (json_is_string(v) && !strcmp(json_string_value(v), s))
            return true;
    return false;
}

static sx_server *start(const char *token)
{
    sx_server_options o = { 0 };
    o.auth_token = token;
    sx_server *s = th_server_start(dir, &o);
    if (!s)
        FAILF("server did not start");
    return s;
}

static void test_route_map_complete(void)
{
    size_t n;
    const sx__route *rt = sx__server_routes(&n);
    ASSERT(n > 60);
    for (size_t i = 0; i < n; i++) {
        const char *ot = NULL, *pv = NULL;
        if (!sx__rbac_route_priv(rt[i].path, &ot, &pv))
            FAILF("route %s has no privilege in rbac.c's route_map", rt[i].path);
    }
}

static void test_users_and_roles(void)
{
    snprintf(dir, sizeof dir, "%s", test_tmpdir("rbac"));
    sx_server *s = start("sup3r-token");
    const char *A = "Bearer alice:alicepw1";
    /* users */
    post_ok("/v2/vectordb/users/create", "{\"userName\":\"alice\",\"password\":\"alicepw1\"}",
            TOKEN);
    post_code("/v2/vectordb/users/create", "{\"userName\":\"alice\",\"password\":\"other-pw\"}",
              TOKEN, 200, 65535, "already exists");
    post_code("/v2/vectordb/users/create", "{\"userName\":\"1bad\",\"password\":\"longenough\"}",
              TOKEN, 200, 1100, "invalid user name");
    post_code("/v2/vectordb/users/create", "{\"userName\":\"bob\",\"password\":\"short\"}", TOKEN,
              200, 1100, "password");
    post_code("/v2/vectordb/users/create", "{\"password\":\"longenough\"}", TOKEN, 200, 1802, NULL);
    json_t *d = post_ok("/v2/vectordb/users/list", "{}", TOKEN);
    ASSERT_EQ(json_array_size(d), 1);
    ASSERT(json_has_str(d, "alice"));
    d = post_ok("/v2/vectordb/users/describe", "{\"userName\":\"alice\"}", TOKEN);
    ASSERT_EQ(json_array_size(d), 0);
    post_code("/v2/vectordb/users/describe", "{\"userName\":\"nobody\"}", TOKEN, 200, 65535,
              "not found");

    /* two collections with rows, as the superuser */
    for (int c = 1; c <= 2; c++) {
        char b[400];
        snprintf(b, sizeof b, "{\"collectionName\":\"c%d\",\"dimension\":4}", c);
        post_ok("/v2/vectordb/collections/create", b, TOKEN);
        snprintf(b, sizeof b,
                 "{\"collectionName\":\"c%d\",\"data\":[{\"id\":1,\"vector\":[1,0,0,0]},"
                 "{\"id\":2,\"vector\":[0,1,0,0]}]}",
                 c);
        post_ok("/v2/vectordb/entities/insert", b, TOKEN);
    }
    const char *srch1 = "{\"collectionName\":\"c1\",\"data\":[[1,0,0,0]],\"limit\":1}";
    const char *srch2 = "{\"collectionName\":\"c2\",\"data\":[[1,0,0,0]],\"limit\":1}";
    const char *qry2 = "{\"collectionName\":\"c2\",\"filter\":\"id > 0\"}";
    const char *ins1 = "{\"collectionName\":\"c1\",\"data\":[{\"id\":3,\"vector\":[0,0,1,0]}]}";

    /* alice: authenticated, public role only */
    post_code("/v2/vectordb/collections/list", "{}", "Bearer alice:wrongpw1", 401, 1800, NULL);
    d = post_ok("/v2/vectordb/collections/list", "{}", A);
    ASSERT(json_has_str(d, "c1") && json_has_str(d, "c2"));
    post_ok("/v2/vectordb/collections/describe", "{\"collectionName\":\"c1\"}", A);
    post_code("/v2/vectordb/entities/search", srch1, A, 403, 1401, "PrivilegeSearch");
    post_code("/v2/vectordb/entities/insert", ins1, A, 403, 1401, "PrivilegeInsert");
    post_code("/v2/vectordb/collections/create", "{\"collectionName\":\"c3\",\"dimension\":4}", A,
              403, 1401, "PrivilegeCreateCollection");
    post_code("/v2/vectordb/users/create", "{\"userName\":\"eve\",\"password\":\"evepw123\"}", A,
              403, 1401, "PrivilegeCreateOwnership");

    /* a role: Search on c1, Query on every collection */
    post_ok("/v2/vectordb/roles/create", "{\"roleName\":\"reader\"}", TOKEN);
    post_code("/v2/vectordb/roles/create", "{\"roleName\":\"reader\"}", TOKEN, 200, 65535,
              "already exists");
    post_code("/v2/vectordb/roles/create", "{\"roleName\":\"admin\"}", TOKEN, 200, 65535,
              "already exists");
    post_ok("/v2/vectordb/roles/grant_privilege",
            "{\"roleName\":\"reader\",\"objectType\":\"Collection\",\"objectName\":\"c1\","
            "\"privilege\":\"Search\"}",
            TOKEN);
    post_ok("/v2/vectordb/roles/grant_privilege",
            "{\"roleName\":\"reader\",\"objectType\":\"Collection\",\"objectName\":\"*\","
            "\"privilege\":\"Query\"}",
            TOKEN);
    post_code("/v2/vectordb/roles/grant_privilege",
              "{\"roleName\":\"reader\",\"objectType\":\"Collection\",\"objectName\":\"*\","
              "\"privilege\":\"Fly\"}",
              TOKEN, 200, 1100, "privilege name");
    post_code("/v2/vectordb/roles/grant_privilege",
              "{\"roleName\":\"reader\",\"objectType\":\"Planet\",\"objectName\":\"*\","
              "\"privilege\":\"Search\"}",
              TOKEN, 200, 1100, "object type");
    post_ok("/v2/vectordb/users/grant_role", "{\"userName\":\"alice\",\"roleName\":\"reader\"}",
            TOKEN);
    post_code("/v2/vectordb/users/grant_role", "{\"userName\":\"alice\",\"roleName\":\"nope\"}",
              TOKEN, 200, 65535, "role not found");
    d = post_ok("/v2/vectordb/users/describe", "{\"userName\":\"alice\"}", TOKEN);
    ASSERT(json_has_str(d, "reader"));
    d = post_ok("/v2/vectordb/roles/list", "{}", TOKEN);
    ASSERT(json_has_str(d, "admin") && json_has_str(d, "public") && json_has_str(d, "reader"));
    d = post_ok("/v2/vectordb/roles/describe", "{\"roleName\":\"reader\"}", TOKEN);
    ASSERT_EQ(json_array_size(d), 2);
    const json_t *g0 = json_array_get(d, 0);
    ASSERT(!strcmp(json_string_value(json_object_get(g0, "objectType")), "Collection"));
    ASSERT(!strcmp(json_string_value(json_object_get(g0, "objectName")), "c1"));
    ASSERT(!strcmp(json_string_value(json_object_get(g0, "privilege")), "Search"));
    ASSERT(!strcmp(json_string_value(json_object_get(g0, "dbName")), "default"));

    d = post_ok("/v2/vectordb/entities/search", srch1, A);
    ASSERT_EQ(json_array_size(d), 1);
    post_code("/v2/vectordb/entities/search", srch2, A, 403, 1401, "PrivilegeSearch");
    d = post_ok("/v2/vectordb/entities/query", qry2, A);
    ASSERT_EQ(json_array_size(d), 2);
    post_code("/v2/vectordb/entities/insert", ins1, A, 403, 1401, "PrivilegeInsert");
    /* in another database the grants (made for "default") do not hold */
    post_ok("/v2/vectordb/databases/create", "{\"dbName\":\"other\"}", TOKEN);
    post_code("/v2/vectordb/entities/query",
              "{\"dbName\":\"other\",\"collectionName\":\"c2\",\"filter\":\"id > 0\"}", A, 403,
              1401, "`other`");

    /* a role with grants cannot be dropped; revoking takes the privilege back */
    post_code("/v2/vectordb/roles/drop", "{\"roleName\":\"reader\"}", TOKEN, 200, 65535,
              "privileges");
    post_code("/v2/vectordb/roles/drop", "{\"roleName\":\"public\"}", TOKEN, 200, 65535,
              "default role");
    post_ok("/v2/vectordb/roles/revoke_privilege",
            "{\"roleName\":\"reader\",\"objectType\":\"Collection\",\"objectName\":\"c1\","
            "\"privilege\":\"Search\"}",
            TOKEN);
    post_code("/v2/vectordb/entities/search", srch1, A, 403, 1401, "PrivilegeSearch");
    post_ok("/v2/vectordb/entities/query", qry2, A);

    /* one's own password */
    post_code("/v2/vectordb/users/update_password",
              "{\"userName\":\"alice\",\"password\":\"not-it\",\"newPassword\":\"alicepw2\"}", A,
              200, 1100, "old password");
    post_ok("/v2/vectordb/users/update_password",
            "{\"userName\":\"alice\",\"password\":\"alicepw1\",\"newPassword\":\"alicepw2\"}", A);
    post_code("/v2/vectordb/collections/list", "{}", A, 401, 1800, NULL);
    const char *A2 = "Bearer alice:alicepw2";
    post_ok("/v2/vectordb/entities/query", qry2, A2);

    /* the admin role: everything */
    post_ok("/v2/vectordb/users/grant_role", "{\"userName\":\"alice\",\"roleName\":\"admin\"}",
            TOKEN);
    post_ok("/v2/vectordb/users/create", "{\"userName\":\"eve\",\"password\":\"evepw123\"}", A2);
    post_ok("/v2/vectordb/entities/insert", ins1, A2);
    post_ok("/v2/vectordb/users/revoke_role", "{\"userName\":\"alice\",\"roleName\":\"admin\"}",
            TOKEN);
    post_code("/v2/vectordb/entities/insert", ins1, A2, 403, 1401, NULL);
    ASSERT_OK(sx_server_stop(s));

    /* durable: a restart keeps users, roles and grants; the file holds hashes only */
    char path[700];
    snprintf(path, sizeof path, "%s/rbac.json", dir);
    FILE *f = fopen(path, "rb");
    ASSERT(f);
    char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    (void)fclose(f);
    ASSERT(strstr(buf, "$argon2id$") != NULL);
    ASSERT(strstr(buf, "alicepw2") == NULL && strstr(buf, "evepw123") == NULL);
    s = start("sup3r-token");
    post_ok("/v2/vectordb/entities/query", qry2, A2);
    post_code("/v2/vectordb/entities/search", srch1, A2, 403, 1401, NULL);
    d = post_ok("/v2/vectordb/users/list", "{}", TOKEN);
    ASSERT_EQ(json_array_size(d), 2);
    post_ok("/v2/vectordb/users/drop", "{\"userName\":\"alice\"}", TOKEN);
    post_code("/v2/vectordb/entities/query", qry2, A2, 401, 1800, NULL);
    post_code("/v2/vectordb/users/drop", "{\"userName\":\"alice\"}", TOKEN, 200, 65535,
              "not found");
    ASSERT_OK(sx_server_stop(s));

    /* a corrupt file refuses to start, naming it */
    f = fopen(path, "wb");
    ASSERT(f);
    (void)fputs("{\"version\":1,\"users\":[{\"name\":", f);
    (void)fclose(f);
    sx_server_options o = { 0 };
    o.auth_token = "sup3r-token";
    o.data_dir = dir;
    o.quiet = true;
    sx_server *bad = NULL;
    ASSERT_STATUS(sx_server_start(&o, &bad), SX_ECORRUPT);
    ASSERT(strstr(sx_errmsg(), "rbac.json") != NULL);
    ASSERT(remove(path) == 0);

    /* without authentication nothing is checked, but users are still managed */
    s = start(NULL);
    post_ok("/v2/vectordb/users/create", "{\"userName\":\"carol\",\"password\":\"carolpw1\"}",
            NULL);
    post_ok("/v2/vectordb/entities/search", srch1, NULL);
    d = post_ok("/v2/vectordb/users/list", "{}", NULL);
    ASSERT(json_has_str(d, "carol"));
    ASSERT_OK(sx_server_stop(s));
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
    RUN(test_route_map_complete);
    RUN(test_users_and_roles);
    curl_global_cleanup();
    return TEST_DONE();
}
