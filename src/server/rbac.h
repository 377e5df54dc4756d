/*
 * rbac.h: users, roles and privileges (Milvus's RBAC, as its REST v2 and gRPC APIs expose it).
 * The model, who is checked and how passwords are kept: the note at the top of rbac.c.
 * Thread-safety: every function may be called from any thread (one mutex inside).
 */
#ifndef SX_SERVER_RBAC_H
#define SX_SERVER_RBAC_H
#include <jansson.h>
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>

#define SX__RBAC_NAME_MAX 32 /* user and role names, as Milvus's limit */
#define SX__RBAC_PW_MIN   6
#define SX__RBAC_PW_MAX   256

typedef struct sx__rbac sx__rbac;

/* Who a request comes from. */
typedef enum sx__who_kind {
    SX__WHO_SUPER = 0, /* no authentication, the token, or a read-write users-file entry */
    SX__WHO_RO = 1,    /* a users-file entry marked :ro (no write route) */
    SX__WHO_USER = 2   /* a user created through the API: checked against its roles */
} sx__who_kind;

typedef struct sx__principal {
    sx__who_kind kind;
    char user[SX__RBAC_NAME_MAX + 1]; /* SX__WHO_USER: the user's name */
} sx__principal;

/* Opens (creating on first change) <dir>/rbac.json. Errors: SX_ECORRUPT (unreadable file:
 * named), SX_EIO, SX_ENOMEM. */
SX_NODISCARD sx_status sx__rbac_open(const char *dir, sx__rbac **out);
void sx__rbac_close(sx__rbac *r);

/* Verifies user:password against the stored users: 1 a match, 0 no such user, -1 a wrong
 * password. The first match of a user costs an argon2id verification (tens of ms); later ones a
 * constant-time compare with a digest kept in memory (forgotten on a password change). */
int sx__rbac_verify(sx__rbac *r, const char *user, const char *pw, size_t pw_len);

/* Whether p may call `route` (a /v2/vectordb/... path) on database `db` with the request body
 * (its "collectionName", and "userName" for a user's own password change). On false, why[] says
 * which privilege was missing (Milvus's wording). */
bool sx__rbac_allowed(sx__rbac *r,
                      const sx__principal *p,
                      const char *route,
                      const char *db,
                      const json_t *body,
                      char *why,
                      size_t why_len);
/* The privilege a route needs (object type "Global" or "Collection" or "User", privilege name);
 * false for a route the map lacks (then only superusers may call it). */
bool sx__rbac_route_priv(const char *route, const char **object_type, const char **privilege);

/* The object type a privilege belongs to ("Global", "Collection", "User"), NULL for a name no
 * table has (gRPC's OperatePrivilegeV2 names the privilege and the collection only). */
const char *sx__rbac_priv_object(const char *privilege);
/* Management. Errors: SX_EINVAL (bad name, password length, unknown object type or privilege:
 * the message says which), SX_EEXIST, SX_ENOTFOUND, SX_EBUSY (a built-in role; a role that still
 * has grants), SX_EIO (the file could not be written: nothing changed). Each change is written
 * to the file (atomic replace) before it returns. */
SX_NODISCARD sx_status sx__rbac_user_create(sx__rbac *r, const char *user, const char *pw);
SX_NODISCARD sx_status sx__rbac_user_drop(sx__rbac *r, const char *user);
/* old_pw must be the current password. */
SX_NODISCARD sx_status sx__rbac_user_passwd(sx__rbac *r,
                                            const char *user,
                                            const char *old_pw,
                                            const char *new_pw);
SX_NODISCARD sx_status sx__rbac_user_role(sx__rbac *r,
                                          const char *user,
                                          const char *role,
                                          bool grant);
SX_NODISCARD sx_status sx__rbac_role_create(sx__rbac *r, const char *role);
SX_NODISCARD sx_status sx__rbac_role_drop(sx__rbac *r, const char *role);
/* object_name "" = "*"; db NULL or "" = "default". */
SX_NODISCARD sx_status sx__rbac_grant(sx__rbac *r,
                                      const char *role,
                                      const char *object_type,
                                      const char *object_name,
                                      const char *db,
                                      const char *privilege,
                                      const char *grantor,
                                      bool grant);
/* JSON answers (new references): the user names (sorted); a user's role names; the role names
 * (admin and public first); a role's grants as [{objectType, objectName, privilege, dbName,
 * grantor}]. NULL with SX_ENOTFOUND / SX_ENOMEM in *st. */
json_t *sx__rbac_users_json(sx__rbac *r);
json_t *sx__rbac_user_roles_json(sx__rbac *r, const char *user, sx_status *st);
json_t *sx__rbac_roles_json(sx__rbac *r);
json_t *sx__rbac_role_grants_json(sx__rbac *r, const char *role, sx_status *st);

/* The server's (http.c): never NULL while the server runs. */
struct sx_server;
sx__rbac *sx__server_rbac(struct sx_server *s);

/* Standard base64 (padding optional) into out (cap bytes, NUL-terminated when room): the length,
 * or -1 (bad input, too long). http.c's decoder, for the gRPC credential RPCs' passwords. */
long sx__b64_decode(const char *s, char *out, size_t cap);

/* The authorization metadata of a gRPC call (base64 of "user:password" or of a token; "Basic x",
 * "Bearer x" too) checked against the server's credentials, then the API's users: 0 and *who, or
 * -1 (not authenticated). Without authentication on, always 0 and a superuser. */
int sx__server_auth_who(const struct sx_server *s, const char *meta, sx__principal *who);
/* sx__server_call on behalf of `who`: an API user's privileges are checked first (a denial is
 * {"code":1401,"message":...}). */
json_t *sx__server_call_who(struct sx_server *s,
                            const char *route,
                            const json_t *body,
                            const char *db,
                            const sx__principal *who,
                            double timeout_s,
                            const char *log_name);

#endif
