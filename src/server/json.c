/*
 * json.c: the JSON conventions of Milvus's REST API v2 on top of jansson.
 *
 * Milvus decodes request bodies with Go's encoding/json through gin binding, so member names
 * match case-insensitively (`autoId` finds `autoID`), unknown members are ignored, a JSON null is
 * the zero value, and validator failures produce the message
 *   missing required parameters, error: Key: 'CollectionNameReq.CollectionName' Error:Field
 *   validation for 'CollectionName' failed on the 'required' tag
 * which clients sometimes match on. Int64 inputs may be numbers or numeric strings.
 * sx__fail_st passes engine messages on without the directories of the paths they name (a client
 * learns which file failed, not where the server keeps its data).
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
        /* the strings Go's strconv.ParseBool takes, as Milvus parses its params ("0" and "1"
         * included: enableDynamicField "0"), case-insensitive for true / false */
        const char *s = json_string_value(v);
        if (strcasecmp(s, "true") == 0 || strcmp(s, "1") == 0 || strcmp(s, "t") == 0 ||
            strcmp(s, "T") == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(s, "false") == 0 || strcmp(s, "0") == 0 || strcmp(s, "f") == 0 ||
            strcmp(s, "F") == 0) {
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

/* Whether c may come right before an absolute path in a message ("open /x", "file=/x", "(/x"). */
static bool path_opener(char c)
{
    return c == ' ' || c == '\t' || c == '(' || c == '[' || c == '{' || c == '\'' || c == '"' ||
           c == '=' || c == ',' || c == ':';
}

/* Whether s[i] ends a path token: whitespace, a quote or bracket, or ": " (the "path: reason"
 * convention of the platform layer). */
static bool path_end(const char *s, size_t i)
{
    char c = s[i];
    return c == '\0' || c == ' ' || c == '\t' || c == '\n' || c == '\'' || c == '"' || c == ')' ||
           c == ']' || c == '}' || c == ',' || c == ';' ||
           (c == ':' && (s[i + 1] == ' ' || s[i + 1] == '\0'));
}

/* Engine and platform messages name the files they failed on with their absolute paths (the
 * server's data directory, a configured path). A client gets the last component only:
 * "open /data/db/rest/x.json.tmp: No space left on device" -> "open x.json.tmp: No space left on
 * device". A lone "/" (as in "a / b") is kept. */
static void strip_paths(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; in[i] && o + 1 < cap;) {
        bool starts = in[i] == '/' && (i == 0 || path_opener(in[i - 1])) && !path_end(in, i + 1) &&
                      in[i + 1] != '/';
        if (!starts) {
            out[o++] = in[i++];
            continue;
        }
        size_t end = i;
        while (!path_end(in, end))
            end++;
        size_t stop = end;
        while (stop > i + 1 && in[stop - 1] == '/') /* "dir/" names dir */
            stop--;
        size_t base = stop;
        while (base > i && in[base - 1] != '/')
            base--;
        for (size_t k = base; k < stop && o + 1 < cap; k++)
            out[o++] = in[k];
        i = end;
    }
    out[o] = '\0';
}

const char *sx__errmsg_safe(char *buf, size_t cap)
{
    const char *m = sx_errmsg();
    strip_paths(m ? m : "", buf, cap);
    return buf;
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
    char clean[1024];
    /* a filter that does not parse: Milvus's words first ("failed to create query plan") */
    const char *plan = st == SX_EPARSE ? "failed to create query plan: " : "";
    if (m && *m) {
        strip_paths(m, clean, sizeof clean);
        sx__fail(rs, code, "%s: %s%s", what, plan, clean);
    } else {
        sx__fail(rs, code, "%s: %s", what, sx_status_str(st));
    }
}

const char *sx__metric_name(sx_metric m)
{
    const char *s = sx_metric_str(m);
    return strcmp(s, "?") == 0 ? "L2" : s;
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
    else if (strcasecmp(s, "HAMMING") == 0)
        *out = SX_METRIC_HAMMING;
    else if (strcasecmp(s, "JACCARD") == 0)
        *out = SX_METRIC_JACCARD;
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
