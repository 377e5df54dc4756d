/*
 * request.c: the request helpers every handler file shares (server.h, "request helpers"), so
 * that no handlers_*.c calls into another one: resolving the collection a request names
 * (sx__req_coll), looking fields up in its metadata, marking it loaded (sx__coll_load), the
 * property helpers of collections and databases, and creating the index one indexParams entry
 * describes (sx__index_apply: used by indexes/create and by collections/create with
 * indexParams).
 *
 * Index creation. Each vector field (up to SX_MAX_VECTOR_FIELDS) has at most one index (the
 * engine's, sx_index_create_on), named (default: the field's name, as Milvus) uniquely within the
 * collection; its name and the type the client asked for are kept in the field's meta.vecs[]
 * entry.
 * Scalar index requests (INVERTED, STL_SORT, Trie, BITMAP, or AUTOINDEX on a scalar field) are
 * accepted and build nothing. Build params arrive as numbers or strings and are handed to the
 * engine as strings; index_type and metric_type inside params are not build params. Metric
 * change, engine index creation and the metadata write run as one sx__cat_coll_modify, under the
 * catalog's DDL lock (handlers_indexes.c has the rules of the metric).
 *
 * Thread-safety: no state; the catalog and the engine do their own locking.
 */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/server.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/err.h"
#include "util/hash.h"

/* ---------------------------------------------------------------- collections of requests */

bool sx__req_coll(
    sx__req *rq, sx__resp *rs, const char *struct_name, sx_collection **h, sx__coll_meta **meta)
{
    const char *name = NULL;
    if (!sx__need_str(rq, rs, "collectionName", struct_name, &name))
        return false;
    if (!sx__cat_db_exists(rq->cat, rq->db_name)) {
        sx__fail(rs, SX__MC_DB_NOT_FOUND, "database not found[database=%s]", rq->db_name);
        return false;
    }
    sx__coll_meta *m = sx__malloc(sizeof *m);
    if (!m) {
        sx__fail(rs, SX__MC_UNEXPECTED, "out of memory");
        return false;
    }
    sx_status st = sx__cat_coll_get(rq->cat, rq->db_name, name, h, m);
    if (st != SX_OK) {
        sx__free(m);
        if (st == SX_ENOTFOUND)
            sx__fail(rs, SX__MC_COLL_NOT_FOUND, SX__COLL_NOT_FOUND, rq->db_name, name);
        else
            sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "collection");
        return false;
    }
    *meta = m;
    return true;
}

void sx__req_coll_done(sx_collection *h, sx__coll_meta *meta)
{
    if (h)
        sx_collection_release(h);
    sx__free(meta);
}

const sx__field_meta *sx__meta_vector_field(const sx__coll_meta *m)
{
    for (size_t i = 0; i < m->n_fields; i++)
        if (sx_field_is_vector(m->fields[i].engine_type))
            return &m->fields[i];
    return NULL;
}

const sx__field_meta *sx__meta_primary_field(const sx__coll_meta *m)
{
    for (size_t i = 0; i < m->n_fields; i++)
        if (m->fields[i].is_primary)
            return &m->fields[i];
    return NULL;
}

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool sx__check_coll_name(sx__resp *rs, const char *name, const char *what)
{
    size_t n = strlen(name);
    if (n == 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM, "collection %s should not be empty: invalid parameter",
                 what);
        return false;
    }
    int rule = 0; /* 1 too long, 2 first character, 3 another character */
    if (n > SX_MAX_NAME)
        rule = 1;
    else if (name[0] != '_' && !is_alpha(name[0]))
        rule = 2;
    for (size_t i = 1; !rule && i < n; i++)
        if (name[i] != '_' && !is_alpha(name[i]) && !(name[i] >= '0' && name[i] <= '9'))
            rule = 3;
    if (!rule)
        return true;
    char why[128];
    if (rule == 1)
        (void)snprintf(why, sizeof why,
                       "the length of a collection %s must be less than %u characters", what,
                       SX_MAX_NAME);
    else if (rule == 2)
        (void)snprintf(why, sizeof why,
                       "the first character of a collection %s must be an underscore or a letter.",
                       what);
    else
        (void)snprintf(why, sizeof why,
                       "collection %s can only contain numbers, letters and underscores.", what);
    sx__fail(rs, SX__MC_INVALID_PARAM, "Invalid collection %s: %.*s%s. %s: invalid parameter", what,
             n > 300 ? 300 : (int)n, name, n > 300 ? "..." : "", why);
    return false;
}

size_t sx__meta_n_parts(const sx__coll_meta *m)
{
    return m->key_parts ? m->key_parts : m->n_parts;
}

const char *sx__meta_part_name(const sx__coll_meta *m, size_t i, char buf[SX_MAX_NAME + 1])
{
    if (m->key_parts)
        (void)snprintf(buf, SX_MAX_NAME + 1, "_default_%zu", i);
    else
        memcpy(buf, m->parts[i], SX_MAX_NAME + 1);
    return buf;
}

int sx__meta_part_find(const sx__coll_meta *m, const char *name)
{
    if (m->key_parts) {
        /* "_default_<i>" with i in [0, key_parts), written without leading zeros */
        static const char pre[] = "_default_";
        if (strncmp(name, pre, sizeof pre - 1) != 0)
            return -1;
        const char *d = name + sizeof pre - 1;
        uint64_t i = 0;
        size_t nd = 0;
        for (; *d >= '0' && *d <= '9' && nd < 6; d++, nd++)
            i = i * 10 + (uint64_t)(*d - '0');
        if (*d || nd == 0 || (nd > 1 && name[sizeof pre - 1] == '0') || i >= m->key_parts)
            return -1;
        return (int)i;
    }
    for (size_t i = 0; i < m->n_parts; i++)
        if (strcmp(m->parts[i], name) == 0)
            return (int)i;
    return -1;
}

const sx__field_meta *sx__meta_key_field(const sx__coll_meta *m)
{
    for (size_t i = 0; m->key_parts && i < m->n_fields; i++)
        if (m->fields[i].is_partition_key)
            return &m->fields[i];
    return NULL;
}

uint32_t sx__meta_key_part(const sx__coll_meta *m, int64_t v, const char *s)
{
    SX_ASSERT(m->key_parts > 0);
    return sx__key_bucket(v, s, m->key_parts);
}

typedef struct sp_entry {
    uint32_t idx;
    float val;
} sp_entry;

static int sp_cmp(const void *a, const void *b)
{
    const sp_entry *x = a, *y = b;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* One (index, value) pair from JSON: false with why set. */
static bool
sp_pair(const json_t *k, const char *ks, const json_t *v, sp_entry *e, char *why, size_t cap)
{
    int64_t i = -1;
    if (ks) { /* an object key: decimal digits only */
        char *end = NULL;
        errno = 0;
        long long x = *ks >= '0' && *ks <= '9' ? strtoll(ks, &end, 10) : -1;
        i = end && !*end && errno == 0 ? x : -1;
    } else if (!json_is_integer(k) || !sx__json_to_int64(k, &i)) {
        i = -1;
    }
    if (i < 0 || i >= (int64_t)UINT32_MAX) {
        (void)snprintf(why, cap, "sparse vector index %s%s is not an integer in [0, 4294967294]",
                       ks ? ks : "", ks ? "" : "(given)");
        return false;
    }
    double d = json_is_number(v) ? json_number_value(v) : (double)NAN;
    if (!isfinite(d) || fabs(d) > (double)FLT_MAX) {
        (void)snprintf(why, cap, "sparse vector value of index %lld is not a finite float",
                       (long long)i);
        return false;
    }
    if (d < 0) {
        (void)snprintf(why, cap, "negative value in sparse float vector (index %lld)",
                       (long long)i);
        return false;
    }
    e->idx = (uint32_t)i;
    e->val = (float)d;
    return true;
}

bool sx__sparse_from_json(const json_t *v, char **out, char *why, size_t cap)
{
    if (!json_is_object(v)) {
        (void)snprintf(why, cap,
                       "a sparse vector is an object of index: value, or {\"indices\": [...], "
                       "\"values\": [...]}");
        return false;
    }
    const json_t *ji = json_object_get(v, "indices"), *jv = json_object_get(v, "values");
    bool csr = ji || jv;
    size_t n = csr ? json_array_size(ji) : json_object_size(v);
    if (csr && (!json_is_array(ji) || !json_is_array(jv) || json_array_size(jv) != n ||
                json_object_size(v) != 2)) {
        (void)snprintf(why, cap,
                       "a sparse vector's \"indices\" and \"values\" must be arrays of the same "
                       "length");
        return false;
    }
    sp_entry *e = sx__malloc((n ? n : 1) * sizeof *e);
    if (!e) {
        (void)snprintf(why, cap, "out of memory");
        return false;
    }
    bool ok = true;
    if (csr) {
        for (size_t i = 0; ok && i < n; i++)
            ok = sp_pair(json_array_get(ji, i), NULL, json_array_get(jv, i), &e[i], why, cap);
    } else {
        size_t i = 0;
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            if (!ok)
                break;
            ok = sp_pair(NULL, k, x, &e[i++], why, cap);
        }
    }
    if (ok) {
        qsort(e, n, sizeof *e, sp_cmp);
        for (size_t i = 1; ok && i < n; i++)
            if (e[i].idx == e[i - 1].idx) {
                (void)snprintf(why, cap, "sparse vector index %u is given twice", e[i].idx);
                ok = false;
            }
    }
    char *text = NULL;
    if (ok) {
        uint32_t *idx = sx__malloc((n ? n : 1) * sizeof *idx);
        float *val = sx__malloc((n ? n : 1) * sizeof *val);
        for (size_t i = 0; idx && val && i < n; i++) {
            idx[i] = e[i].idx;
            val[i] = e[i].val;
        }
        size_t len = idx && val ? sx_sparse_format(idx, val, n, NULL, 0) : 0;
        text = idx && val && len <= SX_MAX_VARCHAR ? sx__malloc(len + 1) : NULL;
        if (text)
            (void)sx_sparse_format(idx, val, n, text, len + 1);
        else if (idx && val && len > SX_MAX_VARCHAR)
            (void)snprintf(why, cap,
                           "the sparse vector of %zu entries takes %zu bytes as text, over the "
                           "%u Sextant keeps per row (about 5,000 entries)",
                           n, len, SX_MAX_VARCHAR);
        else
            (void)snprintf(why, cap, "out of memory");
        ok = text != NULL;
        sx__free(idx);
        sx__free(val);
    }
    sx__free(e);
    *out = text;
    return ok;
}

json_t *sx__sparse_to_json(const char *text)
{
    size_t n = 0;
    if (!text || sx_sparse_parse(text, NULL, NULL, 0, &n) != SX_OK)
        return NULL;
    uint32_t *idx = sx__malloc((n ? n : 1) * sizeof *idx);
    float *val = sx__malloc((n ? n : 1) * sizeof *val);
    json_t *o =
        idx && val && sx_sparse_parse(text, idx, val, n, &n) == SX_OK ? json_object() : NULL;
    for (size_t i = 0; o && i < n; i++) {
        char k[16];
        (void)snprintf(k, sizeof k, "%u", idx[i]);
        json_object_set_new(o, k, json_real((double)val[i]));
    }
    sx__free(idx);
    sx__free(val);
    return o;
}

bool sx__field_is_sparse(const sx__field_meta *f)
{
    return strcmp(f->type, SX__SPARSE_TYPE) == 0;
}

int sx__meta_sparse_at(const sx__coll_meta *m, const char *field)
{
    for (size_t i = 0; field && i < m->n_sparse; i++)
        if (strcmp(m->sparse[i].field, field) == 0)
            return (int)i;
    return -1;
}

int sx__meta_sparse_index_at(const sx__coll_meta *m, const char *index_name)
{
    for (size_t i = 0; index_name && *index_name && i < m->n_sparse; i++)
        if (strcmp(m->sparse[i].index_name, index_name) == 0)
            return (int)i;
    return -1;
}

int sx__meta_vec_at(const sx__coll_meta *m, const char *field)
{
    if (!field || !*field)
        return m->n_vecs ? 0 : -1;
    for (size_t i = 0; i < m->n_vecs; i++)
        if (strcmp(m->vecs[i].field, field) == 0)
            return (int)i;
    return -1;
}

int sx__meta_index_at(const sx__coll_meta *m, const char *index_name)
{
    for (size_t i = 0; index_name && *index_name && i < m->n_vecs; i++)
        if (strcmp(m->vecs[i].index_name, index_name) == 0)
            return (int)i;
    return -1;
}

typedef struct load_ctx {
    /* per vecs[] entry: the engine's index type, for metadata of an index made through the C API
     */
    char types[SX_MAX_VECTOR_FIELDS][32];
    sx__coll_meta *out; /* the caller's copy, refreshed */
} load_ctx;

static sx_status load_fn(void *ctx, sx__coll_meta *m)
{
    load_ctx *l = ctx;
    for (size_t i = 0; i < m->n_vecs; i++) {
        sx__vec_meta *v = &m->vecs[i];
        if (!v->index_name[0] && sx__meta_index_at(m, v->field) < 0) {
            /* made through the C API while the server ran: named after its field */
            _Static_assert(sizeof v->index_name == sizeof v->field, "same name buffers");
            memcpy(v->index_name, v->field, sizeof v->index_name);
            (void)snprintf(v->index_type, sizeof v->index_type, "%s", l->types[i]);
        }
        v->metric_pending = false; /* the engine has an index, so its metric is chosen */
    }
    m->loaded = true;
    memcpy(l->out, m, sizeof *m);
    return SX_OK;
}

bool sx__coll_load(sx__req *rq, sx__resp *rs, sx_collection *h, sx__coll_meta *meta)
{
    load_ctx l;
    memset(&l, 0, sizeof l);
    l.out = meta;
    size_t n_indexed = 0;
    const char *missing = NULL;
    bool current = meta->loaded;
    for (size_t i = 0; i < meta->n_vecs; i++) {
        const sx__vec_meta *v = &meta->vecs[i];
        sx_index_info ii;
        sx_status st = sx_index_describe_on(h, v->field, &ii);
        if (st != SX_OK) {
            sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "load collection");
            return false;
        }
        if (ii.state == SX_INDEX_NONE) {
            if (!missing)
                missing = v->field;
            continue;
        }
        n_indexed++;
        (void)snprintf(l.types[i], sizeof l.types[i], "%s", ii.type);
        current = current && v->index_name[0] && !v->metric_pending;
    }
    for (size_t i = 0; i < meta->n_sparse; i++) { /* a sparse field needs its index too */
        if (meta->sparse[i].index_name[0])
            n_indexed++;
        else if (!missing)
            missing = meta->sparse[i].field;
    }
    if (n_indexed == 0) {
        sx__fail(rs, SX__MC_INDEX_NOT_FOUND, "index not found[collection=%s]", meta->name);
        return false;
    }
    if (missing) {
        /* Milvus's proxy answers this one as a plain error (errors.New): 65535, its text */
        sx__fail(rs, SX__MC_UNEXPECTED,
                 "there is no vector index on field: [%s], please create index firstly", missing);
        return false;
    }
    if (current)
        return true;
    sx_status st = sx__cat_coll_modify(rq->cat, rq->db_name, meta->name, load_fn, &l);
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "load collection");
        return false;
    }
    return true;
}

/* JSON value -> property string. Owned: sx__free. */
static char *prop_string(const json_t *v)
{
    char buf[64];
    if (json_is_string(v))
        return sx__strdup(json_string_value(v));
    if (json_is_integer(v)) {
        (void)snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return sx__strdup(buf);
    }
    if (json_is_real(v)) {
        (void)snprintf(buf, sizeof buf, "%.17g", json_real_value(v));
        return sx__strdup(buf);
    }
    if (json_is_boolean(v))
        return sx__strdup(json_is_true(v) ? "true" : "false");
    if (!v || json_is_null(v))
        return sx__strdup("");
    size_t n = json_dumpb(v, NULL, 0, JSON_COMPACT);
    char *s = sx__malloc(n + 1);
    if (s) {
        (void)json_dumpb(v, s, n, JSON_COMPACT);
        s[n] = '\0';
    }
    return s;
}

json_t *sx__props_to_kv(const json_t *props)
{
    json_t *arr = json_array();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)props, k, v) {
        char *s = prop_string(v);
        json_array_append_new(arr, json_pack("{s:s,s:s}", "key", k, "value", s ? s : ""));
        sx__free(s);
    }
    return arr;
}

void sx__props_merge(json_t *dst, const json_t *src)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)src, k, v) {
        char *s = prop_string(v);
        if (s)
            json_object_set_new(dst, k, json_string(s));
        sx__free(s);
    }
}

/* ---------------------------------------------------------------- index creation */

#define MAX_PARAMS 32

static bool is_scalar_index(const char *t)
{
    static const char *const names[] = { "INVERTED", "STL_SORT", "Trie",  "BITMAP", "TRIE",
                                         "SORTED",   "HYBRID",   "NGRAM", "RTREE" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(t, names[i]) == 0)
            return true;
    return false;
}

/* Milvus's GPU types map to engine indexes with CPU twins (src/index/cagra, src/index/ivf):
 * GPU_CAGRA (build params intermediate_graph_degree, graph_degree, build_algo IVF_PQ|NN_DESCENT,
 * cache_dataset_on_device, adapt_for_cpu; search itopk_size, search_width, min_iterations,
 * max_iterations, team_size), GPU_IVF_FLAT / GPU_IVF_PQ (as IVF_FLAT / IVF_PQ, plus
 * cache_dataset_on_device), GPU_BRUTE_FORCE (FLAT). The engine validates the parameters. */
static bool is_engine_index(const char *t)
{
    static const char *const names[] = { "FLAT",         "HNSW",        "AUTOINDEX",
                                         "IVF_FLAT",     "IVF_SQ8",     "IVF_PQ",
                                         "DISKANN",      "HNSW_SQ",     "GPU_CAGRA",
                                         "GPU_IVF_FLAT", "GPU_IVF_PQ",  "GPU_BRUTE_FORCE",
                                         "BIN_FLAT",     "BIN_IVF_FLAT" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(t, names[i]) == 0)
            return true;
    return false;
}

/* Index types Milvus has that Sextant does not (yet): 701 rather than "invalid". */
static bool is_known_unsupported(const char *t)
{
    static const char *const names[] = { "SCANN",    "IVF_RABITQ", "HNSW_PQ",
                                         "HNSW_PRQ", "IVF_HNSW",   "MINHASH_LSH" };
    if (strncasecmp(t, "GPU_", 4) == 0 && !is_engine_index(t))
        return true;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(t, names[i]) == 0)
            return true;
    return false;
}

const sx__field_meta *sx__meta_field(const sx__coll_meta *m, const char *name)
{
    for (size_t i = 0; i < m->n_fields; i++)
        if (strcmp(m->fields[i].name, name) == 0)
            return &m->fields[i];
    return NULL;
}

static bool skip_param(const char *k)
{
    return strcasecmp(k, "index_type") == 0 || strcasecmp(k, "metric_type") == 0 ||
           strcasecmp(k, "metricType") == 0 || strcasecmp(k, "indexType") == 0;
}

/* One vector index creation, run by sx__cat_coll_modify on fresh metadata. */
typedef struct apply_ctx {
    sx__resp *rs;
    bool answered; /* rs holds the error */
    bool failed;   /* the index was not created, although the modify succeeded */
    sx_collection *h;
    const char *iname, *fname, *itype;
    bool has_metric;
    sx_metric metric;
    const sx_param *ps;
    size_t np;
    sx__coll_meta *out; /* the caller's copy, refreshed on success */
} apply_ctx;

static sx_status apply_fn(void *ctx, sx__coll_meta *m)
{
    apply_ctx *a = ctx;
    char emsg[1024];
    int vi = sx__meta_vec_at(m, a->fname), other = sx__meta_index_at(m, a->iname);
    if (vi < 0) { /* the caller checked the field: the metadata changed under it */
        sx__fail(a->rs, SX__MC_FIELD_NOT_FOUND, "field not found[field=%s]", a->fname);
        a->answered = true;
        return SX_ENOTFOUND;
    }
    sx__vec_meta *v = &m->vecs[vi];
    if (v->index_name[0] && strcmp(v->index_name, a->iname) != 0) {
        sx__fail(a->rs, SX__MC_UNEXPECTED,
                 "CreateIndex failed: at most one distinct index is allowed per field (field %s "
                 "has index %s)",
                 v->field, v->index_name);
        a->answered = true;
        return SX_EEXIST;
    }
    if (sx__meta_sparse_index_at(m, a->iname) >= 0) {
        sx__fail(a->rs, SX__MC_UNEXPECTED,
                 "CreateIndex failed: at most one distinct index is allowed per field (index %s "
                 "is on field %s)",
                 a->iname, m->sparse[sx__meta_sparse_index_at(m, a->iname)].field);
        a->answered = true;
        return SX_EEXIST;
    }
    if (other >= 0 && other != vi) { /* index names are unique in a collection (Milvus) */
        sx__fail(a->rs, SX__MC_UNEXPECTED,
                 "CreateIndex failed: at most one distinct index is allowed per field (index %s "
                 "is on field %s)",
                 a->iname, m->vecs[other].field);
        a->answered = true;
        return SX_EEXIST;
    }
    const sx__field_meta *vfm = sx__meta_field(m, v->field);
    bool bin = vfm && vfm->engine_type == SX_FIELD_BINARY_VECTOR;
    sx_metric want = a->has_metric       ? a->metric
                     : v->metric_pending ? (bin ? SX_METRIC_HAMMING : SX_METRIC_COSINE) /* Milvus */
                                         : v->metric;
    sx_status st = SX_OK;
    if (want != v->metric) {
        if (v->index_name[0]) {
            sx__fail(a->rs, SX__MC_INVALID_PARAM,
                     "invalid parameter[expected=%s][actual=%s]: collection %s has index %s with "
                     "metric %s; drop the index to change the metric",
                     sx__metric_name(v->metric), sx__metric_name(want), m->name, v->index_name,
                     sx__metric_name(v->metric));
            a->answered = true;
            return SX_EINVAL;
        }
        st = sx_collection_set_metric_on(a->h, v->field, want);
        if (st != SX_OK) {
            if (st == SX_EINVAL || st == SX_EBUSY)
                sx__fail(a->rs, SX__MC_INVALID_PARAM,
                         "invalid parameter[expected=%s][actual=%s]: cannot change the metric of "
                         "field %s of collection %s: %s",
                         sx__metric_name(v->metric), sx__metric_name(want), v->field, m->name,
                         sx__errmsg_safe(emsg, sizeof emsg));
            else
                sx__fail_st(a->rs, st, SX__MC_COLL_NOT_FOUND, "create index");
            a->answered = true;
            return st;
        }
        v->metric = want;
    }
    st = sx_index_create_on(a->h, v->field, a->itype, a->ps, a->np);
    if (st != SX_OK) {
        if (st == SX_EEXIST)
            sx__fail(a->rs, SX__MC_UNEXPECTED,
                     "CreateIndex failed: at most one distinct index is allowed per field: %s",
                     sx__errmsg_safe(emsg, sizeof emsg));
        else
            sx__fail_st(a->rs, st, SX__MC_COLL_NOT_FOUND, "create index");
        a->answered = true;
        a->failed = true;
        /* SX_OK all the same: a metric changed above is the engine's now, so it is recorded (the
         * metric stays pending: no index chose it) */
        memcpy(a->out, m, sizeof *m);
        return SX_OK;
    }
    v->metric_pending = false;
    (void)snprintf(v->index_name, sizeof v->index_name, "%s", a->iname);
    (void)snprintf(v->index_type, sizeof v->index_type, "%s", a->itype);
    memcpy(a->out, m, sizeof *m);
    return SX_OK;
}

/* ---- sparse vector indexes: recorded in the metadata; the engine builds per segment */

typedef struct sparse_apply_ctx {
    sx__resp *rs;
    bool answered;
    const char *iname, *fname, *itype, *algo;
    float drop, k1, b;
    sx__coll_meta *out;
} sparse_apply_ctx;

static sx_status sparse_apply_fn(void *ctx, sx__coll_meta *m)
{
    sparse_apply_ctx *a = ctx;
    int si = sx__meta_sparse_at(m, a->fname);
    if (si < 0) {
        sx__fail(a->rs, SX__MC_FIELD_NOT_FOUND, "field not found[field=%s]", a->fname);
        a->answered = true;
        return SX_ENOTFOUND;
    }
    sx__sparse_meta *s = &m->sparse[si];
    int other = sx__meta_sparse_index_at(m, a->iname);
    bool same = s->index_name[0] && strcmp(s->index_name, a->iname) == 0 &&
                strcasecmp(s->index_type, a->itype) == 0 && strcmp(s->algo, a->algo) == 0 &&
                s->drop_ratio_build == a->drop && s->bm25_k1 == a->k1 && s->bm25_b == a->b;
    if (same) { /* Milvus: creating the same index again succeeds */
        memcpy(a->out, m, sizeof *m);
        return SX_OK;
    }
    if (s->index_name[0] || (other >= 0 && other != si) || sx__meta_index_at(m, a->iname) >= 0) {
        sx__fail(a->rs, SX__MC_UNEXPECTED,
                 "CreateIndex failed: at most one distinct index is allowed per field (field %s "
                 "has index %s)",
                 s->field, s->index_name[0] ? s->index_name : a->iname);
        a->answered = true;
        return SX_EEXIST;
    }
    (void)snprintf(s->index_name, sizeof s->index_name, "%s", a->iname);
    (void)snprintf(s->index_type, sizeof s->index_type, "%s", a->itype);
    (void)snprintf(s->algo, sizeof s->algo, "%s", a->algo);
    s->drop_ratio_build = a->drop;
    s->bm25_k1 = a->k1;
    s->bm25_b = a->b;
    memcpy(a->out, m, sizeof *m);
    return SX_OK;
}

/* A number parameter (a number or its digits) into *out; false when it is not one. */
static bool param_num(const json_t *v, double *out)
{
    char *end = NULL;
    if (json_is_number(v))
        *out = json_number_value(v);
    else if (json_is_string(v))
        *out = strtod(json_string_value(v), &end);
    return json_is_number(v) || (end && !*end && end != json_string_value(v));
}

/* A SPARSE_INVERTED_INDEX / SPARSE_WAND (AUTOINDEX) on a sparse field: metric IP, params
 * drop_ratio_build in [0, 1) and inverted_index_algo (TAAT_NAIVE, DAAT_WAND, DAAT_MAXSCORE: the
 * engine runs MaxScore for all of them, which answers what each would). */
static bool sparse_index_apply(sx__req *rq,
                               sx__resp *rs,
                               sx__coll_meta *meta,
                               const char *fname,
                               const char *iname,
                               const char *itype,
                               const char *metric,
                               const json_t *params)
{
    if (strcasecmp(itype, "SPARSE_INVERTED_INDEX") != 0 && strcasecmp(itype, "SPARSE_WAND") != 0 &&
        strcasecmp(itype, "AUTOINDEX") != 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: invalid index type: %s for the sparse vector field %s "
                 "(SPARSE_INVERTED_INDEX, SPARSE_WAND or AUTOINDEX)",
                 itype, fname);
        return false;
    }
    int si = sx__meta_sparse_at(meta, fname);
    bool bm25 = si >= 0 && meta->sparse[si].function[0];
    if (bm25 && (!metric || strcasecmp(metric, "BM25") != 0)) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: the output field %s of BM25 function %s needs metric type "
                 "BM25",
                 fname, meta->sparse[si].function);
        return false;
    }
    if (!bm25 && metric && *metric && strcasecmp(metric, "IP") != 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 strcasecmp(metric, "BM25") == 0
                     ? "invalid parameter: metric type BM25 needs the output field of a BM25 "
                       "function"
                     : "invalid parameter: only IP is the supported metric type for sparse index");
        return false;
    }
    float drop = 0;
    double k1 = 1.2, b = 0.75;
    const char *algo = "";
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)params, k, v) {
        if (skip_param(k))
            continue;
        if (strcmp(k, "drop_ratio_build") == 0) {
            double d = json_is_number(v)   ? json_number_value(v)
                       : json_is_string(v) ? strtod(json_string_value(v), NULL)
                                           : -1;
            if (!(d >= 0 && d < 1)) {
                sx__fail(rs, SX__MC_INVALID_PARAM,
                         "invalid parameter: param 'drop_ratio_build' should be a number in range "
                         "[0, 1)");
                return false;
            }
            drop = (float)d;
        } else if (bm25 && (strcmp(k, "bm25_k1") == 0 || strcmp(k, "bm25_b") == 0)) {
            double x = -1;
            bool is_k1 = strcmp(k, "bm25_k1") == 0;
            /* knowhere's ranges: k1 [0, 3], b [0, 1]; k1 0 (tf ignored) is refused here:
             * the engine reads 0 as its default 1.2 */
            if (!param_num(v, &x) || !(is_k1 ? x > 0 && x <= 3.0 : x >= 0 && x <= 1)) {
                sx__fail(rs, SX__MC_INVALID_PARAM,
                         "invalid parameter: %s should be a number in range %s", k,
                         is_k1 ? "(0, 3]" : "[0, 1]");
                return false;
            }
            *(is_k1 ? &k1 : &b) = x;
        } else if (strcmp(k, "inverted_index_algo") == 0) {
            const char *s = json_string_value(v);
            if (!s || (strcmp(s, "TAAT_NAIVE") != 0 && strcmp(s, "DAAT_WAND") != 0 &&
                       strcmp(s, "DAAT_MAXSCORE") != 0)) {
                sx__fail(rs, SX__MC_INVALID_PARAM,
                         "invalid parameter: inverted_index_algo must be TAAT_NAIVE, DAAT_WAND or "
                         "DAAT_MAXSCORE");
                return false;
            }
            algo = s;
        } else {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: %s is not a parameter of sparse indexes "
                     "(drop_ratio_build, inverted_index_algo%s)",
                     k, bm25 ? ", bm25_k1, bm25_b" : "");
            return false;
        }
    }
    if (bm25 && drop != 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: drop_ratio_build is not supported with BM25 by Sextant");
        return false;
    }
    sparse_apply_ctx a = { rs, false, iname, fname, itype, algo, drop, (float)k1, (float)b, meta };
    sx_status st = sx__cat_coll_modify(rq->cat, rq->db_name, meta->name, sparse_apply_fn, &a);
    if (st != SX_OK && !a.answered)
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "create index");
    return st == SX_OK;
}

bool sx__index_apply(
    sx__req *rq, sx__resp *rs, sx_collection *h, sx__coll_meta *meta, const json_t *ip)
{
    const char *fname = NULL, *iname = NULL, *metric = NULL, *itype = NULL;
    if (!json_is_object(ip) || sx__jstr(ip, "fieldName", &fname) != 0 ||
        sx__jstr(ip, "indexName", &iname) != 0 || sx__jstr(ip, "metricType", &metric) != 0 ||
        sx__jstr(ip, "indexType", &itype) != 0) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: json: cannot unmarshal value into "
                 "Go struct field IndexParamReq.indexParams of type httpserver.IndexParam");
        return false;
    }
    if (!fname || !*fname) {
        sx__fail(rs, SX__MC_MISSING_REQUIRED,
                 "missing required parameters, error: Key: 'IndexParamReq.IndexParams[0]."
                 "FieldName' Error:Field validation for 'FieldName' failed on the 'required' tag");
        return false;
    }
    const json_t *params = sx__jget(ip, "params");
    if (params && !json_is_object(params)) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: json: cannot unmarshal value into "
                 "Go struct field IndexParam.indexParams.params of type map[string]interface {}");
        return false;
    }
    if (!itype || !*itype) {
        const json_t *t = sx__jget(params, "index_type");
        itype = json_is_string(t) && *json_string_value(t) ? json_string_value(t) : "AUTOINDEX";
    }
    if (!metric || !*metric) {
        const json_t *t = sx__jget(params, "metric_type");
        metric = json_is_string(t) ? json_string_value(t) : NULL;
    }
    const sx__field_meta *f = sx__meta_field(meta, fname);
    if (!f) {
        sx__fail(rs, SX__MC_FIELD_NOT_FOUND, "field not found[field=%s]", fname);
        return false;
    }
    if (!iname || !*iname)
        iname = fname;
    if (strlen(iname) > SX_MAX_NAME) {
        sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: index name too long");
        return false;
    }
    if (sx__field_is_sparse(f))
        return sparse_index_apply(rq, rs, meta, fname, iname, itype, metric, params);
    if (!sx_field_is_vector(f->engine_type)) {
        if (is_scalar_index(itype) || strcasecmp(itype, "AUTOINDEX") == 0)
            return true; /* accepted, nothing to build */
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: index type %s is not a scalar index type (field %s is %s)",
                 itype, fname, f->type);
        return false;
    }
    if (is_known_unsupported(itype)) {
        sx__fail(rs, SX__MC_INDEX_UNSUPPORTED,
                 "index type not supported[index_type=%s]: %s is not supported by Sextant yet "
                 "(supported: FLAT, HNSW, AUTOINDEX, IVF_FLAT, IVF_SQ8, IVF_PQ, HNSW_SQ, DISKANN, "
                 "GPU_CAGRA, GPU_IVF_FLAT, GPU_IVF_PQ, GPU_BRUTE_FORCE, BIN_FLAT, BIN_IVF_FLAT)",
                 itype, itype);
        return false;
    }
    if (!is_engine_index(itype)) {
        sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: invalid index type: %s%s", itype,
                 is_scalar_index(itype) ? " (a scalar index type on a vector field)" : "");
        return false;
    }
    apply_ctx a = { .rs = rs, .h = h, .iname = iname, .fname = fname, .itype = itype, .out = meta };
    if (metric && *metric) {
        if (!sx__metric_parse(metric, &a.metric)) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: metric type %s not found or not supported by Sextant, "
                     "supported: [L2 IP COSINE HAMMING JACCARD]",
                     metric);
            return false;
        }
        a.has_metric = true;
    }
    /* params -> strings */
    sx_param ps[MAX_PARAMS];
    char *owned[MAX_PARAMS];
    size_t np = 0;
    bool ok = true;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)params, k, v) {
        if (skip_param(k))
            continue;
        if (np == MAX_PARAMS) {
            sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: too many index params");
            ok = false;
            break;
        }
        char buf[64];
        const char *s = NULL;
        if (json_is_string(v))
            s = json_string_value(v);
        else if (json_is_integer(v)) {
            (void)snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
            s = buf;
        } else if (json_is_real(v)) {
            int64_t iv;
            if (sx__json_to_int64(v, &iv))
                (void)snprintf(buf, sizeof buf, "%lld", (long long)iv);
            else
                (void)snprintf(buf, sizeof buf, "%.17g", json_real_value(v));
            s = buf;
        } else if (json_is_boolean(v))
            s = json_is_true(v) ? "true" : "false";
        else {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: index param %s must be a number or a string", k);
            ok = false;
            break;
        }
        owned[np] = sx__strdup(s);
        if (!owned[np]) {
            sx__fail(rs, SX__MC_UNEXPECTED, "out of memory");
            ok = false;
            break;
        }
        ps[np].key = k;
        ps[np].value = owned[np];
        np++;
    }
    sx_status st = SX_OK;
    if (ok) {
        a.ps = ps;
        a.np = np;
        st = sx__cat_coll_modify(rq->cat, rq->db_name, meta->name, apply_fn, &a);
        if (st != SX_OK && !a.answered) {
            if (st == SX_ENOTFOUND)
                sx__fail(rs, SX__MC_COLL_NOT_FOUND, SX__COLL_NOT_FOUND, rq->db_name, meta->name);
            else
                sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "create index");
        }
    }
    for (size_t i = 0; i < np; i++)
        sx__free(owned[i]);
    return ok && st == SX_OK && !a.failed;
}

bool sx__int_fits(const char *type, int64_t v)
{
    if (strcmp(type, "Int8") == 0)
        return v >= -128 && v <= 127;
    if (strcmp(type, "Int16") == 0)
        return v >= -32768 && v <= 32767;
    if (strcmp(type, "Int32") == 0)
        return v >= INT32_MIN && v <= INT32_MAX;
    return true;
}

void sx__jansson_free(void *p)
{
    json_free_t fr = NULL;
    json_get_alloc_funcs(NULL, &fr);
    if (p)
        (fr ? fr : free)(p);
}

bool sx__field_set_default(sx__resp *rs, sx__field_meta *f, const json_t *v)
{
    const char *why = NULL;
    if (f->is_primary)
        why = "primary field not support default_value: a primary key cannot have a default "
              "value";
    else if (sx_field_is_vector(f->engine_type) || !strcmp(f->type, "JSON") ||
             !strcmp(f->type, "Array"))
        why = "convert defaultValue fail: default values are supported on scalar fields only (not "
              "vectors, JSON or Array)";
    else if (f->engine_type == SX_FIELD_INT64) {
        int64_t x;
        if (!json_is_integer(v) || !sx__json_to_int64(v, &x) || !sx__int_fits(f->type, x))
            why = "the default value is not an integer in the field's range";
    } else if (f->engine_type == SX_FIELD_DOUBLE) {
        double x = json_is_number(v) ? json_number_value(v) : (double)NAN;
        if (!isfinite(x) || (!strcmp(f->type, "Float") && fabs(x) > (double)FLT_MAX))
            why = "the default value is not a finite number in the field's range";
    } else if (f->engine_type == SX_FIELD_BOOL) {
        if (!json_is_boolean(v))
            why = "the default value is not a boolean";
    } else if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
        why = "the default value is not a string (without NUL characters)";
    } else if (json_string_length(v) > (f->max_length ? f->max_length : SX_MAX_VARCHAR)) {
        why = "the default value is longer than the field's max_length";
    }
    char *txt = why ? NULL : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!why && (!txt || strlen(txt) > SX__MAX_DEFAULT_TEXT))
        why = txt ? "the default value is longer than Sextant keeps (255 bytes of JSON text)"
                  : "out of memory";
    if (why) {
        sx__jansson_free(txt);
        sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: field %s: %s", f->name, why);
        return false;
    }
    (void)snprintf(f->default_json, sizeof f->default_json, "%s", txt);
    sx__jansson_free(txt);
    return true;
}

const char *sx__index_state_name(sx_index_state s)
{
    switch (s) {
    case SX_INDEX_IN_PROGRESS:
        return "InProgress";
    case SX_INDEX_FINISHED:
        return "Finished";
    case SX_INDEX_FAILED:
        return "Failed";
    case SX_INDEX_NONE:
        break;
    }
    return "IndexStateNone";
}
