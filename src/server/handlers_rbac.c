/*
 * handlers_rbac.c: /v2/vectordb/users/... and /v2/vectordb/roles/... (Milvus REST v2's RBAC
 * routes) over the server's users-and-roles store (rbac.c, which also says who may call what).
 *
 *   users/create {userName, password}             users/drop {userName}
 *   users/list {} -> [names]                      users/describe {userName} -> [role names]
 *   users/update_password {userName, password, newPassword}
 *   users/grant_role, users/revoke_role {userName, roleName}
 *   roles/create, roles/drop {roleName}           roles/list {} -> [names]
 *   roles/describe {roleName} -> [{objectType, objectName, privilege, dbName, grantor}]
 *   roles/grant_privilege, roles/revoke_privilege {roleName, objectType, objectName, privilege,
 *     dbName (optional: the request's database)}
 *
 * Errors: a bad name, password or privilege 1100; an existing or unknown user or role, a built-in
 * role changed, a role dropped while it has grants 65535 with the reason. Granting what is held or
 * revoking what is not is a success that changes nothing (as Milvus).
 * Thread-safety: handlers keep no state.
 */
#include <string.h>

#include "server/rbac.h"
#include "server/server.h"
#include "util/err.h"

static void rb_fail(sx__resp *rs, sx_status st)
{
    char buf[512];
    sx__fail(rs, st == SX_EINVAL ? SX__MC_INVALID_PARAM : SX__MC_UNEXPECTED, "%s",
             sx__errmsg_safe(buf, sizeof buf));
}

static void rb_done(sx__resp *rs, sx_status st)
{
    if (st == SX_OK)
        sx__ok(rs, NULL);
    else
        rb_fail(rs, st);
}

static sx__rbac *rb(sx__req *rq)
{
    return sx__server_rbac(rq->srv);
}

static void h_user_create(sx__req *rq, sx__resp *rs)
{
    const char *user = NULL, *pw = NULL;
    if (!sx__need_str(rq, rs, "userName", "UserReq", &user) ||
        !sx__need_str(rq, rs, "password", "PasswordReq", &pw))
        return;
    rb_done(rs, sx__rbac_user_create(rb(rq), user, pw));
}

static void h_user_drop(sx__req *rq, sx__resp *rs)
{
    const char *user = NULL;
    if (!sx__need_str(rq, rs, "userName", "UserReq", &user))
        return;
    rb_done(rs, sx__rbac_user_drop(rb(rq), user));
}

static void h_user_list(sx__req *rq, sx__resp *rs)
{
    json_t *a = sx__rbac_users_json(rb(rq));
    if (!a)
        sx__fail(rs, SX__MC_UNEXPECTED, "out of memory");
    else
        sx__ok(rs, a);
}

static void h_user_describe(sx__req *rq, sx__resp *rs)
{
    const char *user = NULL;
    if (!sx__need_str(rq, rs, "userName", "UserReq", &user))
        return;
    sx_status st = SX_OK;
    json_t *a = sx__rbac_user_roles_json(rb(rq), user, &st);
    if (!a)
        rb_fail(rs, st);
    else
        sx__ok(rs, a);
}

static void h_user_passwd(sx__req *rq, sx__resp *rs)
{
    const char *user = NULL, *pw = NULL, *npw = NULL;
    if (!sx__need_str(rq, rs, "userName", "PasswordReq", &user) ||
        !sx__need_str(rq, rs, "password", "PasswordReq", &pw) ||
        !sx__need_str(rq, rs, "newPassword", "PasswordReq", &npw))
        return;
    rb_done(rs, sx__rbac_user_passwd(rb(rq), user, pw, npw));
}

static void user_role(sx__req *rq, sx__resp *rs, bool grant)
{
    const char *user = NULL, *role = NULL;
    if (!sx__need_str(rq, rs, "userName", "UserRoleReq", &user) ||
        !sx__need_str(rq, rs, "roleName", "UserRoleReq", &role))
        return;
    rb_done(rs, sx__rbac_user_role(rb(rq), user, role, grant));
}

static void h_user_grant_role(sx__req *rq, sx__resp *rs)
{
    user_role(rq, rs, true);
}

static void h_user_revoke_role(sx__req *rq, sx__resp *rs)
{
    user_role(rq, rs, false);
}

static void h_role_create(sx__req *rq, sx__resp *rs)
{
    const char *role = NULL;
    if (!sx__need_str(rq, rs, "roleName", "RoleReq", &role))
        return;
    rb_done(rs, sx__rbac_role_create(rb(rq), role));
}

static void h_role_drop(sx__req *rq, sx__resp *rs)
{
    const char *role = NULL;
    if (!sx__need_str(rq, rs, "roleName", "RoleReq", &role))
        return;
    rb_done(rs, sx__rbac_role_drop(rb(rq), role));
}

static void h_role_list(sx__req *rq, sx__resp *rs)
{
    sx__ok(rs, sx__rbac_roles_json(rb(rq)));
}

static void h_role_describe(sx__req *rq, sx__resp *rs)
{
    const char *role = NULL;
    if (!sx__need_str(rq, rs, "roleName", "RoleReq", &role))
        return;
    sx_status st = SX_OK;
    json_t *a = sx__rbac_role_grants_json(rb(rq), role, &st);
    if (!a)
        rb_fail(rs, st);
    else
        sx__ok(rs, a);
}

static void role_priv(sx__req *rq, sx__resp *rs, bool grant)
{
    const char *role = NULL, *otype = NULL, *oname = NULL, *priv = NULL, *db = NULL;
    if (!sx__need_str(rq, rs, "roleName", "GrantReq", &role) ||
        !sx__need_str(rq, rs, "objectType", "GrantReq", &otype) ||
        !sx__need_str(rq, rs, "objectName", "GrantReq", &oname) ||
        !sx__need_str(rq, rs, "privilege", "GrantReq", &priv))
        return;
    if (sx__jstr(rq->body, "dbName", &db) != 0) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: dbName must "
                 "be a string");
        return;
    }
    rb_done(rs, sx__rbac_grant(rb(rq), role, otype, oname, db && *db ? db : rq->db_name, priv,
                               rq->user && *rq->user ? rq->user : "", grant));
}

static void h_role_grant(sx__req *rq, sx__resp *rs)
{
    role_priv(rq, rs, true);
}

static void h_role_revoke(sx__req *rq, sx__resp *rs)
{
    role_priv(rq, rs, false);
}

const sx__route sx__routes_rbac[] = {
    { "/v2/vectordb/users/create", h_user_create, true },
    { "/v2/vectordb/users/drop", h_user_drop, true },
    { "/v2/vectordb/users/list", h_user_list, false },
    { "/v2/vectordb/users/describe", h_user_describe, false },
    { "/v2/vectordb/users/update_password", h_user_passwd, true },
    { "/v2/vectordb/users/grant_role", h_user_grant_role, true },
    { "/v2/vectordb/users/revoke_role", h_user_revoke_role, true },
    { "/v2/vectordb/roles/create", h_role_create, true },
    { "/v2/vectordb/roles/drop", h_role_drop, true },
    { "/v2/vectordb/roles/list", h_role_list, false },
    { "/v2/vectordb/roles/describe", h_role_describe, false },
    { "/v2/vectordb/roles/grant_privilege", h_role_grant, true },
    { "/v2/vectordb/roles/revoke_privilege", h_role_revoke, true },
    { NULL, NULL, false },
};
