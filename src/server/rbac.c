/*
 * rbac.c: users, roles and privileges, as Milvus's RBAC (REST v2 users/... and roles/..., gRPC
 * CreateCredential ... SelectGrant).
 *
 * Model. A user (name, password) holds roles; a role holds grants (object type, object name,
 * database, privilege, grantor). Two roles are built in and can be neither created, dropped nor
 * changed: `admin` (every privilege) and `public` (every user holds it: DescribeCollection,
 * ShowCollections and IndexDetail, as Milvus). Privileges are Milvus's names, per object type
 * (the tables below, with each request's object type and privilege as milvus-proto's
 * privilege_ext_obj options give them: AlterCollection needs CreateCollection, DescribeCollection
 * is Global, ...); `All` (or `*`) is every privilege of its type. A request is allowed when
 * one of its user's roles (or public) has a grant of the route's privilege (route_map) whose
 * database is the request's (or "*") and, for a Collection privilege, whose object name is the
 * request's collectionName (or "*"); a Global grant of a Collection privilege covers every
 * collection. A route the map lacks is refused to every API user (fail closed); a user may always
 * change their own password.
 *
 * Who is checked (http.c). Only with authentication on (--token or --users): the token and the
 * users file's read-write entries are superusers (everything, users and roles included), its
 * `:ro` entries read-only, as before; users created here are checked as above. Without
 * authentication nothing is checked (Milvus with authorizationEnabled off), but users and roles
 * are still managed and stored. There is no built-in root user with a default password: the
 * operator's token or users file is the superuser.
 *
 * Passwords: argon2id (Debian's libargon2; t=2, m=19 MiB, p=1, the OWASP minimum), a 16-byte salt
 * from getrandom, the encoded string ($argon2id$v=19$m=...,t=...,p=...$salt$hash) stored. One
 * verification costs tens of milliseconds, too slow for every request, so a successful one keeps
 * SHA-256(pepper || password) of the user in memory (pepper: 32 random bytes per process) and
 * later requests compare digests in constant time; a password change or a drop forgets it. A
 * wrong password always pays the full argon2 cost.
 *
 * Durability: the whole state is one JSON file, <data>/rbac.json, replaced atomically (write,
 * fsync, rename, fsync dir) before a change is acknowledged; when the write fails, the state is
 * read back from the file (commit_locked), so a failed change leaves nothing behind in memory.
 * Format: {"version":1,"users":[{"name","hash","roles":[..]}],
 * "roles":[{"name","grants":[{"objectType","objectName","dbName","privilege","grantor"}]}]}.
 *
 * Locking: one mutex (mu) guards everything; argon2 runs outside it (on a copy of the hash).
 */
#include "server/rbac.h"

#include <argon2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "platform/fs.h"
#include "util/alloc.h"
#include "util/err.h"

#define RB_T     2u
#define RB_M_KIB 19456u
#define RB_P     1u
#define RB_SALT  16u
#define RB_HASH  32u
#define RB_ENC   160u /* encoded argon2id string */

typedef struct rb_grant {
    char *object; /* Global, Collection, User */
    char *name;   /* "*" or a name */
    char *db;
    char *priv;
    char *grantor;
} rb_grant;

typedef struct rb_role {
    char *name;
    rb_grant *grants;
    size_t n_grants;
} rb_role;

typedef struct rb_user {
    char *name;
    char *hash;
    char **roles;
    size_t n_roles;
    bool cached; /* digest holds SHA-256(pepper || password) of a verified password */
    unsigned char digest[32];
} rb_user;

struct sx__rbac {
    pthread_mutex_t mu;
    char *path;
    rb_user *users;
    size_t n_users;
    rb_role *roles;
    size_t n_roles;
    unsigned char pepper[32];
};

/* ---------------------------------------------------------------- privileges */

static const char *const global_privs[] = { "CreateCollection",
                                            "DropCollection",
                                            "DescribeCollection",
                                            "ShowCollections",
                                            "RenameCollection",
                                            "FlushAll",
                                            "CreateOwnership",
                                            "DropOwnership",
                                            "SelectOwnership",
                                            "ManageOwnership",
                                            "CreateResourceGroup",
                                            "DropResourceGroup",
                                            "DescribeResourceGroup",
                                            "ListResourceGroups",
                                            "TransferNode",
                                            "TransferReplica",
                                            "CreateDatabase",
                                            "DropDatabase",
                                            "ListDatabases",
                                            "DescribeDatabase",
                                            "AlterDatabase",
                                            "CreateAlias",
                                            "DropAlias",
                                            "DescribeAlias",
                                            "ListAliases",
                                            NULL };
static const char *const coll_privs[] = { "CreateIndex",
                                          "DropIndex",
                                          "IndexDetail",
                                          "Load",
                                          "GetLoadingProgress",
                                          "GetLoadState",
                                          "Release",
                                          "Insert",
                                          "Delete",
                                          "Upsert",
                                          "Search",
                                          "Flush",
                                          "GetFlushState",
                                          "Query",
                                          "GetStatistics",
                                          "Compaction",
                                          "Import",
                                          "LoadBalance",
                                          "CreatePartition",
                                          "DropPartition",
                                          "ShowPartitions",
                                          "HasPartition",
                                          NULL };
static const char *const user_privs[] = { "UpdateUser", "SelectUser", NULL };

static bool in_list(const char *const *l, const char *p)
{
    for (; *l; l++)
        if (strcmp(*l, p) == 0)
            return true;
    return false;
}

static const char *const *privs_of(const char *object)
{
    if (strcmp(object, "Global") == 0)
        return global_privs;
    if (strcmp(object, "Collection") == 0)
        return coll_privs;
    if (strcmp(object, "User") == 0)
        return user_privs;
    return NULL;
}

const char *sx__rbac_priv_object(const char *privilege)
{
    static const char *const objects[] = { "Global", "Collection", "User" };
    for (size_t i = 0; privilege && i < sizeof objects / sizeof objects[0]; i++)
        if (in_list(privs_of(objects[i]), privilege))
            return objects[i];
    return NULL;
}

typedef struct route_priv {
    const char *route; /* after /v2/vectordb/ */
    const char *object;
    const char *priv;
} route_priv;

static const route_priv route_map[] = {
    { "collections/create", "Global", "CreateCollection" },
    { "collections/describe", "Global", "DescribeCollection" },
    { "collections/list", "Global", "ShowCollections" },
    { "collections/has", "Global", "DescribeCollection" },
    { "collections/drop", "Global", "DropCollection" },
    { "collections/get_stats", "Collection", "GetStatistics" },
    { "collections/load", "Collection", "Load" },
    { "collections/release", "Collection", "Release" },
    { "collections/refresh_load", "Collection", "Load" },
    { "collections/get_load_state", "Collection", "GetLoadState" },
    { "collections/rename", "Global", "RenameCollection" },
    { "collections/alter_properties", "Global", "CreateCollection" },
    { "collections/drop_properties", "Global", "CreateCollection" },
    { "collections/fields/alter_properties", "Global", "CreateCollection" },
    { "collections/fields/add", "Global", "CreateCollection" },
    { "collections/flush", "Collection", "Flush" },
    { "collections/compact", "Collection", "Compaction" },
    { "collections/get_compaction_state", "Collection", "Compaction" },
    { "entities/insert", "Collection", "Insert" },
    { "entities/upsert", "Collection", "Upsert" },
    { "entities/delete", "Collection", "Delete" },
    { "entities/query", "Collection", "Query" },
    { "entities/get", "Collection", "Query" },
    { "entities/search", "Collection", "Search" },
    { "entities/hybrid_search", "Collection", "Search" },
    { "entities/advanced_search", "Collection", "Search" },
    { "jobs/import/create", "Collection", "Import" },
    { "jobs/import/list", "Collection", "Import" },
    { "jobs/import/get_progress", "Collection", "Import" },
    { "jobs/import/describe", "Collection", "Import" },
    { "indexes/create", "Collection", "CreateIndex" },
    { "indexes/describe", "Collection", "IndexDetail" },
    { "indexes/list", "Collection", "IndexDetail" },
    { "indexes/drop", "Collection", "DropIndex" },
    { "indexes/alter_properties", "Collection", "CreateIndex" },
    { "indexes/drop_properties", "Collection", "CreateIndex" },
    { "partitions/list", "Collection", "ShowPartitions" },
    { "partitions/create", "Collection", "CreatePartition" },
    { "partitions/drop", "Collection", "DropPartition" },
    { "partitions/has", "Collection", "HasPartition" },
    { "partitions/get_stats", "Collection", "GetStatistics" },
    { "partitions/load", "Collection", "Load" },
    { "partitions/release", "Collection", "Release" },
    { "databases/list", "Global", "ListDatabases" },
    { "databases/create", "Global", "CreateDatabase" },
    { "databases/drop", "Global", "DropDatabase" },
    { "databases/describe", "Global", "DescribeDatabase" },
    { "databases/alter", "Global", "AlterDatabase" },
    { "databases/drop_properties", "Global", "AlterDatabase" },
    { "aliases/create", "Global", "CreateAlias" },
    { "aliases/drop", "Global", "DropAlias" },
    { "aliases/alter", "Global", "CreateAlias" },
    { "aliases/describe", "Global", "DescribeAlias" },
    { "aliases/list", "Global", "ListAliases" },
    { "users/create", "Global", "CreateOwnership" },
    { "users/drop", "Global", "DropOwnership" },
    { "users/list", "Global", "SelectOwnership" },
    { "users/describe", "User", "SelectUser" },
    { "users/update_password", "User", "UpdateUser" },
    { "users/grant_role", "Global", "ManageOwnership" },
    { "users/revoke_role", "Global", "ManageOwnership" },
    { "roles/create", "Global", "CreateOwnership" },
    { "roles/drop", "Global", "DropOwnership" },
    { "roles/list", "Global", "SelectOwnership" },
    { "roles/describe", "Global", "SelectOwnership" },
    { "roles/grant_privilege", "Global", "ManageOwnership" },
    { "roles/revoke_privilege", "Global", "ManageOwnership" },
    { NULL, NULL, NULL },
};

/* Sextant's own routes (handlers_console.c): reads, under the privileges of the Milvus routes
 * that show the same things. */
static const route_priv console_map[] = {
    { "server/describe", "Global", "ShowCollections" },
    { "collections/segments", "Collection", "GetStatistics" },
    { "collections/meta", "Global", "DescribeCollection" },
    { "bench/list", "Global", "ShowCollections" },
    { "bench/get", "Global", "ShowCollections" },
    { NULL, NULL, NULL },
};

bool sx__rbac_route_priv(const char *route, const char **object_type, const char **privilege)
{
    static const char pre[] = "/v2/vectordb/";
    static const char pre_sx[] = "/v2/sextant/";
    const route_priv *map = route_map;
    const char *tail = NULL;
    if (route && strncmp(route, pre, sizeof pre - 1) == 0) {
        tail = route + sizeof pre - 1;
    } else if (route && strncmp(route, pre_sx, sizeof pre_sx - 1) == 0) {
        tail = route + sizeof pre_sx - 1;
        map = console_map;
    } else {
        return false;
    }
    for (const route_priv *m = map; m->route; m++)
        if (strcmp(m->route, tail) == 0) {
            *object_type = m->object;
            *privilege = m->priv;
            return true;
        }
    return false;
}

/* ---------------------------------------------------------------- names */

static bool valid_name(const char *s)
{
    if (!s || !*s || strlen(s) > SX__RBAC_NAME_MAX)
        return false;
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')))
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            return false;
    return true;
}

static bool builtin_role(const char *n)
{
    return strcmp(n, "admin") == 0 || strcmp(n, "public") == 0;
}

static rb_user *find_user(sx__rbac *r, const char *n)
{
    for (size_t i = 0; i < r->n_users; i++)
        if (strcmp(r->users[i].name, n) == 0)
            return &r->users[i];
    return NULL;
}

static rb_role *find_role(sx__rbac *r, const char *n)
{
    for (size_t i = 0; i < r->n_roles; i++)
        if (strcmp(r->roles[i].name, n) == 0)
            return &r->roles[i];
    return NULL;
}

/* ---------------------------------------------------------------- memory */

static void grant_fini(rb_grant *g)
{
    sx__free(g->object);
    sx__free(g->name);
    sx__free(g->db);
    sx__free(g->priv);
    sx__free(g->grantor);
}

static void role_fini(rb_role *ro)
{
    for (size_t i = 0; i < ro->n_grants; i++)
        grant_fini(&ro->grants[i]);
    sx__free(ro->grants);
    sx__free(ro->name);
}

static void user_fini(rb_user *u)
{
    for (size_t i = 0; i < u->n_roles; i++)
        sx__free(u->roles[i]);
    sx__free(u->roles);
    sx__free(u->name);
    sx__free(u->hash);
}

static void state_free(rb_user *users, size_t nu, rb_role *roles, size_t nr)
{
    for (size_t i = 0; i < nu; i++)
        user_fini(&users[i]);
    sx__free(users);
    for (size_t i = 0; i < nr; i++)
        role_fini(&roles[i]);
    sx__free(roles);
}

/* ---------------------------------------------------------------- file */

static json_t *state_json(const sx__rbac *r)
{
    json_t *users = json_array(), *roles = json_array();
    for (size_t i = 0; i < r->n_users; i++) {
        const rb_user *u = &r->users[i];
        json_t *rl = json_array();
        for (size_t k = 0; k < u->n_roles; k++)
            json_array_append_new(rl, json_string(u->roles[k]));
        json_array_append_new(
            users, json_pack("{s:s,s:s,s:o}", "name", u->name, "hash", u->hash, "roles", rl));
    }
    for (size_t i = 0; i < r->n_roles; i++) {
        const rb_role *ro = &r->roles[i];
        json_t *gl = json_array();
        for (size_t k = 0; k < ro->n_grants; k++) {
            const rb_grant *g = &ro->grants[k];
            json_array_append_new(gl, json_pack("{s:s,s:s,s:s,s:s,s:s}", "objectType", g->object,
                                                "objectName", g->name, "dbName", g->db, "privilege",
                                                g->priv, "grantor", g->grantor));
        }
        json_array_append_new(roles, json_pack("{s:s,s:o}", "name", ro->name, "grants", gl));
    }
    return json_pack("{s:i,s:o,s:o}", "version", 1, "users", users, "roles", roles);
}

static sx_status save_locked(sx__rbac *r)
{
    json_t *j = state_json(r);
    char *text = j ? json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    if (!text)
        return sx__err(SX_ENOMEM, "rbac: encoding %s", r->path);
    sx_status st = sx__fs_write_atomic(r->path, text, strlen(text));
    free(text); /* jansson's allocator */
    return st;
}

static sx_status load(sx__rbac *r);

/* Writes the changed state. When the write fails, the state is read back from the file (which
 * the failed atomic replace left as it was), so memory never holds what the file does not; if
 * even that fails, no API user is left (every one is refused) until a restart. */
static sx_status commit_locked(sx__rbac *r)
{
    sx_status st = save_locked(r);
    if (st == SX_OK)
        return SX_OK;
    char msg[512];
    (void)snprintf(msg, sizeof msg, "%s", sx_errmsg());
    state_free(r->users, r->n_users, r->roles, r->n_roles);
    r->users = NULL;
    r->roles = NULL;
    r->n_users = r->n_roles = 0;
    if (load(r) != SX_OK) {
        state_free(r->users, r->n_users, r->roles, r->n_roles);
        r->users = NULL;
        r->roles = NULL;
        r->n_users = r->n_roles = 0;
    }
    return sx__err(st, "%s (nothing changed)", msg);
}

static char *jdup(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? sx__strdup(s) : NULL;
}

static sx_status load(sx__rbac *r)
{
    void *data = NULL;
    size_t len = 0;
    if (!sx__fs_exists(r->path))
        return SX_OK;
    sx_status st = sx__fs_read_all(r->path, 64u << 20, &data, &len);
    if (st != SX_OK)
        return st;
    json_error_t e;
    json_t *j = json_loadb(data, len, 0, &e);
    sx__free(data);
    const json_t *users = json_object_get(j, "users"), *roles = json_object_get(j, "roles");
    if (!j || json_integer_value(json_object_get(j, "version")) != 1 || !json_is_array(users) ||
        !json_is_array(roles)) {
        json_decref(j);
        return sx__err(SX_ECORRUPT, "rbac: %s is not a users-and-roles file of version 1", r->path);
    }
    size_t nu = json_array_size(users), nr = json_array_size(roles);
    r->users = sx__calloc(nu + 1, sizeof *r->users);
    r->roles = sx__calloc(nr + 1, sizeof *r->roles);
    st = r->users && r->roles ? SX_OK : sx__err(SX_ENOMEM, "rbac");
    for (size_t i = 0; st == SX_OK && i < nu; i++) {
        const json_t *u = json_array_get(users, i), *rl = json_object_get(u, "roles");
        rb_user *x = &r->users[r->n_users++];
        x->name = jdup(u, "name");
        x->hash = jdup(u, "hash");
        size_t n = json_array_size(rl);
        x->roles = sx__calloc(n + 1, sizeof *x->roles);
        if (!x->name || !x->hash || !x->roles || !valid_name(x->name)) {
            st = sx__err(SX_ECORRUPT, "rbac: %s: user %zu is malformed", r->path, i);
            break;
        }
        for (size_t k = 0; k < n; k++) {
            const char *rn = json_string_value(json_array_get(rl, k));
            x->roles[k] = rn ? sx__strdup(rn) : NULL;
            if (!x->roles[k]) {
                st = sx__err(SX_ECORRUPT, "rbac: %s: user %s has a malformed role", r->path,
                             x->name);
                break;
            }
            x->n_roles++;
        }
    }
    for (size_t i = 0; st == SX_OK && i < nr; i++) {
        const json_t *ro = json_array_get(roles, i), *gl = json_object_get(ro, "grants");
        rb_role *x = &r->roles[r->n_roles++];
        x->name = jdup(ro, "name");
        size_t n = json_array_size(gl);
        x->grants = sx__calloc(n + 1, sizeof *x->grants);
        if (!x->name || !x->grants || !valid_name(x->name)) {
            st = sx__err(SX_ECORRUPT, "rbac: %s: role %zu is malformed", r->path, i);
            break;
        }
        for (size_t k = 0; k < n; k++) {
            const json_t *g = json_array_get(gl, k);
            rb_grant *y = &x->grants[x->n_grants++];
            y->object = jdup(g, "objectType");
            y->name = jdup(g, "objectName");
            y->db = jdup(g, "dbName");
            y->priv = jdup(g, "privilege");
            y->grantor = jdup(g, "grantor");
            if (!y->object || !y->name || !y->db || !y->priv || !y->grantor) {
                st = sx__err(SX_ECORRUPT, "rbac: %s: role %s has a malformed grant", r->path,
                             x->name);
                break;
            }
        }
    }
    json_decref(j);
    return st;
}

sx_status sx__rbac_open(const char *dir, sx__rbac **out)
{
    sx__rbac *r = sx__calloc(1, sizeof *r);
    if (!r)
        return sx__err(SX_ENOMEM, "rbac");
    pthread_mutex_init(&r->mu, NULL);
    char path[4096];
    (void)snprintf(path, sizeof path, "%s/rbac.json", dir);
    r->path = sx__strdup(path);
    sx_status st = r->path ? SX_OK : sx__err(SX_ENOMEM, "rbac");
    if (st == SX_OK && getrandom(r->pepper, sizeof r->pepper, 0) != (ssize_t)sizeof r->pepper)
        st = sx__err(SX_EIO, "rbac: getrandom failed");
    if (st == SX_OK)
        st = load(r);
    if (st != SX_OK) {
        sx__rbac_close(r);
        return st;
    }
    *out = r;
    return SX_OK;
}

void sx__rbac_close(sx__rbac *r)
{
    if (!r)
        return;
    state_free(r->users, r->n_users, r->roles, r->n_roles);
    pthread_mutex_destroy(&r->mu);
    sx__free(r->path);
    sx__free(r);
}

/* ---------------------------------------------------------------- passwords */

/* SHA-256(pepper || pw); all zero (never a match: digest_eq then compares with a real digest
 * only by chance 2^-256) when out of memory. */
static void pw_digest(const sx__rbac *r, const char *pw, size_t len, unsigned char out[32])
{
    memset(out, 0, 32);
    EVP_MD_CTX *x = EVP_MD_CTX_new();
    if (x && EVP_DigestInit_ex(x, EVP_sha256(), NULL) == 1 &&
        EVP_DigestUpdate(x, r->pepper, sizeof r->pepper) == 1 && EVP_DigestUpdate(x, pw, len) == 1)
        (void)EVP_DigestFinal_ex(x, out, NULL);
    EVP_MD_CTX_free(x);
}

static bool digest_eq(const unsigned char *a, const unsigned char *b)
{
    unsigned char d = 0;
    for (size_t i = 0; i < 32; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

static sx_status check_pw(const char *pw)
{
    size_t n = pw ? strlen(pw) : 0;
    if (n < SX__RBAC_PW_MIN || n > SX__RBAC_PW_MAX)
        return sx__err(SX_EINVAL, "invalid password length: the password must have %d to %d bytes",
                       SX__RBAC_PW_MIN, SX__RBAC_PW_MAX);
    return SX_OK;
}

static sx_status hash_pw(const char *pw, char **out)
{
    unsigned char salt[RB_SALT];
    if (getrandom(salt, sizeof salt, 0) != (ssize_t)sizeof salt)
        return sx__err(SX_EIO, "rbac: getrandom failed");
    char *enc = sx__malloc(RB_ENC);
    if (!enc)
        return sx__err(SX_ENOMEM, "rbac");
    int rc = argon2id_hash_encoded(RB_T, RB_M_KIB, RB_P, pw, strlen(pw), salt, sizeof salt, RB_HASH,
                                   enc, RB_ENC);
    if (rc != ARGON2_OK) {
        sx__free(enc);
        return sx__err(SX_ENOMEM, "rbac: argon2id: %s", argon2_error_message(rc));
    }
    *out = enc;
    return SX_OK;
}

int sx__rbac_verify(sx__rbac *r, const char *user, const char *pw, size_t pw_len)
{
    unsigned char dg[32];
    pw_digest(r, pw, pw_len, dg);
    pthread_mutex_lock(&r->mu);
    rb_user *u = find_user(r, user);
    if (!u) {
        pthread_mutex_unlock(&r->mu);
        return 0;
    }
    if (u->cached && digest_eq(u->digest, dg)) {
        pthread_mutex_unlock(&r->mu);
        return 1;
    }
    /* the full cost, outside the lock, on a copy of the hash */
    char *hash = sx__strdup(u->hash);
    pthread_mutex_unlock(&r->mu);
    if (!hash)
        return -1; /* out of memory: refused, not "no such user" */
    int rc = argon2id_verify(hash, pw, pw_len);
    if (rc == ARGON2_OK) {
        pthread_mutex_lock(&r->mu);
        u = find_user(r, user);
        if (u && strcmp(u->hash, hash) == 0) { /* not changed meanwhile */
            memcpy(u->digest, dg, sizeof dg);
            u->cached = true;
        }
        pthread_mutex_unlock(&r->mu);
    }
    sx__free(hash);
    return rc == ARGON2_OK ? 1 : -1;
}

/* ---------------------------------------------------------------- checks */

static bool grant_covers(
    const rb_grant *g, const char *object, const char *priv, const char *db, const char *name)
{
    bool all = strcmp(g->priv, "All") == 0 || strcmp(g->priv, "*") == 0;
    if (!all && strcmp(g->priv, priv) != 0)
        return false;
    if (strcmp(g->db, "*") != 0 && strcmp(g->db, db) != 0)
        return false;
    if (strcmp(g->object, "Global") == 0) /* Global privileges (or All) hold everywhere */
        return true;
    if (strcmp(g->object, object) != 0)
        return false;
    return strcmp(g->name, "*") == 0 || strcmp(g->name, name) == 0;
}

static bool public_has(const char *priv)
{
    return strcmp(priv, "DescribeCollection") == 0 || strcmp(priv, "ShowCollections") == 0 ||
           strcmp(priv, "IndexDetail") == 0;
}

bool sx__rbac_allowed(sx__rbac *r,
                      const sx__principal *p,
                      const char *route,
                      const char *db,
                      const json_t *body,
                      char *why,
                      size_t why_len)
{
    if (p->kind == SX__WHO_SUPER)
        return true;
    if (p->kind == SX__WHO_RO) /* the users file's read-only entries: is_write decides */
        return true;
    const char *object = NULL, *priv = NULL;
    const char *coll = json_string_value(json_object_get(body, "collectionName"));
    const char *uname = json_string_value(json_object_get(body, "userName"));
    db = db && *db ? db : "default";
    if (!sx__rbac_route_priv(route, &object, &priv)) {
        (void)snprintf(why, why_len, "permission deny to %s: %s is for superusers only", p->user,
                       route);
        return false;
    }
    /* one's own password and description */
    if (strcmp(object, "User") == 0 && uname && strcmp(uname, p->user) == 0)
        return true;
    const char *name = strcmp(object, "User") == 0 ? (uname ? uname : "") : (coll ? coll : "");
    if (public_has(priv)) /* every user holds the public role */
        return true;
    bool ok = false;
    pthread_mutex_lock(&r->mu);
    const rb_user *u = find_user(r, p->user);
    for (size_t i = 0; u && !ok && i < u->n_roles; i++) {
        if (strcmp(u->roles[i], "admin") == 0) {
            ok = true;
            break;
        }
        const rb_role *ro = find_role(r, u->roles[i]);
        for (size_t k = 0; ro && !ok && k < ro->n_grants; k++)
            ok = grant_covers(&ro->grants[k], object, priv, db, name);
    }
    pthread_mutex_unlock(&r->mu);
    if (!ok) {
        if (strcmp(object, "Global") == 0)
            (void)snprintf(why, why_len, "Privilege%s: permission deny to %s in the `%s` database",
                           priv, p->user, db);
        else
            (void)snprintf(why, why_len,
                           "Privilege%s: permission deny to %s in the `%s` database (%s %s)", priv,
                           p->user, db, object, name[0] ? name : "*");
    }
    return ok;
}

/* ---------------------------------------------------------------- management */

static sx_status check_user_name(const char *n)
{
    if (!valid_name(n))
        return sx__err(SX_EINVAL,
                       "invalid user name %s: it must start with a letter and have only letters, "
                       "digits and underscores, at most %d",
                       n ? n : "(none)", SX__RBAC_NAME_MAX);
    return SX_OK;
}

static sx_status check_role_name(const char *n)
{
    if (!valid_name(n))
        return sx__err(SX_EINVAL,
                       "invalid role name %s: it must start with a letter and have only letters, "
                       "digits and underscores, at most %d",
                       n ? n : "(none)", SX__RBAC_NAME_MAX);
    return SX_OK;
}

sx_status sx__rbac_user_create(sx__rbac *r, const char *user, const char *pw)
{
    sx_status st = check_user_name(user);
    if (st == SX_OK)
        st = check_pw(pw);
    if (st != SX_OK)
        return st;
    char *hash = NULL;
    st = hash_pw(pw, &hash);
    if (st != SX_OK)
        return st;
    char *name = sx__strdup(user);
    pthread_mutex_lock(&r->mu);
    rb_user *nu = name ? sx__realloc(r->users, (r->n_users + 1) * sizeof *nu) : NULL;
    if (!nu) {
        st = sx__err(SX_ENOMEM, "rbac");
    } else {
        r->users = nu;
        if (find_user(r, user)) {
            st = sx__err(SX_EEXIST, "user already exists: %s", user);
        } else {
            rb_user *u = &r->users[r->n_users++];
            memset(u, 0, sizeof *u);
            u->name = name;
            u->hash = hash;
            name = hash = NULL;
            st = commit_locked(r);
        }
    }
    pthread_mutex_unlock(&r->mu);
    sx__free(name);
    sx__free(hash);
    return st;
}

sx_status sx__rbac_user_drop(sx__rbac *r, const char *user)
{
    pthread_mutex_lock(&r->mu);
    rb_user *u = user ? find_user(r, user) : NULL;
    sx_status st = SX_OK;
    if (!u) {
        st = sx__err(SX_ENOTFOUND, "user not found: %s", user ? user : "(none)");
    } else {
        size_t at = (size_t)(u - r->users);
        user_fini(u);
        memmove(u, u + 1, (r->n_users - at - 1) * sizeof *u);
        r->n_users--;
        st = commit_locked(r);
    }
    pthread_mutex_unlock(&r->mu);
    return st;
}

sx_status
sx__rbac_user_passwd(sx__rbac *r, const char *user, const char *old_pw, const char *new_pw)
{
    sx_status st = check_pw(new_pw);
    if (st != SX_OK)
        return st;
    if (!user || !old_pw)
        return sx__err(SX_EINVAL, "the user name and the old password are required");
    int v = sx__rbac_verify(r, user, old_pw, strlen(old_pw));
    if (v == 0)
        return sx__err(SX_ENOTFOUND, "user not found: %s", user);
    if (v < 0)
        return sx__err(SX_EINVAL, "old password not correct for %s", user);
    char *hash = NULL;
    st = hash_pw(new_pw, &hash);
    if (st != SX_OK)
        return st;
    pthread_mutex_lock(&r->mu);
    rb_user *u = find_user(r, user);
    if (!u) {
        st = sx__err(SX_ENOTFOUND, "user not found: %s", user);
    } else {
        char *old = u->hash;
        u->hash = hash;
        u->cached = false;
        hash = old; /* freed below */
        st = commit_locked(r);
    }
    pthread_mutex_unlock(&r->mu);
    sx__free(hash);
    return st;
}

sx_status sx__rbac_user_role(sx__rbac *r, const char *user, const char *role, bool grant)
{
    if (!user || !role)
        return sx__err(SX_EINVAL, "the user name and the role name are required");
    pthread_mutex_lock(&r->mu);
    rb_user *u = find_user(r, user);
    sx_status st = SX_OK;
    if (!u)
        st = sx__err(SX_ENOTFOUND, "user not found: %s", user);
    else if (!builtin_role(role) && !find_role(r, role))
        st = sx__err(SX_ENOTFOUND, "role not found: %s", role);
    size_t at = SIZE_MAX;
    for (size_t i = 0; st == SX_OK && i < u->n_roles; i++)
        if (strcmp(u->roles[i], role) == 0)
            at = i;
    if (st == SX_OK && grant && at == SIZE_MAX) {
        char *copy = sx__strdup(role);
        char **nr = copy ? sx__realloc(u->roles, (u->n_roles + 1) * sizeof *nr) : NULL;
        if (!nr) {
            sx__free(copy);
            st = sx__err(SX_ENOMEM, "rbac");
        } else {
            u->roles = nr;
            u->roles[u->n_roles++] = copy;
            st = commit_locked(r);
        }
    } else if (st == SX_OK && !grant && at != SIZE_MAX) {
        sx__free(u->roles[at]);
        memmove(&u->roles[at], &u->roles[at + 1], (u->n_roles - at - 1) * sizeof *u->roles);
        u->n_roles--;
        st = commit_locked(r);
    }
    pthread_mutex_unlock(&r->mu);
    return st;
}

sx_status sx__rbac_role_create(sx__rbac *r, const char *role)
{
    sx_status st = check_role_name(role);
    if (st != SX_OK)
        return st;
    char *name = sx__strdup(role);
    pthread_mutex_lock(&r->mu);
    rb_role *nr = name ? sx__realloc(r->roles, (r->n_roles + 1) * sizeof *nr) : NULL;
    if (!nr) {
        st = sx__err(SX_ENOMEM, "rbac");
    } else {
        r->roles = nr;
        if (builtin_role(role) || find_role(r, role)) {
            st = sx__err(SX_EEXIST, "role already exists: %s", role);
        } else {
            rb_role *ro = &r->roles[r->n_roles++];
            memset(ro, 0, sizeof *ro);
            ro->name = name;
            name = NULL;
            st = commit_locked(r);
        }
    }
    pthread_mutex_unlock(&r->mu);
    sx__free(name);
    return st;
}

sx_status sx__rbac_role_drop(sx__rbac *r, const char *role)
{
    if (!role)
        return sx__err(SX_EINVAL, "the role name is required");
    if (builtin_role(role))
        return sx__err(SX_EBUSY, "the default role %s can not be dropped", role);
    pthread_mutex_lock(&r->mu);
    rb_role *ro = find_role(r, role);
    sx_status st = SX_OK;
    if (!ro) {
        st = sx__err(SX_ENOTFOUND, "role not found: %s", role);
    } else if (ro->n_grants > 0) {
        st = sx__err(SX_EBUSY,
                     "fail to drop the role that it has privileges: %s has %zu grants; revoke "
                     "them first",
                     role, ro->n_grants);
    } else {
        /* Milvus takes the role from its users too */
        size_t at = (size_t)(ro - r->roles);
        role_fini(ro);
        memmove(ro, ro + 1, (r->n_roles - at - 1) * sizeof *ro);
        r->n_roles--;
        for (size_t i = 0; i < r->n_users; i++) {
            rb_user *u = &r->users[i];
            for (size_t k = 0; k < u->n_roles;) {
                if (strcmp(u->roles[k], role) == 0) {
                    sx__free(u->roles[k]);
                    memmove(&u->roles[k], &u->roles[k + 1],
                            (u->n_roles - k - 1) * sizeof *u->roles);
                    u->n_roles--;
                } else {
                    k++;
                }
            }
        }
        st = commit_locked(r);
    }
    pthread_mutex_unlock(&r->mu);
    return st;
}

sx_status sx__rbac_grant(sx__rbac *r,
                         const char *role,
                         const char *object_type,
                         const char *object_name,
                         const char *db,
                         const char *privilege,
                         const char *grantor,
                         bool grant)
{
    if (!role || !object_type || !privilege)
        return sx__err(SX_EINVAL, "roleName, objectType and privilege are required");
    const char *const *pl = privs_of(object_type);
    if (!pl)
        return sx__err(SX_EINVAL,
                       "not found the object type[name: %s], supported the object types: "
                       "Global, Collection, User",
                       object_type);
    bool all = strcmp(privilege, "All") == 0 || strcmp(privilege, "*") == 0;
    if (!all && !in_list(pl, privilege))
        return sx__err(SX_EINVAL,
                       "not found the privilege name[%s] in the privilege list of "
                       "object type %s",
                       privilege, object_type);
    if (builtin_role(role))
        return sx__err(SX_EBUSY, "the privileges of the default role %s can not be changed", role);
    const char *name = object_name && *object_name ? object_name : "*";
    if (strcmp(object_type, "Global") == 0)
        name = "*";
    db = db && *db ? db : "default";
    pthread_mutex_lock(&r->mu);
    rb_role *ro = find_role(r, role);
    sx_status st = SX_OK;
    size_t at = SIZE_MAX;
    for (size_t k = 0; ro && k < ro->n_grants; k++) {
        const rb_grant *g = &ro->grants[k];
        if (!strcmp(g->object, object_type) && !strcmp(g->name, name) && !strcmp(g->db, db) &&
            !strcmp(g->priv, privilege))
            at = k;
    }
    if (!ro) {
        st = sx__err(SX_ENOTFOUND, "role not found: %s", role);
    } else if (grant && at == SIZE_MAX) {
        rb_grant g = { sx__strdup(object_type), sx__strdup(name), sx__strdup(db),
                       sx__strdup(privilege), sx__strdup(grantor ? grantor : "") };
        rb_grant *ng = sx__realloc(ro->grants, (ro->n_grants + 1) * sizeof *ng);
        if (!ng || !g.object || !g.name || !g.db || !g.priv || !g.grantor) {
            if (ng)
                ro->grants = ng;
            grant_fini(&g);
            st = sx__err(SX_ENOMEM, "rbac");
        } else {
            ro->grants = ng;
            ro->grants[ro->n_grants++] = g;
            st = commit_locked(r);
        }
    } else if (!grant && at != SIZE_MAX) {
        grant_fini(&ro->grants[at]);
        memmove(&ro->grants[at], &ro->grants[at + 1], (ro->n_grants - at - 1) * sizeof *ro->grants);
        ro->n_grants--;
        st = commit_locked(r);
    }
    pthread_mutex_unlock(&r->mu);
    return st;
}

/* ---------------------------------------------------------------- listings */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

json_t *sx__rbac_users_json(sx__rbac *r)
{
    pthread_mutex_lock(&r->mu);
    const char **names = sx__calloc(r->n_users + 1, sizeof *names);
    json_t *a = names ? json_array() : NULL;
    for (size_t i = 0; a && i < r->n_users; i++)
        names[i] = r->users[i].name;
    if (a) {
        qsort(names, r->n_users, sizeof *names, cmp_str);
        for (size_t i = 0; i < r->n_users; i++)
            json_array_append_new(a, json_string(names[i]));
    }
    pthread_mutex_unlock(&r->mu);
    sx__free(names);
    return a;
}

json_t *sx__rbac_user_roles_json(sx__rbac *r, const char *user, sx_status *st)
{
    pthread_mutex_lock(&r->mu);
    const rb_user *u = user ? find_user(r, user) : NULL;
    json_t *a = NULL;
    if (!u) {
        *st = sx__err(SX_ENOTFOUND, "user not found: %s", user ? user : "(none)");
    } else {
        a = json_array();
        for (size_t k = 0; a && k < u->n_roles; k++)
            json_array_append_new(a, json_string(u->roles[k]));
        *st = a ? SX_OK : sx__err(SX_ENOMEM, "rbac");
    }
    pthread_mutex_unlock(&r->mu);
    return a;
}

json_t *sx__rbac_roles_json(sx__rbac *r)
{
    json_t *a = json_array();
    json_array_append_new(a, json_string("admin"));
    json_array_append_new(a, json_string("public"));
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n_roles; i++)
        json_array_append_new(a, json_string(r->roles[i].name));
    pthread_mutex_unlock(&r->mu);
    return a;
}

json_t *sx__rbac_role_grants_json(sx__rbac *r, const char *role, sx_status *st)
{
    json_t *a = json_array();
    if (!a) {
        *st = sx__err(SX_ENOMEM, "rbac");
        return NULL;
    }
    *st = SX_OK;
    if (role && strcmp(role, "public") == 0) {
        static const char *const pub[] = { "DescribeCollection", "ShowCollections", "IndexDetail" };
        for (size_t i = 0; i < 3; i++)
            json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:s,s:s}", "objectType",
                                               i < 2 ? "Global" : "Collection", "objectName", "*",
                                               "privilege", pub[i], "dbName", "*", "grantor", ""));
        return a;
    }
    if (role && strcmp(role, "admin") == 0) {
        json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:s,s:s}", "objectType", "Global",
                                           "objectName", "*", "privilege", "All", "dbName", "*",
                                           "grantor", ""));
        return a;
    }
    pthread_mutex_lock(&r->mu);
    const rb_role *ro = role ? find_role(r, role) : NULL;
    if (!ro) {
        *st = sx__err(SX_ENOTFOUND, "role not found: %s", role ? role : "(none)");
        json_decref(a);
        a = NULL;
    }
    for (size_t k = 0; ro && k < ro->n_grants; k++) {
        const rb_grant *g = &ro->grants[k];
        json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:s,s:s}", "objectType", g->object,
                                           "objectName", g->name, "privilege", g->priv, "dbName",
                                           g->db, "grantor", g->grantor));
    }
    pthread_mutex_unlock(&r->mu);
    return a;
}
