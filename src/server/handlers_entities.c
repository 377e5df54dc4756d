/*
 * handlers_entities.c: /v2/vectordb/entities/{insert,upsert,delete,query,get,search,
 * hybrid_search} (milvus-rest-v2.md section 6).
 *
 * Model. A REST collection is an engine collection plus catalog metadata (sx__coll_meta): the
 * Milvus types as declared (Int8..Int64 are engine INT64, Float/Double DOUBLE, VarChar/String/JSON
 * VARCHAR, Bool BOOL), and two hidden VARCHAR columns the clients never see: SX__META_FIELD (the
 * dynamic fields of a row as a JSON object text, when enableDynamicField) and SX__PART_FIELD (the
 * partition of a row). Requests are decoded from row objects into columnar sx_batch arrays, and
 * rowsets are encoded back into row objects here.
 *
 * Rules that hold for every handler.
 *   - Hidden columns are never requested with "*" from the engine (its "*" would include them):
 *     the engine always gets an explicit field list, and row encoding emits declared fields and
 *     flattened dynamic keys only.
 *   - Filters reach the engine after three steps (make_filter): exprParams templates `{name}` are
 *     replaced by the JSON encoding of the value (strings quoted and escaped: JSON escapes are a
 *     subset of the filter lexer's); identifiers are checked (a JSON-typed field or, on a dynamic
 *     collection, an undeclared name is refused with 1100: the engine filters declared scalar
 *     columns only, and would compare a JSON field's raw text); partitionName(s) are ANDed as
 *     `sx_part_ in [...]`.
 *   - Int64 values (declared Int64, including the primary key) are strings when the client sent
 *     Accept-Type-Allow-Int64: false (sx__jint64_out); Int8/16/32 stay numbers; VarChar keys are
 *     strings. JSON fields come back as a string holding the raw JSON text, as Milvus does.
 *   - A row-level error rejects the whole request: nothing is written (one engine batch).
 *
 * Search. searchParams may nest index params under "params" or give them flat (2.5.2+); both are
 * merged into one list, a key given twice with different values is "ambiguous parameter" (1100).
 * Generic Milvus keys (metricType, radius, range_filter, ignoreGrowing, hints, level, ...) are
 * consumed here; the rest goes to the engine, whose indexes validate their own keys. Range search
 * (radius / range_filter) is a post-filter over exact-ordered hits: the handler asks the engine
 * for more hits (x4 each round, up to 16384) while a query could still have in-range hits beyond
 * the ones returned, then applies offset and limit per query. Plain searches go through the
 * merger (merge.c) when the server has one, keyed by every parameter but the vectors.
 *
 * Vector fields. A collection has one to four FloatVector fields, each with its own dim, metric
 * and index; inserts need every one of them (each checked against its own dim). A search names
 * the field it searches with annsField (sx_search_req.anns_field); without it, the only vector
 * field, and a collection with several refuses the search (1100, Milvus's "multiple anns_fields
 * exist"). The metric a search may name is its field's.
 *
 * Hybrid search runs each sub-request (its own annsField, vectors, filter, limit,
 * metricType/params) on its own vector field, then fuses per query: RRF (score = sum
 * 1/(k + rank), rank from 1, k = 60 by default) or weighted (sum w_i * normalised distance, each
 * by its field's metric, Milvus's normalisation: L2
 * 1 - 2 atan(d)/pi, IP 0.5 + atan(d)/pi, COSINE (1 + d)/2). Ties sort by primary key. The fused
 * score is returned as "distance" (larger is better); output fields are read with one sx_get.
 *
 * Deviations from Milvus (documented). Inserting a primary key that exists fails (1804) instead
 * of storing a duplicate; upsert on an autoID collection inserts the rows with new ids, then
 * deletes the given keys (not atomic); Float values are kept as doubles (no float32 rounding);
 * groupingField is unsupported (3000).
 *
 * Thread-safety: handlers run concurrently on the HTTP threads; each touches only its request,
 * the catalog (own lock) and the engine (thread-safe). No static mutable state.
 */
#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/analyzer.h"
#include "server/server.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/buf.h"
#include "util/err.h"

#define MAX_LIMIT    16384u
#define MAX_PARAMS   48
#define MAX_DYN_KEYS 128
#define PI_D         3.14159265358979323846

/* ------------------------------------------------------------------ small helpers */

/* A growable NUL-terminated string (util/alloc.h). A failed allocation sets oom. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_addn(sbuf *s, const char *t, size_t n)
{
    if (s->oom)
        return;
    if (!s->p || n >= s->cap - s->len) { /* room for n bytes and the NUL (cap > len when p) */
        size_t nc = s->cap ? s->cap : 64;
        while (nc < s->len + n + 1)
            nc *= 2;
        char *np = sx__realloc(s->p, nc);
        if (!np) {
            s->oom = true;
            return;
        }
        s->p = np;
        s->cap = nc;
    }
    memcpy(s->p + s->len, t, n);
    s->len += n;
    s->p[s->len] = '\0';
}

static void sb_add(sbuf *s, const char *t)
{
    sb_addn(s, t, strlen(t));
}

static void sb_free(sbuf *s)
{
    sx__free(s->p);
    s->p = NULL;
    s->len = s->cap = 0;
}

/* Takes the string out of s (never NULL unless oom; "" when nothing was added). */
static char *sb_take(sbuf *s)
{
    if (!s->p && !s->oom)
        sb_addn(s, "", 0);
    if (s->oom) {
        sb_free(s);
        return NULL;
    }
    char *p = s->p;
    s->p = NULL;
    s->len = s->cap = 0;
    return p;
}

static void ok_cost(sx__resp *rs, json_t *data)
{
    sx__ok(rs, data);
    if (rs->body)
        json_object_set_new(rs->body, "cost", json_integer(0));
}

static void fail_nomem(sx__resp *rs)
{
    sx__fail(rs, SX__MC_UNEXPECTED, "out of memory");
}

static bool is_blank(const char *s)
{
    if (!s)
        return true;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    return *s == '\0';
}

static bool is_ident_start(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}

static bool is_ident_char(char ch)
{
    return is_ident_start(ch) || (ch >= '0' && ch <= '9');
}

/* ------------------------------------------------------------------ collections */

typedef struct coll {
    sx_collection *h;
    sx__coll_meta *meta; /* owned (sx__malloc) */
    int pk;              /* index of the primary key in meta->fields */
    int vec;             /* index of the vector field, -1 if none */
} coll;

static void coll_close(coll *c)
{
    sx__req_coll_done(c->h, c->meta);
    c->h = NULL;
    c->meta = NULL;
}

/* Resolves collectionName of the body into an open handle and a metadata copy (sx__req_coll),
 * and finds its primary key and vector field. On failure sets rs (1802/1801 for the name, 800 /
 * 100 for a missing database / collection) and returns false. */
static bool coll_open(sx__req *rq, sx__resp *rs, const char *struct_name, coll *c)
{
    memset(c, 0, sizeof *c);
    if (!sx__req_coll(rq, rs, struct_name, &c->h, &c->meta))
        return false;
    c->pk = -1;
    c->vec = -1;
    for (size_t i = 0; i < c->meta->n_fields; i++) {
        if (c->meta->fields[i].is_primary)
            c->pk = (int)i;
        if (sx_field_is_vector(c->meta->fields[i].engine_type) && c->vec < 0)
            c->vec = (int)i;
    }
    if (c->pk < 0) {
        sx__fail(rs, SX__MC_UNEXPECTED, "collection %s has no primary key", c->meta->name);
        coll_close(c);
        return false;
    }
    return true;
}

static int field_index(const sx__coll_meta *m, const char *name)
{
    for (size_t i = 0; i < m->n_fields; i++)
        if (strcmp(m->fields[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* The vector field a search or a hybrid sub-request names (Milvus's anns_field): `anns`, a
 * FloatVector field of the collection; absent or "": the only vector field, and a collection with
 * several needs it named, as Milvus. *fi: its index in meta->fields, *v: its vecs[] entry. False
 * with rs set (1100, Milvus's texts). */
static bool anns_of(sx__resp *rs, const coll *c, const char *anns, int *fi, const sx__vec_meta **v)
{
    const sx__coll_meta *m = c->meta;
    if (c->vec < 0 || m->n_vecs == 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: the collection has no vector field");
        return false;
    }
    if (!anns || !*anns) {
        if (m->n_vecs + m->n_sparse > 1) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: multiple anns_fields exist, please specify a anns_field "
                     "in search_params (collection %s has %zu vector fields)",
                     m->name, m->n_vecs + m->n_sparse);
            return false;
        }
        anns = m->vecs[0].field;
    }
    int f = field_index(m, anns), vi = sx__meta_vec_at(m, anns);
    if (f < 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: failed to create query plan: failed to get field schema by "
                 "name: fieldName(%s) not found",
                 anns);
        return false;
    }
    if (vi < 0 || !sx_field_is_vector(m->fields[f].engine_type)) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: failed to create query plan: field (%s) to search is not of "
                 "vector data type",
                 anns);
        return false;
    }
    *fi = f;
    *v = &m->vecs[vi];
    return true;
}

static bool need_loaded(sx__resp *rs, const coll *c)
{
    if (c->meta->loaded)
        return true;
    sx__fail(rs, SX__MC_COLL_NOT_LOADED, "collection not loaded[collection=%s]", c->meta->name);
    return false;
}

/* JSON and Array fields: VARCHAR columns holding the value's compact JSON text. */
static bool is_json_type(const sx__field_meta *f)
{
    return strcmp(f->type, "JSON") == 0 || strcmp(f->type, "Array") == 0;
}

static bool is_array_type(const sx__field_meta *f)
{
    return strcmp(f->type, "Array") == 0;
}

static bool is_hidden_name(const char *s)
{
    return strcmp(s, SX__META_FIELD) == 0 || strcmp(s, SX__PART_FIELD) == 0;
}

static bool part_exists(const sx__coll_meta *m, const char *p)
{
    return sx__meta_part_find(m, p) >= 0;
}

/* ------------------------------------------------------------------ filters */

/* Replaces `{name}` placeholders outside string literals with the JSON encoding of
 * params[name]. Owned result (sx__free). On failure sets rs, returns NULL. */
static char *substitute(sx__resp *rs, const char *f, const json_t *params)
{
    sbuf out = { 0 };
    const char *p = f;
    while (*p) {
        char ch = *p;
        if (ch == '"' || ch == '\'') {
            const char *s = p++;
            while (*p && *p != ch) {
                if (*p == '\\' && p[1])
                    p++;
                p++;
            }
            if (*p)
                p++;
            sb_addn(&out, s, (size_t)(p - s));
            continue;
        }
        if (ch == '{' && is_ident_start(p[1])) {
            const char *q = p + 1;
            while (is_ident_char(*q))
                q++;
            if (*q == '}') {
                char name[256];
                size_t n = (size_t)(q - p - 1);
                if (n >= sizeof name)
                    n = sizeof name - 1;
                memcpy(name, p + 1, n);
                name[n] = '\0';
                json_t *v = json_is_object(params) ? json_object_get(params, name) : NULL;
                if (!v) {
                    sb_free(&out);
                    sx__fail(rs, SX__MC_INVALID_PARAM,
                             "invalid parameter: the template variable {%s} of the filter has no "
                             "value in exprParams",
                             name);
                    return NULL;
                }
                char *enc = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
                if (!enc) {
                    sb_free(&out);
                    fail_nomem(rs);
                    return NULL;
                }
                sb_add(&out, enc);
                sx__jansson_free(enc);
                p = q + 1;
                continue;
            }
        }
        sb_addn(&out, p, 1);
        p++;
    }
    char *r = sb_take(&out);
    if (!r)
        fail_nomem(rs);
    return r;
}

static bool is_keyword(const char *s, size_t n)
{
    static const char *const kw[] = { "and", "or",   "not",  "in",    "like",
                                      "is",  "null", "true", "false", "exists" };
    for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
        if (strlen(kw[i]) == n && strncasecmp(kw[i], s, n) == 0)
            return true;
    return false;
}

/* The declared fields of m, "id, vector, color", into buf (hidden columns are never declared;
 * cut with "..." when they do not fit). */
static void field_list(const sx__coll_meta *m, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < m->n_fields; i++) {
        size_t len = strlen(m->fields[i].name);
        if (o + len + 2 + 5 > cap) { /* room for ", " and ", ..." */
            (void)snprintf(buf + o, cap - o, "%s...", i ? ", " : "");
            return;
        }
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", m->fields[i].name);
    }
}

/* Where the rewrite of a filter moved the user's text (check_filter_fields, make_filter), so that
 * a parse error the engine reports on the rewritten text ("... at position N", naming the token
 * it met) is told in the user's terms: the position in what they sent and their identifier, not
 * the hidden column. One map per handler call, kept in a thread-local (a handler runs on one
 * thread); entity routes run through fix_filter_error (the route table's wrappers below). */
#define FMAP_MAX 32

typedef struct fmap_ent {
    size_t rpos, rlen;          /* the replacement in the rewritten text */
    size_t opos, olen;          /* what it replaced in the user's text */
    char name[SX_MAX_NAME + 1]; /* the user's identifier ("$meta" for $meta) */
} fmap_ent;

typedef struct fmap {
    int filters;  /* filters made in this call (the map is used only when there is one) */
    size_t shift; /* characters make_filter put before the rewritten text ("(") */
    size_t len;   /* the user's filter (exprParams substituted), in bytes */
    size_t n;
    bool overflow; /* more rewrites than FMAP_MAX: positions are not translated */
    fmap_ent e[FMAP_MAX];
} fmap;

static _Thread_local fmap tl_fmap;

static void fmap_add(size_t rpos, size_t rlen, size_t opos, const char *name, size_t olen)
{
    fmap *m = &tl_fmap;
    if (m->n == FMAP_MAX) {
        m->overflow = true;
        return;
    }
    fmap_ent *e = &m->e[m->n++];
    *e = (fmap_ent){ .rpos = rpos, .rlen = rlen, .opos = opos, .olen = olen };
    size_t cn = olen < SX_MAX_NAME ? olen : SX_MAX_NAME;
    memcpy(e->name, name, cn);
    e->name[cn] = '\0';
}

/* Checks the identifiers of a filter against the schema and rewrites the dynamic field for the
 * engine: `$meta` becomes the hidden column SX__META_FIELD, and a name that is not a field of a
 * collection with the dynamic field enabled becomes the key of its JSON object
 * (`subject == "x"` -> `sx_meta_["subject"] == "x"`), as Milvus reads them. JSON fields keep their
 * own name (`meta["lang"]`). A name that is neither (or a hidden column's name) is refused with
 * Milvus's message listing the fields. Returns the rewritten filter (owned, sx__free) or NULL with
 * rs set. */
static char *check_filter_fields(sx__resp *rs, const sx__coll_meta *m, const char *f)
{
    sbuf out = { 0 };
    const char *p = f;
    while (*p) {
        char ch = *p;
        const char *s0 = p;
        if (ch == '"' || ch == '\'') {
            p++;
            while (*p && *p != ch) {
                if (*p == '\\' && p[1])
                    p++;
                p++;
            }
            if (*p)
                p++;
            sb_addn(&out, s0, (size_t)(p - s0));
            continue;
        }
        if (ch >= '0' && ch <= '9') {
            while (is_ident_char(*p) || *p == '.')
                p++;
            sb_addn(&out, s0, (size_t)(p - s0));
            continue;
        }
        if (ch == '$' && strncmp(p, "$meta", 5) == 0 && !is_ident_char(p[5])) {
            if (!m->enable_dynamic) {
                sx__fail(rs, SX__MC_INVALID_PARAM,
                         "invalid parameter: cannot parse expression: collection %s has no "
                         "dynamic field ($meta)",
                         m->name);
                sb_free(&out);
                return NULL;
            }
            fmap_add(out.len, strlen(SX__META_FIELD), (size_t)(p - f), "$meta", 5);
            sb_add(&out, SX__META_FIELD);
            p += 5;
            continue;
        }
        if (!is_ident_start(ch)) {
            sb_addn(&out, p, 1);
            p++;
            continue;
        }
        while (is_ident_char(*p))
            p++;
        size_t n = (size_t)(p - s0);
        const char *q = p;
        while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
            q++;
        /* string prefix (r"..", u8"..", L".."), keyword, function call (the engine says it is
         * unsupported), declared field: as written */
        char name[SX_MAX_NAME + 1];
        size_t cn = n > SX_MAX_NAME ? SX_MAX_NAME : n;
        memcpy(name, s0, cn);
        name[cn] = '\0';
        int fi = n <= SX_MAX_NAME ? field_index(m, name) : -1;
        if (fi >= 0 && sx__field_is_sparse(&m->fields[fi]) && *p != '"' && *p != '\'' &&
            *q != '(') {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: cannot parse expression: the sparse vector field %s "
                     "cannot be used in a filter",
                     name);
            sb_free(&out);
            return NULL;
        }
        if (*p == '"' || *p == '\'' || is_keyword(s0, n) || *q == '(' || fi >= 0) {
            sb_addn(&out, s0, n);
            continue;
        }
        if (m->enable_dynamic && !is_hidden_name(name) && n <= SX_MAX_NAME) {
            fmap_add(out.len, sizeof(SX__META_FIELD "[\"\"]") - 1 + n, (size_t)(s0 - f), s0, n);
            sb_add(&out, SX__META_FIELD "[\"");
            sb_addn(&out, s0, n); /* an identifier: nothing to escape */
            sb_add(&out, "\"]");
            continue;
        }
        char list[512];
        field_list(m, list, sizeof list);
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: cannot parse expression: field %s not exist: collection %s "
                 "has no field named \"%s\" (its fields: %s)",
                 name, m->name, name, list);
        sb_free(&out);
        return NULL;
    }
    char *r = sb_take(&out);
    if (!r)
        fail_nomem(rs);
    return r;
}

/* Appends `sx_part_ in ["a","b"]` for the names in parts (array of strings or one string).
 * Checks every name exists (200). */
static bool part_filter(sx__resp *rs, const sx__coll_meta *m, const json_t *parts, sbuf *out)
{
    size_t n = json_is_array(parts) ? json_array_size(parts) : 1;
    if (json_is_array(parts) && n == 0)
        return true;
    sb_add(out, SX__PART_FIELD " in [");
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_is_array(parts) ? json_array_get(parts, i) : parts;
        if (!json_is_string(v)) {
            sx__fail(rs, SX__MC_BAD_JSON,
                     "can only accept json format request, error: partition names must be "
                     "strings");
            return false;
        }
        const char *pn = json_string_value(v);
        if (!part_exists(m, pn)) {
            sx__fail(rs, SX__MC_PART_NOT_FOUND, "partition not found[partition=%s]", pn);
            return false;
        }
        char *enc = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!enc) {
            out->oom = true;
            return true;
        }
        if (i)
            sb_add(out, ",");
        sb_add(out, enc);
        sx__jansson_free(enc);
    }
    sb_add(out, "]");
    return true;
}

/* The filter the engine gets: the filter of `src` (a request or a hybrid sub-request; exprParams
 * templates substituted, fields checked) AND the
 * partition restriction. `parts` is an array of names or a single name, NULL = all. On success
 * *out is owned (sx__free; "" = no filter). On failure rs is set. */
static bool
make_filter(const json_t *src, sx__resp *rs, const coll *c, const json_t *parts, char **out)
{
    const char *uf = "";
    if (sx__jstr(src, "filter", &uf) != 0) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: json: cannot unmarshal non-string "
                 "into Go struct field .filter of type string");
        return false;
    }
    char *sub = NULL;
    if (!is_blank(uf)) {
        json_t *ep = sx__jget(src, "exprParams");
        if (ep && !json_is_object(ep)) {
            sx__fail(rs, SX__MC_BAD_JSON,
                     "can only accept json format request, error: exprParams must be an object");
            return false;
        }
        sub = substitute(rs, uf, ep);
        if (!sub)
            return false;
        tl_fmap.filters++;
        tl_fmap.n = 0;
        tl_fmap.overflow = false;
        tl_fmap.shift = 0;
        tl_fmap.len = strlen(sub);
        char *rw = check_filter_fields(rs, c->meta, sub);
        sx__free(sub);
        if (!rw)
            return false;
        sub = rw;
    }
    bool have_parts = parts && (!json_is_array(parts) || json_array_size(parts) > 0);
    if (have_parts && json_is_string(parts) && !*json_string_value(parts))
        have_parts = false; /* "" = every partition, as gRPC's unset partition_name */
    if (have_parts && c->meta->key_parts) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: not support manually specifying the partition names if "
                 "partition key mode is used");
        sx__free(sub);
        return false;
    }
    if (have_parts && !c->meta->has_partitions) {
        /* No partition column: only "_default" exists, and it holds every row. */
        size_t n = json_is_array(parts) ? json_array_size(parts) : 1;
        for (size_t i = 0; i < n; i++) {
            const json_t *v = json_is_array(parts) ? json_array_get(parts, i) : parts;
            if (!json_is_string(v) || strcmp(json_string_value(v), "_default") != 0) {
                sx__fail(rs, SX__MC_PART_NOT_FOUND, "partition not found[partition=%s]",
                         json_is_string(v) ? json_string_value(v) : "?");
                sx__free(sub);
                return false;
            }
        }
        have_parts = false;
    }
    sbuf f = { 0 };
    if (sub && have_parts) {
        tl_fmap.shift = 1;
        sb_add(&f, "(");
        sb_add(&f, sub);
        sb_add(&f, ") and ");
    } else if (sub) {
        sb_add(&f, sub);
    }
    sx__free(sub);
    if (have_parts && !part_filter(rs, c->meta, parts, &f)) {
        sb_free(&f);
        return false;
    }
    *out = sb_take(&f);
    if (!*out) {
        fail_nomem(rs);
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------ output fields */

typedef struct outplan {
    size_t n;                      /* declared fields to emit besides the primary key */
    size_t fidx[SX_MAX_FIELDS];    /* indexes into meta->fields */
    bool all_dyn;                  /* flatten every dynamic key ("*" or "$meta") */
    size_t n_dyn;                  /* named dynamic keys */
    const char *dyn[MAX_DYN_KEYS]; /* borrowed from the request body */
    size_t n_eng;                  /* fields asked of the engine (the pk comes first anyway) */
    const char *eng[SX_MAX_FIELDS + 2];
} outplan;

static void plan_add_field(outplan *o, const sx__coll_meta *m, size_t fi, int pk)
{
    if ((int)fi == pk)
        return;
    for (size_t i = 0; i < o->n; i++)
        if (o->fidx[i] == fi)
            return;
    o->fidx[o->n++] = fi;
    o->eng[o->n_eng++] = m->fields[fi].name;
}

/* Builds the output plan from outputFields (NULL: `star` decides between all fields and none).
 * `extra_part` also asks the engine for the partition column (get with partitionNames). */
static bool
plan_outputs(sx__resp *rs, const coll *c, const json_t *of, bool star, outplan *o, bool extra_part)
{
    memset(o, 0, sizeof *o);
    const sx__coll_meta *m = c->meta;
    if (of && !json_is_array(of)) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: json: cannot unmarshal into Go "
                 "struct field .outputFields of type []string");
        return false;
    }
    size_t n = of ? json_array_size(of) : 0;
    if (!of || n == 0) {
        if (star) {
            for (size_t i = 0; i < m->n_fields; i++)
                plan_add_field(o, m, i, c->pk);
            o->all_dyn = m->enable_dynamic;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(of, i);
        if (!json_is_string(v)) {
            sx__fail(rs, SX__MC_BAD_JSON,
                     "can only accept json format request, error: json: cannot unmarshal into Go "
                     "struct field .outputFields of type string");
            return false;
        }
        const char *name = json_string_value(v);
        if (strcmp(name, "*") == 0) {
            for (size_t f = 0; f < m->n_fields; f++)
                plan_add_field(o, m, f, c->pk);
            o->all_dyn = m->enable_dynamic;
            continue;
        }
        int fi = field_index(m, name);
        if (fi >= 0) {
            plan_add_field(o, m, (size_t)fi, c->pk);
            continue;
        }
        if (m->enable_dynamic && strcmp(name, "$meta") == 0) {
            o->all_dyn = true;
            continue;
        }
        if (!m->enable_dynamic) {
            sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: field %s not exist", name);
            return false;
        }
        if (o->n_dyn == MAX_DYN_KEYS) {
            sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: too many output fields");
            return false;
        }
        o->dyn[o->n_dyn++] = name;
    }
    if (m->enable_dynamic && (o->all_dyn || o->n_dyn))
        o->eng[o->n_eng++] = SX__META_FIELD;
    if (extra_part && m->has_partitions)
        o->eng[o->n_eng++] = SX__PART_FIELD;
    return true;
}

static int col_of(const sx_rowset *r, const char *name)
{
    for (size_t i = 0; i < r->n_cols; i++)
        if (strcmp(r->cols[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* One cell as Milvus encodes it. New reference (NULL on OOM / invalid UTF-8). */
static json_t *
cell_json(const sx__req *rq, const sx__field_meta *fm, const sx_rowset *r, size_t col, size_t row)
{
    const void *d = r->cols[col].data;
    if (r->cols[col].valid && !r->cols[col].valid[row])
        return json_null(); /* NULL in a nullable field */
    switch (r->cols[col].type) {
    case SX_FIELD_INT64: {
        int64_t v = ((const int64_t *)d)[row];
        if (!fm || strcmp(fm->type, "Int64") == 0)
            return sx__jint64_out(rq, v);
        return json_integer((json_int_t)v);
    }
    case SX_FIELD_DOUBLE:
        return json_real(((const double *)d)[row]);
    case SX_FIELD_BOOL:
        return json_boolean(((const bool *)d)[row]);
    case SX_FIELD_VARCHAR: {
        const char *s = ((char *const *)d)[row];
        if (fm && sx__field_is_sparse(fm)) { /* the engine's text, as {"index": value} */
            json_t *o = sx__sparse_to_json(s);
            return o ? o : json_object();
        }
        if (fm && is_array_type(fm)) { /* the stored JSON text, as the array it is */
            json_t *a = s && *s ? json_loads(s, 0, NULL) : NULL;
            return json_is_array(a) ? a : (json_decref(a), json_array());
        }
        json_t *v = json_string(s ? s : "");
        return v ? v : json_null();
    }
    case SX_FIELD_FLOAT_VECTOR:
    case SX_FIELD_FLOAT16_VECTOR:
    case SX_FIELD_BFLOAT16_VECTOR:
    case SX_FIELD_BINARY_VECTOR: {
        sx_field_type t = r->cols[col].type;
        uint32_t dim = r->dims[col];
        return sx__vec_to_json(t, dim, (const char *)d + (size_t)row * sx_vector_row_bytes(t, dim));
    }
    }
    return json_null();
}

typedef struct rowmap {
    int pk_col;
    int cols[SX_MAX_FIELDS]; /* per plan field: rowset column */
    int meta_col;
} rowmap;

static void map_rows(const coll *c, const outplan *o, const sx_rowset *r, rowmap *mp)
{
    mp->pk_col = col_of(r, c->meta->fields[c->pk].name);
    for (size_t i = 0; i < o->n; i++)
        mp->cols[i] = col_of(r, c->meta->fields[o->fidx[i]].name);
    mp->meta_col = (o->all_dyn || o->n_dyn) ? col_of(r, SX__META_FIELD) : -1;
}

/* A distance as JSON. JSON has no infinity (jansson refuses to encode one, which used to drop the
 * key): a distance that overflowed float is sent as the largest float with its sign, and a NaN
 * (never produced by the engine's distances) as the largest float too, so "distance" is always
 * present and sorts last for L2. New reference. */
static json_t *dist_json(float d)
{
    if (isnan(d))
        d = FLT_MAX;
    else if (isinf(d))
        d = d > 0 ? FLT_MAX : -FLT_MAX;
    return json_real((double)d);
}

/* Encodes row `row` of r as a Milvus row object (pk, distance when dist != NULL, fields,
 * flattened dynamic keys). New reference or NULL on OOM. */
static json_t *row_json(const sx__req *rq,
                        const coll *c,
                        const outplan *o,
                        const rowmap *mp,
                        const sx_rowset *r,
                        size_t row,
                        const float *dist)
{
    json_t *obj = json_object();
    if (!obj)
        return NULL;
    const sx__field_meta *pkf = &c->meta->fields[c->pk];
    if (mp->pk_col >= 0)
        json_object_set_new(obj, pkf->name, cell_json(rq, pkf, r, (size_t)mp->pk_col, row));
    if (dist)
        json_object_set_new(obj, "distance", dist_json(*dist));
    for (size_t i = 0; i < o->n; i++) {
        if (mp->cols[i] < 0)
            continue;
        const sx__field_meta *fm = &c->meta->fields[o->fidx[i]];
        json_object_set_new(obj, fm->name, cell_json(rq, fm, r, (size_t)mp->cols[i], row));
    }
    if (mp->meta_col >= 0) {
        const char *txt = ((char *const *)r->cols[mp->meta_col].data)[row];
        json_t *dyn = txt && *txt ? json_loads(txt, 0, NULL) : NULL;
        if (json_is_object(dyn)) {
            const char *k;
            json_t *v;
            if (o->all_dyn) {
                json_object_foreach(dyn, k, v) {
                    if (!json_object_get(obj, k))
                        json_object_set(obj, k, v);
                }
            }
            for (size_t i = 0; i < o->n_dyn; i++) {
                v = json_object_get(dyn, o->dyn[i]);
                if (v && !json_object_get(obj, o->dyn[i]))
                    json_object_set(obj, o->dyn[i], v);
            }
        }
        json_decref(dyn);
    }
    return obj;
}

/* ------------------------------------------------------------------ answer text

 * A code-0 answer of rows is encoded row by row: {"code":0,"data":[row,...],"cost":0} (and
 * "topks" for searches), the order jansson gave the whole tree. Each row is a small JSON tree,
 * written out and freed at once, so the answer exists once, as text: the tree of a whole answer
 * cost several times its text (a float of a vector: a 32-byte json_real and an 8-byte slot for
 * about 20 bytes of text). */
typedef struct atext {
    sx__wbuf w;
    size_t n; /* rows written */
} atext;

static int atext_cb(const char *buf, size_t size, void *data)
{
    sx__wbuf *w = data;
    sx__wbuf_put(w, buf, size);
    return w->failed ? -1 : 0;
}

static void at_put(atext *a, const char *text)
{
    sx__wbuf_put(&a->w, text, strlen(text));
}

static void at_begin(atext *a)
{
    sx__wbuf_init(&a->w);
    a->n = 0;
    at_put(a, "{\"code\":0,\"data\":[");
}

/* Appends one row (consumed; NULL = out of memory). False on out of memory. */
static bool at_row(atext *a, json_t *row)
{
    if (!row)
        return false;
    if (a->n++)
        sx__wbuf_put(&a->w, ",", 1);
    int r = json_dump_callback(row, atext_cb, &a->w, JSON_COMPACT);
    json_decref(row);
    return r == 0 && sx__wbuf_ok(&a->w);
}

/* Closes the text (with "topks" when topks != NULL) and hands it to rs. False on out of memory
 * (nothing handed; the caller fails the request and calls at_abort). */
static bool at_end(atext *a, sx__resp *rs, const size_t *topks, size_t nq)
{
    at_put(a, "],\"cost\":0");
    if (topks) {
        at_put(a, ",\"topks\":[");
        for (size_t q = 0; q < nq; q++) {
            char num[32];
            int k = snprintf(num, sizeof num, "%s%zu", q ? "," : "", topks[q]);
            sx__wbuf_put(&a->w, num, (size_t)k);
        }
        sx__wbuf_put(&a->w, "]", 1);
    }
    sx__wbuf_put(&a->w, "}", 1);
    if (!sx__wbuf_ok(&a->w))
        return false;
    json_decref(rs->body);
    rs->body = NULL;
    sx__free(rs->text);
    rs->text = a->w.data;
    rs->text_len = a->w.len;
    a->w.data = NULL;
    sx__wbuf_fini(&a->w);
    return true;
}

static void at_abort(atext *a)
{
    sx__wbuf_fini(&a->w);
}

/* ------------------------------------------------------------------ answer size

 * The answer of a search, query or get is held in memory before it is sent (the engine's rows,
 * then the text), so its size is bounded before any work: hits x the JSON bytes of one row,
 * estimated from the schema (numbers at their longest, a float vector at 20 bytes per element,
 * strings at their key and quotes only), must fit max_response_bytes; and again on the rows the
 * engine found, with their real string lengths, before the text is made. Checked arithmetic: a
 * product that overflows counts as over the limit. */

#define DEFAULT_MAX_RESPONSE ((uint64_t)64 << 20)
#define JSON_NUM_BYTES       26u /* ",-1.2345678901234567e-308" */
#define JSON_VEC_ELEM_BYTES  20u /* one float element of a vector, with its separator */

static uint64_t max_response(const sx__req *rq)
{
    return rq->opts && rq->opts->max_response_bytes ? rq->opts->max_response_bytes
                                                    : DEFAULT_MAX_RESPONSE;
}

/* At most `want` rows, and never more than the collection holds (its live rows now; rows inserted
 * meanwhile are caught by the check on what the engine found). */
static uint64_t at_most_rows(const coll *c, uint64_t want)
{
    sx_collection_info ci;
    if (sx_collection_describe(c->h, &ci) != SX_OK)
        return want;
    return ci.n_rows < want ? ci.n_rows : want;
}

/* JSON bytes of one field of one row without its string contents: key, quotes, separators. */
static uint64_t field_bytes(const sx__field_meta *fm)
{
    uint64_t key = strlen(fm->name) + 4;
    switch (fm->engine_type) {
    case SX_FIELD_FLOAT_VECTOR:
        return key + 2 + (uint64_t)fm->dim * JSON_VEC_ELEM_BYTES;
    case SX_FIELD_FLOAT16_VECTOR:
    case SX_FIELD_BFLOAT16_VECTOR:
    case SX_FIELD_BINARY_VECTOR: /* base64 in quotes */
        return key + 2 + (sx_vector_row_bytes(fm->engine_type, fm->dim) + 2) / 3 * 4;
    case SX_FIELD_VARCHAR:
        return key + 2;
    case SX_FIELD_BOOL:
        return key + 6;
    case SX_FIELD_INT64:
    case SX_FIELD_DOUBLE:
        break;
    }
    return key + JSON_NUM_BYTES;
}

/* The estimated JSON bytes of one answer row: braces, the primary key, the distance (search),
 * the planned fields. */
static uint64_t row_bytes(const coll *c, const outplan *o, bool with_distance)
{
    uint64_t b =
        2 + field_bytes(&c->meta->fields[c->pk]) + (with_distance ? 12 + JSON_NUM_BYTES : 0);
    for (size_t i = 0; i < o->n; i++)
        b += field_bytes(&c->meta->fields[o->fidx[i]]);
    return b;
}

static void human_bytes(uint64_t b, char *out, size_t cap)
{
    if (b >= (uint64_t)1 << 30)
        snprintf(out, cap, "%.1f GiB", (double)b / (double)((uint64_t)1 << 30));
    else if (b >= (uint64_t)1 << 20)
        snprintf(out, cap, "%.1f MiB", (double)b / (double)((uint64_t)1 << 20));
    else
        snprintf(out, cap, "%llu bytes", (unsigned long long)b);
}

/* Refuses (code 1100) an answer of `rows` rows of `per_row` bytes plus `extra` bytes that would
 * exceed the server's response limit. `how` names what the estimate counted. */
static bool admit_answer(const sx__req *rq,
                         sx__resp *rs,
                         uint64_t rows,
                         uint64_t per_row,
                         uint64_t extra,
                         const char *how)
{
    uint64_t lim = max_response(rq), total = 0;
    bool wraps = __builtin_mul_overflow(rows, per_row, &total) ||
                 __builtin_add_overflow(total, extra, &total);
    if (!wraps && total <= lim)
        return true;
    char est[32], cap[32];
    if (wraps)
        snprintf(est, sizeof est, "more than 16 EiB");
    else
        human_bytes(total, est, sizeof est);
    human_bytes(lim, cap, sizeof cap);
    sx__fail(rs, SX__MC_INVALID_PARAM,
             "invalid parameter: the answer would be about %s (%s: %llu rows x %llu bytes), over "
             "the server's response limit of %s (sextant serve --max-response-mb): lower limit or "
             "nq, or ask for fewer outputFields",
             est, how, (unsigned long long)rows, (unsigned long long)per_row, cap);
    return false;
}

/* The string bytes of the rows of r that the answer will hold (VarChar and JSON fields, the
 * dynamic-field column), counted on the data the engine returned. rows == NULL: every row. */
static uint64_t rowset_string_bytes(const sx_rowset *r, const size_t *rows, size_t n)
{
    uint64_t b = 0;
    for (size_t col = 0; col < r->n_cols; col++) {
        if (r->cols[col].type != SX_FIELD_VARCHAR || strcmp(r->cols[col].name, SX__PART_FIELD) == 0)
            continue;
        char *const *v = (char *const *)r->cols[col].data;
        for (size_t i = 0; i < n; i++) {
            const char *s = v[rows ? rows[i] : i];
            /* escapes can grow a string (at most 6x for control bytes); count 1x plus quotes */
            b += (s ? strlen(s) : 0) + 2;
        }
    }
    return b;
}

/* ------------------------------------------------------------------ insert, upsert */

typedef struct colbuf {
    const sx__field_meta *fm; /* NULL for hidden columns */
    const char *name;
    sx_field_type type;
    void *data;        /* n rows, sx__calloc */
    bool owns_strings; /* VARCHAR entries were allocated by jansson (json_dumps) */
    json_t *def;       /* the field's default value (owned), NULL = none */
    bool *valid;       /* nullable fields with a NULL row: n rows (sx__malloc), else NULL */
} colbuf;

static void colbufs_free(colbuf *cb, size_t n_cols, size_t n_rows)
{
    for (size_t i = 0; i < n_cols; i++) {
        if (cb[i].owns_strings && cb[i].data) {
            char **s = cb[i].data;
            for (size_t r = 0; r < n_rows; r++)
                sx__jansson_free(s[r]);
        }
        sx__free(cb[i].data);
        sx__free(cb[i].valid);
        json_decref(cb[i].def);
    }
}

#define BAD_ROW(...)                                                              \
 do {                                                                             \
  char m_[600];                                                                   \
  (void)snprintf(m_, sizeof m_, __VA_ARGS__);                                     \
  sx__fail(rs, SX__MC_BAD_INSERT, "fail to deal the insert data, error: %s", m_); \
  return false;                                                                   \
 } while (0)

/* Checks an Array field's value: a JSON array of at most max_capacity elements of the element
 * type (integers in its range, finite numbers, booleans, strings up to the element max_length).
 */
static bool check_array(sx__resp *rs, const sx__field_meta *fm, size_t row, const json_t *v)
{
    if (!json_is_array(v))
        BAD_ROW("row %zu: field %s: the value is not an array (Array of %s)", row, fm->name,
                fm->elem_type);
    size_t n = json_array_size(v);
    if (n > fm->max_capacity)
        BAD_ROW("row %zu: field %s: the array has %zu elements, more than max_capacity (%u)", row,
                fm->name, n, fm->max_capacity);
    const char *et = fm->elem_type;
    bool is_int = !strncmp(et, "Int", 3), is_num = !strcmp(et, "Float") || !strcmp(et, "Double");
    bool is_str = !strcmp(et, "VarChar") || !strcmp(et, "String");
    for (size_t k = 0; k < n; k++) {
        const json_t *e = json_array_get(v, k);
        bool ok;
        if (is_int) {
            ok = json_is_integer(e) && sx__int_fits(et, (int64_t)json_integer_value(e));
        } else if (is_num) {
            double x = json_is_number(e) ? json_number_value(e) : (double)NAN;
            ok = isfinite(x) && (strcmp(et, "Float") != 0 || fabs(x) <= (double)FLT_MAX);
        } else if (is_str) {
            ok = json_is_string(e) && strlen(json_string_value(e)) == json_string_length(e);
            if (ok && json_string_length(e) > fm->elem_max_length)
                BAD_ROW("row %zu: field %s: element %zu is longer than the elements' max_length "
                        "(%u)",
                        row, fm->name, k, fm->elem_max_length);
        } else {
            ok = json_is_boolean(e);
        }
        if (!ok)
            BAD_ROW("row %zu: field %s: element %zu is not a valid %s", row, fm->name, k, et);
    }
    return true;
}

/* Stores one declared field's value of row `row` into cb. */
static bool put_value(sx__resp *rs, colbuf *cb, size_t row, const json_t *v)
{
    const sx__field_meta *fm = cb->fm;
    uint32_t dim = fm->dim; /* vector fields: each its own */
    switch (fm->engine_type) {
    case SX_FIELD_INT64: {
        int64_t x;
        if (json_is_boolean(v) || !sx__json_to_int64(v, &x))
            BAD_ROW("row %zu: field %s: the value is not an integer (%s)", row, fm->name, fm->type);
        if (!sx__int_fits(fm->type, x))
            BAD_ROW("row %zu: field %s: %lld is out of the range of %s", row, fm->name,
                    (long long)x, fm->type);
        ((int64_t *)cb->data)[row] = x;
        return true;
    }
    case SX_FIELD_DOUBLE: {
        if (!json_is_number(v))
            BAD_ROW("row %zu: field %s: the value is not a number (%s)", row, fm->name, fm->type);
        double x = json_number_value(v);
        if (!isfinite(x) || (strcmp(fm->type, "Float") == 0 && fabs(x) > (double)FLT_MAX))
            BAD_ROW("row %zu: field %s: %g is out of the range of %s", row, fm->name, x, fm->type);
        ((double *)cb->data)[row] = x;
        return true;
    }
    case SX_FIELD_BOOL:
        if (!json_is_boolean(v))
            BAD_ROW("row %zu: field %s: the value is not a boolean", row, fm->name);
        ((bool *)cb->data)[row] = json_is_true(v);
        return true;
    case SX_FIELD_VARCHAR: {
        if (sx__field_is_sparse(fm)) {
            char why[256], *txt = NULL;
            if (!sx__sparse_from_json(v, &txt, why, sizeof why))
                BAD_ROW("row %zu: field %s: %s", row, fm->name, why);
            ((char **)cb->data)[row] = txt;
            return true;
        }
        if (is_json_type(fm)) {
            if (is_array_type(fm) && !check_array(rs, fm, row, v))
                return false;
            char *txt = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
            if (!txt)
                BAD_ROW("row %zu: field %s: cannot encode the JSON value", row, fm->name);
            ((char **)cb->data)[row] = txt;
            if (strlen(txt) > SX_MAX_VARCHAR)
                BAD_ROW("row %zu: field %s: the JSON value is longer than %u bytes", row, fm->name,
                        SX_MAX_VARCHAR);
            return true;
        }
        if (!json_is_string(v))
            BAD_ROW("row %zu: field %s: the value is not a string (%s)", row, fm->name, fm->type);
        const char *s = json_string_value(v);
        size_t len = json_string_length(v);
        if (strlen(s) != len)
            BAD_ROW("row %zu: field %s: the string holds a NUL character", row, fm->name);
        uint32_t maxlen = fm->max_length ? fm->max_length : SX_MAX_VARCHAR;
        if (len > maxlen)
            BAD_ROW("row %zu: field %s: the length (%zu) exceeds max length (%u)", row, fm->name,
                    len, maxlen);
        ((const char **)cb->data)[row] = s;
        return true;
    }
    case SX_FIELD_FLOAT_VECTOR: {
        if (!json_is_array(v))
            BAD_ROW("row %zu: field %s: the vector is not an array of numbers", row, fm->name);
        if (json_array_size(v) != dim)
            BAD_ROW("row %zu: field %s: the dimension (%zu) does not match the schema (%u)", row,
                    fm->name, json_array_size(v), dim);
        float *dst = (float *)cb->data + row * dim;
        for (uint32_t i = 0; i < dim; i++) {
            const json_t *e = json_array_get(v, i);
            double x = json_is_number(e) ? json_number_value(e) : (double)NAN;
            if (!json_is_number(e) || !isfinite(x) || fabs(x) > (double)FLT_MAX)
                BAD_ROW("row %zu: field %s: element %u is not a finite float", row, fm->name, i);
            dst[i] = (float)x;
        }
        return true;
    }
    case SX_FIELD_FLOAT16_VECTOR:
    case SX_FIELD_BFLOAT16_VECTOR:
    case SX_FIELD_BINARY_VECTOR: {
        char why[200];
        size_t rb = sx_vector_row_bytes(fm->engine_type, dim);
        if (!sx__vec_from_json(v, fm->engine_type, dim, (char *)cb->data + row * rb, why,
                               sizeof why))
            BAD_ROW("row %zu: field %s: %s", row, fm->name, why);
        return true;
    }
    }
    BAD_ROW("row %zu: field %s: unsupported type %s", row, fm->name, fm->type);
}

static size_t width_of(sx_field_type t, uint32_t dim)
{
    switch (t) {
    case SX_FIELD_INT64:
        return sizeof(int64_t);
    case SX_FIELD_DOUBLE:
        return sizeof(double);
    case SX_FIELD_BOOL:
        return sizeof(bool);
    case SX_FIELD_VARCHAR:
        return sizeof(char *);
    case SX_FIELD_FLOAT_VECTOR:
    case SX_FIELD_FLOAT16_VECTOR:
    case SX_FIELD_BFLOAT16_VECTOR:
    case SX_FIELD_BINARY_VECTOR:
        return sx_vector_row_bytes(t, dim);
    }
    return 8;
}

/* The analyzers of a collection's BM25 functions, one per sparse[] entry (NULL: not a function
 * output), made once per request. */
typedef struct bm25_set {
    sx__analyzer *an[SX_MAX_VECTOR_FIELDS];
} bm25_set;

static void bm25_set_free(bm25_set *b)
{
    for (size_t i = 0; i < SX_MAX_VECTOR_FIELDS; i++)
        sx__analyzer_free(b->an[i]);
    memset(b, 0, sizeof *b);
}

/* The analyzer of sparse[si]'s function input (its field's analyzer_params). False with rs set. */
static bool bm25_analyzer(sx__resp *rs, const sx__coll_meta *m, size_t si, sx__analyzer **out)
{
    const sx__field_meta *in = sx__meta_field(m, m->sparse[si].bm25_input);
    json_t *ap = in && in->analyzer[0] ? json_loads(in->analyzer, 0, NULL) : NULL;
    char why[256] = "";
    *out = in ? sx__analyzer_new(ap, why, sizeof why) : NULL;
    json_decref(ap);
    if (!*out) {
        sx__fail(rs, SX__MC_UNEXPECTED, "BM25 function %s: %s", m->sparse[si].function,
                 in ? why : "its input field is gone");
        return false;
    }
    return true;
}

static bool bm25_set_make(sx__resp *rs, const sx__coll_meta *m, bm25_set *b)
{
    memset(b, 0, sizeof *b);
    for (size_t i = 0; i < m->n_sparse; i++)
        if (m->sparse[i].function[0] && !bm25_analyzer(rs, m, i, &b->an[i])) {
            bm25_set_free(b);
            return false;
        }
    return true;
}

/* The engine's sparse text of a BM25 document: the term frequencies of the analyzed text. NULL
 * with why set (too many distinct terms for a row, or out of memory). */
static char *bm25_doc(const sx__analyzer *a, const char *text, char *why, size_t cap)
{
    uint32_t *idx = NULL;
    float *val = NULL;
    size_t n = 0;
    if (!sx__analyze_tf(a, text, &idx, &val, &n)) {
        (void)snprintf(why, cap, "out of memory");
        return NULL;
    }
    size_t len = sx_sparse_format(idx, val, n, NULL, 0);
    char *t = len <= SX_MAX_VARCHAR ? sx__malloc(len + 1) : NULL;
    if (t)
        (void)sx_sparse_format(idx, val, n, t, len + 1);
    else
        (void)snprintf(why, cap,
                       len > SX_MAX_VARCHAR
                           ? "the text has %zu distinct terms, more than Sextant keeps for a row "
                             "(about 5,000)"
                           : "out of memory (%zu terms)",
                       n);
    sx__free(idx);
    sx__free(val);
    return t;
}

/* The partition of row r in partition key mode, by its key in key_cb (int64 or string cells). */
static const char *
key_part(const sx__coll_meta *m, const colbuf *key_cb, size_t r, char (*names)[SX_MAX_NAME + 1])
{
    uint32_t i = key_cb->type == SX_FIELD_INT64
                     ? sx__meta_key_part(m, ((const int64_t *)key_cb->data)[r], NULL)
                     : sx__meta_key_part(m, 0, ((char *const *)key_cb->data)[r]);
    return names[i];
}

/* Decodes `rows` into columns. with_pk: the primary key is a column (false for autoID). In
 * partition key mode *key_names_out gets the partition names the partition column points into
 * (owned by the caller: sx__free after the columns are written). */
static bool decode_rows(sx__resp *rs,
                        const coll *c,
                        const json_t *rows,
                        bool with_pk,
                        bool pk_forbidden,
                        const char *part,
                        colbuf *cb,
                        size_t *n_cb,
                        char (**key_names_out)[SX_MAX_NAME + 1],
                        const bm25_set *bm)
{
    const sx__coll_meta *m = c->meta;
    size_t n = json_array_size(rows);
    size_t k = 0;
    for (size_t f = 0; f < m->n_fields; f++) {
        if ((int)f == c->pk && !with_pk)
            continue;
        cb[k].fm = &m->fields[f];
        cb[k].name = m->fields[f].name;
        cb[k].type = m->fields[f].engine_type;
        cb[k].owns_strings = is_json_type(&m->fields[f]) || sx__field_is_sparse(&m->fields[f]);
        cb[k].def = m->fields[f].default_json[0]
                        ? json_loads(m->fields[f].default_json, JSON_DECODE_ANY, NULL)
                        : NULL;
        cb[k].data = sx__calloc(n, width_of(cb[k].type, m->fields[f].dim));
        k++;
        *n_cb = k;
        if (!cb[k - 1].data) {
            fail_nomem(rs);
            return false;
        }
    }
    colbuf *meta_cb = NULL, *part_cb = NULL, *key_cb = NULL;
    /* partition key mode: each row's partition from its key (the names live in key_names) */
    char(*key_names)[SX_MAX_NAME + 1] = NULL;
    if (sx__meta_key_field(m) && m->has_partitions) {
        for (size_t i = 0; i < k; i++)
            if (cb[i].fm && cb[i].fm->is_partition_key)
                key_cb = &cb[i];
        SX_ASSERT(key_cb); /* never the (autoID) primary key */
        key_names = sx__calloc(m->key_parts, sizeof *key_names);
        if (!key_names) {
            fail_nomem(rs);
            return false;
        }
        *key_names_out = key_names;
        for (size_t i = 0; i < m->key_parts; i++)
            (void)sx__meta_part_name(m, i, key_names[i]);
    }
    if (m->enable_dynamic) {
        meta_cb = &cb[k++];
        meta_cb->name = SX__META_FIELD;
        meta_cb->type = SX_FIELD_VARCHAR;
        meta_cb->owns_strings = true;
        meta_cb->data = sx__calloc(n, sizeof(char *));
        *n_cb = k;
        if (!meta_cb->data) {
            fail_nomem(rs);
            return false;
        }
    }
    if (m->has_partitions) {
        part_cb = &cb[k++];
        part_cb->name = SX__PART_FIELD;
        part_cb->type = SX_FIELD_VARCHAR;
        part_cb->data = sx__calloc(n, sizeof(char *));
        *n_cb = k;
        if (!part_cb->data) {
            fail_nomem(rs);
            return false;
        }
    }
    for (size_t r = 0; r < n; r++) {
        const json_t *row = json_array_get(rows, r);
        if (!json_is_object(row))
            BAD_ROW("row %zu is not a JSON object", r);
        /* declared fields */
        size_t ci = 0;
        for (size_t f = 0; f < m->n_fields; f++) {
            const sx__field_meta *fm = &m->fields[f];
            json_t *v = json_object_get(row, fm->name);
            if (json_is_null(v))
                v = NULL;
            if ((int)f == c->pk && !with_pk) {
                if (v && pk_forbidden)
                    BAD_ROW("row %zu: the primary key %s is auto-generated (autoID): do not "
                            "give it",
                            r, fm->name);
                continue;
            }
            int bi = sx__field_is_sparse(fm) ? sx__meta_sparse_at(m, fm->name) : -1;
            if (bi >= 0 && bm->an[bi]) { /* a BM25 function's output: from its input text */
                if (v)
                    BAD_ROW("row %zu: field %s is the output of BM25 function %s (computed from "
                            "%s): do not give it",
                            r, fm->name, m->sparse[bi].function, m->sparse[bi].bm25_input);
                const json_t *tv = json_object_get(row, m->sparse[bi].bm25_input);
                char why[256];
                char *txt = bm25_doc(bm->an[bi], json_is_string(tv) ? json_string_value(tv) : "",
                                     why, sizeof why);
                if (!txt)
                    BAD_ROW("row %zu: field %s: %s", r, m->sparse[bi].bm25_input, why);
                ((char **)cb[ci].data)[r] = txt;
                ci++;
                continue;
            }
            if (!v)
                v = cb[ci].def;       /* omitted or null: the default, when the field has one */
            if (!v && fm->nullable) { /* else NULL (its cell stays 0 / NULL pointer) */
                if (!cb[ci].valid) {
                    cb[ci].valid = sx__malloc(n);
                    if (!cb[ci].valid) {
                        fail_nomem(rs);
                        return false;
                    }
                    memset(cb[ci].valid, 1, n);
                }
                cb[ci].valid[r] = false;
                ci++;
                continue;
            }
            if (!v)
                BAD_ROW("row %zu: the field %s is missing", r, fm->name);
            if (!put_value(rs, &cb[ci], r, v))
                return false;
            ci++;
        }
        /* other keys */
        json_t *dyn = NULL;
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)row, key, val) {
            if (field_index(m, key) >= 0)
                continue;
            if (strcmp(key, "$meta") == 0) {
                json_decref(dyn);
                BAD_ROW("row %zu: $meta is a reserved field name: give dynamic fields as "
                        "top-level keys",
                        r);
            }
            if (!m->enable_dynamic) {
                json_decref(dyn);
                sx__fail(rs, SX__MC_INVALID_PARAM,
                         "has pass more field without dynamic schema, please check it (row %zu, "
                         "field %s)",
                         r, key);
                return false;
            }
            if (!dyn)
                dyn = json_object();
            if (!dyn || json_object_set(dyn, key, val) != 0) {
                json_decref(dyn);
                fail_nomem(rs);
                return false;
            }
        }
        if (meta_cb) {
            if (!dyn)
                dyn = json_object();
            char *txt = dyn ? json_dumps(dyn, JSON_COMPACT) : NULL;
            json_decref(dyn);
            dyn = NULL;
            if (!txt) {
                fail_nomem(rs);
                return false;
            }
            ((char **)meta_cb->data)[r] = txt;
            if (strlen(txt) > SX_MAX_VARCHAR)
                BAD_ROW("row %zu: the dynamic fields take more than %u bytes", r, SX_MAX_VARCHAR);
        }
        json_decref(dyn);
        if (part_cb)
            ((const char **)part_cb->data)[r] = key_cb ? key_part(m, key_cb, r, key_names) : part;
    }
    return true;
}

/* Returns the json ids of the rows' primary keys (given in the rows, or `ids`). */
static json_t *
ids_json(const sx__req *rq, const coll *c, const colbuf *pkcol, const int64_t *ids, size_t n)
{
    SX_ASSERT(ids || pkcol); /* without generated ids, the rows carry their keys */
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        if (ids)
            json_array_append_new(a, sx__jint64_out(rq, ids[i]));
        else if (c->meta->fields[c->pk].engine_type == SX_FIELD_INT64)
            json_array_append_new(a, sx__jint64_out(rq, ((const int64_t *)pkcol->data)[i]));
        else
            json_array_append_new(a, json_string(((char *const *)pkcol->data)[i]));
    }
    return a;
}

/* Reads the given primary keys of an autoID upsert (validated like a row value). */
static bool upsert_auto_keys(sx__resp *rs, const coll *c, const json_t *rows, int64_t *keys)
{
    const sx__field_meta *fm = &c->meta->fields[c->pk];
    for (size_t r = 0; r < json_array_size(rows); r++) {
        json_t *v = json_object_get(json_array_get(rows, r), fm->name);
        if (!v || json_is_null(v))
            BAD_ROW("row %zu: the primary key %s is required by upsert", r, fm->name);
        if (json_is_boolean(v) || !sx__json_to_int64(v, &keys[r]))
            BAD_ROW("row %zu: field %s: the value is not an integer", r, fm->name);
    }
    return true;
}

static void write_rows(sx__req *rq, sx__resp *rs, bool upsert)
{
    const char *sname = "CollectionDataReq";
    coll c;
    if (!coll_open(rq, rs, sname, &c))
        return;
    colbuf cb[SX_MAX_FIELDS + 2];
    memset(cb, 0, sizeof cb);
    size_t n_cb = 0, n = 0;
    int64_t *ids = NULL, *old_keys = NULL;
    sx_column *cols = NULL;
    char(*key_names)[SX_MAX_NAME + 1] = NULL; /* partition key mode: the partition column's */
    bm25_set bm = { { NULL } };
    json_t *rows = sx__jget(rq->body, "data");
    if (!rows) {
        sx__fail(rs, SX__MC_MISSING_REQUIRED,
                 "missing required parameters, error: Key: '%s.Data' Error:Field validation for "
                 "'Data' failed on the 'required' tag",
                 sname);
        goto out;
    }
    if (!json_is_array(rows)) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: json: cannot unmarshal into Go "
                 "struct field %s.data of type []map[string]interface {}",
                 sname);
        goto out;
    }
    n = json_array_size(rows);
    if (n == 0) {
        sx__fail(rs, SX__MC_BAD_INSERT, "fail to deal the insert data, error: no rows in data");
        goto out;
    }
    const char *part = "";
    if (sx__jstr(rq->body, "partitionName", &part) != 0) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: partitionName must be a string");
        goto out;
    }
    if (*part && c.meta->key_parts) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: not support manually specifying the partition names if "
                 "partition key mode is used");
        goto out;
    }
    if (!*part)
        part = "_default";
    if (!c.meta->key_parts && !part_exists(c.meta, part) && !(strcmp(part, "_default") == 0)) {
        sx__fail(rs, SX__MC_PART_NOT_FOUND, "partition not found[partition=%s]", part);
        goto out;
    }
    const sx__field_meta *pkf = &c.meta->fields[c.pk];
    bool auto_id = pkf->auto_id;
    if (auto_id && upsert) {
        old_keys = sx__malloc(n * sizeof *old_keys);
        if (!old_keys) {
            fail_nomem(rs);
            goto out;
        }
        if (!upsert_auto_keys(rs, &c, rows, old_keys))
            goto out;
    }
    if (!bm25_set_make(rs, c.meta, &bm))
        goto out;
    if (!decode_rows(rs, &c, rows, !auto_id, !upsert, part, cb, &n_cb, &key_names, &bm))
        goto out;
    cols = sx__calloc(n_cb, sizeof *cols);
    if (!cols) {
        fail_nomem(rs);
        goto out;
    }
    for (size_t i = 0; i < n_cb; i++) {
        cols[i].name = cb[i].name;
        cols[i].type = cb[i].type;
        cols[i].data = cb[i].data;
        cols[i].valid = cb[i].valid;
    }
    sx_batch b = { n, cols, n_cb };
    sx_status st;
    if (pkf->engine_type == SX_FIELD_INT64) {
        ids = sx__malloc(n * sizeof *ids);
        if (!ids) {
            fail_nomem(rs);
            goto out;
        }
    }
    if (upsert && !auto_id)
        st = sx_upsert(c.h, &b);
    else
        st = sx_insert(c.h, &b, ids);
    if (st == SX_OK && old_keys) {
        sx_keys k = { n, old_keys, NULL };
        st = sx_delete(c.h, &k, NULL);
    }
    if (st != SX_OK) {
        if (st == SX_EINVAL || st == SX_EEXIST) {
            char emsg[1024];
            sx__fail(rs, SX__MC_BAD_INSERT, "fail to deal the insert data, error: %s",
                     sx__errmsg_safe(emsg, sizeof emsg));
        } else
            sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, upsert ? "upsert" : "insert");
        goto out;
    }
    const colbuf *pkcol = NULL;
    for (size_t i = 0; i < n_cb; i++)
        if (cb[i].fm == pkf)
            pkcol = &cb[i];
    json_t *idarr = ids_json(rq, &c, pkcol, auto_id ? ids : NULL, n);
    json_t *data = json_object();
    if (!idarr || !data) {
        json_decref(idarr);
        json_decref(data);
        fail_nomem(rs);
        goto out;
    }
    json_object_set_new(data, upsert ? "upsertCount" : "insertCount", json_integer((json_int_t)n));
    json_object_set_new(data, upsert ? "upsertIds" : "insertIds", idarr);
    ok_cost(rs, data);
    if (rq->metrics)
        sx__metrics_rows(rq->metrics, n, 0, 0);
out:
    colbufs_free(cb, n_cb, n);
    bm25_set_free(&bm);
    sx__free(key_names);
    sx__free(cols);
    sx__free(ids);
    sx__free(old_keys);
    coll_close(&c);
}

static void h_insert(sx__req *rq, sx__resp *rs)
{
    write_rows(rq, rs, false);
}

static void h_upsert(sx__req *rq, sx__resp *rs)
{
    write_rows(rq, rs, true);
}

/* ------------------------------------------------------------------ delete */

static void h_delete(sx__req *rq, sx__resp *rs)
{
    coll c;
    if (!coll_open(rq, rs, "CollectionFilterReq", &c))
        return;
    const char *uf = NULL;
    char *filter = NULL;
    if (!sx__need_str(rq, rs, "filter", "CollectionFilterReq", &uf))
        goto out;
    json_t *part = sx__jget(rq->body, "partitionName");
    if (json_is_string(part) && !*json_string_value(part)) /* json_is_string(NULL) is false */
        part = NULL;
    if (!make_filter(rq->body, rs, &c, part, &filter))
        goto out;
    uint64_t n = 0;
    sx_status st = sx_delete_where(c.h, filter, &n);
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "delete");
        goto out;
    }
    json_t *data = json_object();
    json_object_set_new(data, "deleteCount", json_integer((json_int_t)n));
    ok_cost(rs, data);
    if (rq->metrics)
        sx__metrics_rows(rq->metrics, 0, n, 0);
out:
    sx__free(filter);
    coll_close(&c);
}

/* ------------------------------------------------------------------ query, get */

/* The body's key as a limit or offset (def when absent or 0). zero_refused: a 0 given explicitly
 * is refused, as Milvus's search refuses topk 0 (a query's limit 0 means the default). */
static bool
read_limit(sx__req *rq, sx__resp *rs, const char *key, int64_t def, bool zero_refused, int64_t *out)
{
    int64_t v = 0;
    if (sx__jint(rq->body, key, &v) != 0) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: json: cannot unmarshal into Go "
                 "struct field .%s of type int32",
                 key);
        return false;
    }
    if (v < 0) { /* Milvus's texts and its code for them (65535: plain errors in its proxy) */
        if (strcmp(key, "offset") == 0)
            sx__fail(rs, SX__MC_UNEXPECTED, "offset [%lld] is invalid, should be gte than 0",
                     (long long)v);
        else
            sx__fail(rs, SX__MC_UNEXPECTED,
                     "topk [%lld] is invalid, it should be in range [1, %u], but got %lld",
                     (long long)v, MAX_LIMIT, (long long)v);
        return false;
    }
    if (v == 0 && zero_refused && sx__jget(rq->body, key)) {
        sx__fail(rs, SX__MC_UNEXPECTED,
                 "topk [0] is invalid, it should be in range [1, %u], but got 0", MAX_LIMIT);
        return false;
    }
    *out = v ? v : def;
    return true;
}

/* A search's limit and limit + offset (both in [0, INT64_MAX]) against MAX_LIMIT, with Milvus's
 * texts and code (65535). */
static bool check_window(sx__resp *rs, int64_t limit, int64_t offset)
{
    uint64_t window = (uint64_t)limit + (uint64_t)offset;
    if ((uint64_t)limit > MAX_LIMIT)
        sx__fail(rs, SX__MC_UNEXPECTED,
                 "topk [%lld] is invalid, it should be in range [1, %u], but got %lld",
                 (long long)limit, MAX_LIMIT, (long long)limit);
    else if (window > MAX_LIMIT)
        sx__fail(rs, SX__MC_UNEXPECTED,
                 "offset+topk [%llu] is invalid, it should be in range [1, %u], but got %llu",
                 (unsigned long long)window, MAX_LIMIT, (unsigned long long)window);
    return window <= MAX_LIMIT;
}

/* Answers every row of r (optionally only those whose partition is in parts) as rs's text.
 * False on out of memory (rs untouched). */
static bool rows_answer(const sx__req *rq,
                        sx__resp *rs,
                        const coll *c,
                        const outplan *o,
                        const sx_rowset *r,
                        const json_t *parts)
{
    rowmap mp;
    map_rows(c, o, r, &mp);
    int pcol = parts ? col_of(r, SX__PART_FIELD) : -1;
    atext a;
    at_begin(&a);
    for (size_t i = 0; i < r->n_rows; i++) {
        if (pcol >= 0) {
            const char *p = ((char *const *)r->cols[pcol].data)[i];
            bool keep = false;
            size_t np = json_is_array(parts) ? json_array_size(parts) : 1;
            for (size_t j = 0; j < np; j++) {
                const json_t *v = json_is_array(parts) ? json_array_get(parts, j) : parts;
                keep |= json_is_string(v) && strcmp(json_string_value(v), p) == 0;
            }
            if (!keep)
                continue;
        }
        if (!at_row(&a, row_json(rq, c, o, &mp, r, i, NULL))) {
            at_abort(&a);
            return false;
        }
    }
    if (!at_end(&a, rs, NULL, 0)) {
        at_abort(&a);
        return false;
    }
    return true;
}

static bool is_count_query(const json_t *of)
{
    if (!json_is_array(of))
        return false;
    for (size_t i = 0; i < json_array_size(of); i++) {
        const json_t *v = json_array_get(of, i);
        if (json_is_string(v) && strcasecmp(json_string_value(v), "count(*)") == 0)
            return true;
    }
    return false;
}

static void h_query(sx__req *rq, sx__resp *rs)
{
    coll c;
    if (!coll_open(rq, rs, "QueryReqV2", &c))
        return;
    char *filter = NULL;
    sx_rowset *r = NULL;
    outplan *o = sx__malloc(sizeof *o);
    if (!o) {
        fail_nomem(rs);
        goto out;
    }
    json_t *of = sx__jget(rq->body, "outputFields");
    int64_t limit = 100, offset = 0;
    if (!read_limit(rq, rs, "limit", 100, false, &limit) ||
        !read_limit(rq, rs, "offset", 0, false, &offset))
        goto out;
    json_t *parts = sx__jget(rq->body, "partitionNames");
    if (parts && !json_is_array(parts)) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: partitionNames must be an array");
        goto out;
    }
    if (!make_filter(rq->body, rs, &c, parts, &filter))
        goto out;
    if (!need_loaded(rs, &c))
        goto out;
    if (is_count_query(of)) {
        if (json_array_size(of) != 1) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: count(*) cannot be mixed with other output fields");
            goto out;
        }
        uint64_t n = 0;
        sx_status st = sx_count(c.h, filter, &n);
        if (st != SX_OK) {
            sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "query");
            goto out;
        }
        json_t *row = json_object();
        json_object_set_new(row, "count(*)", sx__jint64_out(rq, (int64_t)n));
        json_t *a = json_array();
        json_array_append_new(a, row);
        ok_cost(rs, a);
        goto out;
    }
    uint64_t window = (uint64_t)limit + (uint64_t)offset; /* both in [0, INT64_MAX] */
    if (window > MAX_LIMIT) {
        sx__fail(rs, SX__MC_UNEXPECTED,
                 "invalid max query result window, (offset+limit) should be in range [1, %u], but "
                 "got %llu",
                 MAX_LIMIT, (unsigned long long)window);
        goto out;
    }
    if (!plan_outputs(rs, &c, of, true, o, false))
        goto out;
    uint64_t per_row = row_bytes(&c, o, false);
    if (!admit_answer(rq, rs, at_most_rows(&c, (uint64_t)limit), per_row, 0,
                      "limit, or the rows the collection holds"))
        goto out;
    sx_status st = sx_query(c.h, filter, o->eng, o->n_eng, (uint64_t)limit, (uint64_t)offset, &r);
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "query");
        goto out;
    }
    if (!admit_answer(rq, rs, r->n_rows, per_row, rowset_string_bytes(r, NULL, r->n_rows),
                      "rows found, with their strings"))
        goto out;
    if (!rows_answer(rq, rs, &c, o, r, NULL))
        fail_nomem(rs);
out:
    sx_rowset_free(r);
    sx__free(filter);
    sx__free(o);
    coll_close(&c);
}

static void fail_bad_pk(sx__resp *rs)
{
    sx__fail(rs, SX__MC_BAD_PK,
             "please check the primary key and its' type can only in [int, string]");
}

static void h_get(sx__req *rq, sx__resp *rs)
{
    coll c;
    if (!coll_open(rq, rs, "CollectionIDReq", &c))
        return;
    int64_t *ints = NULL;
    const char **strs = NULL;
    sx_rowset *r = NULL;
    outplan *o = sx__malloc(sizeof *o);
    if (!o) {
        fail_nomem(rs);
        goto out;
    }
    json_t *id = sx__jget(rq->body, "id");
    if (!id) {
        sx__fail(rs, SX__MC_MISSING_REQUIRED,
                 "missing required parameters, error: Key: 'CollectionIDReq.ID' Error:Field "
                 "validation for 'ID' failed on the 'required' tag");
        goto out;
    }
    size_t n = json_is_array(id) ? json_array_size(id) : 1;
    bool int_pk = c.meta->fields[c.pk].engine_type == SX_FIELD_INT64;
    ints = sx__calloc(n ? n : 1, sizeof *ints);
    strs = sx__calloc(n ? n : 1, sizeof *strs);
    if (!ints || !strs) {
        fail_nomem(rs);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_is_array(id) ? json_array_get(id, i) : id;
        if (int_pk) {
            if (json_is_boolean(v) || !sx__json_to_int64(v, &ints[i])) {
                fail_bad_pk(rs);
                goto out;
            }
        } else {
            if (!json_is_string(v)) {
                fail_bad_pk(rs);
                goto out;
            }
            strs[i] = json_string_value(v);
        }
    }
    json_t *parts = sx__jget(rq->body, "partitionNames");
    if (parts && !json_is_array(parts)) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: partitionNames must be an array");
        goto out;
    }
    if (parts && json_array_size(parts) == 0)
        parts = NULL;
    for (size_t i = 0; parts && i < json_array_size(parts); i++) {
        const json_t *v = json_array_get(parts, i);
        if (!json_is_string(v) || !part_exists(c.meta, json_string_value(v))) {
            sx__fail(rs, SX__MC_PART_NOT_FOUND, "partition not found[partition=%s]",
                     json_is_string(v) ? json_string_value(v) : "?");
            goto out;
        }
    }
    if (!need_loaded(rs, &c))
        goto out;
    if (!plan_outputs(rs, &c, sx__jget(rq->body, "outputFields"), true, o, parts != NULL))
        goto out;
    uint64_t per_row = row_bytes(&c, o, false);
    if (!admit_answer(rq, rs, n, per_row, 0, "ids"))
        goto out;
    sx_keys k = { n, int_pk ? ints : NULL, int_pk ? NULL : strs };
    sx_status st = sx_get(c.h, &k, o->eng, o->n_eng, &r);
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "get");
        goto out;
    }
    if (!admit_answer(rq, rs, r->n_rows, per_row, rowset_string_bytes(r, NULL, r->n_rows),
                      "rows found, with their strings"))
        goto out;
    if (!rows_answer(rq, rs, &c, o, r, c.meta->has_partitions ? parts : NULL))
        fail_nomem(rs);
out:
    sx_rowset_free(r);
    sx__free(ints);
    sx__free((void *)strs);
    sx__free(o);
    coll_close(&c);
}

/* ------------------------------------------------------------------ search */

typedef struct sparams {
    size_t n;
    const char *key[MAX_PARAMS]; /* borrowed from the body */
    char *val[MAX_PARAMS];       /* owned */
    sx_param eng[MAX_PARAMS];    /* what the engine gets */
    size_t n_eng;
    bool has_radius, has_range;
    double radius, range_filter;
    bool ignore_growing; /* ignoreGrowing / ignore_growing: search sealed rows only */
    bool exact;          /* exact (Sextant): scan every row, no index (the console's recall) */
    const char *metric;  /* borrowed */
    json_t *owned;       /* the object the keys are borrowed from, when it is a copy */
} sparams;

static void sparams_free(sparams *p)
{
    for (size_t i = 0; i < p->n; i++)
        sx__free(p->val[i]);
    p->n = 0;
    json_decref(p->owned);
    p->owned = NULL;
}

/* Canonical text of a parameter value: integers in decimal, integral reals as integers, strings
 * as they are, other JSON compactly. Owned or NULL. */
static char *param_text(const json_t *v)
{
    char buf[64];
    if (json_is_integer(v)) {
        (void)snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        return sx__strdup(buf);
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 9e15)
            (void)snprintf(buf, sizeof buf, "%lld", (long long)d);
        else
            (void)snprintf(buf, sizeof buf, "%.17g", d);
        return sx__strdup(buf);
    }
    if (json_is_string(v))
        return sx__strdup(json_string_value(v));
    if (json_is_boolean(v))
        return sx__strdup(json_is_true(v) ? "true" : "false");
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    char *r = t ? sx__strdup(t) : NULL;
    sx__jansson_free(t);
    return r;
}

static bool sparams_add(sx__resp *rs, sparams *p, const char *key, const json_t *v)
{
    if (json_is_null(v))
        return true;
    char *t = param_text(v);
    if (!t) {
        fail_nomem(rs);
        return false;
    }
    for (size_t i = 0; i < p->n; i++) {
        if (strcmp(p->key[i], key) != 0)
            continue;
        if (strcmp(p->val[i], t) != 0) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: ambiguous parameter: key=%s, value1=%s, value2=%s", key,
                     p->val[i], t);
            sx__free(t);
            return false;
        }
        sx__free(t);
        return true;
    }
    if (p->n == MAX_PARAMS) {
        sx__free(t);
        sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: too many search parameters");
        return false;
    }
    p->key[p->n] = key;
    p->val[p->n] = t;
    p->n++;
    return true;
}

static bool is_generic_param(const char *k)
{
    static const char *const g[] = { "metricType",    "metric_type",    "radius",   "range_filter",
                                     "ignoreGrowing", "ignore_growing", "hints",    "level",
                                     "round_decimal", "offset",         "topk",     "topK",
                                     "limit",         "group_by_field", "iterator", "collection_id",
                                     "exact" };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
        if (strcmp(g[i], k) == 0)
            return true;
    return false;
}

static bool param_double(sx__resp *rs, const char *key, const char *txt, double *out)
{
    char *end = NULL;
    double d = strtod(txt, &end);
    if (end == txt || *end || !isfinite(d)) {
        sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: %s must be a number, got %s", key,
                 txt);
        return false;
    }
    *out = d;
    return true;
}

/* Merges searchParams (flat and nested) and checks the metric (cm: the searched field's) and
 * range. */
static bool parse_sparams(sx__resp *rs, sx_metric cm, const json_t *sp, sparams *p)
{
    memset(p, 0, sizeof *p);
    if (!sp)
        return true;
    if (!json_is_object(sp)) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: searchParams must be an object");
        return false;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)sp, k, v) {
        if (strcmp(k, "params") == 0) {
            if (json_is_null(v))
                continue;
            if (!json_is_object(v)) {
                sx__fail(rs, SX__MC_BAD_JSON,
                         "can only accept json format request, error: searchParams.params must "
                         "be an object");
                return false;
            }
            const char *k2;
            json_t *v2;
            json_object_foreach(v, k2, v2) {
                if (!sparams_add(rs, p, strcmp(k2, "metric_type") == 0 ? "metricType" : k2, v2))
                    return false;
            }
            continue;
        }
        if (!sparams_add(rs, p, strcmp(k, "metric_type") == 0 ? "metricType" : k, v))
            return false;
    }
    for (size_t i = 0; i < p->n; i++) {
        const char *key = p->key[i];
        if (strcmp(key, "metricType") == 0) {
            p->metric = p->val[i];
        } else if (strcmp(key, "ignoreGrowing") == 0 || strcmp(key, "ignore_growing") == 0) {
            if (strcasecmp(p->val[i], "true") != 0 && strcasecmp(p->val[i], "false") != 0) {
                sx__fail(rs, SX__MC_INVALID_PARAM,
                         "invalid parameter: %s must be true or false, got %s", key, p->val[i]);
                return false;
            }
            p->ignore_growing = strcasecmp(p->val[i], "true") == 0;
        } else if (strcmp(key, "exact") == 0) {
            if (strcasecmp(p->val[i], "true") != 0 && strcasecmp(p->val[i], "false") != 0) {
                sx__fail(rs, SX__MC_INVALID_PARAM,
                         "invalid parameter: exact must be true or false, got %s", p->val[i]);
                return false;
            }
            p->exact = strcasecmp(p->val[i], "true") == 0;
        } else if (strcmp(key, "radius") == 0) {
            if (!param_double(rs, key, p->val[i], &p->radius))
                return false;
            p->has_radius = true;
        } else if (strcmp(key, "range_filter") == 0) {
            if (!param_double(rs, key, p->val[i], &p->range_filter))
                return false;
            p->has_range = true;
        } else if (!is_generic_param(key)) {
            p->eng[p->n_eng].key = key;
            p->eng[p->n_eng].value = p->val[i];
            p->n_eng++;
        }
    }
    if (p->metric && *p->metric) {
        sx_metric m;
        if (!sx__metric_parse(p->metric, &m)) {
            sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: metric type %s is not supported",
                     p->metric);
            return false;
        }
        if (m != cm) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter[expected=%s][actual=%s]: metric type not match",
                     sx__metric_name(cm), sx__metric_name(m));
            return false;
        }
    }
    if (p->has_range && !p->has_radius) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: range_filter needs radius in searchParams");
        return false;
    }
    if (p->has_radius && p->has_range) {
        bool sim = sx_metric_is_similarity(cm);
        bool ok = !sim ? p->range_filter < p->radius : p->range_filter > p->radius;
        if (!ok) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: range_filter must be %s than radius for metric %s",
                     !sim ? "less" : "greater", sx__metric_name(cm));
            return false;
        }
    }
    /* sorted by key: the merge key and the engine see one canonical order */
    for (size_t i = 1; i < p->n_eng; i++) {
        sx_param t = p->eng[i];
        size_t j = i;
        while (j > 0 && strcmp(p->eng[j - 1].key, t.key) > 0) {
            p->eng[j] = p->eng[j - 1];
            j--;
        }
        p->eng[j] = t;
    }
    return true;
}

static bool in_range(const sparams *p, sx_metric m, float d)
{
    if (!sx_metric_is_similarity(m))
        return (double)d < p->radius && (!p->has_range || (double)d >= p->range_filter);
    return (double)d > p->radius && (!p->has_range || (double)d <= p->range_filter);
}

/* sp's engine params with ef / search_list raised to at least k (a range search's widened
 * round; the values are written into buf). Returns wide. */
static const sx_param *
widen_list_params(const sparams *sp, uint32_t k, sx_param *wide, char (*buf)[24])
{
    for (size_t i = 0; i < sp->n_eng; i++) {
        wide[i] = sp->eng[i];
        if (strcmp(wide[i].key, "ef") != 0 && strcmp(wide[i].key, "search_list") != 0)
            continue;
        char *end = NULL;
        long long v = strtoll(wide[i].value, &end, 10);
        if (end && *end == '\0' && v >= 0 && v < (long long)k) {
            (void)snprintf(buf[i], sizeof buf[i], "%u", k);
            wide[i].value = buf[i];
        }
    }
    return wide;
}

/* Whether hits beyond `d` (the worst returned) could still be in range. */
static bool maybe_more(const sparams *p, sx_metric m, float d)
{
    return !sx_metric_is_similarity(m) ? (double)d < p->radius : (double)d > p->radius;
}

/* Reads `data` into nq*dim floats (owned) or fails with 1801/1802/1102. */
static bool read_vectors(sx__req *rq,
                         sx__resp *rs,
                         const json_t *data,
                         sx_field_type vtype,
                         uint32_t dim,
                         const char *sname,
                         void **out,
                         size_t *nq_out)
{
    if (!data) {
        sx__fail(rs, SX__MC_MISSING_REQUIRED,
                 "missing required parameters, error: Key: '%s.Data' Error:Field validation for "
                 "'Data' failed on the 'required' tag",
                 sname);
        return false;
    }
    if (!json_is_array(data) || json_array_size(data) == 0) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: data must be a non-empty array of "
                 "float vectors");
        return false;
    }
    size_t nq = json_array_size(data);
    uint32_t max_nq = rq->opts && rq->opts->max_nq ? rq->opts->max_nq : 16384;
    if (nq > max_nq) {
        sx__fail(rs, SX__MC_PARAM_TOO_LARGE,
                 "parameter too large: nq (number of search vectors per request) should be in "
                 "range [1, %u], but got %zu",
                 max_nq, nq);
        return false;
    }
    size_t qb = sx__vec_query_bytes(vtype, dim);
    float *q = sx__malloc(nq * qb + 1);
    if (!q) {
        fail_nomem(rs);
        return false;
    }
    for (size_t i = 0; vtype != SX_FIELD_FLOAT_VECTOR && i < nq; i++) {
        char why[200];
        if (!sx__vec_query_from_json(json_array_get(data, i), vtype, dim, (char *)q + i * qb, why,
                                     sizeof why)) {
            sx__fail(rs, SX__MC_BAD_JSON,
                     "can only accept json format request, error: data[%zu]: %s", i, why);
            sx__free(q);
            return false;
        }
    }
    for (size_t i = 0; vtype == SX_FIELD_FLOAT_VECTOR && i < nq; i++) {
        const json_t *v = json_array_get(data, i);
        if (!json_is_array(v) || json_array_size(v) != dim) {
            sx__fail(rs, SX__MC_BAD_JSON,
                     "can only accept json format request, error: data[%zu]: the vector "
                     "dimension (%zu) does not match the field dimension (%u)",
                     i, json_is_array(v) ? json_array_size(v) : 0, dim);
            sx__free(q);
            return false;
        }
        for (uint32_t d = 0; d < dim; d++) {
            const json_t *e = json_array_get(v, d);
            double x = json_is_number(e) ? json_number_value(e) : (double)NAN;
            if (!isfinite(x) || fabs(x) > (double)FLT_MAX) {
                sx__fail(rs, SX__MC_BAD_JSON,
                         "can only accept json format request, error: data[%zu][%u] is not a "
                         "finite float",
                         i, d);
                sx__free(q);
                return false;
            }
            q[i * dim + d] = (float)x;
        }
    }
    *out = q;
    *nq_out = nq;
    return true;
}

static bool check_consistency(sx__req *rq, sx__resp *rs)
{
    const char *cl = NULL;
    if (sx__jstr(rq->body, "consistencyLevel", &cl) != 0) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: consistencyLevel must be a string");
        return false;
    }
    if (!cl || !*cl)
        return true;
    static const char *const ok[] = { "Strong", "Session", "Bounded", "Eventually", "Customized" };
    for (size_t i = 0; i < 5; i++)
        if (strcmp(cl, ok[i]) == 0)
            return true;
    sx__fail(rs, SX__MC_INVALID_PARAM,
             "invalid parameter: consistencyLevel %s is not one of Strong, Session, Bounded, "
             "Eventually, Customized",
             cl);
    return false;
}

/* The merge key: every input of the search but the vectors. Owned or NULL. */
static char *merge_key(const sx__req *rq,
                       const coll *c,
                       const sx__vec_meta *v,
                       const sparams *p,
                       const char *filter,
                       uint32_t k,
                       uint32_t offset,
                       const outplan *o)
{
    sbuf s = { 0 };
    char num[96];
    sb_add(&s, rq->db_name ? rq->db_name : "");
    sb_add(&s, "\x1f");
    sb_add(&s, c->meta->engine_name);
    (void)snprintf(num, sizeof num, "\x1f%lld\x1f%s\x1f%u\x1f%u\x1f",
                   (long long)c->meta->collection_id, sx__metric_name(v->metric), k, offset);
    sb_add(&s, num);
    sb_add(&s, v->field); /* the searched vector field */
    /* the flags the batch runs with (merge.c runs a batch with its first request's) */
    sb_add(&s, p->ignore_growing ? "\x1fg" : "\x1f-");
    sb_add(&s, p->exact ? "e\x1f" : "-\x1f");
    for (size_t i = 0; i < p->n_eng; i++) {
        sb_add(&s, p->eng[i].key);
        sb_add(&s, "=");
        sb_add(&s, p->eng[i].value);
        sb_add(&s, "\x1e");
    }
    sb_add(&s, "\x1f");
    sb_add(&s, filter);
    sb_add(&s, "\x1f");
    for (size_t i = 0; i < o->n_eng; i++) {
        sb_add(&s, o->eng[i]);
        sb_add(&s, "\x1e");
    }
    return sb_take(&s);
}

/* Search by primary keys (`ids` instead of `data`, newer Milvus servers): the stored vectors of
 * those rows are the queries, in the order given. Every key must exist (else 1100 naming it).
 * Owned *out (nq x dim floats). */
static bool read_id_vectors(sx__req *rq,
                            sx__resp *rs,
                            const coll *c,
                            int vfi,
                            const json_t *ids,
                            void **out,
                            size_t *nq_out)
{
    size_t n = json_array_size(ids);
    uint32_t max_nq = rq->opts && rq->opts->max_nq ? rq->opts->max_nq : 16384;
    if (!json_is_array(ids) || n == 0 || n > max_nq) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: ids must be an array of 1..%u primary keys", max_nq);
        return false;
    }
    bool int_pk = c->meta->fields[c->pk].engine_type == SX_FIELD_INT64;
    int64_t *ints = sx__calloc(n, sizeof *ints);
    const char **strs = sx__calloc(n, sizeof *strs);
    sx_rowset *r = NULL;
    bool ok = ints && strs;
    for (size_t i = 0; ok && i < n; i++) {
        const json_t *v = json_array_get(ids, i);
        ok = int_pk ? !json_is_boolean(v) && sx__json_to_int64(v, &ints[i]) : json_is_string(v);
        if (!ok) {
            fail_bad_pk(rs);
            break;
        }
        strs[i] = int_pk ? NULL : json_string_value(v);
    }
    if (!ints || !strs)
        fail_nomem(rs);
    const char *vname = c->meta->fields[vfi].name;
    sx_keys k = { n, int_pk ? ints : NULL, int_pk ? NULL : strs };
    sx_status st = ok ? sx_get(c->h, &k, &vname, 1, &r) : SX_OK;
    if (ok && st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "search by ids");
        ok = false;
    }
    uint32_t dim = c->meta->fields[vfi].dim;
    sx_field_type vt = c->meta->fields[vfi].engine_type;
    size_t qb = sx__vec_query_bytes(vt, dim), rb = sx_vector_row_bytes(vt, dim);
    char *q = ok ? sx__malloc(n * qb + 1) : NULL;
    if (ok && !q) {
        fail_nomem(rs);
        ok = false;
    }
    /* sx_get skips missing keys and keeps the given order: match them up */
    int vcol = ok ? col_of(r, vname) : -1;
    size_t at = 0;
    for (size_t i = 0; ok && i < n; i++) {
        bool found =
            at < r->n_rows && (int_pk ? ((const int64_t *)r->cols[0].data)[at] == ints[i]
                                      : strcmp(((char *const *)r->cols[0].data)[at], strs[i]) == 0);
        if (!found || vcol < 0) {
            char key[80];
            if (int_pk)
                (void)snprintf(key, sizeof key, "%lld", (long long)ints[i]);
            else
                (void)snprintf(key, sizeof key, "%.60s", strs[i]);
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: search by ids: no row has the primary key %s", key);
            ok = false;
            break;
        }
        sx__vec_row_to_query(vt, dim, (const char *)r->cols[vcol].data + at * rb, q + i * qb);
        at++;
    }
    sx_rowset_free(r);
    sx__free(ints);
    sx__free((void *)strs);
    if (!ok) {
        sx__free(q);
        return false;
    }
    *out = q;
    *nq_out = n;
    return true;
}

/* Hits chosen for the response: rowset rows and per-query counts. */
typedef struct picks {
    size_t *rows;
    size_t n;
    size_t *topks;
} picks;

/* The rounds of a range search (more hits until every query is exhausted or out of range) into
 * *out. False with rs set on a failure. */
static bool range_search(sx__req *rq,
                         sx__resp *rs,
                         coll *c,
                         sx_metric metric,
                         sx_search_req *req,
                         const sparams *sp,
                         size_t want,
                         uint64_t per_row,
                         sx_rowset **out)
{
    uint32_t kk = (uint32_t)want;
    sx_search_req local = *req; /* the rounds change k and params: the caller's stays as it was */
    req = &local;
    req->offset = 0;
    /* the widened rounds ask for more candidates than the caller's list size: a graph's ef /
     * search_list (which must be >= k) is raised with them (pymilvus's search_iterator runs
     * range searches with ef = its batch size) */
    sx_param wide[MAX_PARAMS];
    char widebuf[MAX_PARAMS][24];
    for (;;) {
        req->k = kk;
        if (kk > want)
            req->params = widen_list_params(sp, kk, wide, widebuf);
        /* the candidates of this round are held too: bound them as an answer */
        if (!admit_answer(rq, rs, (uint64_t)req->nq * at_most_rows(c, kk), per_row, 0,
                          "nq x the candidates a range search needs"))
            return false;
        sx_rowset *r = NULL;
        sx_status st = sx_search(c->h, req, &r);
        if (st != SX_OK) {
            sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "search");
            return false;
        }
        bool again = false;
        size_t base = 0;
        for (size_t qi = 0; qi < req->nq && kk < MAX_LIMIT; qi++) {
            size_t t = r->topks[qi], kept = 0;
            for (size_t h = 0; h < t; h++)
                kept += in_range(sp, metric, r->distances[base + h]);
            if (kept < want && t == kk && maybe_more(sp, metric, r->distances[base + t - 1]))
                again = true;
            base += t;
        }
        if (!again) {
            *out = r;
            return true;
        }
        sx_rowset_free(r);
        kk = kk > MAX_LIMIT / 4 ? MAX_LIMIT : kk * 4;
    }
}

/* ------------------------------------------------------------------ group-by search */

/* groupingField / groupSize / strictGroupSize (gRPC: group_by_field, group_size,
 * strict_group_size). The answer per query: the `limit` best groups (after `offset` groups), a
 * group being the hits sharing one value of the field (NULL is a value of its own), ordered by
 * their best hit; each group gives its best groupSize hits (default 1), consecutive, best first.
 * The engine is asked for limit x groupSize candidates, then 4x more each round (raising ef /
 * search_list with them, as range search does), until every query has its groups filled or its
 * candidates run out (fewer than asked), or 16384; on exact (FLAT, growing) data the answer is
 * then exact, on an index as approximate as the index. strictGroupSize is accepted: the rounds
 * already widen until every group is full. Not combined with range search (1100). */
#define MAX_GROUP_SIZE 1024

typedef struct grouping {
    const char *field; /* NULL: not a grouped search; borrowed from the body */
    size_t fi;         /* index into meta->fields */
    size_t size;
    bool strict;
} grouping;

static bool parse_grouping(sx__req *rq, sx__resp *rs, const coll *c, grouping *g)
{
    memset(g, 0, sizeof *g);
    const char *gf = NULL;
    int64_t size = 1;
    if (sx__jstr(rq->body, "groupingField", &gf) != 0 ||
        sx__jint(rq->body, "groupSize", &size) != 0 ||
        sx__jbool(rq->body, "strictGroupSize", &g->strict) != 0) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: groupingField must be a string, "
                 "groupSize an integer, strictGroupSize a boolean");
        return false;
    }
    if (!gf || !*gf)
        return true;
    int fi = field_index(c->meta, gf);
    const sx__field_meta *fm = fi >= 0 ? &c->meta->fields[fi] : NULL;
    if (!fm) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: groupBy field not found in schema: field %s is not in "
                 "collection %s",
                 gf, c->meta->name);
        return false;
    }
    if (sx_field_is_vector(fm->engine_type) || fm->engine_type == SX_FIELD_DOUBLE ||
        is_json_type(fm)) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: group by field %s of type %s is not supported (Bool, Int8, "
                 "Int16, Int32, Int64 and VarChar fields can group)",
                 gf, fm->type);
        return false;
    }
    if (size < 1 || size > MAX_GROUP_SIZE) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: groupSize %lld is out of range [1, %d]", (long long)size,
                 MAX_GROUP_SIZE);
        return false;
    }
    g->field = gf;
    g->fi = (size_t)fi;
    g->size = (size_t)size;
    return true;
}

/* Hashes of a hit's group value (col of r, row): NULL, an INT64 / BOOL, or a string. */
static uint64_t group_hash(const sx_rowset *r, int col, size_t row)
{
    const sx_column *cl = &r->cols[col];
    if (cl->valid && !cl->valid[row])
        return 0x9e3779b97f4a7c15ull;
    uint64_t h = 1469598103934665603ull;
    if (cl->type == SX_FIELD_VARCHAR) {
        for (const char *p = ((char *const *)cl->data)[row]; *p; p++)
            h = (h ^ (uint8_t)*p) * 1099511628211ull;
        return h;
    }
    int64_t v = cl->type == SX_FIELD_BOOL ? ((const bool *)cl->data)[row]
                                          : ((const int64_t *)cl->data)[row];
    h ^= (uint64_t)v;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static bool group_same(const sx_rowset *r, int col, size_t a, size_t b)
{
    const sx_column *cl = &r->cols[col];
    bool na = cl->valid && !cl->valid[a], nb = cl->valid && !cl->valid[b];
    if (na || nb)
        return na == nb;
    if (cl->type == SX_FIELD_VARCHAR)
        return strcmp(((char *const *)cl->data)[a], ((char *const *)cl->data)[b]) == 0;
    if (cl->type == SX_FIELD_BOOL)
        return ((const bool *)cl->data)[a] == ((const bool *)cl->data)[b];
    return ((const int64_t *)cl->data)[a] == ((const int64_t *)cl->data)[b];
}

/* Groups the hits [base, base + t) of one query: gid[h] = the group of hit h (in order of first
 * appearance) when it is kept (the group is among the first `groups` and holds fewer than `size`
 * hits before it), else SIZE_MAX. *n_groups = groups formed, *full = every one of them holds
 * `size` hits. scratch: 2 * groups + 2 size_t (a hash table of first rows) and groups counters.
 * Returns false on out of memory. */
static bool group_hits(const sx_rowset *r,
                       int col,
                       size_t base,
                       size_t t,
                       size_t groups,
                       size_t size,
                       size_t *gid,
                       size_t *n_groups,
                       bool *full)
{
    size_t cap = 4;
    while (cap < 2 * groups + 2)
        cap *= 2;
    size_t *slot = sx__malloc(cap * sizeof *slot);            /* group index + 1, 0 = empty */
    size_t *first = sx__malloc((groups + 1) * sizeof *first); /* a row of each group */
    size_t *count = sx__calloc(groups + 1, sizeof *count);
    if (!slot || !first || !count) {
        sx__free(slot);
        sx__free(first);
        sx__free(count);
        return false;
    }
    memset(slot, 0, cap * sizeof *slot);
    size_t ng = 0;
    for (size_t h = 0; h < t; h++) {
        size_t row = base + h, i = (size_t)group_hash(r, col, row) & (cap - 1), g = SIZE_MAX;
        while (slot[i]) {
            if (group_same(r, col, first[slot[i] - 1], row)) {
                g = slot[i] - 1;
                break;
            }
            i = (i + 1) & (cap - 1);
        }
        if (g == SIZE_MAX && ng < groups) {
            g = ng++;
            first[g] = row;
            slot[i] = g + 1;
        }
        if (g != SIZE_MAX && count[g] < size)
            count[g]++;
        else
            g = SIZE_MAX;
        gid[h] = g;
    }
    bool all = ng == groups;
    for (size_t g = 0; g < ng; g++)
        all = all && count[g] == size;
    *n_groups = ng;
    *full = all;
    sx__free(slot);
    sx__free(first);
    sx__free(count);
    return true;
}

/* One round of a grouped search: the best k hits of every query from offset 0, into *out. */
typedef sx_status (*group_round)(void *ctx, uint32_t k, sx_rowset **out);

/* A dense search's rounds: its own copy of the request (k and params change; the caller's stays
 * as it was), list params (ef, search_list) raised with k as range search does. */
typedef struct dense_rounds {
    sx_collection *h;
    sx_search_req req;
    const sparams *sp;
    uint32_t user_k;
    sx_param wide[MAX_PARAMS];
    char widebuf[MAX_PARAMS][24];
} dense_rounds;

static sx_status dense_round(void *ctx, uint32_t k, sx_rowset **out)
{
    dense_rounds *d = ctx;
    d->req.k = k;
    d->req.offset = 0;
    if (k > d->user_k)
        d->req.params = widen_list_params(d->sp, k, d->wide, d->widebuf);
    return sx_search(d->h, &d->req, out);
}

/* A sparse search's rounds (exact: more candidates only add hits further down). */
typedef struct sparse_rounds {
    sx_collection *h;
    sx_sparse_req req;
} sparse_rounds;

static sx_status sparse_round(void *ctx, uint32_t k, sx_rowset **out)
{
    sparse_rounds *s = ctx;
    s->req.k = k;
    s->req.offset = 0;
    return sx_sparse_search(s->h, &s->req, out);
}

/* Runs the rounds of a grouped search of nq queries (k grows) into *out. False with rs set on a
 * failure. */
static bool group_search(sx__req *rq,
                         sx__resp *rs,
                         coll *c,
                         size_t nq,
                         group_round round,
                         void *ctx,
                         const grouping *g,
                         size_t window,
                         uint64_t per_row,
                         sx_rowset **out)
{
    size_t kk = window * g->size;
    if (kk > MAX_LIMIT)
        kk = MAX_LIMIT;
    for (;;) {
        if (!admit_answer(rq, rs, (uint64_t)nq * at_most_rows(c, kk), per_row, 0,
                          "nq x the candidates a grouped search needs"))
            return false;
        sx_rowset *r = NULL;
        sx_status st = round(ctx, (uint32_t)kk, &r);
        if (st != SX_OK) {
            sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "search");
            return false;
        }
        int col = col_of(r, g->field);
        size_t *gid = sx__malloc((kk + 1) * sizeof *gid);
        bool again = false, ok = col >= 0 && gid;
        size_t base = 0;
        for (size_t qi = 0; ok && qi < nq; qi++) {
            size_t t = r->topks[qi], ng = 0;
            bool full = false;
            ok = group_hits(r, col, base, t, window, g->size, gid, &ng, &full);
            if (ok && !full && t == kk && kk < MAX_LIMIT)
                again = true; /* more candidates may fill the groups */
            base += t;
        }
        sx__free(gid);
        if (!ok) {
            sx_rowset_free(r);
            fail_nomem(rs);
            return false;
        }
        if (!again) {
            *out = r;
            return true;
        }
        sx_rowset_free(r);
        kk = kk > MAX_LIMIT / 4 ? MAX_LIMIT : kk * 4;
    }
}

/* The kept hits of one query's block in answer order (group by group, offset groups skipped, best
 * first within a group: a stable counting sort of gid): order[k] = the hit's index in the block.
 * start: window + 2 counters. Returns the number kept. */
static size_t
group_order(const size_t *gid, size_t t, size_t offset, size_t window, size_t *start, size_t *order)
{
    memset(start, 0, (window + 2) * sizeof *start);
    for (size_t h = 0; h < t; h++)
        if (gid[h] != SIZE_MAX && gid[h] >= offset)
            start[gid[h] - offset + 1]++;
    for (size_t k = 1; k <= window; k++)
        start[k] += start[k - 1];
    for (size_t h = 0; h < t; h++)
        if (gid[h] != SIZE_MAX && gid[h] >= offset)
            order[start[gid[h] - offset]++] = h;
    return window ? start[window - 1] : 0; /* each start[k] now ends group k */
}

/* The hits of r to answer, group by group (groups in order of their best hit, offset groups
 * skipped), into pk. False on out of memory. */
static bool group_picks(
    const sx_rowset *r, const grouping *g, size_t nq, size_t offset, size_t limit, picks *pk)
{
    int col = col_of(r, g->field);
    size_t window = offset + limit, maxt = 0;
    for (size_t qi = 0; qi < nq; qi++)
        maxt = r->topks[qi] > maxt ? r->topks[qi] : maxt;
    size_t *gid = sx__malloc((maxt + 1) * sizeof *gid);
    size_t *order = sx__malloc((maxt + 1) * sizeof *order);
    size_t *start = sx__malloc((window + 2) * sizeof *start);
    pk->rows = sx__malloc((r->n_rows + 1) * sizeof *pk->rows);
    bool ok = col >= 0 && gid && order && start && pk->rows;
    size_t base = 0;
    for (size_t qi = 0; ok && qi < nq; qi++) {
        size_t t = r->topks[qi], ng = 0;
        bool full = false;
        ok = group_hits(r, col, base, t, window, g->size, gid, &ng, &full);
        if (!ok)
            break;
        size_t kept = group_order(gid, t, offset, window, start, order);
        for (size_t k = 0; k < kept; k++)
            pk->rows[pk->n + k] = base + order[k];
        pk->n += kept;
        pk->topks[qi] = kept;
        base += t;
    }
    sx__free(gid);
    sx__free(order);
    sx__free(start);
    return ok;
}

/* ------------------------------------------------------------------ sparse vector search */

/* The queries of a search on a sparse field: data[] of sparse vectors (the forms
 * sx__sparse_from_json takes). Owned arrays (sparse_queries_free). */
typedef struct sparse_queries {
    size_t nq;
    sx_sparse_query *q;
} sparse_queries;

static void sparse_queries_free(sparse_queries *s)
{
    for (size_t i = 0; s->q && i < s->nq; i++) {
        sx__free((void *)s->q[i].idx);
        sx__free((void *)s->q[i].val);
    }
    sx__free(s->q);
    memset(s, 0, sizeof *s);
}

static bool read_sparse_queries(sx__req *rq,
                                sx__resp *rs,
                                const json_t *data,
                                const char *sname,
                                const sx__analyzer *an,
                                sparse_queries *out)
{
    memset(out, 0, sizeof *out);
    if (!data) {
        sx__fail(rs, SX__MC_MISSING_REQUIRED,
                 "missing required parameters, error: Key: '%s.Data' Error:Field validation for "
                 "'Data' failed on the 'required' tag",
                 sname);
        return false;
    }
    size_t nq = json_array_size(data);
    uint32_t max_nq = rq->opts && rq->opts->max_nq ? rq->opts->max_nq : 16384;
    if (!json_is_array(data) || nq == 0 || nq > max_nq) {
        sx__fail(rs, nq > max_nq ? SX__MC_PARAM_TOO_LARGE : SX__MC_BAD_JSON,
                 "can only accept json format request, error: data must be an array of 1 to %u "
                 "sparse vectors",
                 max_nq);
        return false;
    }
    out->q = sx__calloc(nq, sizeof *out->q);
    if (!out->q) {
        fail_nomem(rs);
        return false;
    }
    out->nq = nq;
    for (size_t i = 0; an && i < nq; i++) { /* BM25: raw texts, their term counts */
        const json_t *t = json_array_get(data, i);
        if (!json_is_string(t)) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: data[%zu]: a full-text (BM25) search takes texts", i);
            return false;
        }
        uint32_t *idx = NULL;
        float *val = NULL;
        size_t n = 0;
        if (!sx__analyze_tf(an, json_string_value(t), &idx, &val, &n)) {
            fail_nomem(rs);
            return false;
        }
        out->q[i] = (sx_sparse_query){ idx, val, n };
    }
    for (size_t i = 0; !an && i < nq; i++) {
        char why[256], *txt = NULL;
        if (!sx__sparse_from_json(json_array_get(data, i), &txt, why, sizeof why)) {
            sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: data[%zu]: %s", i, why);
            return false;
        }
        size_t n = 0;
        uint32_t *idx = NULL;
        float *val = NULL;
        sx_status st = sx_sparse_parse(txt, NULL, NULL, 0, &n);
        if (st == SX_OK) {
            idx = sx__malloc((n ? n : 1) * sizeof *idx);
            val = sx__malloc((n ? n : 1) * sizeof *val);
            st = idx && val ? sx_sparse_parse(txt, idx, val, n, &n) : SX_ENOMEM;
        }
        sx__free(txt);
        out->q[i] = (sx_sparse_query){ idx, val, n };
        if (st != SX_OK) {
            fail_nomem(rs);
            return false;
        }
    }
    return true;
}

/* The searchParams of a search on sparse field sm: its metricType (top level or in params) must
 * be the field's (BM25 for a function output, else IP) or absent; the rest goes through
 * parse_sparams. False with rs set. */
static bool sparse_sparams(sx__resp *rs, const sx__sparse_meta *sm, const json_t *sp, sparams *p)
{
    memset(p, 0, sizeof *p);
    const char *want = sm->function[0] ? "BM25" : "IP";
    json_t *copy = json_is_object(sp) ? json_deep_copy(sp) : NULL;
    json_t *inner = json_object_get(copy, "params");
    json_t *objs[2] = { copy, json_is_object(inner) ? inner : NULL };
    static const char *const keys[] = { "metricType", "metric_type" };
    bool ok = true;
    for (size_t w = 0; ok && w < 2; w++) {
        for (size_t k = 0; ok && objs[w] && k < 2; k++) {
            const json_t *mt = json_object_get(objs[w], keys[k]);
            if (!mt)
                continue;
            if (!json_is_string(mt) || strcasecmp(json_string_value(mt), want) != 0) {
                sx__fail(rs, SX__MC_INVALID_PARAM,
                         "invalid parameter[expected=%s][actual=%s]: metric type not match", want,
                         json_is_string(mt) ? json_string_value(mt) : "?");
                ok = false;
                break;
            }
            json_object_del(objs[w], keys[k]);
        }
    }
    ok = ok && parse_sparams(rs, SX_METRIC_IP, copy ? copy : sp, p);
    /* p borrows keys from the parsed object: the copy lives as long as p */
    p->owned = copy;
    return ok;
}

/* drop_ratio_search (and the generic keys parse_sparams takes) of a sparse search; anything else
 * is refused, naming what is accepted. */
static bool sparse_params(sx__resp *rs, const sparams *sp, float *drop)
{
    *drop = 0;
    for (size_t i = 0; i < sp->n_eng; i++) {
        const char *k = sp->eng[i].key, *v = sp->eng[i].value;
        if (strcmp(k, "drop_ratio_search") == 0) {
            char *end = NULL;
            double d = strtod(v, &end);
            if (!end || *end || !(d >= 0 && d < 1)) {
                sx__fail(rs, SX__MC_INVALID_PARAM,
                         "invalid parameter: drop_ratio_search must be a number in [0, 1), got %s",
                         v);
                return false;
            }
            *drop = (float)d;
        } else {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: %s is not a search parameter of sparse vectors "
                     "(drop_ratio_search)",
                     k);
            return false;
        }
    }
    if (sp->has_radius) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: range search (radius) on a sparse vector field is not "
                 "supported by Sextant yet");
        return false;
    }
    return true;
}

/* The hits of r (every row, per query as r->topks says) as the search answer. */
static bool answer_hits(sx__req *rq,
                        sx__resp *rs,
                        const coll *c,
                        const outplan *o,
                        const sx_rowset *r,
                        const size_t *rows,
                        size_t n,
                        const size_t *topks,
                        size_t nq)
{
    uint64_t per_row = row_bytes(c, o, true);
    if (!admit_answer(rq, rs, n, per_row, rowset_string_bytes(r, rows, n),
                      "hits found, with their strings"))
        return false;
    rowmap mp;
    map_rows(c, o, r, &mp);
    atext at;
    at_begin(&at);
    bool enc = true;
    for (size_t i = 0; enc && i < n; i++)
        enc = at_row(&at, row_json(rq, c, o, &mp, r, rows[i], &r->distances[rows[i]]));
    if (!enc || !at_end(&at, rs, topks, nq)) {
        at_abort(&at);
        fail_nomem(rs);
        return false;
    }
    if (rq->metrics)
        sx__metrics_rows(rq->metrics, 0, 0, nq);
    return true;
}

/* A search whose annsField is the sparse field si: sx_sparse_search with the field's index
 * params (drop_ratio_build) and the request's (drop_ratio_search); grouped (groupingField) as a
 * dense search is, in rounds of more candidates. Range search and ids are refused (1100). */
static void search_sparse(sx__req *rq, sx__resp *rs, coll *c, int si, outplan *o)
{
    const char *sname = "SearchReqV2";
    const sx__sparse_meta *sm = &c->meta->sparse[si];
    sparse_queries sq = { 0 };
    sparams sp;
    memset(&sp, 0, sizeof sp);
    char *filter = NULL;
    sx_rowset *r = NULL;
    size_t *rows = NULL;
    picks pk = { 0 };
    sx__analyzer *an = NULL;
    if (sm->function[0] && !bm25_analyzer(rs, c->meta, (size_t)si, &an))
        goto out;
    if (sx__jget(rq->body, "ids")) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: search by ids on a sparse vector field is not supported by "
                 "Sextant yet");
        goto out;
    }
    if (!read_sparse_queries(rq, rs, sx__jget(rq->body, "data"), sname, an, &sq))
        goto out;
    int64_t limit = 100, offset = 0;
    grouping grp;
    if (!read_limit(rq, rs, "limit", 100, true, &limit) ||
        !read_limit(rq, rs, "offset", 0, false, &offset) || !check_window(rs, limit, offset) ||
        !parse_grouping(rq, rs, c, &grp) || !check_consistency(rq, rs))
        goto out;
    float drop = 0;
    if (!sparse_sparams(rs, sm, sx__jget(rq->body, "searchParams"), &sp) ||
        !sparse_params(rs, &sp, &drop))
        goto out;
    json_t *parts = sx__jget(rq->body, "partitionNames");
    if (parts && !json_is_array(parts)) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: partitionNames must be an array");
        goto out;
    }
    if (!make_filter(rq->body, rs, c, parts, &filter) ||
        !plan_outputs(rs, c, sx__jget(rq->body, "outputFields"), false, o, false))
        goto out;
    if (grp.field) /* the group's value is answered with each hit, as Milvus does */
        plan_add_field(o, c->meta, grp.fi, c->pk);
    if (!need_loaded(rs, c))
        goto out;
    if (!sm->index_name[0]) { /* loaded implies indexed; kept for a concurrent drop */
        sx__fail(rs, SX__MC_INDEX_NOT_FOUND, "index not found[field=%s]", sm->field);
        goto out;
    }
    if (!admit_answer(rq, rs, (uint64_t)sq.nq * at_most_rows(c, (uint64_t)limit),
                      row_bytes(c, o, true), 0, "nq x limit, or x the rows the collection holds"))
        goto out;
    sx_sparse_req req = { .field = sm->field,
                          .queries = sq.q,
                          .nq = sq.nq,
                          .k = (uint32_t)limit,
                          .offset = (uint32_t)offset,
                          .filter = filter,
                          .output_fields = o->eng,
                          .n_output_fields = o->n_eng,
                          .drop_ratio_search = drop,
                          .drop_ratio_build = sm->drop_ratio_build,
                          .ignore_growing = sp.ignore_growing,
                          .exhaustive = sp.exact || strcmp(sm->algo, "TAAT_NAIVE") == 0,
                          .scoring = sm->function[0] ? SX_SPARSE_BM25 : SX_SPARSE_IP,
                          .bm25_k1 = sm->bm25_k1,
                          .bm25_b = sm->bm25_b };
    if (grp.field) {
        sparse_rounds sr = { .h = c->h, .req = req };
        pk.topks = sx__calloc(sq.nq, sizeof *pk.topks);
        if (!pk.topks) {
            fail_nomem(rs);
            goto out;
        }
        if (!group_search(rq, rs, c, sq.nq, sparse_round, &sr, &grp, (size_t)(limit + offset),
                          row_bytes(c, o, true), &r))
            goto out;
        if (!group_picks(r, &grp, sq.nq, (size_t)offset, (size_t)limit, &pk)) {
            fail_nomem(rs);
            goto out;
        }
        (void)answer_hits(rq, rs, c, o, r, pk.rows, pk.n, pk.topks, sq.nq);
        goto out;
    }
    sx_status st = sx_sparse_search(c->h, &req, &r);
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "search");
        goto out;
    }
    rows = sx__malloc((r->n_rows + 1) * sizeof *rows);
    if (!rows) {
        fail_nomem(rs);
        goto out;
    }
    for (size_t i = 0; i < r->n_rows; i++)
        rows[i] = i;
    (void)answer_hits(rq, rs, c, o, r, rows, r->n_rows, r->topks, sq.nq);
out:
    sx__free(pk.rows);
    sx__free(pk.topks);
    sparse_queries_free(&sq);
    sparams_free(&sp);
    sx__analyzer_free(an);
    sx__free(filter);
    sx__free(rows);
    sx_rowset_free(r);
}

static void h_search(sx__req *rq, sx__resp *rs)
{
    const char *sname = "SearchReqV2";
    coll c;
    if (!coll_open(rq, rs, sname, &c))
        return;
    void *q = NULL;
    char *filter = NULL, *key = NULL;
    sx_rowset *r = NULL;
    sparams sp;
    memset(&sp, 0, sizeof sp);
    picks pk = { 0 };
    outplan *o = sx__malloc(sizeof *o);
    if (!o) {
        fail_nomem(rs);
        goto out;
    }
    const char *anns = NULL;
    if (sx__jstr(rq->body, "annsField", &anns) != 0) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: annsField must be a string");
        goto out;
    }
    int si = anns && *anns ? sx__meta_sparse_at(c.meta, anns) : -1;
    if ((!anns || !*anns) && c.meta->n_vecs == 0 && c.meta->n_sparse == 1)
        si = 0; /* the only vector field is sparse */
    if (si >= 0) {
        search_sparse(rq, rs, &c, si, o);
        goto out;
    }
    int vfi = -1;
    const sx__vec_meta *vm = NULL;
    if (!anns_of(rs, &c, anns, &vfi, &vm))
        goto out;
    size_t nq = 0;
    uint32_t dim = c.meta->fields[vfi].dim;
    const json_t *ids = sx__jget(rq->body, "ids");
    if (ids && sx__jget(rq->body, "data")) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: give either data (vectors) or ids (primary keys), not both");
        goto out;
    }
    if (ids ? !read_id_vectors(rq, rs, &c, vfi, ids, &q, &nq)
            : !read_vectors(rq, rs, sx__jget(rq->body, "data"), c.meta->fields[vfi].engine_type,
                            dim, sname, &q, &nq))
        goto out;
    int64_t limit = 100, offset = 0;
    if (!read_limit(rq, rs, "limit", 100, true, &limit) ||
        !read_limit(rq, rs, "offset", 0, false, &offset))
        goto out;
    if (!check_window(rs, limit, offset))
        goto out;
    uint64_t window = (uint64_t)limit + (uint64_t)offset;
    grouping grp;
    if (!parse_grouping(rq, rs, &c, &grp))
        goto out;
    if (!check_consistency(rq, rs))
        goto out;
    if (!parse_sparams(rs, vm->metric, sx__jget(rq->body, "searchParams"), &sp))
        goto out;
    if (grp.field && sp.has_radius) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: a range search (radius) cannot be grouped (groupingField)");
        goto out;
    }
    json_t *parts = sx__jget(rq->body, "partitionNames");
    if (parts && !json_is_array(parts)) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: partitionNames must be an array");
        goto out;
    }
    if (!make_filter(rq->body, rs, &c, parts, &filter))
        goto out;
    if (!plan_outputs(rs, &c, sx__jget(rq->body, "outputFields"), false, o, false))
        goto out;
    if (grp.field) /* the group's value is answered with each hit, as Milvus does */
        plan_add_field(o, c.meta, grp.fi, c.pk);
    if (!need_loaded(rs, &c))
        goto out;
    uint64_t per_row = row_bytes(&c, o, true);
    if (!admit_answer(rq, rs, (uint64_t)nq * at_most_rows(&c, (uint64_t)limit), per_row, 0,
                      "nq x limit, or x the rows the collection holds"))
        goto out;

    bool bin = c.meta->fields[vfi].engine_type == SX_FIELD_BINARY_VECTOR;
    sx_search_req req = { .queries = bin ? NULL : q,
                          .bqueries = bin ? q : NULL,
                          .nq = nq,
                          .k = (uint32_t)limit,
                          .offset = (uint32_t)offset,
                          .filter = filter,
                          .output_fields = o->eng,
                          .n_output_fields = o->n_eng,
                          .params = sp.eng,
                          .n_params = sp.n_eng,
                          .metric = -1,
                          .ignore_growing = sp.ignore_growing,
                          .exact = sp.exact,
                          .anns_field = vm->field };
    sx_status st;
    pk.topks = sx__calloc(nq, sizeof *pk.topks);
    if (!pk.topks) {
        fail_nomem(rs);
        goto out;
    }
    sx_metric metric = vm->metric;
    if (grp.field) {
        dense_rounds *d = sx__malloc(sizeof *d);
        if (!d) {
            fail_nomem(rs);
            goto out;
        }
        *d = (dense_rounds){ .h = c.h, .req = req, .sp = &sp, .user_k = req.k };
        bool done = group_search(rq, rs, &c, nq, dense_round, d, &grp, (size_t)window, per_row, &r);
        sx__free(d);
        if (!done)
            goto out;
        if (!group_picks(r, &grp, nq, (size_t)offset, (size_t)limit, &pk)) {
            fail_nomem(rs);
            goto out;
        }
        st = SX_OK;
    } else if (sp.has_radius) {
        if (!range_search(rq, rs, &c, metric, &req, &sp, (size_t)(limit + offset), per_row, &r))
            goto out;
        st = SX_OK;
    } else if (rq->merger && !sp.ignore_growing) {
        key = merge_key(rq, &c, vm, &sp, filter, req.k, req.offset, o);
        st = key ? sx__merger_search(rq->merger, c.h, key, &req, &r) : sx_search(c.h, &req, &r);
    } else {
        st = sx_search(c.h, &req, &r);
    }
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "search");
        goto out;
    }
    if (!pk.rows)
        pk.rows = sx__malloc((r->n_rows + 1) * sizeof *pk.rows);
    if (!pk.rows) {
        fail_nomem(rs);
        goto out;
    }
    size_t base = 0;
    for (size_t qi = 0; !grp.field && qi < nq; qi++) {
        size_t t = r->topks[qi], skipped = 0;
        for (size_t h = 0; h < t; h++) {
            size_t row = base + h;
            if (sp.has_radius) {
                if (!in_range(&sp, metric, r->distances[row]))
                    continue;
                if (skipped < (size_t)offset) {
                    skipped++;
                    continue;
                }
                if (pk.topks[qi] >= (size_t)limit)
                    continue;
            }
            pk.rows[pk.n++] = row;
            pk.topks[qi]++;
        }
        base += t;
    }
    (void)answer_hits(rq, rs, &c, o, r, pk.rows, pk.n, pk.topks, nq);
out:
    sx_rowset_free(r);
    sparams_free(&sp);
    sx__free(pk.rows);
    sx__free(pk.topks);
    sx__free(q);
    sx__free(filter);
    sx__free(key);
    sx__free(o);
    coll_close(&c);
}

/* ------------------------------------------------------------------ hybrid search */

/* One hit of a sub-search, then one fused candidate. */
typedef struct fhit {
    size_t q;
    int64_t ik;
    const char *sk; /* borrowed from a sub-search rowset (VarChar keys) */
    double score;
} fhit;

static int key_cmp(const fhit *a, const fhit *b)
{
    if (a->sk || b->sk)
        return strcmp(a->sk ? a->sk : "", b->sk ? b->sk : "");
    return a->ik < b->ik ? -1 : (a->ik > b->ik);
}

static int fhit_by_key(const void *x, const void *y)
{
    const fhit *a = x, *b = y;
    if (a->q != b->q)
        return a->q < b->q ? -1 : 1;
    return key_cmp(a, b);
}

static int fhit_by_score(const void *x, const void *y)
{
    const fhit *a = x, *b = y;
    if (a->q != b->q)
        return a->q < b->q ? -1 : 1;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return key_cmp(a, b);
}

/* Milvus's weighted-ranker normalisation of a raw distance into [0, 1], larger is better. */
/* The sub-search metric of a BM25 field, for the weighted ranker only (not an engine metric). */
#define METRIC_BM25 ((sx_metric)100)

/* Milvus's normalisation of a sub-search's scores for the weighted ranker: the distances (L2,
 * HAMMING, JACCARD) 1 - 2 atan(d) / pi, IP 0.5 + atan(d) / pi, BM25 2 atan(d) / pi, COSINE
 * (1 + d) / 2. */
static double norm_score(sx_metric m, float d)
{
    if (m == METRIC_BM25)
        return 2.0 * atan((double)d) / PI_D;
    if (m == SX_METRIC_L2 || m == SX_METRIC_HAMMING || m == SX_METRIC_JACCARD)
        return 1.0 - 2.0 * atan((double)d) / PI_D;
    if (m == SX_METRIC_IP)
        return 0.5 + atan((double)d) / PI_D;
    return (1.0 + (double)d) / 2.0;
}

#define MAX_SUBS 16

typedef struct rerank {
    bool weighted;
    double k;
    double w[MAX_SUBS];
} rerank;

static bool parse_rerank(sx__req *rq, sx__resp *rs, size_t n_subs, rerank *rr)
{
    memset(rr, 0, sizeof *rr);
    rr->k = 60;
    json_t *r = sx__jget(rq->body, "rerank");
    if (!r)
        return true; /* RRF(60) */
    if (!json_is_object(r)) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: rerank must be an object");
        return false;
    }
    const char *strategy = "rrf";
    if (sx__jstr(r, "strategy", &strategy) != 0 || !strategy) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: rerank.strategy must be a string");
        return false;
    }
    json_t *p = sx__jget(r, "params");
    if (p && !json_is_object(p)) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: rerank.params must be an object");
        return false;
    }
    if (strcasecmp(strategy, "rrf") == 0) {
        if (sx__jdouble(p, "k", &rr->k) != 0 || !(rr->k > 0 && rr->k < 16384)) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: rrf k must be a number in (0, 16384)");
            return false;
        }
        return true;
    }
    if (strcasecmp(strategy, "weighted") != 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: unknown rerank strategy %s (rrf, weighted)", strategy);
        return false;
    }
    rr->weighted = true;
    json_t *w = sx__jget(p, "weights");
    if (!json_is_array(w) || json_array_size(w) != n_subs) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: the number of weights must equal the number of search "
                 "requests (%zu)",
                 n_subs);
        return false;
    }
    for (size_t i = 0; i < n_subs; i++) {
        const json_t *e = json_array_get(w, i);
        if (!json_is_number(e) || !(json_number_value(e) >= 0 && json_number_value(e) <= 1)) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: rerank weight %zu must be in [0, 1]", i);
            return false;
        }
        rr->w[i] = json_number_value(e);
    }
    return true;
}

/* Runs sub-request `sub` (limit hits per query, pk only). */
/* One sub-request of a hybrid search; `grow` (a grouped hybrid search's groupSize, else 1)
 * multiplies its limit, so the fused candidates can fill the groups. */
static bool run_sub(sx__req *rq,
                    sx__resp *rs,
                    const coll *c,
                    const json_t *sub,
                    const json_t *parts,
                    size_t grow,
                    size_t *nq_io,
                    sx_metric *metric_out,
                    sx_rowset **out)
{
    bool ok = false;
    void *q = NULL;
    char *filter = NULL;
    sparams sp;
    memset(&sp, 0, sizeof sp);
    sparse_queries sq = { 0 };
    sx__analyzer *an = NULL;
    json_t *tmp = json_object();
    if (!tmp) {
        fail_nomem(rs);
        return false;
    }
    if (!json_is_object(sub)) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: search[] entries must be objects");
        goto out;
    }
    const char *anns = NULL;
    if (sx__jstr(sub, "annsField", &anns) != 0) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: search[].annsField must be a "
                 "string");
        goto out;
    }
    int si = anns && *anns ? sx__meta_sparse_at(c->meta, anns) : -1;
    if ((!anns || !*anns) && c->meta->n_vecs == 0 && c->meta->n_sparse == 1)
        si = 0;
    int vfi = -1;
    const sx__vec_meta *vm = NULL;
    if (si < 0 && !anns_of(rs, c, anns, &vfi, &vm))
        goto out;
    *metric_out = si < 0                            ? vm->metric
                  : c->meta->sparse[si].function[0] ? METRIC_BM25
                                                    : SX_METRIC_IP;
    size_t nq = 0;
    if (si >= 0 && c->meta->sparse[si].function[0] && !bm25_analyzer(rs, c->meta, (size_t)si, &an))
        goto out;
    if (si >= 0 ? !read_sparse_queries(rq, rs, sx__jget(sub, "data"), "SubSearchReq", an, &sq)
                : !read_vectors(rq, rs, sx__jget(sub, "data"), c->meta->fields[vfi].engine_type,
                                c->meta->fields[vfi].dim, "SubSearchReq", &q, &nq))
        goto out;
    if (si >= 0)
        nq = sq.nq;
    if (*nq_io && nq != *nq_io) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: every search request must have the same nq");
        goto out;
    }
    *nq_io = nq;
    int64_t limit = 100;
    int64_t v = 0;
    if (sx__jint(sub, "limit", &v) != 0 || v < 0 || v > (int64_t)MAX_LIMIT) {
        sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: search[].limit must be in [1, %u]",
                 MAX_LIMIT);
        goto out;
    }
    if (v)
        limit = v;
    const char *gf = NULL;
    if (sx__jstr(sub, "groupingField", &gf) != 0 || (gf && *gf)) {
        sx__fail(rs, SX__MC_UNSUPPORTED, "unsupported operation: group by search (groupingField)");
        goto out;
    }
    json_t *mt = sx__jget(sub, "metricType"), *pr = sx__jget(sub, "params");
    if (mt)
        json_object_set(tmp, "metricType", mt);
    if (pr)
        json_object_set(tmp, "params", pr);
    if (si >= 0 ? !sparse_sparams(rs, &c->meta->sparse[si], tmp, &sp)
                : !parse_sparams(rs, *metric_out, tmp, &sp))
        goto out;
    if (sp.has_radius) {
        sx__fail(rs, SX__MC_UNSUPPORTED,
                 "unsupported operation: range search inside hybrid_search");
        goto out;
    }
    float drop = 0;
    if (si >= 0 && !sparse_params(rs, &sp, &drop))
        goto out;
    if (!make_filter(sub, rs, c, parts, &filter))
        goto out;
    int64_t user_limit = limit;
    if (grow > 1)
        limit =
            limit * (int64_t)grow > (int64_t)MAX_LIMIT ? (int64_t)MAX_LIMIT : limit * (int64_t)grow;
    if (!admit_answer(rq, rs, (uint64_t)nq * at_most_rows(c, (uint64_t)limit),
                      2 + field_bytes(&c->meta->fields[c->pk]) + 12 + JSON_NUM_BYTES, 0,
                      "nq x search[].limit"))
        goto out;
    if (si >= 0) {
        const sx__sparse_meta *sm = &c->meta->sparse[si];
        if (!sm->index_name[0]) {
            sx__fail(rs, SX__MC_INDEX_NOT_FOUND, "index not found[field=%s]", sm->field);
            goto out;
        }
        sx_sparse_req sreq = { .field = sm->field,
                               .queries = sq.q,
                               .nq = sq.nq,
                               .k = (uint32_t)limit,
                               .filter = filter,
                               .drop_ratio_search = drop,
                               .drop_ratio_build = sm->drop_ratio_build,
                               .ignore_growing = sp.ignore_growing,
                               .exhaustive = sp.exact || strcmp(sm->algo, "TAAT_NAIVE") == 0,
                               .scoring = sm->function[0] ? SX_SPARSE_BM25 : SX_SPARSE_IP,
                               .bm25_k1 = sm->bm25_k1,
                               .bm25_b = sm->bm25_b };
        sx_status sst = sx_sparse_search(c->h, &sreq, out);
        if (sst != SX_OK) {
            sx__fail_st(rs, sst, SX__MC_COLL_NOT_FOUND, "hybrid_search");
            goto out;
        }
        ok = true;
        goto out;
    }
    sx_param wide[MAX_PARAMS];
    char widebuf[MAX_PARAMS][24];
    bool bin = c->meta->fields[vfi].engine_type == SX_FIELD_BINARY_VECTOR;
    sx_search_req req = { .queries = bin ? NULL : q,
                          .bqueries = bin ? q : NULL,
                          .nq = nq,
                          .k = (uint32_t)limit,
                          .filter = filter,
                          .params = limit > user_limit
                                        ? widen_list_params(&sp, (uint32_t)limit, wide, widebuf)
                                        : sp.eng,
                          .n_params = sp.n_eng,
                          .metric = -1,
                          .ignore_growing = sp.ignore_growing,
                          .exact = sp.exact,
                          .anns_field = vm->field };
    sx_status st = sx_search(c->h, &req, out);
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "hybrid_search");
        goto out;
    }
    ok = true;
out:
    json_decref(tmp);
    sparams_free(&sp);
    sparse_queries_free(&sq);
    sx__analyzer_free(an);
    sx__free(q);
    sx__free(filter);
    return ok;
}

/* A grouped hybrid search: the fused candidates hits[0, n) (by query, best first) are grouped by
 * the field's value (read with one sx_get; rows deleted meanwhile drop out) as a grouped search
 * groups engine hits: per query the limit best groups after `offset`, groupSize each, group by
 * group. Kept hits go to the front of `hits` (*n_keep), counts into topks. False with rs set. */
static bool group_fused(sx__resp *rs,
                        const coll *c,
                        const grouping *g,
                        fhit *hits,
                        size_t n,
                        size_t offset,
                        size_t limit,
                        size_t *topks,
                        size_t *n_keep)
{
    bool int_pk = c->meta->fields[c->pk].engine_type == SX_FIELD_INT64;
    int64_t *ints = sx__calloc(n + 1, sizeof *ints);
    const char **strs = sx__calloc(n + 1, sizeof *strs);
    size_t window = offset + limit;
    size_t *gid = sx__malloc((n + 1) * sizeof *gid),
           *start = sx__malloc((window + 2) * sizeof *start);
    fhit *out = sx__malloc((n + 1) * sizeof *out);
    size_t *order = sx__malloc((n + 1) * sizeof *order);
    sx_rowset *gv = NULL;
    bool ok = ints && strs && gid && start && out && order;
    for (size_t i = 0; ok && i < n; i++) {
        ints[i] = hits[i].ik;
        strs[i] = hits[i].sk;
    }
    sx_keys keys = { n, int_pk ? ints : NULL, int_pk ? NULL : strs };
    const char *fld = g->field;
    sx_status st = ok ? sx_get(c->h, &keys, &fld, 1, &gv) : SX_OK;
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "hybrid_search");
        sx__free(ints);
        sx__free((void *)strs);
        sx__free(gid);
        sx__free(start);
        sx__free(out);
        sx__free(order);
        return false;
    }
    /* the hits whose row still exists, in order: gv's rows match them one to one */
    size_t m = 0, gr = 0;
    for (size_t i = 0; ok && i < n; i++) {
        fhit k = { 0 };
        if (gr < gv->n_rows) {
            k.ik = int_pk ? ((const int64_t *)gv->cols[0].data)[gr] : 0;
            k.sk = int_pk ? NULL : ((char *const *)gv->cols[0].data)[gr];
        }
        if (gr < gv->n_rows && key_cmp(&k, &hits[i]) == 0) {
            hits[m++] = hits[i];
            gr++;
        }
    }
    int col = ok ? col_of(gv, g->field) : -1;
    ok = ok && col >= 0 && m == gv->n_rows;
    size_t kept = 0;
    for (size_t base = 0; ok && base < m;) {
        size_t qi = hits[base].q, t = 0, ng = 0;
        while (base + t < m && hits[base + t].q == qi)
            t++;
        bool full = false;
        ok = group_hits(gv, col, base, t, window, g->size, gid, &ng, &full);
        if (!ok)
            break;
        size_t q_kept = group_order(gid, t, offset, window, start, order);
        for (size_t k = 0; k < q_kept; k++)
            out[kept + k] = hits[base + order[k]];
        kept += q_kept;
        topks[qi] = q_kept;
        base += t;
    }
    if (ok) {
        memcpy(hits, out, kept * sizeof *hits);
        *n_keep = kept;
    } else {
        fail_nomem(rs);
    }
    sx_rowset_free(gv);
    sx__free(ints);
    sx__free((void *)strs);
    sx__free(gid);
    sx__free(start);
    sx__free(out);
    sx__free(order);
    return ok;
}

static void h_hybrid_search(sx__req *rq, sx__resp *rs)
{
    coll c;
    if (!coll_open(rq, rs, "HybridSearchReq", &c))
        return;
    sx_rowset *sub_rs[MAX_SUBS] = { NULL };
    sx_metric sub_metric[MAX_SUBS];
    size_t n_subs = 0, nq = 0, n_hits = 0, n_keep = 0;
    fhit *hits = NULL;
    size_t *topks = NULL;
    int64_t *ints = NULL;
    const char **strs = NULL;
    sx_rowset *got = NULL;
    outplan *o = sx__malloc(sizeof *o);
    rerank rr;
    if (!o) {
        fail_nomem(rs);
        goto out;
    }
    if (c.vec < 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: the collection has no vector field");
        goto out;
    }
    json_t *subs = sx__jget(rq->body, "search");
    if (!subs || (json_is_array(subs) && json_array_size(subs) == 0)) {
        sx__fail(rs, SX__MC_MISSING_REQUIRED,
                 "missing required parameters, error: Key: 'HybridSearchReq.Search' Error:Field "
                 "validation for 'Search' failed on the 'required' tag");
        goto out;
    }
    if (!json_is_array(subs) || json_array_size(subs) > MAX_SUBS) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: search must be an array of at most "
                 "%d requests",
                 MAX_SUBS);
        goto out;
    }
    int64_t limit = 100, offset = 0;
    if (!read_limit(rq, rs, "limit", 100, true, &limit) ||
        !read_limit(rq, rs, "offset", 0, false, &offset))
        goto out;
    if (!check_window(rs, limit, offset))
        goto out;
    grouping grp;
    if (!parse_grouping(rq, rs, &c, &grp))
        goto out;
    if (!check_consistency(rq, rs) || !parse_rerank(rq, rs, json_array_size(subs), &rr))
        goto out;
    json_t *parts = sx__jget(rq->body, "partitionNames");
    if (parts && !json_is_array(parts)) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: partitionNames must be an array");
        goto out;
    }
    if (!plan_outputs(rs, &c, sx__jget(rq->body, "outputFields"), false, o, false))
        goto out;
    if (grp.field) /* the group's value is answered with each hit */
        plan_add_field(o, c.meta, grp.fi, c.pk);
    if (!need_loaded(rs, &c))
        goto out;
    for (size_t i = 0; i < json_array_size(subs); i++) {
        if (!run_sub(rq, rs, &c, json_array_get(subs, i), parts, grp.field ? grp.size : 1, &nq,
                     &sub_metric[i], &sub_rs[i]))
            goto out;
        n_subs = i + 1;
        n_hits += sub_rs[i]->n_rows;
    }
    uint64_t per_row = row_bytes(&c, o, true);
    if (!admit_answer(rq, rs, (uint64_t)nq * at_most_rows(&c, (uint64_t)limit), per_row, 0,
                      "nq x limit"))
        goto out;
    /* fuse: every (query, key) gets the sum of its sub-search contributions */
    hits = sx__malloc((n_hits + 1) * sizeof *hits);
    topks = sx__calloc(nq, sizeof *topks);
    if (!hits || !topks) {
        fail_nomem(rs);
        goto out;
    }
    bool int_pk = c.meta->fields[c.pk].engine_type == SX_FIELD_INT64;
    size_t at = 0;
    for (size_t i = 0; i < n_subs; i++) {
        const sx_rowset *r = sub_rs[i];
        size_t base = 0;
        for (size_t qi = 0; qi < nq; qi++) {
            for (size_t h = 0; h < r->topks[qi]; h++) {
                fhit *f = &hits[at++];
                f->q = qi;
                f->ik = int_pk ? ((const int64_t *)r->cols[0].data)[base + h] : 0;
                f->sk = int_pk ? NULL : ((char *const *)r->cols[0].data)[base + h];
                f->score = rr.weighted ? rr.w[i] * norm_score(sub_metric[i], r->distances[base + h])
                                       : 1.0 / (rr.k + (double)(h + 1));
            }
            base += r->topks[qi];
        }
    }
    qsort(hits, n_hits, sizeof *hits, fhit_by_key);
    size_t n_u = 0;
    for (size_t i = 0; i < n_hits; i++) {
        if (n_u && hits[n_u - 1].q == hits[i].q && key_cmp(&hits[n_u - 1], &hits[i]) == 0)
            hits[n_u - 1].score += hits[i].score;
        else
            hits[n_u++] = hits[i];
    }
    qsort(hits, n_u, sizeof *hits, fhit_by_score);
    if (grp.field) {
        if (!group_fused(rs, &c, &grp, hits, n_u, (size_t)offset, (size_t)limit, topks, &n_keep))
            goto out;
    } else {
        /* per query: skip offset, keep limit (in place) */
        size_t seen = 0;
        for (size_t i = 0; i < n_u; i++) {
            if (i == 0 || hits[i].q != hits[i - 1].q)
                seen = 0;
            if (seen++ < (size_t)offset || topks[hits[i].q] >= (size_t)limit)
                continue;
            topks[hits[i].q]++;
            hits[n_keep++] = hits[i];
        }
    }
    ints = sx__calloc(n_keep + 1, sizeof *ints);
    strs = sx__calloc(n_keep + 1, sizeof *strs);
    if (!ints || !strs) {
        fail_nomem(rs);
        goto out;
    }
    for (size_t i = 0; i < n_keep; i++) {
        ints[i] = hits[i].ik;
        strs[i] = hits[i].sk;
    }
    sx_keys keys = { n_keep, int_pk ? ints : NULL, int_pk ? NULL : strs };
    sx_status st = sx_get(c.h, &keys, o->eng, o->n_eng, &got);
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "hybrid_search");
        goto out;
    }
    if (!admit_answer(rq, rs, n_keep, per_row, rowset_string_bytes(got, NULL, got->n_rows),
                      "hits found, with their strings"))
        goto out;
    rowmap mp;
    map_rows(&c, o, got, &mp);
    atext atx;
    at_begin(&atx);
    bool enc = true;
    size_t gr = 0;
    for (size_t i = 0; enc && i < n_keep; i++) {
        float dist = (float)hits[i].score;
        json_t *row = NULL;
        fhit g = { 0 };
        if (gr < got->n_rows) {
            g.ik = int_pk ? ((const int64_t *)got->cols[0].data)[gr] : 0;
            g.sk = int_pk ? NULL : ((char *const *)got->cols[0].data)[gr];
        }
        if (gr < got->n_rows && key_cmp(&g, &hits[i]) == 0) {
            row = row_json(rq, &c, o, &mp, got, gr++, &dist);
        } else { /* deleted meanwhile: key and score only */
            row = json_object();
            if (row) {
                json_object_set_new(row, c.meta->fields[c.pk].name,
                                    int_pk ? sx__jint64_out(rq, hits[i].ik)
                                           : json_string(hits[i].sk));
                json_object_set_new(row, "distance", dist_json(dist));
            }
        }
        enc = at_row(&atx, row);
    }
    if (!enc || !at_end(&atx, rs, topks, nq)) {
        at_abort(&atx);
        fail_nomem(rs);
        goto out;
    }
    if (rq->metrics)
        sx__metrics_rows(rq->metrics, 0, 0, nq * n_subs);
out:
    for (size_t i = 0; i < MAX_SUBS; i++)
        sx_rowset_free(sub_rs[i]);
    sx_rowset_free(got);
    sx__free(hits);
    sx__free(topks);
    sx__free(ints);
    sx__free((void *)strs);
    sx__free(o);
    coll_close(&c);
}

/* Replaces every `from` in *msg by `to` (a new string; the old one freed). */
static void replace_all(char **msg, const char *from, const char *to)
{
    if (!strstr(*msg, from))
        return;
    sbuf b = { 0 };
    const char *p = *msg;
    size_t fl = strlen(from);
    for (const char *q; (q = strstr(p, from)) != NULL; p = q + fl) {
        sb_addn(&b, p, (size_t)(q - p));
        sb_add(&b, to);
    }
    sb_add(&b, p);
    char *r = sb_take(&b);
    if (r) {
        sx__free(*msg);
        *msg = r;
    }
}

/* A failed answer about the one filter this call rewrote: its position and the token it names
 * told in the user's text (see fmap). */
static void fix_filter_error(sx__resp *rs)
{
    const fmap *m = &tl_fmap;
    json_t *msgv = rs->body ? json_object_get(rs->body, "message") : NULL;
    if (m->filters != 1 || (m->n == 0 && m->shift == 0) || !json_is_string(msgv))
        return;
    char *msg = sx__strdup(json_string_value(msgv));
    if (!msg)
        return;
    char *at = strstr(msg, " at position ");
    const fmap_ent *in = NULL; /* the rewrite the position falls in */
    if (at && !m->overflow) {
        char *num = at + 13, *end = NULL;
        unsigned long long rp = strtoull(num, &end, 10);
        if (end != num && rp >= m->shift) {
            size_t r = (size_t)rp - m->shift, o = r;
            for (size_t i = 0; i < m->n; i++) {
                const fmap_ent *e = &m->e[i];
                if (r >= e->rpos + e->rlen) {
                    o = o - e->rlen + e->olen;
                } else {
                    if (r >= e->rpos) {
                        o = e->opos;
                        in = e;
                    }
                    break;
                }
            }
            char tail[64];
            (void)snprintf(tail, sizeof tail, " at position %zu%s", o, end);
            *at = '\0';
            sbuf b = { 0 };
            /* past the user's text: the parenthesis make_filter closed it with */
            static const char close_paren[] = "unexpected ')'";
            char *paren = o >= m->len ? strstr(msg, close_paren) : NULL;
            if (paren) {
                sb_addn(&b, msg, (size_t)(paren - msg));
                sb_add(&b, "unexpected end of expression");
                sb_add(&b, paren + sizeof close_paren - 1);
            } else {
                sb_add(&b, msg);
            }
            sb_add(&b, tail);
            char *r2 = sb_take(&b);
            if (r2) {
                sx__free(msg);
                msg = r2;
            }
        }
    }
    /* the token the parser names, then any other mention of the hidden column */
    if (in) {
        char q[SX_MAX_NAME + 3];
        (void)snprintf(q, sizeof q, "'%s'", in->name);
        replace_all(&msg, "'" SX__META_FIELD "'", q);
    }
    for (size_t i = 0; i < m->n; i++) {
        char from[SX_MAX_NAME + 16];
        (void)snprintf(from, sizeof from, SX__META_FIELD "[\"%s\"]", m->e[i].name);
        replace_all(&msg, from, m->e[i].name);
    }
    replace_all(&msg, SX__META_FIELD, "$meta");
    json_object_set_new(rs->body, "message", json_string(msg));
    sx__free(msg);
}

/* The entity routes that take a filter, with fix_filter_error after them. */
#define WITH_FILTER_FIX(fn)                     \
 static void fn##_ff(sx__req *rq, sx__resp *rs) \
 {                                              \
  memset(&tl_fmap, 0, sizeof tl_fmap);          \
  fn(rq, rs);                                   \
  fix_filter_error(rs);                         \
 }
WITH_FILTER_FIX(h_delete)
WITH_FILTER_FIX(h_query)
WITH_FILTER_FIX(h_search)
WITH_FILTER_FIX(h_hybrid_search)

const sx__route sx__routes_entities[] = {
    { "/v2/vectordb/entities/insert", h_insert, true },
    { "/v2/vectordb/entities/upsert", h_upsert, true },
    { "/v2/vectordb/entities/delete", h_delete_ff, true },
    { "/v2/vectordb/entities/query", h_query_ff, false },
    { "/v2/vectordb/entities/get", h_get, false },
    { "/v2/vectordb/entities/search", h_search_ff, false },
    { "/v2/vectordb/entities/hybrid_search", h_hybrid_search_ff, false },
    { "/v2/vectordb/entities/advanced_search", h_hybrid_search_ff, false },
    { NULL, NULL, false },
};
