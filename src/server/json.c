/*
 * json.c: the JSON conventions of Milvus's REST API v2 on top of jansson.
 *
 * Milvus decodes request bodies with Go's encoding/json through gin binding, so member names
 * match case-insensitively (`autoId` finds `autoID`), unknown members are ignored, a JSON null is
 * the zero value, and validator failures produce the message
 *   missing required parameters, error: Key: 'CollectionNameReq.CollectionName' Error:Field
 *   validation for 'CollectionName' failed on the 'required' tag
 * which clients sometimes match on. Int64 inputs may be numbers or numeric strings.
 *
 * Thread-safety: every function touches only its arguments.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/server.h"
#include "util/alloc.h"

json_t *sx__jget(const json_t *obj, const char *key)
{
    if (!json_is_object(obj) || !key)
        return NULL;
    json_t *v = json_object_get(obj, key); /* exact match first: the common case */
    if (!v) {
        const char *k;
        json_t *val;
        json_object_foreach((json_t *)obj, k, val) {
            if (strcasecmp(k, key) == 0) {
                v = val;
                break;
            }
        }
    }
    return json_is_null(v) ? NULL : v;
}

bool sx__json_to_int64(const json_t *v, int64_t *out)
{
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return true;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!isfinite(d) || d != floor(d) || d < -9.2233720368547758e18 ||
            d >= 9.2233720368547758e18)
            return false;
        *out = (int64_t)d;
        return true;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!*s)
            return false;
        char *end = NULL;
        errno = 0;
        long long x = strtoll(s, &end, 10);
        if (errno || !end || *end)
            return false;
        *out = (int64_t)x;
        return true;
    }
    return false;
}

int sx__jstr(const json_t *obj, const char *key, const char **out)
{
    json_t *v = sx__jget(obj, key);
    if (!v)
        return 0;
    if (!json_is_string(v))
        return -1;
    *out = json_string_value(v);
    return 0;
}

int sx__jint(const json_t *obj, const char *key, int64_t *out)
{
    json_t *v = sx__jget(obj, key);
    if (!v)
        return 0;
    return sx__json_to_int64(v, out) ? 0 : -1;
}

int sx__jbool(const json_t *obj, const char *key, bool *out)
{
    json_t *v = sx__jget(obj, key);
    if (!v)
        return 0;
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcasecmp(s, "true") == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(s, "false") == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

int sx__jdouble(const json_t *obj, const char *key, double *out)
{
    json_t *v = sx__jget(obj, key);
    if (!v)
        return 0;
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end = NULL;
        errno = 0;
        double d = strtod(s, &end);
        if (*s && !errno && end && !*end && isfinite(d)) {
            *out = d;
            return 0;
        }
    }
    return -1;
}

/* "collectionName" -> "CollectionName" (Go's exported field name). */
static void go_field(const char *key, char *buf, size_t cap)
{
    (void)snprintf(buf, cap, "%s", key);
    if (buf[0] >= 'a' && buf[0] <= 'z')
        buf[0] = (char)(buf[0] - 'a' + 'A');
}

bool sx__need_str(
    sx__req *rq, sx__resp *rs, const char *key, const char *struct_name, const char **out)
{
    const char *s = NULL;
    char field[128];
    go_field(key, field, sizeof field);
    if (sx__jstr(rq->body, key, &s) != 0) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: json: cannot unmarshal %s into Go "
                 "struct field %s.%s of type string",
                 "non-string", struct_name, key);
        return false;
    }
    if (!s || !*s) {
        sx__fail(rs, SX__MC_MISSING_REQUIRED,
                 "missing required parameters, error: Key: '%s.%s' Error:Field validation for "
                 "'%s' failed on the 'required' tag",
                 struct_name, field, field);
        return false;
    }
    *out = s;
    return true;
}

json_t *sx__jint64_out(const sx__req *rq, int64_t v)
{
    if (rq && rq->int64_as_string) {
        char buf[32];
        (void)snprintf(buf, sizeof buf, "%lld", (long long)v);
        return json_string(buf);
    }
    return json_integer((json_int_t)v);
}

void sx__ok(sx__resp *rs, json_t *data)
{
    if (!data)
        data = json_object();
    json_decref(rs->body);
    rs->body = json_object();
    if (rs->body) {
        json_object_set_new(rs->body, "code", json_integer(0));
        json_object_set_new(rs->body, "data", data);
    } else {
        json_decref(data);
    }
}

void sx__fail(sx__resp *rs, int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_decref(rs->body);
    sx__free(rs->text); /* replaces a text answer too */
    rs->text = NULL;
    rs->text_len = 0;
    rs->body = json_object();
    if (rs->body) {
        json_object_set_new(rs->body, "code", json_integer(code));
        json_object_set_new(rs->body, "message", json_string(msg));
    }
}

void sx__fail_st(sx__resp *rs, sx_status st, int not_found_code, const char *what)
{
    int code;
    switch (st) {
    case SX_EINVAL:
    case SX_EPARSE:
        code = SX__MC_INVALID_PARAM;
        break;
    case SX_ENOTFOUND:
        code = not_found_code;
        break;
    default:
        code = SX__MC_UNEXPECTED;
        break;
    }
    const char *m = sx_errmsg();
    if (m && *m)
        sx__fail(rs, code, "%s: %s", what, m);
    else
        sx__fail(rs, code, "%s: %s", what, sx_status_str(st));
}

const char *sx__metric_name(sx_metric m)
{
    switch (m) {
    case SX_METRIC_L2:
        return "L2";
    case SX_METRIC_IP:
        return "IP";
    case SX_METRIC_COSINE:
        return "COSINE";
    }
    return "L2";
}

bool sx__metric_parse(const char *s, sx_metric *out)
{
    if (!s)
        return false;
    if (strcasecmp(s, "L2") == 0)
        *out = SX_METRIC_L2;
    else if (strcasecmp(s, "IP") == 0)
        *out = SX_METRIC_IP;
    else if (strcasecmp(s, "COSINE") == 0)
        *out = SX_METRIC_COSINE;
    else
        return false;
    return true;
}

json_t *sx__resp_json(sx__resp *rs)
{
    json_t *j = rs->body;
    if (!j && rs->text)
        j = json_loadb((const char *)rs->text, rs->text_len, 0, NULL);
    sx__free(rs->text);
    rs->text = NULL;
    rs->text_len = 0;
    rs->body = NULL;
    return j;
}
