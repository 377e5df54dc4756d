/*
 * grpc_milvus.c: the MilvusService RPCs (milvus.proto.milvus.MilvusService, our own definitions
 * in proto/milvus.proto) on top of the service layer the REST API uses.
 *
 * No logic twice. Every RPC that reads or changes data is translated into the request of the
 * REST route that does the same thing and run through sx__server_call (http.c: the route's
 * handler, its validation, the catalog, the engine, the search merger, limits, metrics and the
 * access log), and the route's answer is translated back. The handlers are the service layer;
 * this file and the JSON decoding of http.c are its two front ends. Metadata-only answers
 * (DescribeCollection's schema, ShowCollections' ids) read the catalog directly.
 * Cost: rows and vectors pass through a JSON tree (jansson) on the way in and out, about as
 * much memory as the REST request of the same rows; not a second copy of any logic.
 *
 * Requests. A request is unpacked with protobuf-c only after a pre-scan of its wire bytes
 * (wire_depth): protobuf-c recurses into nested messages without a limit, so a message nested
 * deeper than MAX_DEPTH levels, or one whose bytes do not parse as the declared message, is
 * refused first. The request's own db_name, when set, overrides the dbname metadata.
 *
 * Errors, as Milvus answers them: business errors go inside the response's Status (error_code
 * and code, both set: CollectionNotExists/100, IndexNotExist/700, IllegalArgument/1100, ...)
 * with grpc-status 0; an undecodable message is INVALID_ARGUMENT; a declared RPC we do not serve
 * (resource groups, roles, credential changes) gets a Status error naming it, never UNIMPLEMENTED
 * (the Node SDK turns UNIMPLEMENTED into an empty success); an RPC the definitions do not declare
 * is UNIMPLEMENTED.
 *
 * Memory. The response is built in a per-call arena (every message, array and string), packed
 * into one sx__malloc'ed buffer for the transport, and the arena is freed in one go.
 *
 * Threads: any number of calls run at once (the transport's workers); nothing here is shared.
 */
#include <math.h>
#include <protobuf-c/protobuf-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "milvus.pb-c.h"
#include "server/rbac.h"
#include "server/server.h"
#include "util/alloc.h"

#define PM(x)          SxPb__##x
#define PI(x)          SX_PB__##x
#define DESC(lower)    (&sx_pb__##lower##__descriptor)
#define NEW(a, lower)  anew((a), DESC(lower))
#define MAX_DEPTH      32
#define AUTHZ(r)       ((r)->call->authz ? (r)->call->authz : "")
#define SERVER_VERSION "v2.5.0"

/* ------------------------------------------------------------------ arena */

typedef struct ablk {
    struct ablk *next;
    size_t used, cap;
    max_align_t data[];
} ablk;

typedef struct arena {
    ablk *head;
    bool oom;
} arena;

static void *amalloc(arena *a, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (n == 0)
        n = sizeof(max_align_t);
    ablk *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 60000 ? n : 60000;
        b = sx__malloc(sizeof *b + cap);
        if (!b) {
            a->oom = true;
            return NULL;
        }
        b->cap = cap;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

static void arena_free(arena *a)
{
    while (a->head) {
        ablk *n = a->head->next;
        sx__free(a->head);
        a->head = n;
    }
}

static void *anew(arena *a, const ProtobufCMessageDescriptor *d)
{
    void *m = amalloc(a, d->sizeof_message);
    if (m)
        protobuf_c_message_init(d, m);
    return m;
}

static char *astr(arena *a, const char *s)
{
    if (!s)
        s = "";
    size_t n = strlen(s);
    char *p = amalloc(a, n + 1);
    if (p)
        memcpy(p, s, n + 1);
    return p ? p : (char *)protobuf_c_empty_string;
}

static char *astrf(arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static char *astrf(arena *a, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return astr(a, buf);
}

/* ------------------------------------------------------------------ the call */

typedef struct rpc {
    const sx__svc *svc;
    const sx__grpc_call *call;
    arena a;
    const ProtobufCMessage *req; /* unpacked request */
    char db[SX_MAX_NAME + 1];
    sx__grpc_reply *out;
} rpc;

/* ------------------------------------------------------------------ wire pre-scan */

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned s = 0; s < 64 && *p < end; s += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* True when buf parses as message d nested at most `left` more levels deep. */
static bool wire_depth(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, int left)
{
    if (left <= 0)
        return false;
    if (len == 0)
        return true; /* an empty message (p may be NULL: no bytes field sent) */
    const uint8_t *end = p + len;
    while (p < end) {
        uint64_t key, v;
        if (!varint(&p, end, &key))
            return false;
        unsigned wt = (unsigned)(key & 7);
        uint32_t num = (uint32_t)(key >> 3);
        switch (wt) {
        case 0:
            if (!varint(&p, end, &v))
                return false;
            break;
        case 1:
            if (end - p < 8)
                return false;
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                return false;
            p += 4;
            break;
        case 2: {
            if (!varint(&p, end, &v) || v > (uint64_t)(end - p))
                return false;
            const ProtobufCFieldDescriptor *f =
                d ? protobuf_c_message_descriptor_get_field(d, num) : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE &&
                !wire_depth(f->descriptor, p, (size_t)v, left - 1))
                return false;
            p += v;
            break;
        }
        default:
            return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------------ generic field access */

static const char *str_field(const ProtobufCMessage *m, const char *name)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
    if (!f || f->type != PROTOBUF_C_TYPE_STRING || f->label == PROTOBUF_C_LABEL_REPEATED)
        return "";
    const char *s = *(char *const *)(const void *)((const char *)m + f->offset);
    return s ? s : "";
}

/* ------------------------------------------------------------------ Status */

static PM(ErrorCode) error_code_of(int code)
{
    switch (code) {
    case SX__MC_OK:
        return PI(ERROR_CODE__Success);
    case SX__MC_COLL_NOT_FOUND:
        return PI(ERROR_CODE__CollectionNotExists);
    case SX__MC_INDEX_NOT_FOUND:
        return PI(ERROR_CODE__IndexNotExist);
    case SX__MC_INVALID_PARAM:
    case SX__MC_MISSING_PARAM:
    case SX__MC_BAD_JSON:
    case SX__MC_MISSING_REQUIRED:
    case SX__MC_BAD_INSERT:
    case SX__MC_BAD_PK:
    case SX__MC_ILLEGAL_SCHEMA:
        return PI(ERROR_CODE__IllegalArgument);
    case SX__MC_PRIV_DENIED:
    case SX__MC_NOT_AUTH:
        return PI(ERROR_CODE__PermissionDenied);
    case SX__MC_LIMITED:
        return PI(ERROR_CODE__RateLimit);
    case SX__MC_NOT_READY:
        return PI(ERROR_CODE__NotReadyServe);
    default:
        return PI(ERROR_CODE__UnexpectedError);
    }
}

static PM(Status) * status_new(arena *a, int code, const char *msg)
{
    PM(Status) *s = NEW(a, status);
    if (!s)
        return NULL;
    s->code = code;
    s->error_code = error_code_of(code);
    s->reason = astr(a, code ? msg : "");
    s->retriable = code == SX__MC_LIMITED;
    return s;
}

/* The Status of a route's answer ({"code":N,"message":...}). */
static PM(Status) * status_of(arena *a, const json_t *ans)
{
    if (!ans)
        return status_new(a, SX__MC_UNEXPECTED, "server out of memory");
    json_t *c = json_object_get(ans, "code");
    int code = json_is_integer(c) ? (int)json_integer_value(c) : SX__MC_UNEXPECTED;
    const char *m = json_string_value(json_object_get(ans, "message"));
    return status_new(a, code, m ? m : "");
}

static bool ans_ok(const json_t *ans)
{
    json_t *c = ans ? json_object_get(ans, "code") : NULL;
    return json_is_integer(c) && json_integer_value(c) == 0;
}

static json_t *ans_data(const json_t *ans)
{
    return ans ? json_object_get(ans, "data") : NULL;
}

/* The strings of a JSON array as an arena array (*n of them; NULL when out of memory). */
static char **arena_strings(arena *a, const json_t *arr, size_t *n)
{
    size_t k = json_array_size(arr);
    char **out = amalloc(a, (k ? k : 1) * sizeof *out);
    *n = 0;
    for (size_t i = 0; out && i < k; i++)
        out[(*n)++] = astr(a, json_string_value(json_array_get(arr, i)));
    return out;
}

/* ------------------------------------------------------------------ route calls */

static json_t *call_route(rpc *r, const char *route, const json_t *body)
{
    /* a request body could not be built: jansson refuses strings that are not UTF-8 (protobuf-c
     * does not check them), or memory ran out */
    if (!body)
        return json_pack("{s:i,s:s}", "code", SX__MC_INVALID_PARAM, "message",
                         "invalid parameter: a string in the request is not valid UTF-8");
    /* an API user is held to its roles' privileges (rbac.c) */
    sx__principal who = { r->call->user        ? SX__WHO_USER
                          : r->call->read_only ? SX__WHO_RO
                                               : SX__WHO_SUPER,
                          "" };
    if (r->call->user)
        (void)snprintf(who.user, sizeof who.user, "%s", r->call->user);
    return r->svc->ops->call(r->svc->ctx, route, body, r->db, &who, AUTHZ(r), r->call->timeout_s,
                             r->call->method);
}

/* A body with collectionName (from the request's collection_name) and more members. */
static json_t *coll_body(const rpc *r)
{
    return json_pack("{s:s}", "collectionName", str_field(r->req, "collection_name"));
}

/* ------------------------------------------------------------------ type names */

static const struct {
    const char *name;
    PM(DataType) t;
} TYPES[] = {
    { "Bool", PI(DATA_TYPE__Bool) },
    { "Int8", PI(DATA_TYPE__Int8) },
    { "Int16", PI(DATA_TYPE__Int16) },
    { "Int32", PI(DATA_TYPE__Int32) },
    { "Int64", PI(DATA_TYPE__Int64) },
    { "Float", PI(DATA_TYPE__Float) },
    { "Double", PI(DATA_TYPE__Double) },
    { "String", PI(DATA_TYPE__String) },
    { "VarChar", PI(DATA_TYPE__VarChar) },
    { "Array", PI(DATA_TYPE__Array) },
    { "JSON", PI(DATA_TYPE__JSON) },
    { "BinaryVector", PI(DATA_TYPE__BinaryVector) },
    { "FloatVector", PI(DATA_TYPE__FloatVector) },
    { "Float16Vector", PI(DATA_TYPE__Float16Vector) },
    { "BFloat16Vector", PI(DATA_TYPE__BFloat16Vector) },
    { "SparseFloatVector", PI(DATA_TYPE__SparseFloatVector) },
    { "Int8Vector", PI(DATA_TYPE__Int8Vector) },
};

static const char *type_name(PM(DataType) t)
{
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (TYPES[i].t == t)
            return TYPES[i].name;
    return NULL;
}

static PM(DataType) type_of(const char *name)
{
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (strcmp(TYPES[i].name, name) == 0)
            return TYPES[i].t;
    return PI(DATA_TYPE__None);
}

static uint64_t hybrid_ts(int64_t ms)
{
    return (uint64_t)ms << 18; /* Milvus's hybrid timestamp: physical ms, 18 logical bits */
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static PM(KeyValuePair) * kv_new(arena *a, const char *k, const char *v)
{
    PM(KeyValuePair) *p = NEW(a, key_value_pair);
    if (p) {
        p->key = astr(a, k);
        p->value = astr(a, v);
    }
    return p;
}

/* Looks a key up in key/value pairs; NULL when absent. */
static const char *kv_get(PM(KeyValuePair) *const *kv, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (kv[i] && kv[i]->key && strcmp(kv[i]->key, key) == 0)
            return kv[i]->value ? kv[i]->value : "";
    return NULL;
}

/* A JSON value from a parameter text: numbers and JSON stay typed, the rest is a string. */
static json_t *param_value(const char *v)
{
    json_error_t e;
    json_t *j = json_loads(v, JSON_DECODE_ANY, &e);
    return j ? j : json_string(v);
}

/* ------------------------------------------------------------------ rows <-> columns */

/* The fields a collection's metadata declares (NULL when the collection is unknown). */
typedef struct schema_ref {
    sx__coll_meta *m; /* arena-owned copy */
    bool found;
} schema_ref;

static schema_ref schema_get(rpc *r, const char *name)
{
    schema_ref s = { amalloc(&r->a, sizeof(sx__coll_meta)), false };
    if (s.m)
        s.found = r->svc->ops->coll_get(r->svc->ctx, AUTHZ(r), r->db, name, s.m) == SX_OK;
    return s;
}

static const sx__field_meta *meta_field(const sx__coll_meta *m, const char *name)
{
    for (size_t i = 0; m && i < m->n_fields; i++)
        if (strcmp(m->fields[i].name, name) == 0)
            return &m->fields[i];
    return NULL;
}

static PM(DataType) field_type(const sx__field_meta *f)
{
    PM(DataType) t = type_of(f->type);
    if (t != PI(DATA_TYPE__None))
        return t;
    switch (f->engine_type) {
    case SX_FIELD_INT64:
        return PI(DATA_TYPE__Int64);
    case SX_FIELD_DOUBLE:
        return PI(DATA_TYPE__Double);
    case SX_FIELD_BOOL:
        return PI(DATA_TYPE__Bool);
    case SX_FIELD_VARCHAR:
        return PI(DATA_TYPE__VarChar);
    case SX_FIELD_FLOAT_VECTOR:
        return PI(DATA_TYPE__FloatVector);
    case SX_FIELD_FLOAT16_VECTOR:
        return PI(DATA_TYPE__Float16Vector);
    case SX_FIELD_BFLOAT16_VECTOR:
        return PI(DATA_TYPE__BFloat16Vector);
    case SX_FIELD_BINARY_VECTOR:
        return PI(DATA_TYPE__BinaryVector);
    default:
        return PI(DATA_TYPE__None);
    }
}

/* Bytes of one row of a byte-encoded vector type (BinaryVector dim / 8, Float16Vector and
 * BFloat16Vector dim * 2); 0 for the other types. */
static size_t bytes_vector_row(PM(DataType) t, uint32_t dim)
{
    if (t == PI(DATA_TYPE__BinaryVector))
        return dim / 8;
    if (t == PI(DATA_TYPE__Float16Vector) || t == PI(DATA_TYPE__BFloat16Vector))
        return (size_t)dim * 2;
    return 0;
}

/* n bytes as a JSON base64 string (the REST form of those vectors). New reference or NULL. */
static json_t *b64_json(const void *p, size_t n)
{
    char *s = sx__malloc((n + 2) / 3 * 4 + 1);
    if (!s)
        return NULL;
    size_t len = sx__b64_encode(p, n, s);
    json_t *j = json_stringn(s, len);
    sx__free(s);
    return j;
}

/* One output column being filled from rows. */
typedef struct outcol {
    const char *name;
    PM(DataType) type;
    uint32_t dim;
    PM(DataType) elem; /* Array: the element type */
    bool dynamic;      /* the $meta column: the row's keys outside the schema */
    bool nullable;     /* a nullable field: FieldData.valid_data for every row (dense values) */
    PM(FieldData) * fd;
    size_t n;
} outcol;

static bool col_init(arena *a, outcol *c, size_t rows)
{
    PM(FieldData) *fd = NEW(a, field_data);
    if (!fd)
        return false;
    c->fd = fd;
    fd->field_name = astr(a, c->name);
    fd->type = c->type;
    fd->is_dynamic = c->dynamic;
    size_t n = rows ? rows : 1;
    if (c->type == PI(DATA_TYPE__SparseFloatVector)) {
        PM(VectorField) *v = NEW(a, vector_field);
        PM(SparseFloatArray) *sa = NEW(a, sparse_float_array);
        if (!v || !sa || !(sa->contents = amalloc(a, n * sizeof *sa->contents)))
            return false;
        v->data_case = PI(VECTOR_FIELD__DATA_SPARSE_FLOAT_VECTOR);
        v->sparse_float_vector = sa;
        fd->field_case = PI(FIELD_DATA__FIELD_VECTORS);
        fd->vectors = v;
        return true;
    }
    if (c->type == PI(DATA_TYPE__FloatVector)) {
        PM(VectorField) *v = NEW(a, vector_field);
        PM(FloatArray) *fa = NEW(a, float_array);
        if (!v || !fa || !(fa->data = amalloc(a, n * (c->dim ? c->dim : 1) * sizeof(float))))
            return false;
        v->dim = c->dim;
        v->data_case = PI(VECTOR_FIELD__DATA_FLOAT_VECTOR);
        v->float_vector = fa;
        fd->field_case = PI(FIELD_DATA__FIELD_VECTORS);
        fd->vectors = v;
        return true;
    }
    size_t vb = bytes_vector_row(c->type, c->dim);
    if (vb) { /* binary, float16, bfloat16: the rows' bytes back to back */
        PM(VectorField) *v = NEW(a, vector_field);
        ProtobufCBinaryData b = { 0, amalloc(a, n * vb) };
        if (!v || !b.data)
            return false;
        v->dim = c->dim;
        if (c->type == PI(DATA_TYPE__BinaryVector)) {
            v->data_case = PI(VECTOR_FIELD__DATA_BINARY_VECTOR);
            v->binary_vector = b;
        } else if (c->type == PI(DATA_TYPE__Float16Vector)) {
            v->data_case = PI(VECTOR_FIELD__DATA_FLOAT16_VECTOR);
            v->float16_vector = b;
        } else {
            v->data_case = PI(VECTOR_FIELD__DATA_BFLOAT16_VECTOR);
            v->bfloat16_vector = b;
        }
        fd->field_case = PI(FIELD_DATA__FIELD_VECTORS);
        fd->vectors = v;
        return true;
    }
    PM(ScalarField) *s = NEW(a, scalar_field);
    if (!s)
        return false;
    fd->field_case = PI(FIELD_DATA__FIELD_SCALARS);
    fd->scalars = s;
    switch (c->type) {
    case PI(DATA_TYPE__Bool): {
        PM(BoolArray) *x = NEW(a, bool_array);
        if (!x || !(x->data = amalloc(a, n * sizeof *x->data)))
            return false;
        s->data_case = PI(SCALAR_FIELD__DATA_BOOL_DATA);
        s->bool_data = x;
        break;
    }
    case PI(DATA_TYPE__Int8):
    case PI(DATA_TYPE__Int16):
    case PI(DATA_TYPE__Int32): {
        PM(IntArray) *x = NEW(a, int_array);
        if (!x || !(x->data = amalloc(a, n * sizeof *x->data)))
            return false;
        s->data_case = PI(SCALAR_FIELD__DATA_INT_DATA);
        s->int_data = x;
        break;
    }
    case PI(DATA_TYPE__Int64): {
        PM(LongArray) *x = NEW(a, long_array);
        if (!x || !(x->data = amalloc(a, n * sizeof *x->data)))
            return false;
        s->data_case = PI(SCALAR_FIELD__DATA_LONG_DATA);
        s->long_data = x;
        break;
    }
    case PI(DATA_TYPE__Float): {
        PM(FloatArray) *x = NEW(a, float_array);
        if (!x || !(x->data = amalloc(a, n * sizeof *x->data)))
            return false;
        s->data_case = PI(SCALAR_FIELD__DATA_FLOAT_DATA);
        s->float_data = x;
        break;
    }
    case PI(DATA_TYPE__Double): {
        PM(DoubleArray) *x = NEW(a, double_array);
        if (!x || !(x->data = amalloc(a, n * sizeof *x->data)))
            return false;
        s->data_case = PI(SCALAR_FIELD__DATA_DOUBLE_DATA);
        s->double_data = x;
        break;
    }
    case PI(DATA_TYPE__JSON): {
        PM(JSONArray) *x = NEW(a, jsonarray);
        if (!x || !(x->data = amalloc(a, n * sizeof *x->data)))
            return false;
        s->data_case = PI(SCALAR_FIELD__DATA_JSON_DATA);
        s->json_data = x;
        break;
    }
    case PI(DATA_TYPE__Array): { /* one ScalarField of the element type per row */
        PM(ArrayArray) *x = NEW(a, array_array);
        if (!x || !(x->data = amalloc(a, n * sizeof *x->data)))
            return false;
        x->element_type = c->elem;
        s->data_case = PI(SCALAR_FIELD__DATA_ARRAY_DATA);
        s->array_data = x;
        break;
    }
    default: { /* VarChar, String */
        PM(StringArray) *x = NEW(a, string_array);
        if (!x || !(x->data = amalloc(a, n * sizeof *x->data)))
            return false;
        s->data_case = PI(SCALAR_FIELD__DATA_STRING_DATA);
        s->string_data = x;
        break;
    }
    }
    return true;
}

static double jnum(const json_t *v)
{
    if (json_is_integer(v))
        return (double)json_integer_value(v);
    if (json_is_real(v))
        return json_real_value(v);
    if (json_is_true(v))
        return 1;
    return 0;
}

static int64_t jint(const json_t *v)
{
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    if (json_is_real(v))
        return (int64_t)json_real_value(v);
    if (json_is_string(v))
        return strtoll(json_string_value(v), NULL, 10);
    return 0;
}

/* JSON text of a value in the arena (compact). */
static ProtobufCBinaryData jtext(arena *a, const json_t *v)
{
    ProtobufCBinaryData b = { 0, NULL };
    if (!v)
        return b;
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!t)
        return b;
    size_t n = strlen(t);
    b.data = amalloc(a, n + 1);
    if (b.data) {
        memcpy(b.data, t, n);
        b.len = n;
    }
    free(t);
    return b;
}

/* The REST object {"index": value} (ascending indexes) of a sparse row -> the wire's pairs. */
static void sparse_put(arena *a, outcol *c, const json_t *v)
{
    PM(SparseFloatArray) *sa = c->fd->vectors->sparse_float_vector;
    size_t n = json_object_size(v), k = 0;
    ProtobufCBinaryData b = { 0, amalloc(a, n * 8 + 1) };
    const char *key;
    json_t *x;
    json_object_foreach((json_t *)v, key, x) {
        if (!b.data)
            break;
        uint32_t idx = (uint32_t)strtoul(key, NULL, 10);
        float f = (float)jnum(x);
        uint8_t *p = b.data + 8 * k++;
        p[0] = (uint8_t)idx;
        p[1] = (uint8_t)(idx >> 8);
        p[2] = (uint8_t)(idx >> 16);
        p[3] = (uint8_t)(idx >> 24);
        memcpy(p + 4, &f, 4);
        if ((int64_t)idx + 1 > c->fd->vectors->dim)
            c->fd->vectors->dim = (int64_t)idx + 1; /* the batch's largest index + 1 */
    }
    b.len = b.data ? 8 * k : 0;
    sa->contents[sa->n_contents++] = b;
}

static void col_put(arena *a, outcol *c, const json_t *v)
{
    if (c->type == PI(DATA_TYPE__SparseFloatVector)) {
        c->n++;
        sparse_put(a, c, v);
        return;
    }
    size_t i = c->n++;
    if (c->type == PI(DATA_TYPE__FloatVector)) {
        PM(FloatArray) *fa = c->fd->vectors->float_vector;
        for (uint32_t k = 0; k < c->dim; k++)
            fa->data[fa->n_data + k] = (float)jnum(json_array_get(v, k));
        fa->n_data += c->dim;
        return;
    }
    size_t vb = bytes_vector_row(c->type, c->dim);
    if (vb) { /* REST answers these as base64 of the row's bytes */
        PM(VectorField) *vf = c->fd->vectors;
        ProtobufCBinaryData *b = c->type == PI(DATA_TYPE__BinaryVector)    ? &vf->binary_vector
                                 : c->type == PI(DATA_TYPE__Float16Vector) ? &vf->float16_vector
                                                                           : &vf->bfloat16_vector;
        char *tmp = amalloc(a, vb + 2);
        long got =
            tmp && json_is_string(v) ? sx__b64_decode(json_string_value(v), tmp, vb + 2) : -1;
        if (got == (long)vb)
            memcpy(b->data + b->len, tmp, vb);
        else
            memset(b->data + b->len, 0, vb);
        b->len += vb;
        return;
    }
    PM(ScalarField) *s = c->fd->scalars;
    switch (s->data_case) {
    case PI(SCALAR_FIELD__DATA_BOOL_DATA):
        s->bool_data->data[i] = json_is_true(v);
        s->bool_data->n_data = i + 1;
        break;
    case PI(SCALAR_FIELD__DATA_INT_DATA):
        s->int_data->data[i] = (int32_t)jint(v);
        s->int_data->n_data = i + 1;
        break;
    case PI(SCALAR_FIELD__DATA_LONG_DATA):
        s->long_data->data[i] = jint(v);
        s->long_data->n_data = i + 1;
        break;
    case PI(SCALAR_FIELD__DATA_FLOAT_DATA):
        s->float_data->data[i] = (float)jnum(v);
        s->float_data->n_data = i + 1;
        break;
    case PI(SCALAR_FIELD__DATA_DOUBLE_DATA):
        s->double_data->data[i] = jnum(v);
        s->double_data->n_data = i + 1;
        break;
    case PI(SCALAR_FIELD__DATA_JSON_DATA):
        if (!c->dynamic && json_is_string(v)) { /* a JSON field: REST answers its stored text */
            size_t len = json_string_length(v);
            ProtobufCBinaryData t = { len, amalloc(a, len + 1) };
            if (t.data)
                memcpy(t.data, json_string_value(v), len + 1);
            else
                t.len = 0;
            s->json_data->data[i] = t;
        } else {
            s->json_data->data[i] = jtext(a, v ? v : json_null());
        }
        s->json_data->n_data = i + 1;
        break;
    case PI(SCALAR_FIELD__DATA_ARRAY_DATA): {
        /* the row's elements as a column of the element type */
        outcol ec = { .name = c->name, .type = s->array_data->element_type };
        size_t ne = json_is_array(v) ? json_array_size(v) : 0;
        PM(ScalarField) *es = NULL;
        if (col_init(a, &ec, ne)) {
            for (size_t k = 0; k < ne; k++)
                col_put(a, &ec, json_array_get(v, k));
            es = ec.fd->scalars;
        }
        s->array_data->data[i] = es ? es : NEW(a, scalar_field);
        s->array_data->n_data = i + 1;
        break;
    }
    default:
        s->string_data->data[i] = json_is_string(v) ? astr(a, json_string_value(v))
                                  : v               ? (char *)jtext(a, v).data
                                                    : astr(a, "");
        if (!s->string_data->data[i])
            s->string_data->data[i] = astr(a, "");
        s->string_data->n_data = i + 1;
        break;
    }
}

/* Columns from the rows of a route's answer (search hits or query rows). `skip` is a key that
 * is not a field (search's "distance"). Keys of the schema become typed columns, "count(*)" an
 * Int64 column, other keys the $meta column (dynamic fields). Fills *fields / *n_fields and the
 * output field names (schema order, then dynamic keys in first-seen order). `want` (optional: the
 * outputFields asked for, "*" = all): with no rows, those fields are still answered as empty
 * columns, as Milvus does (pymilvus's query raises "No fields returned" on none, which ends its
 * query_iterator with an error instead of an empty batch). */
static bool rows_to_columns(rpc *r,
                            const sx__coll_meta *m,
                            const json_t *rows,
                            const json_t *want,
                            const char *skip,
                            PM(FieldData) * **fields,
                            size_t *n_fields,
                            char ***names,
                            size_t *n_names)
{
    arena *a = &r->a;
    size_t nrows = json_array_size(rows);
    size_t cap = (m ? m->n_fields : 0) + 2;
    outcol *cols = amalloc(a, cap * sizeof *cols);
    size_t nc = 0;
    if (!cols)
        return false;
    json_t *dyn_keys = json_array();
    /* the columns: every schema field some row has, in schema order; count(*) */
    for (size_t f = 0; m && f < m->n_fields; f++) {
        bool any = false;
        for (size_t i = 0; i < nrows && !any; i++)
            any = json_object_get(json_array_get(rows, i), m->fields[f].name) != NULL;
        size_t k;
        const json_t *w;
        json_array_foreach(nrows ? NULL : want, k, w) {
            const char *wn = json_string_value(w);
            any |= wn && (strcmp(wn, m->fields[f].name) == 0 || strcmp(wn, "*") == 0);
        }
        if (!any)
            continue;
        outcol *c = &cols[nc++];
        c->name = m->fields[f].name;
        c->type = field_type(&m->fields[f]);
        c->dim = m->fields[f].dim;
        c->elem = m->fields[f].elem_type[0] ? type_of(m->fields[f].elem_type) : PI(DATA_TYPE__None);
        c->nullable = m->fields[f].nullable;
    }
    bool has_dyn = false;
    for (size_t i = 0; i < nrows; i++) {
        const char *k;
        json_t *v;
        json_object_foreach(json_array_get(rows, i), k, v) {
            if ((skip && strcmp(k, skip) == 0) || meta_field(m, k))
                continue;
            if (strcmp(k, "count(*)") == 0) {
                bool seen = false;
                for (size_t c = 0; c < nc; c++)
                    seen |= strcmp(cols[c].name, k) == 0;
                if (!seen && nc < cap) {
                    cols[nc].name = "count(*)";
                    cols[nc].type = PI(DATA_TYPE__Int64);
                    nc++;
                }
                continue;
            }
            has_dyn = true;
            bool seen = false;
            size_t j;
            json_t *dk;
            json_array_foreach(dyn_keys, j, dk)
                seen |= strcmp(json_string_value(dk), k) == 0;
            if (!seen)
                json_array_append_new(dyn_keys, json_string(k));
        }
    }
    if (has_dyn && nc < cap) {
        cols[nc].name = "$meta";
        cols[nc].type = PI(DATA_TYPE__JSON);
        cols[nc].dynamic = true;
        nc++;
    }
    bool ok = true;
    for (size_t c = 0; c < nc && ok; c++) {
        ok = col_init(a, &cols[c], nrows);
        if (ok && cols[c].nullable) { /* as Milvus answers: every row's value, and the mask */
            cols[c].fd->valid_data = amalloc(a, (nrows ? nrows : 1) * sizeof(protobuf_c_boolean));
            cols[c].fd->n_valid_data = nrows;
            ok = cols[c].fd->valid_data != NULL;
        }
    }
    for (size_t i = 0; i < nrows && ok; i++) {
        json_t *row = json_array_get(rows, i);
        for (size_t c = 0; c < nc; c++) {
            if (!cols[c].dynamic) {
                json_t *v = json_object_get(row, cols[c].name);
                if (cols[c].nullable) {
                    cols[c].fd->valid_data[i] = v && !json_is_null(v);
                    if (!cols[c].fd->valid_data[i])
                        v = NULL; /* a zero value / "" in the data */
                }
                col_put(a, &cols[c], v);
                continue;
            }
            json_t *obj = json_object();
            const char *k;
            json_t *v;
            json_object_foreach(row, k, v) {
                if ((skip && strcmp(k, skip) == 0) || meta_field(m, k) ||
                    strcmp(k, "count(*)") == 0)
                    continue;
                json_object_set(obj, k, v);
            }
            col_put(a, &cols[c], obj);
            json_decref(obj);
        }
    }
    if (ok) {
        *fields = amalloc(a, (nc ? nc : 1) * sizeof **fields);
        *names = amalloc(a, (nc + json_array_size(dyn_keys) + 1) * sizeof **names);
        ok = *fields && *names;
    }
    if (ok) {
        size_t nn = 0;
        for (size_t c = 0; c < nc; c++) {
            (*fields)[c] = cols[c].fd;
            if (!cols[c].dynamic)
                (*names)[nn++] = astr(a, cols[c].name);
        }
        size_t j;
        json_t *dk;
        json_array_foreach(dyn_keys, j, dk)
            (*names)[nn++] = astr(a, json_string_value(dk));
        *n_fields = nc;
        *n_names = nn;
    }
    json_decref(dyn_keys);
    return ok && !a->oom;
}

static json_t *cell(const PM(FieldData) * fd, size_t i, size_t di, char *why, size_t cap);
static size_t column_rows(const PM(FieldData) * fd);

/* One row of an Array column: its ScalarField of elements as a JSON array (new reference), or
 * NULL with *why set. The elements are read as a column of their own (a null element is JSON
 * null, which the Array check refuses). */
static json_t *
array_cell(const PM(FieldData) * fd, const PM(ScalarField) * es, char *why, size_t cap)
{
    if (!es)
        return json_array();
    PM(FieldData) tmp = *fd;
    tmp.field_case = PI(FIELD_DATA__FIELD_SCALARS);
    tmp.scalars = (PM(ScalarField) *)es;
    tmp.n_valid_data = 0;
    tmp.valid_data = NULL;
    size_t n = column_rows(&tmp);
    json_t *arr = json_array();
    for (size_t k = 0; k < n && arr; k++) {
        json_t *v = cell(&tmp, k, k, why, cap);
        if (!v) {
            json_decref(arr);
            return NULL;
        }
        json_array_append_new(arr, v);
    }
    return arr;
}

/* A sparse row as the SDKs send it (Milvus's wire form: pairs of a little-endian uint32 index and
 * float32 value) -> the REST object {"index": value} the shared handlers take, which check the
 * rules (order is theirs to fix, values >= 0, ...). NULL with why set on a bad length or a
 * non-finite value. */
static json_t *
sparse_row_json(const uint8_t *p, size_t len, const char *what, char *why, size_t cap)
{
    if (len % 8) {
        snprintf(why, cap, "%s: %zu bytes are not pairs of a uint32 index and a float32 value",
                 what, len);
        return NULL;
    }
    json_t *o = json_object();
    for (size_t k = 0; o && k < len / 8; k++) {
        uint32_t idx = (uint32_t)p[8 * k] | (uint32_t)p[8 * k + 1] << 8 |
                       (uint32_t)p[8 * k + 2] << 16 | (uint32_t)p[8 * k + 3] << 24;
        float x;
        memcpy(&x, p + 8 * k + 4, 4);
        if (!isfinite(x)) {
            snprintf(why, cap, "%s: the value of index %u is NaN or infinite", what, idx);
            json_decref(o);
            return NULL;
        }
        char key[16];
        snprintf(key, sizeof key, "%u", idx);
        if (json_object_get(o, key)) {
            snprintf(why, cap, "%s: index %u is given twice", what, idx);
            json_decref(o);
            return NULL;
        }
        json_object_set_new(o, key, json_real((double)x));
    }
    return o;
}

/* A column of an insert's fields_data: the value of row i as JSON (new reference), or NULL
 * with *why set. With a null mask (valid_data), row i is null where the mask says so, and its
 * value is at data index di: the SDKs send only the valid rows' values (compact; di counts the
 * valid rows before i), older writers every row's (di = i); columns_to_rows tells which. */
static json_t *cell(const PM(FieldData) * fd, size_t i, size_t di, char *why, size_t cap)
{
    if (fd->field_case == PI(FIELD_DATA__FIELD_VECTORS)) {
        const PM(VectorField) *v = fd->vectors;
        if (v->data_case == PI(VECTOR_FIELD__DATA_SPARSE_FLOAT_VECTOR) && v->sparse_float_vector) {
            const PM(SparseFloatArray) *sa = v->sparse_float_vector;
            if (i >= sa->n_contents) {
                snprintf(why, cap, "field %s: %zu sparse rows do not cover row %zu", fd->field_name,
                         sa->n_contents, i);
                return NULL;
            }
            char what[300];
            snprintf(what, sizeof what, "field %s row %zu", fd->field_name, i);
            return sparse_row_json(sa->contents[i].data, sa->contents[i].len, what, why, cap);
        }
        const ProtobufCBinaryData *bytes =
            v->data_case == PI(VECTOR_FIELD__DATA_BINARY_VECTOR)     ? &v->binary_vector
            : v->data_case == PI(VECTOR_FIELD__DATA_FLOAT16_VECTOR)  ? &v->float16_vector
            : v->data_case == PI(VECTOR_FIELD__DATA_BFLOAT16_VECTOR) ? &v->bfloat16_vector
                                                                     : NULL;
        if (bytes) { /* the row's bytes, as REST takes them: base64 */
            size_t dim = v->dim > 0 ? (size_t)v->dim : 0;
            size_t rb = v->data_case == PI(VECTOR_FIELD__DATA_BINARY_VECTOR) ? dim / 8 : dim * 2;
            if (rb == 0 || (i + 1) * rb > bytes->len) {
                snprintf(why, cap, "field %s: %zu bytes for dim %zu do not cover row %zu",
                         fd->field_name, bytes->len, dim, i);
                return NULL;
            }
            return b64_json(bytes->data + i * rb, rb);
        }
        if (v->data_case != PI(VECTOR_FIELD__DATA_FLOAT_VECTOR) || !v->float_vector) {
            snprintf(why, cap,
                     "field %s: the vector data does not match a supported vector type "
                     "(FloatVector, Float16Vector, BFloat16Vector, BinaryVector, "
                     "SparseFloatVector)",
                     fd->field_name);
            return NULL;
        }
        size_t dim = v->dim > 0 ? (size_t)v->dim : 0;
        if (dim == 0 || (i + 1) * dim > v->float_vector->n_data) {
            snprintf(why, cap, "field %s: %zu floats for dim %zu do not cover row %zu",
                     fd->field_name, v->float_vector->n_data, dim, i);
            return NULL;
        }
        json_t *arr = json_array();
        for (size_t k = 0; k < dim; k++) {
            float x = v->float_vector->data[i * dim + k];
            if (!isfinite(x)) {
                json_decref(arr);
                snprintf(why, cap, "field %s: row %zu has a NaN or infinite value", fd->field_name,
                         i);
                return NULL;
            }
            json_array_append_new(arr, json_real((double)x));
        }
        return arr;
    }
    const PM(ScalarField) *s = fd->field_case == PI(FIELD_DATA__FIELD_SCALARS) ? fd->scalars : NULL;
    if (!s) {
        snprintf(why, cap, "field %s has no data", fd->field_name);
        return NULL;
    }
    /* a null mask (legacy or per scalar): invalid rows are JSON null */
    const protobuf_c_boolean *valid = fd->n_valid_data ? fd->valid_data : s->valid_data;
    size_t n_valid = fd->n_valid_data ? fd->n_valid_data : s->n_valid_data;
    if (n_valid && i < n_valid && !valid[i])
        return json_null();
    i = di;
#define GET(member, make)                   \
 do {                                       \
  if (!s->member || i >= s->member->n_data) \
   break;                                   \
  return make;                              \
 } while (0)
    switch (s->data_case) {
    case PI(SCALAR_FIELD__DATA_BOOL_DATA):
        GET(bool_data, json_boolean(s->bool_data->data[i]));
        break;
    case PI(SCALAR_FIELD__DATA_INT_DATA):
        GET(int_data, json_integer(s->int_data->data[i]));
        break;
    case PI(SCALAR_FIELD__DATA_LONG_DATA):
        GET(long_data, json_integer((json_int_t)s->long_data->data[i]));
        break;
    case PI(SCALAR_FIELD__DATA_FLOAT_DATA):
        if (s->float_data && i < s->float_data->n_data && !isfinite(s->float_data->data[i])) {
            snprintf(why, cap, "field %s: row %zu is NaN or infinite", fd->field_name, i);
            return NULL;
        }
        GET(float_data, json_real((double)s->float_data->data[i]));
        break;
    case PI(SCALAR_FIELD__DATA_DOUBLE_DATA):
        if (s->double_data && i < s->double_data->n_data && !isfinite(s->double_data->data[i])) {
            snprintf(why, cap, "field %s: row %zu is NaN or infinite", fd->field_name, i);
            return NULL;
        }
        GET(double_data, json_real(s->double_data->data[i]));
        break;
    case PI(SCALAR_FIELD__DATA_STRING_DATA):
        if (s->string_data && i < s->string_data->n_data) {
            json_t *j = json_string(s->string_data->data[i]);
            if (!j)
                snprintf(why, cap, "field %s: row %zu is not valid UTF-8", fd->field_name, i);
            return j;
        }
        break;
    case PI(SCALAR_FIELD__DATA_JSON_DATA):
        if (s->json_data && i < s->json_data->n_data) {
            json_error_t e;
            const ProtobufCBinaryData *b = &s->json_data->data[i];
            if (b->len == 0)
                return json_null();
            json_t *j = json_loadb((const char *)b->data, b->len, JSON_DECODE_ANY, &e);
            if (!j)
                snprintf(why, cap, "field %s: row %zu is not valid JSON: %s", fd->field_name, i,
                         e.text);
            return j;
        }
        break;
    case PI(SCALAR_FIELD__DATA_ARRAY_DATA):
        GET(array_data, array_cell(fd, s->array_data->data[i], why, cap));
        break;
    default:
        snprintf(why, cap, "field %s: this data type is not supported", fd->field_name);
        return NULL;
    }
#undef GET
    snprintf(why, cap, "field %s has fewer values than rows (row %zu missing)", fd->field_name, i);
    return NULL;
}

static size_t scalar_count(const PM(ScalarField) * s);

/* Whether row i of a scalar column with a null mask is valid. */
static bool row_valid(const PM(FieldData) * fd, size_t i)
{
    const PM(ScalarField) *s = fd->scalars;
    const protobuf_c_boolean *valid = fd->n_valid_data ? fd->valid_data : s->valid_data;
    size_t n_valid = fd->n_valid_data ? fd->n_valid_data : s->n_valid_data;
    return i >= n_valid || valid[i];
}

/* Whether fd has a null mask and holds only the valid rows' values (see cell). */
static bool compact_column(const PM(FieldData) * fd)
{
    if (fd->field_case != PI(FIELD_DATA__FIELD_SCALARS) || !fd->scalars)
        return false;
    const PM(ScalarField) *s = fd->scalars;
    const protobuf_c_boolean *valid = fd->n_valid_data ? fd->valid_data : s->valid_data;
    size_t n_valid = fd->n_valid_data ? fd->n_valid_data : s->n_valid_data;
    if (!n_valid)
        return false;
    size_t n_true = 0;
    for (size_t k = 0; k < n_valid; k++)
        n_true += valid[k] != 0;
    return scalar_count(s) == n_true && n_true < n_valid;
}

static size_t column_rows(const PM(FieldData) * fd)
{
    if (fd->field_case == PI(FIELD_DATA__FIELD_VECTORS)) {
        const PM(VectorField) *v = fd->vectors;
        if (v->data_case == PI(VECTOR_FIELD__DATA_FLOAT_VECTOR) && v->float_vector && v->dim > 0)
            return v->float_vector->n_data / (size_t)v->dim;
        if (v->data_case == PI(VECTOR_FIELD__DATA_SPARSE_FLOAT_VECTOR) && v->sparse_float_vector)
            return v->sparse_float_vector->n_contents;
        /* bytes per row: binary dim / 8, float16 / bfloat16 dim * 2 (a short tail is no row) */
        size_t dim = v->dim > 0 ? (size_t)v->dim : 0;
        if (v->data_case == PI(VECTOR_FIELD__DATA_BINARY_VECTOR) && dim >= 8)
            return v->binary_vector.len / (dim / 8);
        if (v->data_case == PI(VECTOR_FIELD__DATA_FLOAT16_VECTOR) && dim)
            return v->float16_vector.len / (dim * 2);
        if (v->data_case == PI(VECTOR_FIELD__DATA_BFLOAT16_VECTOR) && dim)
            return v->bfloat16_vector.len / (dim * 2);
        return 0;
    }
    const PM(ScalarField) *s = fd->field_case == PI(FIELD_DATA__FIELD_SCALARS) ? fd->scalars : NULL;
    if (!s)
        return 0;
    if (fd->n_valid_data)
        return fd->n_valid_data;
    if (s->n_valid_data)
        return s->n_valid_data;
    return scalar_count(s);
}

/* The number of values a ScalarField holds. */
static size_t scalar_count(const PM(ScalarField) * s)
{
    switch (s->data_case) {
    case PI(SCALAR_FIELD__DATA_BOOL_DATA):
        return s->bool_data ? s->bool_data->n_data : 0;
    case PI(SCALAR_FIELD__DATA_INT_DATA):
        return s->int_data ? s->int_data->n_data : 0;
    case PI(SCALAR_FIELD__DATA_LONG_DATA):
        return s->long_data ? s->long_data->n_data : 0;
    case PI(SCALAR_FIELD__DATA_FLOAT_DATA):
        return s->float_data ? s->float_data->n_data : 0;
    case PI(SCALAR_FIELD__DATA_DOUBLE_DATA):
        return s->double_data ? s->double_data->n_data : 0;
    case PI(SCALAR_FIELD__DATA_STRING_DATA):
        return s->string_data ? s->string_data->n_data : 0;
    case PI(SCALAR_FIELD__DATA_JSON_DATA):
        return s->json_data ? s->json_data->n_data : 0;
    case PI(SCALAR_FIELD__DATA_ARRAY_DATA):
        return s->array_data ? s->array_data->n_data : 0;
    default:
        return 0;
    }
}

/* Row objects from column-wise fields_data (the $meta column's keys spread into the row, as
 * REST clients send dynamic fields). NULL with why on a malformed column. */
static json_t *
columns_to_rows(PM(FieldData) *const *fds, size_t n_fds, uint32_t num_rows, char *why, size_t cap)
{
    if (n_fds == 0) {
        (void)snprintf(why, cap, "no fields_data: an insert gives every field as a column");
        return NULL;
    }
    size_t rows = num_rows;
    if (rows == 0)
        rows = column_rows(fds[0]);
    /* every column must hold the rows num_rows claims, before anything is built from it: a
     * message of a few bytes must not make the server build millions of rows (found by
     * fuzz_grpc: num_rows 73,000,000 and one $meta value) */
    for (size_t f = 0; f < n_fds; f++) {
        size_t got = column_rows(fds[f]);
        if (got != rows) {
            (void)snprintf(why, cap,
                           "the num_rows (%zu) of field (%s) is not equal to passed num_rows (%zu)",
                           got, fds[f]->field_name ? fds[f]->field_name : "", rows);
            return NULL;
        }
    }
    /* per column: compact (1) or not, and the valid rows seen so far */
    size_t *seen = sx__calloc(n_fds ? 2 * n_fds : 1, sizeof *seen);
    if (!seen)
        return NULL;
    for (size_t f = 0; f < n_fds; f++)
        seen[2 * f] = compact_column(fds[f]);
    json_t *out = json_array();
    for (size_t i = 0; i < rows && out; i++) {
        json_t *row = json_object();
        for (size_t f = 0; f < n_fds; f++) {
            const PM(FieldData) *fd = fds[f];
            size_t di = seen[2 * f] ? seen[2 * f + 1] : i;
            json_t *v = cell(fd, i, di, why, cap);
            if (!v) {
                json_decref(row);
                json_decref(out);
                sx__free(seen);
                return NULL;
            }
            if (seen[2 * f] && row_valid(fd, i))
                seen[2 * f + 1]++;
            bool dyn = fd->is_dynamic || strcmp(fd->field_name, "$meta") == 0;
            if (dyn && json_is_object(v)) {
                const char *k;
                json_t *x;
                json_object_foreach(v, k, x)
                    json_object_set(row, k, x);
                json_decref(v);
            } else if (dyn && json_is_null(v)) {
                json_decref(v);
            } else {
                json_object_set_new(row, fd->field_name, v);
            }
        }
        json_array_append_new(out, row);
    }
    sx__free(seen);
    return out;
}

/* ------------------------------------------------------------------ RPCs: server */

static void *rpc_connect(rpc *r)
{
    PM(ConnectResponse) *o = NEW(&r->a, connect_response);
    PM(ServerInfo) *si = NEW(&r->a, server_info);
    if (!o || !si)
        return NULL;
    o->status = status_new(&r->a, 0, "");
    si->build_tags = astrf(&r->a, "sextant-%s", sx_version());
    si->deploy_mode = astr(&r->a, "STANDALONE");
    o->server_info = si;
    o->identifier = now_ms();
    return o;
}

static void *rpc_get_version(rpc *r)
{
    PM(GetVersionResponse) *o = NEW(&r->a, get_version_response);
    if (!o)
        return NULL;
    o->status = status_new(&r->a, 0, "");
    o->version = astr(&r->a, SERVER_VERSION);
    return o;
}

static void *rpc_check_health(rpc *r)
{
    PM(CheckHealthResponse) *o = NEW(&r->a, check_health_response);
    if (!o)
        return NULL;
    o->status = status_new(&r->a, 0, "");
    o->ishealthy = !r->svc->ops->stopping(r->svc->ctx);
    if (!o->ishealthy) {
        o->reasons = amalloc(&r->a, sizeof *o->reasons);
        if (o->reasons) {
            o->reasons[0] = astr(&r->a, "server is shutting down");
            o->n_reasons = 1;
        }
    }
    return o;
}

static void *rpc_alloc_timestamp(rpc *r)
{
    PM(AllocTimestampResponse) *o = NEW(&r->a, alloc_timestamp_response);
    if (!o)
        return NULL;
    o->status = status_new(&r->a, 0, "");
    o->timestamp = hybrid_ts(now_ms());
    return o;
}

/* ------------------------------------------------------------------ RPCs: databases */

static void *rpc_list_databases(rpc *r)
{
    PM(ListDatabasesResponse) *o = NEW(&r->a, list_databases_response);
    if (!o)
        return NULL;
    char **names = NULL;
    size_t n = 0;
    sx_status st = r->svc->ops->db_list(r->svc->ctx, AUTHZ(r), &names, &n);
    if (st != SX_OK) {
        o->status = status_new(&r->a, SX__MC_UNEXPECTED, sx_errmsg());
        return o;
    }
    o->status = status_new(&r->a, 0, "");
    o->db_names = amalloc(&r->a, (n ? n : 1) * sizeof *o->db_names);
    o->db_ids = amalloc(&r->a, (n ? n : 1) * sizeof *o->db_ids);
    o->created_timestamp = amalloc(&r->a, (n ? n : 1) * sizeof *o->created_timestamp);
    for (size_t i = 0; o->db_names && o->db_ids && o->created_timestamp && i < n; i++) {
        o->db_names[i] = astr(&r->a, names[i]);
        json_t *props = NULL;
        int64_t id = 0;
        if (r->svc->ops->db_describe(r->svc->ctx, AUTHZ(r), names[i], &props, &id) == SX_OK)
            json_decref(props);
        o->db_ids[i] = id;
    }
    o->n_db_names = o->n_db_ids = o->n_created_timestamp = n;
    sx_strings_free(names, n);
    return o;
}

static void *rpc_status_route(rpc *r, const char *route, json_t *body)
{
    json_t *ans = body ? call_route(r, route, body) : NULL;
    json_decref(body);
    PM(Status) *s = status_of(&r->a, ans);
    json_decref(ans);
    return s;
}

static json_t *props_object(PM(KeyValuePair) *const *kv, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; i < n; i++)
        if (kv[i] && kv[i]->key && *kv[i]->key)
            json_object_set_new(o, kv[i]->key, json_string(kv[i]->value ? kv[i]->value : ""));
    return o;
}

static void *rpc_create_database(rpc *r)
{
    const PM(CreateDatabaseRequest) *q = (const void *)r->req;
    json_t *b = json_pack("{s:s,s:o}", "dbName", q->db_name, "properties",
                          props_object(q->properties, q->n_properties));
    return rpc_status_route(r, "/v2/vectordb/databases/create", b);
}

static void *rpc_drop_database(rpc *r)
{
    const PM(DropDatabaseRequest) *q = (const void *)r->req;
    return rpc_status_route(r, "/v2/vectordb/databases/drop",
                            json_pack("{s:s}", "dbName", q->db_name));
}

static void *rpc_alter_database(rpc *r)
{
    const PM(AlterDatabaseRequest) *q = (const void *)r->req;
    if (q->n_delete_keys) {
        json_t *keys = json_array();
        for (size_t i = 0; i < q->n_delete_keys; i++)
            json_array_append_new(keys, json_string(q->delete_keys[i]));
        json_t *b = json_pack("{s:s,s:o}", "dbName", q->db_name, "propertyKeys", keys);
        json_t *ans = call_route(r, "/v2/vectordb/databases/drop_properties", b);
        json_decref(b);
        if (!ans_ok(ans)) {
            PM(Status) *s = status_of(&r->a, ans);
            json_decref(ans);
            return s;
        }
        json_decref(ans);
        if (!q->n_properties)
            return status_new(&r->a, 0, "");
    }
    json_t *b = json_pack("{s:s,s:o}", "dbName", q->db_name, "properties",
                          props_object(q->properties, q->n_properties));
    return rpc_status_route(r, "/v2/vectordb/databases/alter", b);
}

static void *rpc_describe_database(rpc *r)
{
    const PM(DescribeDatabaseRequest) *q = (const void *)r->req;
    PM(DescribeDatabaseResponse) *o = NEW(&r->a, describe_database_response);
    if (!o)
        return NULL;
    const char *db = q->db_name && *q->db_name ? q->db_name : r->db;
    json_t *props = NULL;
    int64_t id = 0;
    if (r->svc->ops->db_describe(r->svc->ctx, AUTHZ(r), db, &props, &id) != SX_OK) {
        o->status = status_new(&r->a, SX__MC_DB_NOT_FOUND,
                               astrf(&r->a, "database not found[database=%s]", db));
        return o;
    }
    o->status = status_new(&r->a, 0, "");
    o->db_name = astr(&r->a, db);
    o->dbid = id;
    size_t n = json_object_size(props), i = 0;
    o->properties = amalloc(&r->a, (n ? n : 1) * sizeof *o->properties);
    const char *k;
    json_t *v;
    json_object_foreach(props, k, v) {
        if (!o->properties)
            break;
        o->properties[i++] = kv_new(&r->a, k, json_is_string(v) ? json_string_value(v) : "");
    }
    o->n_properties = i;
    json_decref(props);
    return o;
}

/* ------------------------------------------------------------------ RPCs: collections */

/* A FieldSchema.default_value as the JSON value REST's defaultValue holds (new reference), NULL
 * when none is set. */
static json_t *default_json(const PM(ValueField) * v)
{
    if (!v)
        return NULL;
    switch (v->data_case) {
    case PI(VALUE_FIELD__DATA_BOOL_DATA):
        return json_boolean(v->bool_data);
    case PI(VALUE_FIELD__DATA_INT_DATA):
        return json_integer(v->int_data);
    case PI(VALUE_FIELD__DATA_LONG_DATA):
        return json_integer((json_int_t)v->long_data);
    case PI(VALUE_FIELD__DATA_FLOAT_DATA):
        return json_real((double)v->float_data);
    case PI(VALUE_FIELD__DATA_DOUBLE_DATA):
        return json_real(v->double_data);
    case PI(VALUE_FIELD__DATA_STRING_DATA):
        return json_string(v->string_data ? v->string_data : "");
    default:
        return NULL;
    }
}

/* The REST schema of a gRPC CollectionSchema (serialized in CreateCollectionRequest.schema). */
static json_t *schema_json(const PM(CollectionSchema) * sc, char *why, size_t cap)
{
    json_t *fields = json_array();
    bool auto_id = sc->autoid;
    for (size_t i = 0; i < sc->n_fields; i++) {
        const PM(FieldSchema) *f = sc->fields[i];
        if (f->is_dynamic || strcmp(f->name, "$meta") == 0)
            continue; /* the dynamic field is enable_dynamic_field's */
        const char *tn = type_name(f->data_type);
        if (!tn) {
            snprintf(why, cap, "field %s: unknown data type %d", f->name, (int)f->data_type);
            json_decref(fields);
            return NULL;
        }
        json_t *fo = json_pack("{s:s,s:s}", "fieldName", f->name, "dataType", tn);
        if (f->is_primary_key) {
            json_object_set_new(fo, "isPrimary", json_true());
            if (f->autoid)
                auto_id = true;
        }
        if (f->autoid)
            json_object_set_new(fo, "autoID", json_true());
        if (f->is_partition_key)
            json_object_set_new(fo, "isPartitionKey", json_true());
        if (f->nullable)
            json_object_set_new(fo, "nullable", json_true());
        if (f->description && *f->description)
            json_object_set_new(fo, "description", json_string(f->description));
        json_t *dv = default_json(f->default_value);
        if (dv)
            json_object_set_new(fo, "defaultValue", dv);
        if (f->element_type != PI(DATA_TYPE__None) && type_name(f->element_type))
            json_object_set_new(fo, "elementDataType", json_string(type_name(f->element_type)));
        json_t *tp = json_object();
        for (size_t k = 0; k < f->n_type_params; k++)
            if (f->type_params[k]->key && *f->type_params[k]->key)
                json_object_set_new(tp, f->type_params[k]->key,
                                    param_value(f->type_params[k]->value));
        if (json_object_size(tp))
            json_object_set_new(fo, "elementTypeParams", tp);
        else
            json_decref(tp);
        json_array_append_new(fields, fo);
    }
    json_t *fns = json_array();
    for (size_t i = 0; i < sc->n_functions; i++) {
        const PM(FunctionSchema) *fs = sc->functions[i];
        json_t *in = json_array(), *out = json_array(), *ps = json_object();
        for (size_t k = 0; k < fs->n_input_field_names; k++)
            json_array_append_new(in, json_string(fs->input_field_names[k]));
        for (size_t k = 0; k < fs->n_output_field_names; k++)
            json_array_append_new(out, json_string(fs->output_field_names[k]));
        for (size_t k = 0; k < fs->n_params; k++)
            if (fs->params[k]->key)
                json_object_set_new(ps, fs->params[k]->key, param_value(fs->params[k]->value));
        json_array_append_new(
            fns, json_pack("{s:s,s:s,s:o,s:o,s:o}", "name", fs->name ? fs->name : "", "type",
                           fs->type == PI(FUNCTION_TYPE__BM25) ? "BM25" : "Unsupported",
                           "inputFieldNames", in, "outputFieldNames", out, "params", ps));
    }
    return json_pack("{s:b,s:b,s:o,s:o}", "autoID", auto_id, "enableDynamicField",
                     sc->enable_dynamic_field, "fields", fields, "functions", fns);
}

static const char *consistency_name(PM(ConsistencyLevel) c)
{
    switch (c) {
    case PI(CONSISTENCY_LEVEL__Strong):
        return "Strong";
    case PI(CONSISTENCY_LEVEL__Session):
        return "Session";
    case PI(CONSISTENCY_LEVEL__Eventually):
        return "Eventually";
    case PI(CONSISTENCY_LEVEL__Customized):
        return "Customized";
    default:
        return "Bounded";
    }
}

static PM(ConsistencyLevel) consistency_of(const char *s)
{
    if (!strcmp(s, "Strong"))
        return PI(CONSISTENCY_LEVEL__Strong);
    if (!strcmp(s, "Session"))
        return PI(CONSISTENCY_LEVEL__Session);
    if (!strcmp(s, "Eventually"))
        return PI(CONSISTENCY_LEVEL__Eventually);
    if (!strcmp(s, "Customized"))
        return PI(CONSISTENCY_LEVEL__Customized);
    return PI(CONSISTENCY_LEVEL__Bounded);
}

static void *rpc_create_collection(rpc *r)
{
    const PM(CreateCollectionRequest) *q = (const void *)r->req;
    if (!wire_depth(DESC(collection_schema), q->schema.data, q->schema.len, MAX_DEPTH))
        return status_new(&r->a, SX__MC_ILLEGAL_SCHEMA, "schema is not a valid CollectionSchema");
    PM(CollectionSchema) *sc = (PM(CollectionSchema) *)protobuf_c_message_unpack(
        DESC(collection_schema), NULL, q->schema.len, q->schema.data);
    if (!sc)
        return status_new(&r->a, SX__MC_ILLEGAL_SCHEMA, "schema is not a valid CollectionSchema");
    char why[256] = "";
    json_t *schema = schema_json(sc, why, sizeof why);
    json_t *b = NULL;
    if (schema) {
        json_t *params =
            json_pack("{s:s}", "consistencyLevel", consistency_name(q->consistency_level));
        for (size_t i = 0; i < q->n_properties; i++)
            if (q->properties[i]->key && !strcmp(q->properties[i]->key, "collection.ttl.seconds"))
                json_object_set_new(params, "ttlSeconds", param_value(q->properties[i]->value));
        if (q->num_partitions) /* 0: not given */
            json_object_set_new(params, "partitionsNum", json_integer(q->num_partitions));
        if (q->shards_num) /* 0: not given */
            json_object_set_new(params, "shardsNum", json_integer(q->shards_num));
        b = json_pack("{s:s,s:o,s:o}", "collectionName", q->collection_name, "schema", schema,
                      "params", params);
        if (sc->description && *sc->description)
            json_object_set_new(b, "description", json_string(sc->description));
    }
    protobuf_c_message_free_unpacked(&sc->base, NULL);
    if (!b)
        return status_new(&r->a, SX__MC_ILLEGAL_SCHEMA, why[0] ? why : "bad schema");
    return rpc_status_route(r, "/v2/vectordb/collections/create", b);
}

static void *rpc_drop_collection(rpc *r)
{
    return rpc_status_route(r, "/v2/vectordb/collections/drop", coll_body(r));
}

static void *rpc_load_collection(rpc *r)
{
    const PM(LoadCollectionRequest) *q = (const void *)r->req;
    json_t *b = coll_body(r);
    /* in-memory replicas (a cluster's query nodes; a single server has one copy) */
    if (b && q->replica_number > 0)
        json_object_set_new(b, "replicaNumber", json_integer(q->replica_number));
    return rpc_status_route(r, "/v2/vectordb/collections/load", b);
}

static void *rpc_release_collection(rpc *r)
{
    return rpc_status_route(r, "/v2/vectordb/collections/release", coll_body(r));
}

static void *rpc_rename_collection(rpc *r)
{
    const PM(RenameCollectionRequest) *q = (const void *)r->req;
    json_t *b =
        json_pack("{s:s,s:s}", "collectionName", q->oldname, "newCollectionName", q->newname);
    if (q->newdbname && *q->newdbname)
        json_object_set_new(b, "newDbName", json_string(q->newdbname));
    return rpc_status_route(r, "/v2/vectordb/collections/rename", b);
}

static void *rpc_alter_collection(rpc *r)
{
    const PM(AlterCollectionRequest) *q = (const void *)r->req;
    if (q->n_delete_keys) {
        json_t *keys = json_array();
        for (size_t i = 0; i < q->n_delete_keys; i++)
            json_array_append_new(keys, json_string(q->delete_keys[i]));
        json_t *b = coll_body(r);
        json_object_set_new(b, "propertyKeys", keys);
        json_t *ans = call_route(r, "/v2/vectordb/collections/drop_properties", b);
        json_decref(b);
        if (!ans_ok(ans) || !q->n_properties) {
            PM(Status) *s = status_of(&r->a, ans);
            json_decref(ans);
            return s;
        }
        json_decref(ans);
    }
    json_t *b = coll_body(r);
    json_object_set_new(b, "properties", props_object(q->properties, q->n_properties));
    return rpc_status_route(r, "/v2/vectordb/collections/alter_properties", b);
}

/* A Status for a collection the catalog does not have (database or collection). */
static PM(Status) * not_found(rpc *r, const char *name)
{
    if (!r->svc->ops->db_exists(r->svc->ctx, AUTHZ(r), r->db))
        return status_new(&r->a, SX__MC_DB_NOT_FOUND,
                          astrf(&r->a, "database not found[database=%s]", r->db));
    return status_new(&r->a, SX__MC_COLL_NOT_FOUND, astrf(&r->a, SX__COLL_NOT_FOUND, r->db, name));
}

static PM(FieldSchema) * field_schema(arena *a, const sx__field_meta *f)
{
    PM(FieldSchema) *o = NEW(a, field_schema);
    if (!o)
        return NULL;
    o->fieldid = f->field_id;
    o->name = astr(a, f->name);
    o->is_primary_key = f->is_primary;
    o->description = astr(a, f->description);
    o->data_type = field_type(f);
    o->autoid = f->auto_id;
    o->is_partition_key = f->is_partition_key;
    o->nullable = f->nullable;
    o->type_params = amalloc(a, 5 * sizeof *o->type_params);
    if (o->type_params && f->dim) {
        char v[16];
        snprintf(v, sizeof v, "%u", f->dim);
        o->type_params[o->n_type_params++] = kv_new(a, "dim", v);
    }
    json_t *dv = f->default_json[0] ? json_loads(f->default_json, JSON_DECODE_ANY, NULL) : NULL;
    PM(ValueField) *vf = dv ? NEW(a, value_field) : NULL;
    if (vf) { /* by the field's type, as Milvus fills default_value */
        if (json_is_boolean(dv)) {
            vf->data_case = PI(VALUE_FIELD__DATA_BOOL_DATA);
            vf->bool_data = json_is_true(dv);
        } else if (json_is_string(dv)) {
            vf->data_case = PI(VALUE_FIELD__DATA_STRING_DATA);
            vf->string_data = astr(a, json_string_value(dv));
        } else if (f->engine_type == SX_FIELD_DOUBLE) {
            bool fl = strcmp(f->type, "Float") == 0;
            vf->data_case =
                fl ? PI(VALUE_FIELD__DATA_FLOAT_DATA) : PI(VALUE_FIELD__DATA_DOUBLE_DATA);
            if (fl) /* float_data and double_data share the oneof's union */
                vf->float_data = (float)json_number_value(dv);
            else
                vf->double_data = json_number_value(dv);
        } else if (!strcmp(f->type, "Int64")) {
            vf->data_case = PI(VALUE_FIELD__DATA_LONG_DATA);
            vf->long_data = (int64_t)json_integer_value(dv);
        } else {
            vf->data_case = PI(VALUE_FIELD__DATA_INT_DATA);
            vf->int_data = (int32_t)json_integer_value(dv);
        }
        o->default_value = vf;
    }
    json_decref(dv);
    if (o->type_params && f->elem_type[0]) { /* Array: its elements' type and limits */
        char v[16];
        o->element_type = type_of(f->elem_type);
        snprintf(v, sizeof v, "%u", f->max_capacity);
        o->type_params[o->n_type_params++] = kv_new(a, "max_capacity", v);
        if (f->elem_max_length) {
            snprintf(v, sizeof v, "%u", f->elem_max_length);
            o->type_params[o->n_type_params++] = kv_new(a, "max_length", v);
        }
    } else if (o->type_params && f->max_length && strcmp(f->type, "JSON") != 0 &&
               !sx__field_is_sparse(f)) {
        char v[16];
        snprintf(v, sizeof v, "%u", f->max_length);
        o->type_params[o->n_type_params++] = kv_new(a, "max_length", v);
    }
    if (o->type_params && f->enable_analyzer) {
        o->type_params[o->n_type_params++] = kv_new(a, "enable_analyzer", "true");
        if (f->analyzer[0])
            o->type_params[o->n_type_params++] = kv_new(a, "analyzer_params", f->analyzer);
    }
    return o;
}

static void *rpc_describe_collection(rpc *r)
{
    PM(DescribeCollectionResponse) *o = NEW(&r->a, describe_collection_response);
    if (!o)
        return NULL;
    const char *name = str_field(r->req, "collection_name");
    schema_ref s = schema_get(r, name);
    if (!s.m)
        return NULL;
    if (!s.found) {
        o->status = not_found(r, name);
        return o;
    }
    const sx__coll_meta *m = s.m;
    arena *a = &r->a;
    o->status = status_new(a, 0, "");
    PM(CollectionSchema) *sc = NEW(a, collection_schema);
    if (!sc)
        return NULL;
    sc->name = astr(a, m->name);
    sc->description = astr(a, m->description);
    sc->enable_dynamic_field = m->enable_dynamic;
    sc->fields = amalloc(a, (m->n_fields + 1) * sizeof *sc->fields);
    if (!sc->fields)
        return NULL;
    for (size_t i = 0; i < m->n_fields; i++) {
        sc->fields[i] = field_schema(a, &m->fields[i]);
        if (m->fields[i].is_primary && m->fields[i].auto_id)
            sc->autoid = true;
    }
    sc->n_fields = m->n_fields;
    /* BM25 functions, and their outputs marked */
    sc->functions = amalloc(a, (m->n_sparse ? m->n_sparse : 1) * sizeof *sc->functions);
    for (size_t i = 0; sc->functions && i < m->n_sparse; i++) {
        const sx__sparse_meta *sp = &m->sparse[i];
        PM(FunctionSchema) *fs = sp->function[0] ? NEW(a, function_schema) : NULL;
        if (!fs)
            continue;
        fs->name = astr(a, sp->function);
        fs->id = 100 + (int64_t)i;
        fs->description = astr(a, "");
        fs->type = PI(FUNCTION_TYPE__BM25);
        fs->input_field_names = amalloc(a, sizeof(char *));
        fs->output_field_names = amalloc(a, sizeof(char *));
        if (!fs->input_field_names || !fs->output_field_names)
            return NULL;
        fs->input_field_names[0] = astr(a, sp->bm25_input);
        fs->output_field_names[0] = astr(a, sp->field);
        fs->n_input_field_names = fs->n_output_field_names = 1;
        for (size_t k = 0; k < m->n_fields; k++) {
            if (!strcmp(m->fields[k].name, sp->field) && sc->fields[k])
                sc->fields[k]->is_function_output = true;
            if (!strcmp(m->fields[k].name, sp->bm25_input)) {
                fs->input_field_ids = amalloc(a, sizeof(int64_t));
                if (fs->input_field_ids) {
                    fs->input_field_ids[0] = m->fields[k].field_id;
                    fs->n_input_field_ids = 1;
                }
            }
            if (!strcmp(m->fields[k].name, sp->field)) {
                fs->output_field_ids = amalloc(a, sizeof(int64_t));
                if (fs->output_field_ids) {
                    fs->output_field_ids[0] = m->fields[k].field_id;
                    fs->n_output_field_ids = 1;
                }
            }
        }
        sc->functions[sc->n_functions++] = fs;
    }
    o->schema = sc;
    o->collectionid = m->collection_id;
    o->created_timestamp = hybrid_ts(m->created_ms);
    o->created_utc_timestamp = (uint64_t)m->created_ms;
    o->update_timestamp = o->created_timestamp;
    o->update_timestamp_str = astrf(a, "%llu", (unsigned long long)o->created_timestamp);
    o->shards_num = (int32_t)m->shards;
    o->consistency_level = consistency_of(m->consistency);
    o->collection_name = astr(a, m->name);
    o->db_name = astr(a, r->db);
    o->num_partitions = (int64_t)sx__meta_n_parts(m);
    o->aliases = amalloc(a, (m->n_aliases ? m->n_aliases : 1) * sizeof *o->aliases);
    for (size_t i = 0; o->aliases && i < m->n_aliases; i++)
        o->aliases[o->n_aliases++] = astr(a, m->aliases[i]);
    o->virtual_channel_names = amalloc(a, sizeof(char *));
    o->physical_channel_names = amalloc(a, sizeof(char *));
    if (o->virtual_channel_names && o->physical_channel_names) {
        o->virtual_channel_names[0] = astrf(a, "sextant-dml-%lld_v0", (long long)m->collection_id);
        o->physical_channel_names[0] = astr(a, "sextant-dml");
        o->n_virtual_channel_names = o->n_physical_channel_names = 1;
    }
    json_error_t e;
    json_t *props = json_loads(m->properties, 0, &e);
    size_t np = json_object_size(props), i = 0;
    o->properties = amalloc(a, (np ? np : 1) * sizeof *o->properties);
    const char *k;
    json_t *v;
    json_object_foreach(props, k, v) {
        if (!o->properties)
            break;
        o->properties[i++] = kv_new(a, k, json_is_string(v) ? json_string_value(v) : "");
    }
    o->n_properties = i;
    json_decref(props);
    return o;
}

static void *rpc_has_collection(rpc *r)
{
    PM(BoolResponse) *o = NEW(&r->a, bool_response);
    if (!o)
        return NULL;
    const char *name = str_field(r->req, "collection_name");
    schema_ref s = schema_get(r, name);
    if (!s.m)
        return NULL;
    if (!s.found && !r->svc->ops->db_exists(r->svc->ctx, AUTHZ(r), r->db)) {
        o->status = not_found(r, name);
        return o;
    }
    o->status = status_new(&r->a, 0, "");
    o->value = s.found;
    return o;
}

static void *rpc_show_collections(rpc *r)
{
    PM(ShowCollectionsResponse) *o = NEW(&r->a, show_collections_response);
    if (!o)
        return NULL;
    char **names = NULL;
    size_t n = 0;
    if (r->svc->ops->coll_list(r->svc->ctx, AUTHZ(r), r->db, &names, &n) != SX_OK) {
        o->status = not_found(r, "");
        return o;
    }
    arena *a = &r->a;
    size_t c = n ? n : 1;
    o->collection_names = amalloc(a, c * sizeof(char *));
    o->collection_ids = amalloc(a, c * sizeof(int64_t));
    o->created_timestamps = amalloc(a, c * sizeof(uint64_t));
    o->created_utc_timestamps = amalloc(a, c * sizeof(uint64_t));
    o->inmemory_percentages = amalloc(a, c * sizeof(int64_t));
    o->query_service_available = amalloc(a, c * sizeof(protobuf_c_boolean));
    o->shards_num = amalloc(a, c * sizeof(int32_t));
    sx__coll_meta *m = amalloc(a, sizeof *m);
    size_t k = 0;
    for (size_t i = 0; m && o->shards_num && o->query_service_available && i < n; i++) {
        if (r->svc->ops->coll_get(r->svc->ctx, AUTHZ(r), r->db, names[i], m) != SX_OK)
            continue; /* dropped meanwhile */
        o->collection_names[k] = astr(a, names[i]);
        o->collection_ids[k] = m->collection_id;
        o->created_timestamps[k] = hybrid_ts(m->created_ms);
        o->created_utc_timestamps[k] = (uint64_t)m->created_ms;
        o->inmemory_percentages[k] = m->loaded ? 100 : 0;
        o->query_service_available[k] = m->loaded;
        o->shards_num[k] = (int32_t)m->shards;
        k++;
    }
    o->n_collection_names = o->n_collection_ids = o->n_created_timestamps = k;
    o->n_created_utc_timestamps = o->n_inmemory_percentages = o->n_query_service_available = k;
    o->n_shards_num = k;
    sx_strings_free(names, n);
    o->status = status_new(a, 0, "");
    return o;
}

static void *rpc_get_collection_statistics(rpc *r)
{
    PM(GetCollectionStatisticsResponse) *o = NEW(&r->a, get_collection_statistics_response);
    if (!o)
        return NULL;
    json_t *b = coll_body(r);
    json_t *ans = call_route(r, "/v2/vectordb/collections/get_stats", b);
    json_decref(b);
    o->status = status_of(&r->a, ans);
    if (ans_ok(ans)) {
        o->stats = amalloc(&r->a, sizeof *o->stats);
        if (o->stats) {
            o->stats[0] = kv_new(
                &r->a, "row_count",
                astrf(&r->a, "%lld", (long long)jint(json_object_get(ans_data(ans), "rowCount"))));
            o->n_stats = 1;
        }
    }
    json_decref(ans);
    return o;
}

static void *rpc_get_partition_statistics(rpc *r)
{
    const PM(GetPartitionStatisticsRequest) *q = (const void *)r->req;
    PM(GetPartitionStatisticsResponse) *o = NEW(&r->a, get_partition_statistics_response);
    if (!o)
        return NULL;
    json_t *b = coll_body(r);
    json_object_set_new(b, "partitionName", json_string(q->partition_name));
    json_t *ans = call_route(r, "/v2/vectordb/partitions/get_stats", b);
    json_decref(b);
    o->status = status_of(&r->a, ans);
    if (ans_ok(ans)) {
        o->stats = amalloc(&r->a, sizeof *o->stats);
        if (o->stats) {
            o->stats[0] = kv_new(
                &r->a, "row_count",
                astrf(&r->a, "%lld", (long long)jint(json_object_get(ans_data(ans), "rowCount"))));
            o->n_stats = 1;
        }
    }
    json_decref(ans);
    return o;
}

static void *rpc_get_load_state(rpc *r)
{
    PM(GetLoadStateResponse) *o = NEW(&r->a, get_load_state_response);
    if (!o)
        return NULL;
    json_t *b = coll_body(r);
    json_t *ans = call_route(r, "/v2/vectordb/collections/get_load_state", b);
    json_decref(b);
    o->status = status_of(&r->a, ans);
    const char *st = json_string_value(json_object_get(ans_data(ans), "loadState"));
    o->state = !st                               ? PI(LOAD_STATE__LoadStateNotExist)
               : !strcmp(st, "LoadStateLoaded")  ? PI(LOAD_STATE__LoadStateLoaded)
               : !strcmp(st, "LoadStateLoading") ? PI(LOAD_STATE__LoadStateLoading)
               : !strcmp(st, "LoadStateNotLoad") ? PI(LOAD_STATE__LoadStateNotLoad)
                                                 : PI(LOAD_STATE__LoadStateNotExist);
    json_decref(ans);
    return o;
}

static void *rpc_get_loading_progress(rpc *r)
{
    PM(GetLoadingProgressResponse) *o = NEW(&r->a, get_loading_progress_response);
    if (!o)
        return NULL;
    json_t *b = coll_body(r);
    json_t *ans = call_route(r, "/v2/vectordb/collections/get_load_state", b);
    json_decref(b);
    o->status = status_of(&r->a, ans);
    const char *st = json_string_value(json_object_get(ans_data(ans), "loadState"));
    json_t *pr = json_object_get(ans_data(ans), "loadProgress");
    if (st && !strcmp(st, "LoadStateLoaded"))
        o->progress = 100;
    else if (json_is_integer(pr))
        o->progress = (int64_t)json_integer_value(pr);
    o->refresh_progress = o->progress;
    json_decref(ans);
    return o;
}

static void *rpc_flush(rpc *r)
{
    const PM(FlushRequest) *q = (const void *)r->req;
    PM(FlushResponse) *o = NEW(&r->a, flush_response);
    if (!o)
        return NULL;
    arena *a = &r->a;
    size_t n = q->n_collection_names;
    o->coll_segids = amalloc(a, (n ? n : 1) * sizeof *o->coll_segids);
    o->flush_coll_segids = amalloc(a, (n ? n : 1) * sizeof *o->flush_coll_segids);
    o->coll_seal_times = amalloc(a, (n ? n : 1) * sizeof *o->coll_seal_times);
    o->coll_flush_ts = amalloc(a, (n ? n : 1) * sizeof *o->coll_flush_ts);
    if (!o->coll_segids || !o->flush_coll_segids || !o->coll_seal_times || !o->coll_flush_ts)
        return NULL;
    uint64_t ts = hybrid_ts(now_ms());
    for (size_t i = 0; i < n; i++) {
        json_t *b = json_pack("{s:s}", "collectionName", q->collection_names[i]);
        json_t *ans = call_route(r, "/v2/vectordb/collections/flush", b);
        json_decref(b);
        if (!ans_ok(ans)) {
            o->status = status_of(a, ans);
            json_decref(ans);
            return o;
        }
        json_decref(ans);
        /* flushing is synchronous here: no segment is left to wait for */
        PM(FlushResponse__CollSegIDsEntry) *e1 = NEW(a, flush_response__coll_seg_ids_entry);
        PM(FlushResponse__FlushCollSegIDsEntry) *e2 =
            NEW(a, flush_response__flush_coll_seg_ids_entry);
        PM(FlushResponse__CollSealTimesEntry) *e3 = NEW(a, flush_response__coll_seal_times_entry);
        PM(FlushResponse__CollFlushTsEntry) *e4 = NEW(a, flush_response__coll_flush_ts_entry);
        PM(LongArray) *l1 = NEW(a, long_array), *l2 = NEW(a, long_array);
        if (!e1 || !e2 || !e3 || !e4 || !l1 || !l2)
            return NULL;
        e1->key = e2->key = e3->key = e4->key = astr(a, q->collection_names[i]);
        e1->value = l1;
        e2->value = l2;
        e3->value = (int64_t)(ts >> 18);
        e4->value = ts;
        o->coll_segids[i] = e1;
        o->flush_coll_segids[i] = e2;
        o->coll_seal_times[i] = e3;
        o->coll_flush_ts[i] = e4;
    }
    o->n_coll_segids = o->n_flush_coll_segids = o->n_coll_seal_times = o->n_coll_flush_ts = n;
    o->db_name = astr(a, r->db);
    o->status = status_new(a, 0, "");
    return o;
}

static void *rpc_get_flush_state(rpc *r)
{
    PM(GetFlushStateResponse) *o = NEW(&r->a, get_flush_state_response);
    if (!o)
        return NULL;
    o->status = status_new(&r->a, 0, "");
    o->flushed = true; /* Flush returns once the rows are durable */
    return o;
}

/* ------------------------------------------------------------------ RPCs: partitions */

static json_t *part_body(const rpc *r)
{
    json_t *b = coll_body(r);
    json_object_set_new(b, "partitionName", json_string(str_field(r->req, "partition_name")));
    return b;
}

static json_t *parts_body(const rpc *r, char *const *names, size_t n)
{
    json_t *b = coll_body(r);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_string(names[i]));
    json_object_set_new(b, "partitionNames", arr);
    return b;
}

static void *rpc_create_partition(rpc *r)
{
    return rpc_status_route(r, "/v2/vectordb/partitions/create", part_body(r));
}

static void *rpc_drop_partition(rpc *r)
{
    return rpc_status_route(r, "/v2/vectordb/partitions/drop", part_body(r));
}

static void *rpc_has_partition(rpc *r)
{
    PM(BoolResponse) *o = NEW(&r->a, bool_response);
    if (!o)
        return NULL;
    json_t *b = part_body(r);
    json_t *ans = call_route(r, "/v2/vectordb/partitions/has", b);
    json_decref(b);
    o->status = status_of(&r->a, ans);
    o->value = json_is_true(json_object_get(ans_data(ans), "has"));
    json_decref(ans);
    return o;
}

static void *rpc_load_partitions(rpc *r)
{
    const PM(LoadPartitionsRequest) *q = (const void *)r->req;
    return rpc_status_route(r, "/v2/vectordb/partitions/load",
                            parts_body(r, q->partition_names, q->n_partition_names));
}

static void *rpc_release_partitions(rpc *r)
{
    const PM(ReleasePartitionsRequest) *q = (const void *)r->req;
    return rpc_status_route(r, "/v2/vectordb/partitions/release",
                            parts_body(r, q->partition_names, q->n_partition_names));
}

static void *rpc_show_partitions(rpc *r)
{
    PM(ShowPartitionsResponse) *o = NEW(&r->a, show_partitions_response);
    if (!o)
        return NULL;
    const char *name = str_field(r->req, "collection_name");
    schema_ref s = schema_get(r, name);
    if (!s.m)
        return NULL;
    if (!s.found) {
        o->status = not_found(r, name);
        return o;
    }
    arena *a = &r->a;
    size_t np = sx__meta_n_parts(s.m), n = np ? np : 1;
    o->partition_names = amalloc(a, n * sizeof(char *));
    o->partitionids = amalloc(a, n * sizeof(int64_t));
    o->created_timestamps = amalloc(a, n * sizeof(uint64_t));
    o->created_utc_timestamps = amalloc(a, n * sizeof(uint64_t));
    o->inmemory_percentages = amalloc(a, n * sizeof(int64_t));
    if (!o->inmemory_percentages)
        return NULL;
    for (size_t i = 0; i < np; i++) {
        char pb[SX_MAX_NAME + 1];
        o->partition_names[i] = astr(a, sx__meta_part_name(s.m, i, pb));
        o->partitionids[i] = s.m->collection_id + 1 + (int64_t)i; /* ids after the collection's */
        o->created_timestamps[i] = hybrid_ts(s.m->created_ms);
        o->created_utc_timestamps[i] = (uint64_t)s.m->created_ms;
        o->inmemory_percentages[i] = s.m->loaded ? 100 : 0;
    }
    o->n_partition_names = o->n_partitionids = o->n_created_timestamps = np;
    o->n_created_utc_timestamps = o->n_inmemory_percentages = np;
    o->status = status_new(a, 0, "");
    return o;
}

/* ------------------------------------------------------------------ RPCs: indexes */

static void *rpc_create_index(rpc *r)
{
    const PM(CreateIndexRequest) *q = (const void *)r->req;
    json_t *ip = json_pack("{s:s}", "fieldName", q->field_name);
    json_t *params = json_object();
    if (q->index_name && *q->index_name)
        json_object_set_new(ip, "indexName", json_string(q->index_name));
    for (size_t i = 0; i < q->n_extra_params; i++) {
        const char *k = q->extra_params[i]->key, *v = q->extra_params[i]->value;
        if (!k || !v)
            continue;
        if (!strcmp(k, "index_type")) {
            json_object_set_new(ip, "indexType", json_string(v));
        } else if (!strcmp(k, "metric_type")) {
            json_object_set_new(ip, "metricType", json_string(v));
        } else if (!strcmp(k, "params")) {
            json_error_t e;
            json_t *p = json_loads(v, 0, &e);
            if (json_is_object(p))
                json_object_update(params, p);
            json_decref(p);
        } else {
            json_object_set_new(params, k, param_value(v));
        }
    }
    json_object_set_new(ip, "params", params);
    json_t *b = coll_body(r);
    json_object_set_new(b, "indexParams", json_pack("[o]", ip));
    return rpc_status_route(r, "/v2/vectordb/indexes/create", b);
}

/* The collection's vector indexes, dense then sparse: field and index names (borrowed from m).
 * Returns how many (at most 2 * SX_MAX_VECTOR_FIELDS). */
static size_t all_indexes(const sx__coll_meta *m, const char **fields, const char **names)
{
    size_t n = 0;
    for (size_t i = 0; i < m->n_vecs; i++)
        if (m->vecs[i].index_name[0]) {
            fields[n] = m->vecs[i].field;
            names[n++] = m->vecs[i].index_name;
        }
    for (size_t i = 0; i < m->n_sparse; i++)
        if (m->sparse[i].index_name[0]) {
            fields[n] = m->sparse[i].field;
            names[n++] = m->sparse[i].index_name;
        }
    return n;
}

/* The index a gRPC index request names: index_name; "" : the index of field_name, else the
 * collection's only vector index. NULL with *st set (700) when there is none, or several and the
 * request names neither (Milvus's message). */
static const char *pick_index(rpc *r, const sx__coll_meta *m, PM(Status) * *st, bool *several)
{
    const char *name = str_field(r->req, "collection_name");
    const char *iname = str_field(r->req, "index_name");
    const char *f = str_field(r->req, "field_name");
    if (*iname)
        return iname;
    size_t n = 0;
    const char *only = NULL;
    const char *fields[2 * SX_MAX_VECTOR_FIELDS], *names[2 * SX_MAX_VECTOR_FIELDS];
    size_t ni = all_indexes(m, fields, names);
    for (size_t i = 0; i < ni; i++) {
        if (*f && strcmp(fields[i], f) != 0)
            continue;
        only = names[i];
        n++;
    }
    if (n == 1)
        return astr(&r->a, only);
    *several = n > 1;
    *st = n ? status_new(&r->a, SX__MC_INDEX_NOT_FOUND,
                         astrf(&r->a,
                               "there are multiple indexes, please specify the index_name "
                               "[collection=%s]",
                               name))
            : status_new(&r->a, SX__MC_INDEX_NOT_FOUND,
                         astrf(&r->a, "index not found[collection=%s]%s%s%s", name,
                               *f ? "[field=" : "", f, *f ? "]" : ""));
    return NULL;
}

/* One index as the REST describe answers it: on success *desc is a borrowed object of *ans
 * (json_decref *ans). */
static PM(Status) * index_describe_named(rpc *r, const char *iname, json_t **ans, json_t **desc)
{
    json_t *b = coll_body(r);
    json_object_set_new(b, "indexName", json_string(iname));
    *ans = call_route(r, "/v2/vectordb/indexes/describe", b);
    json_decref(b);
    if (!ans_ok(*ans))
        return status_of(&r->a, *ans);
    *desc = json_array_get(ans_data(*ans), 0);
    return status_new(&r->a, 0, "");
}

/* The collection's index (named, that of field_name, or the only one) as the REST describe
 * answers it: on success *desc is a borrowed object of *ans (json_decref *ans). */
static PM(Status) * index_describe(rpc *r, json_t **ans, json_t **desc)
{
    const char *name = str_field(r->req, "collection_name");
    *ans = NULL;
    *desc = NULL;
    schema_ref s = schema_get(r, name);
    if (!s.m)
        return NULL;
    if (!s.found)
        return not_found(r, name);
    PM(Status) *st = NULL;
    bool several = false;
    const char *iname = pick_index(r, s.m, &st, &several);
    if (!iname)
        return st;
    return index_describe_named(r, iname, ans, desc);
}

static PM(IndexState) index_state(const json_t *d)
{
    const char *s = json_string_value(json_object_get(d, "indexState"));
    if (!s)
        return PI(INDEX_STATE__IndexStateNone);
    if (!strcmp(s, "Finished"))
        return PI(INDEX_STATE__Finished);
    if (!strcmp(s, "InProgress"))
        return PI(INDEX_STATE__InProgress);
    if (!strcmp(s, "Failed"))
        return PI(INDEX_STATE__Failed);
    return PI(INDEX_STATE__IndexStateNone);
}

/* An IndexDescription from the REST describe of one index. NULL on out of memory. */
static PM(IndexDescription) * index_description(arena *a, const json_t *d, int64_t id)
{
    PM(IndexDescription) *x = NEW(a, index_description);
    if (!x)
        return NULL;
    const char *it = json_string_value(json_object_get(d, "indexType"));
    const char *mt = json_string_value(json_object_get(d, "metricType"));
    x->index_name = astr(a, json_string_value(json_object_get(d, "indexName")));
    x->field_name = astr(a, json_string_value(json_object_get(d, "fieldName")));
    x->indexid = id;
    x->params = amalloc(a, 3 * sizeof *x->params);
    json_t *bp = json_object_get(d, "params");
    if (x->params) {
        x->params[x->n_params++] = kv_new(a, "index_type", it ? it : "");
        x->params[x->n_params++] = kv_new(a, "metric_type", mt ? mt : "");
        char *bt = json_object_size(bp) ? json_dumps(bp, JSON_COMPACT) : NULL;
        if (bt) /* the build params' JSON text, as Milvus gives it */
            x->params[x->n_params++] = kv_new(a, "params", bt);
        free(bt);
    }
    x->indexed_rows = jint(json_object_get(d, "indexedRows"));
    x->total_rows = jint(json_object_get(d, "totalRows"));
    x->pending_index_rows = jint(json_object_get(d, "pendingRows"));
    x->state = index_state(d);
    x->index_state_fail_reason = astr(a, json_string_value(json_object_get(d, "failReason")));
    return x;
}

/* DescribeIndex: the named index; index_name "": every vector index of the collection (those of
 * field_name when it is set), one IndexDescription each, in schema order, as Milvus answers. */
static void *rpc_describe_index(rpc *r)
{
    PM(DescribeIndexResponse) *o = NEW(&r->a, describe_index_response);
    if (!o)
        return NULL;
    arena *a = &r->a;
    const char *name = str_field(r->req, "collection_name");
    const char *iname = str_field(r->req, "index_name");
    const char *f = str_field(r->req, "field_name");
    schema_ref s = schema_get(r, name);
    if (!s.m)
        return NULL;
    if (!s.found) {
        o->status = not_found(r, name);
        return o;
    }
    const char *fields[2 * SX_MAX_VECTOR_FIELDS], *names[2 * SX_MAX_VECTOR_FIELDS];
    size_t ni = all_indexes(s.m, fields, names);
    o->index_descriptions = amalloc(a, (ni + 1) * sizeof *o->index_descriptions);
    if (!o->index_descriptions)
        return NULL;
    for (size_t i = 0; i < ni; i++) {
        if ((*iname && strcmp(names[i], iname) != 0) ||
            (!*iname && *f && strcmp(fields[i], f) != 0))
            continue;
        json_t *ans = NULL, *d = NULL;
        PM(Status) *st = index_describe_named(r, names[i], &ans, &d);
        PM(IndexDescription) *x = d ? index_description(a, d, (int64_t)i + 1) : NULL;
        json_decref(ans);
        if (!st || (!x && st->code == 0))
            return NULL;
        if (st->code != 0) {
            o->status = st;
            o->n_index_descriptions = 0;
            return o;
        }
        o->index_descriptions[o->n_index_descriptions++] = x;
    }
    if (o->n_index_descriptions == 0)
        o->status = status_new(a, SX__MC_INDEX_NOT_FOUND,
                               *iname ? astrf(a, "index not found[indexName=%s]", iname)
                                      : astrf(a, "index not found[collection=%s]%s%s%s", name,
                                              *f ? "[field=" : "", f, *f ? "]" : ""));
    else
        o->status = status_new(a, 0, "");
    return o;
}

static void *rpc_get_index_state(rpc *r)
{
    PM(GetIndexStateResponse) *o = NEW(&r->a, get_index_state_response);
    if (!o)
        return NULL;
    json_t *ans, *d;
    o->status = index_describe(r, &ans, &d);
    o->state = index_state(d);
    o->fail_reason = astr(&r->a, json_string_value(json_object_get(d, "failReason")));
    json_decref(ans);
    return o;
}

static void *rpc_get_index_build_progress(rpc *r)
{
    PM(GetIndexBuildProgressResponse) *o = NEW(&r->a, get_index_build_progress_response);
    if (!o)
        return NULL;
    json_t *ans, *d;
    o->status = index_describe(r, &ans, &d);
    o->indexed_rows = jint(json_object_get(d, "indexedRows"));
    o->total_rows = jint(json_object_get(d, "totalRows"));
    json_decref(ans);
    return o;
}

/* DropIndex: the named index; index_name "": that of field_name, else the only one (several:
 * Milvus's "there are multiple indexes" error; none: success, as dropping a missing index). */
static void *rpc_drop_index(rpc *r)
{
    const char *iname = str_field(r->req, "index_name");
    if (!*iname) {
        schema_ref s = schema_get(r, str_field(r->req, "collection_name"));
        PM(Status) *st = NULL;
        bool several = false;
        if (s.m && s.found) {
            const char *p = pick_index(r, s.m, &st, &several);
            if (several)
                return st;
            iname = p ? p : "";
        }
    }
    json_t *b = coll_body(r);
    json_object_set_new(b, "indexName", json_string(iname));
    return rpc_status_route(r, "/v2/vectordb/indexes/drop", b);
}

static void *rpc_alter_index(rpc *r)
{
    const PM(AlterIndexRequest) *q = (const void *)r->req;
    json_t *b = coll_body(r);
    json_object_set_new(b, "indexName", json_string(q->index_name));
    if (q->n_delete_keys) {
        json_t *keys = json_array();
        for (size_t i = 0; i < q->n_delete_keys; i++)
            json_array_append_new(keys, json_string(q->delete_keys[i]));
        json_object_set_new(b, "propertyKeys", keys);
        return rpc_status_route(r, "/v2/vectordb/indexes/drop_properties", b);
    }
    json_object_set_new(b, "properties", props_object(q->extra_params, q->n_extra_params));
    return rpc_status_route(r, "/v2/vectordb/indexes/alter_properties", b);
}

/* ------------------------------------------------------------------ RPCs: writes */

static PM(IDs) * ids_of(arena *a, const json_t *ids)
{
    PM(IDs) *o = NEW(a, ids);
    if (!o)
        return NULL;
    size_t n = json_array_size(ids);
    bool str = n > 0 && json_is_string(json_array_get(ids, 0));
    if (str) {
        PM(StringArray) *s = NEW(a, string_array);
        if (!s || !(s->data = amalloc(a, n * sizeof *s->data)))
            return NULL;
        for (size_t i = 0; i < n; i++)
            s->data[i] = astr(a, json_string_value(json_array_get(ids, i)));
        s->n_data = n;
        o->id_field_case = PI(IDS__ID_FIELD_STR_ID);
        o->str_id = s;
    } else {
        PM(LongArray) *l = NEW(a, long_array);
        if (!l || !(l->data = amalloc(a, (n ? n : 1) * sizeof *l->data)))
            return NULL;
        for (size_t i = 0; i < n; i++)
            l->data[i] = jint(json_array_get(ids, i));
        l->n_data = n;
        o->id_field_case = PI(IDS__ID_FIELD_INT_ID);
        o->int_id = l;
    }
    return o;
}

static void *write_rows(rpc *r, bool upsert)
{
    PM(MutationResult) *o = NEW(&r->a, mutation_result);
    if (!o)
        return NULL;
    PM(FieldData) *const *fds;
    size_t n_fds;
    uint32_t num_rows;
    const char *part;
    if (upsert) {
        const PM(UpsertRequest) *q = (const void *)r->req;
        fds = q->fields_data;
        n_fds = q->n_fields_data;
        num_rows = q->num_rows;
        part = q->partition_name;
    } else {
        const PM(InsertRequest) *q = (const void *)r->req;
        fds = q->fields_data;
        n_fds = q->n_fields_data;
        num_rows = q->num_rows;
        part = q->partition_name;
    }
    char why[256] = "";
    json_t *rows = columns_to_rows(fds, n_fds, num_rows, why, sizeof why);
    if (!rows) {
        o->status =
            status_new(&r->a, SX__MC_BAD_INSERT, astrf(&r->a, "invalid insert data: %s", why));
        o->err_index = NULL;
        return o;
    }
    size_t n = json_array_size(rows);
    json_t *b = coll_body(r);
    json_object_set_new(b, "data", rows);
    if (part && *part)
        json_object_set_new(b, "partitionName", json_string(part));
    json_t *ans =
        call_route(r, upsert ? "/v2/vectordb/entities/upsert" : "/v2/vectordb/entities/insert", b);
    json_decref(b);
    o->status = status_of(&r->a, ans);
    if (ans_ok(ans)) {
        json_t *d = ans_data(ans);
        json_t *ids = json_object_get(d, upsert ? "upsertIds" : "insertIds");
        o->ids = ids_of(&r->a, ids);
        int64_t cnt = jint(json_object_get(d, upsert ? "upsertCount" : "insertCount"));
        if (upsert)
            o->upsert_cnt = cnt;
        else
            o->insert_cnt = cnt;
        o->succ_index = amalloc(&r->a, (n ? n : 1) * sizeof *o->succ_index);
        for (size_t i = 0; o->succ_index && i < n; i++)
            o->succ_index[i] = (uint32_t)i;
        o->n_succ_index = o->succ_index ? n : 0;
        o->timestamp = hybrid_ts(now_ms());
    } else {
        o->err_index = amalloc(&r->a, (n ? n : 1) * sizeof *o->err_index);
        for (size_t i = 0; o->err_index && i < n; i++)
            o->err_index[i] = (uint32_t)i;
        o->n_err_index = o->err_index ? n : 0;
    }
    json_decref(ans);
    return o;
}

static void *rpc_insert(rpc *r)
{
    return write_rows(r, false);
}

static void *rpc_upsert(rpc *r)
{
    return write_rows(r, true);
}

static void *rpc_delete(rpc *r)
{
    const PM(DeleteRequest) *q = (const void *)r->req;
    PM(MutationResult) *o = NEW(&r->a, mutation_result);
    if (!o)
        return NULL;
    json_t *b = coll_body(r);
    json_object_set_new(b, "filter", json_string(q->expr));
    if (q->partition_name && *q->partition_name)
        json_object_set_new(b, "partitionName", json_string(q->partition_name));
    json_t *ans = call_route(r, "/v2/vectordb/entities/delete", b);
    json_decref(b);
    o->status = status_of(&r->a, ans);
    o->delete_cnt = jint(json_object_get(ans_data(ans), "deleteCount"));
    o->ids = ids_of(&r->a, NULL);
    o->timestamp = hybrid_ts(now_ms());
    json_decref(ans);
    return o;
}

/* ------------------------------------------------------------------ RPCs: search, query */

/* A gRPC search's filter (dsl) and search_params key/values into REST body b: annsField, limit,
 * offset, groupingField / groupSize / strictGroupSize, searchParams (metricType, ignoreGrowing,
 * params). */
static void search_params_into(json_t *b, const char *dsl, PM(KeyValuePair) *const *sp, size_t n_sp)
{
    if (dsl && *dsl)
        json_object_set_new(b, "filter", json_string(dsl));
    json_t *sparams = json_object(), *inner = json_object();
    for (size_t i = 0; i < n_sp; i++) {
        const char *k = sp[i]->key, *v = sp[i]->value;
        if (!k || !v)
            continue;
        if (!strcmp(k, "anns_field")) {
            if (*v)
                json_object_set_new(b, "annsField", json_string(v));
        } else if (!strcmp(k, "topk") || !strcmp(k, "limit")) {
            json_object_set_new(b, "limit", param_value(v));
        } else if (!strcmp(k, "offset")) {
            json_object_set_new(b, "offset", param_value(v));
        } else if (!strcmp(k, "metric_type")) {
            if (*v)
                json_object_set_new(sparams, "metricType", json_string(v));
        } else if (!strcmp(k, "params")) {
            json_error_t e;
            json_t *p = json_loads(v, 0, &e);
            if (json_is_object(p))
                json_object_update(inner, p);
            json_decref(p);
        } else if (!strcmp(k, "group_by_field")) {
            if (*v)
                json_object_set_new(b, "groupingField", json_string(v));
        } else if (!strcmp(k, "group_size")) {
            json_object_set_new(b, "groupSize", param_value(v));
        } else if (!strcmp(k, "strict_group_size")) {
            json_object_set_new(b, "strictGroupSize", param_value(v));
        } else if (!strcmp(k, "ignore_growing")) {
            json_object_set_new(sparams, "ignoreGrowing", param_value(v));
        } else if (!strcmp(k, "round_decimal") || !strcmp(k, "hints") || !strcmp(k, "iterator") ||
                   !strcmp(k, "search_iter_v2") || !strcmp(k, "collection_id")) {
            /* applied by the client (round_decimal) or without meaning here */
        } else {
            json_object_set_new(inner, k, param_value(v));
        }
    }
    json_object_set_new(sparams, "params", inner);
    json_object_set_new(b, "searchParams", sparams);
}

/* The primary keys of a search by ids (SearchRequest.ids), as REST's "ids". NULL with why. */
static json_t *ids_json_of(const PM(IDs) * ids, char *why, size_t cap)
{
    json_t *a = json_array();
    if (ids && ids->id_field_case == PI(IDS__ID_FIELD_INT_ID) && ids->int_id) {
        for (size_t i = 0; a && i < ids->int_id->n_data; i++)
            json_array_append_new(a, json_integer((json_int_t)ids->int_id->data[i]));
    } else if (ids && ids->id_field_case == PI(IDS__ID_FIELD_STR_ID) && ids->str_id) {
        for (size_t i = 0; a && i < ids->str_id->n_data; i++) {
            json_t *s = json_string(ids->str_id->data[i] ? ids->str_id->data[i] : "");
            if (!s) {
                snprintf(why, cap, "primary key %zu is not valid UTF-8", i);
                json_decref(a);
                return NULL;
            }
            json_array_append_new(a, s);
        }
    }
    if (a && json_array_size(a) == 0) {
        snprintf(why, cap, "search by primary keys without keys (ids is empty)");
        json_decref(a);
        return NULL;
    }
    return a;
}

/* The REST search request of one gRPC SearchRequest / SubSearchRequest: data (vectors from the
 * serialized PlaceholderGroup) or ids (search by primary keys: those rows' stored vectors),
 * annsField, limit, offset, filter, searchParams. NULL with why. */
static json_t *search_body(const ProtobufCBinaryData *pg_bytes,
                           const PM(IDs) * ids,
                           const char *dsl,
                           PM(KeyValuePair) *const *sp,
                           size_t n_sp,
                           char *why,
                           size_t cap)
{
    if (ids) {
        json_t *ij = ids_json_of(ids, why, cap);
        if (!ij)
            return NULL;
        json_t *b = json_pack("{s:o}", "ids", ij);
        search_params_into(b, dsl, sp, n_sp);
        return b;
    }
    if (!pg_bytes || !pg_bytes->len) {
        snprintf(why, cap, "search without query vectors (placeholder_group is empty)");
        return NULL;
    }
    if (!wire_depth(DESC(placeholder_group), pg_bytes->data, pg_bytes->len, MAX_DEPTH)) {
        snprintf(why, cap, "placeholder_group is not a valid PlaceholderGroup");
        return NULL;
    }
    PM(PlaceholderGroup) *pg = (PM(PlaceholderGroup) *)protobuf_c_message_unpack(
        DESC(placeholder_group), NULL, pg_bytes->len, pg_bytes->data);
    if (!pg || pg->n_placeholders != 1) {
        snprintf(why, cap, "placeholder_group must hold one placeholder");
        if (pg)
            protobuf_c_message_free_unpacked(&pg->base, NULL);
        return NULL;
    }
    const PM(PlaceholderValue) *pv = pg->placeholders[0];
    json_t *data = json_array();
    bool ok = true;
    bool sparse = pv->type == PI(PLACEHOLDER_TYPE__Placeholder_SparseFloatVector);
    bool texts = pv->type == PI(PLACEHOLDER_TYPE__Placeholder_VarChar); /* BM25 search */
    for (size_t i = 0; texts && i < pv->n_values; i++) {
        json_t *t = json_stringn((const char *)pv->values[i].data, pv->values[i].len);
        if (!t) {
            snprintf(why, cap, "query text %zu is not valid UTF-8", i);
            ok = false;
            break;
        }
        json_array_append_new(data, t);
    }
    /* binary, float16, bfloat16 queries: each value's bytes, as REST takes them (base64); the
     * REST handler checks their length against the field */
    bool raw = pv->type == PI(PLACEHOLDER_TYPE__Placeholder_BinaryVector) ||
               pv->type == PI(PLACEHOLDER_TYPE__Placeholder_Float16Vector) ||
               pv->type == PI(PLACEHOLDER_TYPE__Placeholder_BFloat16Vector);
    for (size_t i = 0; raw && i < pv->n_values; i++) {
        json_t *t = b64_json(pv->values[i].data, pv->values[i].len);
        if (!t) {
            snprintf(why, cap, "out of memory");
            ok = false;
            break;
        }
        json_array_append_new(data, t);
    }
    if (texts || raw) {
        /* the texts / bytes are the data */
    } else if (pv->type != PI(PLACEHOLDER_TYPE__Placeholder_FloatVector) && !sparse) {
        snprintf(why, cap,
                 "the placeholder type %d is not a supported query type (FloatVector, "
                 "Float16Vector, BFloat16Vector, BinaryVector, SparseFloatVector, VarChar)",
                 (int)pv->type);
        ok = false;
    }
    for (size_t i = 0; ok && sparse && i < pv->n_values; i++) {
        char what[64];
        snprintf(what, sizeof what, "sparse query %zu", i);
        json_t *o = sparse_row_json(pv->values[i].data, pv->values[i].len, what, why, cap);
        if (!o)
            ok = false;
        else
            json_array_append_new(data, o);
    }
    for (size_t i = 0; ok && !sparse && !texts && !raw && i < pv->n_values; i++) {
        const ProtobufCBinaryData *v = &pv->values[i];
        if (v->len == 0 || v->len % 4) {
            snprintf(why, cap, "query vector %zu has %zu bytes, not a whole number of float32", i,
                     v->len);
            ok = false;
            break;
        }
        json_t *arr = json_array();
        for (size_t k = 0; k < v->len / 4; k++) {
            float x;
            memcpy(&x, v->data + 4 * k, 4);
            if (!isfinite(x)) {
                snprintf(why, cap, "query vector %zu has a NaN or infinite value", i);
                ok = false;
                break;
            }
            json_array_append_new(arr, json_real((double)x));
        }
        json_array_append_new(data, arr);
    }
    protobuf_c_message_free_unpacked(&pg->base, NULL);
    if (!ok) {
        json_decref(data);
        return NULL;
    }
    json_t *b = json_pack("{s:o}", "data", data);
    search_params_into(b, dsl, sp, n_sp);
    return b;
}

static json_t *out_fields_json(char *const *names, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_string(names[i]));
    return arr;
}

/* SearchResults from a REST search answer (rows with "distance" + topks). */
static void *search_results(rpc *r, const char *name, const json_t *ans, int64_t limit)
{
    PM(SearchResults) *o = NEW(&r->a, search_results);
    if (!o)
        return NULL;
    arena *a = &r->a;
    o->status = status_of(a, ans);
    o->session_ts = hybrid_ts(now_ms()); /* as QueryResults.session_ts */
    o->collection_name = astr(a, name);
    if (!ans_ok(ans))
        return o;
    schema_ref s = schema_get(r, name);
    if (!s.m)
        return NULL;
    const sx__field_meta *pk = NULL;
    for (size_t i = 0; s.found && i < s.m->n_fields; i++)
        if (s.m->fields[i].is_primary)
            pk = &s.m->fields[i];
    json_t *rows = ans_data(ans);
    json_t *topks = json_object_get(ans, "topks");
    size_t n = json_array_size(rows), nq = json_array_size(topks);
    PM(SearchResultData) *d = NEW(a, search_result_data);
    if (!d)
        return NULL;
    d->num_queries = (int64_t)nq;
    d->top_k = limit;
    d->topks = amalloc(a, (nq ? nq : 1) * sizeof *d->topks);
    d->scores = amalloc(a, (n ? n : 1) * sizeof *d->scores);
    if (!d->topks || !d->scores)
        return NULL;
    for (size_t q = 0; q < nq; q++)
        d->topks[q] = jint(json_array_get(topks, q));
    d->n_topks = nq;
    json_t *idv = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *row = json_array_get(rows, i);
        d->scores[i] = (float)jnum(json_object_get(row, "distance"));
        if (pk)
            json_array_append(idv, json_object_get(row, pk->name));
    }
    d->n_scores = n;
    d->ids = ids_of(a, idv);
    json_decref(idv);
    if (!rows_to_columns(r, s.m, rows, NULL, "distance", &d->fields_data, &d->n_fields_data,
                         &d->output_fields, &d->n_output_fields))
        return NULL;
    if (pk)
        d->primary_field_name = astr(a, pk->name);
    o->results = d;
    return o;
}

static bool output_all(char *const *names, size_t n)
{
    return n == 1 && !strcmp(names[0], "*");
}

/* The outputFields of a REST request: the requested ones, always with the primary key (the
 * SDKs read a hit's id from fields_data only); none requested: the primary key only, as Milvus
 * answers ("*": every field). */
static json_t *with_pk(rpc *r, const char *name, char *const *names, size_t n)
{
    json_t *arr = out_fields_json(names, n);
    schema_ref s = schema_get(r, name);
    bool count = false;
    for (size_t k = 0; k < n; k++)
        count |= !strcmp(names[k], "count(*)");
    if (!s.m || !s.found || output_all(names, n) || count)
        return arr;
    for (size_t i = 0; i < s.m->n_fields; i++) {
        if (!s.m->fields[i].is_primary)
            continue;
        bool have = false;
        for (size_t k = 0; k < n; k++)
            have |= !strcmp(names[k], s.m->fields[i].name);
        if (!have)
            json_array_append_new(arr, json_string(s.m->fields[i].name));
    }
    return arr;
}

static void *rpc_search(rpc *r)
{
    const PM(SearchRequest) *q = (const void *)r->req;
    char why[256] = "";
    bool by_ids = q->search_input_case == PI(SEARCH_REQUEST__SEARCH_INPUT_IDS);
    json_t *b = search_body(by_ids ? NULL : &q->placeholder_group, by_ids ? q->ids : NULL, q->dsl,
                            q->search_params, q->n_search_params, why, sizeof why);
    if (!b) {
        PM(SearchResults) *o = NEW(&r->a, search_results);
        if (o)
            o->status = status_new(&r->a, SX__MC_INVALID_PARAM, why);
        return o;
    }
    json_object_set_new(b, "collectionName", json_string(q->collection_name));
    json_object_set_new(b, "outputFields",
                        output_all(q->output_fields, q->n_output_fields)
                            ? json_pack("[s]", "*")
                            : with_pk(r, q->collection_name, q->output_fields, q->n_output_fields));
    if (q->n_partition_names)
        json_object_set_new(b, "partitionNames",
                            out_fields_json(q->partition_names, q->n_partition_names));
    int64_t limit = jint(json_object_get(b, "limit"));
    json_t *ans = call_route(r, "/v2/vectordb/entities/search", b);
    json_decref(b);
    void *o = search_results(r, q->collection_name, ans, limit);
    json_decref(ans);
    return o;
}

static void *rpc_hybrid_search(rpc *r)
{
    const PM(HybridSearchRequest) *q = (const void *)r->req;
    char why[256] = "";
    json_t *subs = json_array();
    for (size_t i = 0; i < q->n_requests; i++) {
        const PM(SearchRequest) *s = q->requests[i];
        json_t *sb = search_body(&s->placeholder_group, NULL, s->dsl, s->search_params,
                                 s->n_search_params, why, sizeof why);
        if (!sb) {
            json_decref(subs);
            PM(SearchResults) *o = NEW(&r->a, search_results);
            if (o)
                o->status = status_new(&r->a, SX__MC_INVALID_PARAM,
                                       astrf(&r->a, "search request %zu: %s", i, why));
            return o;
        }
        json_array_append_new(subs, sb);
    }
    json_t *b = coll_body(r);
    json_object_set_new(b, "search", subs);
    json_t *rerank = json_object(), *rp = json_object();
    const char *strategy = kv_get(q->rank_params, q->n_rank_params, "strategy");
    json_object_set_new(rerank, "strategy", json_string(strategy ? strategy : "rrf"));
    const char *params = kv_get(q->rank_params, q->n_rank_params, "params");
    if (params) {
        json_error_t e;
        json_t *p = json_loads(params, 0, &e);
        if (json_is_object(p))
            json_object_update(rp, p);
        json_decref(p);
    }
    json_object_set_new(rerank, "params", rp);
    json_object_set_new(b, "rerank", rerank);
    const char *lim = kv_get(q->rank_params, q->n_rank_params, "limit");
    const char *off = kv_get(q->rank_params, q->n_rank_params, "offset");
    if (lim)
        json_object_set_new(b, "limit", param_value(lim));
    if (off)
        json_object_set_new(b, "offset", param_value(off));
    json_object_set_new(b, "outputFields",
                        output_all(q->output_fields, q->n_output_fields)
                            ? json_pack("[s]", "*")
                            : with_pk(r, q->collection_name, q->output_fields, q->n_output_fields));
    if (q->n_partition_names)
        json_object_set_new(b, "partitionNames",
                            out_fields_json(q->partition_names, q->n_partition_names));
    int64_t limit = jint(json_object_get(b, "limit"));
    json_t *ans = call_route(r, "/v2/vectordb/entities/hybrid_search", b);
    json_decref(b);
    /* the REST answer of a hybrid search is one list of hits */
    if (ans_ok(ans) && !json_object_get(ans, "topks"))
        json_object_set_new(ans, "topks",
                            json_pack("[I]", (json_int_t)json_array_size(ans_data(ans))));
    void *o = search_results(r, q->collection_name, ans, limit);
    json_decref(ans);
    return o;
}

static void *rpc_query(rpc *r)
{
    const PM(QueryRequest) *q = (const void *)r->req;
    PM(QueryResults) *o = NEW(&r->a, query_results);
    if (!o)
        return NULL;
    json_t *b = coll_body(r);
    if (q->expr && *q->expr)
        json_object_set_new(b, "filter", json_string(q->expr));
    json_object_set_new(b, "outputFields",
                        output_all(q->output_fields, q->n_output_fields)
                            ? json_pack("[s]", "*")
                            : with_pk(r, q->collection_name, q->output_fields, q->n_output_fields));
    const char *lim = kv_get(q->query_params, q->n_query_params, "limit");
    const char *off = kv_get(q->query_params, q->n_query_params, "offset");
    if (lim)
        json_object_set_new(b, "limit", param_value(lim));
    if (off)
        json_object_set_new(b, "offset", param_value(off));
    if (q->n_partition_names)
        json_object_set_new(b, "partitionNames",
                            out_fields_json(q->partition_names, q->n_partition_names));
    json_t *ans = call_route(r, "/v2/vectordb/entities/query", b);
    json_t *want = json_incref(json_object_get(b, "outputFields"));
    json_decref(b);
    o->status = status_of(&r->a, ans);
    o->collection_name = astr(&r->a, q->collection_name);
    /* the read's timestamp (Milvus's hybrid form): pymilvus 2.5's iterators pin their reads to it
     * (sent back as guarantee_timestamp, which reads here ignore: a read sees every write
     * acknowledged before it); without it they warn and use the client's clock */
    o->session_ts = hybrid_ts(now_ms());
    if (ans_ok(ans)) {
        schema_ref s = schema_get(r, q->collection_name);
        if (!s.m ||
            !rows_to_columns(r, s.found ? s.m : NULL, ans_data(ans), want, NULL, &o->fields_data,
                             &o->n_fields_data, &o->output_fields, &o->n_output_fields)) {
            json_decref(want);
            json_decref(ans);
            return NULL;
        }
        for (size_t i = 0; s.found && i < s.m->n_fields; i++)
            if (s.m->fields[i].is_primary)
                o->primary_field_name = astr(&r->a, s.m->fields[i].name);
    }
    json_decref(want);
    json_decref(ans);
    return o;
}

/* ------------------------------------------------------------------ RPCs: aliases */

static json_t *alias_body(const rpc *r, bool with_coll)
{
    json_t *b = json_pack("{s:s}", "aliasName", str_field(r->req, "alias"));
    if (with_coll)
        json_object_set_new(b, "collectionName", json_string(str_field(r->req, "collection_name")));
    return b;
}

static void *rpc_create_alias(rpc *r)
{
    return rpc_status_route(r, "/v2/vectordb/aliases/create", alias_body(r, true));
}

static void *rpc_drop_alias(rpc *r)
{
    return rpc_status_route(r, "/v2/vectordb/aliases/drop", alias_body(r, false));
}

static void *rpc_alter_alias(rpc *r)
{
    return rpc_status_route(r, "/v2/vectordb/aliases/alter", alias_body(r, true));
}

static void *rpc_describe_alias(rpc *r)
{
    PM(DescribeAliasResponse) *o = NEW(&r->a, describe_alias_response);
    if (!o)
        return NULL;
    json_t *b = alias_body(r, false);
    json_t *ans = call_route(r, "/v2/vectordb/aliases/describe", b);
    json_decref(b);
    o->status = status_of(&r->a, ans);
    o->db_name = astr(&r->a, r->db);
    o->alias = astr(&r->a, str_field(r->req, "alias"));
    json_t *d = ans_data(ans);
    const char *coll = json_string_value(json_object_get(d, "collectionName"));
    o->collection = astr(&r->a, coll ? coll : "");
    json_decref(ans);
    return o;
}

static void *rpc_list_aliases(rpc *r)
{
    PM(ListAliasesResponse) *o = NEW(&r->a, list_aliases_response);
    if (!o)
        return NULL;
    const char *coll = str_field(r->req, "collection_name");
    json_t *b = *coll ? coll_body(r) : json_object();
    json_t *ans = call_route(r, "/v2/vectordb/aliases/list", b);
    json_decref(b);
    o->status = status_of(&r->a, ans);
    o->db_name = astr(&r->a, r->db);
    o->collection_name = astr(&r->a, coll);
    o->aliases = arena_strings(&r->a, ans_data(ans), &o->n_aliases);
    json_decref(ans);
    return o;
}

/* ------------------------------------------------------------------ RPCs: users */

/* The SDKs send passwords base64-encoded (Milvus's convention). NULL when the field is not. */
static const char *b64_field(rpc *r, const char *name)
{
    const char *in = str_field(r->req, name);
    char *out = amalloc(&r->a, SX__RBAC_PW_MAX * 2 + 2);
    if (!in || !out)
        return NULL;
    long n = sx__b64_decode(in, out, SX__RBAC_PW_MAX * 2 + 1);
    if (n < 0)
        return NULL;
    out[n] = '\0';
    return out;
}

static void *rpc_create_credential(rpc *r)
{
    const char *pw = b64_field(r, "password");
    if (!pw)
        return status_new(&r->a, SX__MC_INVALID_PARAM,
                          "invalid parameter: the password must be base64 (as the SDKs send it)");
    return rpc_status_route(
        r, "/v2/vectordb/users/create",
        json_pack("{s:s,s:s}", "userName", str_field(r->req, "username"), "password", pw));
}

static void *rpc_update_credential(rpc *r)
{
    const char *old = b64_field(r, "oldPassword"), *npw = b64_field(r, "newPassword");
    if (!old || !npw)
        return status_new(
            &r->a, SX__MC_INVALID_PARAM,
            "invalid parameter: the passwords must be base64 (as the SDKs send them)");
    return rpc_status_route(r, "/v2/vectordb/users/update_password",
                            json_pack("{s:s,s:s,s:s}", "userName", str_field(r->req, "username"),
                                      "password", old, "newPassword", npw));
}

static void *rpc_delete_credential(rpc *r)
{
    return rpc_status_route(r, "/v2/vectordb/users/drop",
                            json_pack("{s:s}", "userName", str_field(r->req, "username")));
}

/* The API's users (rbac.c); the --users file's entries are the operator's and are not listed. */
static void *rpc_list_cred_users(rpc *r)
{
    PM(ListCredUsersResponse) *o = NEW(&r->a, list_cred_users_response);
    if (!o)
        return NULL;
    json_t *b = json_object();
    json_t *ans = call_route(r, "/v2/vectordb/users/list", b);
    json_decref(b);
    o->status = status_of(&r->a, ans);
    o->usernames = arena_strings(&r->a, ans_data(ans), &o->n_usernames);
    json_decref(ans);
    return o;
}

/* ------------------------------------------------------------------ RPCs: roles */

/* Each runs the REST route that does the same (handlers_rbac.c), so an API user is held to the
 * same privileges and the answers carry the same errors. */

static void *rpc_create_role(rpc *r)
{
    const PM(CreateRoleRequest) *q = (const void *)r->req;
    return rpc_status_route(
        r, "/v2/vectordb/roles/create",
        json_pack("{s:s}", "roleName", q->entity && q->entity->name ? q->entity->name : ""));
}

/* force_drop (Milvus's): the role's grants are revoked first, then it is dropped. */
static void *rpc_drop_role(rpc *r)
{
    const PM(DropRoleRequest) *q = (const void *)r->req;
    const char *role = q->role_name ? q->role_name : "";
    if (q->force_drop) {
        json_t *b = json_pack("{s:s}", "roleName", role);
        json_t *ans = call_route(r, "/v2/vectordb/roles/describe", b);
        json_decref(b);
        if (!ans_ok(ans)) {
            PM(Status) *s = status_of(&r->a, ans);
            json_decref(ans);
            return s;
        }
        size_t i;
        const json_t *g;
        json_array_foreach(ans_data(ans), i, g) {
            json_t *rb =
                json_pack("{s:s,s:O,s:O,s:O,s:O}", "roleName", role, "objectType",
                          json_object_get(g, "objectType"), "objectName",
                          json_object_get(g, "objectName"), "privilege",
                          json_object_get(g, "privilege"), "dbName", json_object_get(g, "dbName"));
            json_t *ra = call_route(r, "/v2/vectordb/roles/revoke_privilege", rb);
            json_decref(rb);
            if (!ans_ok(ra)) {
                PM(Status) *s = status_of(&r->a, ra);
                json_decref(ra);
                json_decref(ans);
                return s;
            }
            json_decref(ra);
        }
        json_decref(ans);
    }
    return rpc_status_route(r, "/v2/vectordb/roles/drop", json_pack("{s:s}", "roleName", role));
}

static void *rpc_operate_user_role(rpc *r)
{
    const PM(OperateUserRoleRequest) *q = (const void *)r->req;
    bool add = q->type == PI(OPERATE_USER_ROLE_TYPE__AddUserToRole);
    return rpc_status_route(
        r, add ? "/v2/vectordb/users/grant_role" : "/v2/vectordb/users/revoke_role",
        json_pack("{s:s,s:s}", "userName", q->username ? q->username : "", "roleName",
                  q->role_name ? q->role_name : ""));
}

static PM(RoleEntity) * role_entity(arena *a, const char *name)
{
    PM(RoleEntity) *e = NEW(a, role_entity);
    if (e)
        e->name = astr(a, name);
    return e;
}

static PM(UserEntity) * user_entity(arena *a, const char *name)
{
    PM(UserEntity) *e = NEW(a, user_entity);
    if (e)
        e->name = astr(a, name);
    return e;
}

/* users/list, or the one user asked for; each user's roles through users/describe. NULL answer
 * (with *st set) on an error. The map user -> roles is what both Select RPCs read. */
static json_t *users_roles(rpc *r, const char *only, PM(Status) * *st)
{
    json_t *names = NULL;
    if (only && *only) {
        names = json_pack("[s]", only);
    } else {
        json_t *b = json_object();
        json_t *ans = call_route(r, "/v2/vectordb/users/list", b);
        json_decref(b);
        if (!ans_ok(ans)) {
            *st = status_of(&r->a, ans);
            json_decref(ans);
            return NULL;
        }
        names = json_incref(ans_data(ans));
        json_decref(ans);
    }
    json_t *out = json_object();
    size_t i;
    const json_t *n;
    json_array_foreach(names, i, n) {
        json_t *b = json_pack("{s:O}", "userName", n);
        json_t *ans = call_route(r, "/v2/vectordb/users/describe", b);
        json_decref(b);
        if (!ans_ok(ans)) {
            *st = status_of(&r->a, ans);
            json_decref(ans);
            json_decref(out);
            json_decref(names);
            return NULL;
        }
        json_object_set(out, json_string_value(n), ans_data(ans));
        json_decref(ans);
    }
    json_decref(names);
    return out;
}

static void *rpc_select_role(rpc *r)
{
    const PM(SelectRoleRequest) *q = (const void *)r->req;
    PM(SelectRoleResponse) *o = NEW(&r->a, select_role_response);
    if (!o)
        return NULL;
    const char *only = q->role && q->role->name ? q->role->name : "";
    json_t *roles = NULL;
    if (*only) { /* one role: it must exist (roles/describe says so) */
        json_t *b = json_pack("{s:s}", "roleName", only);
        json_t *ans = call_route(r, "/v2/vectordb/roles/describe", b);
        json_decref(b);
        if (!ans_ok(ans)) {
            o->status = status_of(&r->a, ans);
            json_decref(ans);
            return o;
        }
        json_decref(ans);
        roles = json_pack("[s]", only);
    } else {
        json_t *b = json_object();
        json_t *ans = call_route(r, "/v2/vectordb/roles/list", b);
        json_decref(b);
        if (!ans_ok(ans)) {
            o->status = status_of(&r->a, ans);
            json_decref(ans);
            return o;
        }
        roles = json_incref(ans_data(ans));
        json_decref(ans);
    }
    PM(Status) *st = NULL;
    json_t *ur = q->include_user_info ? users_roles(r, NULL, &st) : NULL;
    if (q->include_user_info && !ur) {
        json_decref(roles);
        o->status = st;
        return o;
    }
    size_t nr = json_array_size(roles);
    o->results = amalloc(&r->a, (nr ? nr : 1) * sizeof *o->results);
    for (size_t i = 0; o->results && i < nr; i++) {
        const char *role = json_string_value(json_array_get(roles, i));
        PM(RoleResult) *res = NEW(&r->a, role_result);
        if (!res)
            break;
        res->role = role_entity(&r->a, role);
        size_t nu = json_object_size(ur);
        res->users = amalloc(&r->a, (nu ? nu : 1) * sizeof *res->users);
        const char *user;
        const json_t *held;
        json_object_foreach(ur, user, held) {
            size_t k;
            const json_t *x;
            json_array_foreach(held, k, x) {
                if (res->users && strcmp(json_string_value(x), role) == 0)
                    res->users[res->n_users++] = user_entity(&r->a, user);
            }
        }
        o->results[o->n_results++] = res;
    }
    json_decref(ur);
    json_decref(roles);
    o->status = status_new(&r->a, 0, "");
    return o;
}

static void *rpc_select_user(rpc *r)
{
    const PM(SelectUserRequest) *q = (const void *)r->req;
    PM(SelectUserResponse) *o = NEW(&r->a, select_user_response);
    if (!o)
        return NULL;
    PM(Status) *st = NULL;
    json_t *ur = users_roles(r, q->user && q->user->name ? q->user->name : "", &st);
    if (!ur) {
        o->status = st;
        return o;
    }
    size_t nu = json_object_size(ur);
    o->results = amalloc(&r->a, (nu ? nu : 1) * sizeof *o->results);
    const char *user;
    const json_t *held;
    json_object_foreach(ur, user, held) {
        PM(UserResult) *res = o->results ? NEW(&r->a, user_result) : NULL;
        if (!res)
            break;
        res->user = user_entity(&r->a, user);
        size_t nr = q->include_role_info ? json_array_size(held) : 0;
        res->roles = amalloc(&r->a, (nr ? nr : 1) * sizeof *res->roles);
        for (size_t k = 0; res->roles && k < nr; k++)
            res->roles[res->n_roles++] =
                role_entity(&r->a, json_string_value(json_array_get(held, k)));
        o->results[o->n_results++] = res;
    }
    json_decref(ur);
    o->status = status_new(&r->a, 0, "");
    return o;
}

static void *grant_route(rpc *r,
                         bool grant,
                         const char *role,
                         const char *otype,
                         const char *oname,
                         const char *db,
                         const char *priv)
{
    json_t *b = json_pack("{s:s,s:s,s:s,s:s}", "roleName", role, "objectType", otype, "objectName",
                          oname && *oname ? oname : "*", "privilege", priv);
    if (b && db && *db)
        json_object_set_new(b, "dbName", json_string(db));
    return rpc_status_route(
        r, grant ? "/v2/vectordb/roles/grant_privilege" : "/v2/vectordb/roles/revoke_privilege", b);
}

static void *rpc_operate_privilege(rpc *r)
{
    const PM(OperatePrivilegeRequest) *q = (const void *)r->req;
    const PM(GrantEntity) *e = q->entity;
    const char *role = e && e->role && e->role->name ? e->role->name : "";
    const char *otype = e && e->object && e->object->name ? e->object->name : "";
    const char *priv = e && e->grantor && e->grantor->privilege && e->grantor->privilege->name
                           ? e->grantor->privilege->name
                           : "";
    return grant_route(r, q->type == PI(OPERATE_PRIVILEGE_TYPE__Grant), role, otype,
                       e && e->object_name ? e->object_name : "", e ? e->db_name : NULL, priv);
}

/* V2 names a privilege, a database and a collection ("*": all); the object type is the one the
 * privilege belongs to. Privilege groups (ClusterReadOnly, CollectionReadWrite, ...) are not
 * served. */
static void *rpc_operate_privilege_v2(rpc *r)
{
    const PM(OperatePrivilegeV2Request) *q = (const void *)r->req;
    const char *role = q->role && q->role->name ? q->role->name : "";
    const char *priv = q->grantor && q->grantor->privilege && q->grantor->privilege->name
                           ? q->grantor->privilege->name
                           : "";
    const char *otype = sx__rbac_priv_object(priv);
    if (!otype)
        return status_new(&r->a, SX__MC_INVALID_PARAM,
                          astrf(&r->a,
                                "invalid parameter: privilege %s is not a privilege Sextant knows "
                                "(privilege groups are not supported by Sextant)",
                                priv));
    const char *coll = q->collection_name && *q->collection_name ? q->collection_name : "*";
    return grant_route(r, q->type == PI(OPERATE_PRIVILEGE_TYPE__Grant), role, otype,
                       strcmp(otype, "Collection") == 0 ? coll : "*", q->db_name, priv);
}

static void *rpc_select_grant(rpc *r)
{
    const PM(SelectGrantRequest) *q = (const void *)r->req;
    PM(SelectGrantResponse) *o = NEW(&r->a, select_grant_response);
    if (!o)
        return NULL;
    const PM(GrantEntity) *e = q->entity;
    const char *role = e && e->role && e->role->name ? e->role->name : "";
    const char *otype = e && e->object && e->object->name ? e->object->name : "";
    const char *oname = e && e->object_name ? e->object_name : "";
    const char *db = e && e->db_name ? e->db_name : "";
    json_t *b = json_pack("{s:s}", "roleName", role);
    json_t *ans = call_route(r, "/v2/vectordb/roles/describe", b);
    json_decref(b);
    o->status = status_of(&r->a, ans);
    size_t n = json_array_size(ans_data(ans));
    o->entities = amalloc(&r->a, (n ? n : 1) * sizeof *o->entities);
    for (size_t i = 0; ans_ok(ans) && o->entities && i < n; i++) {
        const json_t *g = json_array_get(ans_data(ans), i);
        const char *gt = json_string_value(json_object_get(g, "objectType"));
        const char *gn = json_string_value(json_object_get(g, "objectName"));
        const char *gd = json_string_value(json_object_get(g, "dbName"));
        /* "" or "*" asks for every grant; a grant on database "*" is on every database */
        bool any_db = !*db || strcmp(db, "*") == 0 || (gd && strcmp(gd, "*") == 0);
        if ((*otype && (!gt || strcmp(gt, otype) != 0)) ||
            (*oname && (!gn || strcmp(gn, oname) != 0)) ||
            (!any_db && (!gd || strcmp(gd, db) != 0)))
            continue;
        PM(GrantEntity) *x = NEW(&r->a, grant_entity);
        PM(ObjectEntity) *ob = NEW(&r->a, object_entity);
        PM(GrantorEntity) *gr = NEW(&r->a, grantor_entity);
        PM(PrivilegeEntity) *pv = NEW(&r->a, privilege_entity);
        if (!x || !ob || !gr || !pv)
            break;
        x->role = role_entity(&r->a, role);
        ob->name = astr(&r->a, gt ? gt : "");
        x->object = ob;
        x->object_name = astr(&r->a, gn ? gn : "");
        pv->name = astr(&r->a, json_string_value(json_object_get(g, "privilege")));
        gr->privilege = pv;
        gr->user = user_entity(&r->a, json_string_value(json_object_get(g, "grantor")));
        x->grantor = gr;
        x->db_name = astr(&r->a, gd ? gd : "");
        o->entities[o->n_entities++] = x;
    }
    json_decref(ans);
    return o;
}

/* ------------------------------------------------------------------ dispatch */

typedef void *(*rpc_fn)(rpc *r);

static const struct {
    const char *method;
    rpc_fn fn;
} RPCS[] = {
    { "Connect", rpc_connect },
    { "GetVersion", rpc_get_version },
    { "CheckHealth", rpc_check_health },
    { "AllocTimestamp", rpc_alloc_timestamp },
    { "ListDatabases", rpc_list_databases },
    { "CreateDatabase", rpc_create_database },
    { "DropDatabase", rpc_drop_database },
    { "AlterDatabase", rpc_alter_database },
    { "DescribeDatabase", rpc_describe_database },
    { "CreateCollection", rpc_create_collection },
    { "DropCollection", rpc_drop_collection },
    { "HasCollection", rpc_has_collection },
    { "DescribeCollection", rpc_describe_collection },
    { "ShowCollections", rpc_show_collections },
    { "LoadCollection", rpc_load_collection },
    { "ReleaseCollection", rpc_release_collection },
    { "RenameCollection", rpc_rename_collection },
    { "AlterCollection", rpc_alter_collection },
    { "GetCollectionStatistics", rpc_get_collection_statistics },
    { "GetLoadState", rpc_get_load_state },
    { "GetLoadingProgress", rpc_get_loading_progress },
    { "Flush", rpc_flush },
    { "GetFlushState", rpc_get_flush_state },
    { "CreatePartition", rpc_create_partition },
    { "DropPartition", rpc_drop_partition },
    { "HasPartition", rpc_has_partition },
    { "ShowPartitions", rpc_show_partitions },
    { "LoadPartitions", rpc_load_partitions },
    { "ReleasePartitions", rpc_release_partitions },
    { "GetPartitionStatistics", rpc_get_partition_statistics },
    { "CreateIndex", rpc_create_index },
    { "DescribeIndex", rpc_describe_index },
    { "GetIndexState", rpc_get_index_state },
    { "GetIndexBuildProgress", rpc_get_index_build_progress },
    { "DropIndex", rpc_drop_index },
    { "AlterIndex", rpc_alter_index },
    { "Insert", rpc_insert },
    { "Upsert", rpc_upsert },
    { "Delete", rpc_delete },
    { "Search", rpc_search },
    { "HybridSearch", rpc_hybrid_search },
    { "Query", rpc_query },
    { "ListCredUsers", rpc_list_cred_users },
    { "CreateCredential", rpc_create_credential },
    { "UpdateCredential", rpc_update_credential },
    { "DeleteCredential", rpc_delete_credential },
    { "CreateRole", rpc_create_role },
    { "DropRole", rpc_drop_role },
    { "OperateUserRole", rpc_operate_user_role },
    { "SelectRole", rpc_select_role },
    { "SelectUser", rpc_select_user },
    { "OperatePrivilege", rpc_operate_privilege },
    { "OperatePrivilegeV2", rpc_operate_privilege_v2 },
    { "SelectGrant", rpc_select_grant },
    { "CreateAlias", rpc_create_alias },
    { "DropAlias", rpc_drop_alias },
    { "AlterAlias", rpc_alter_alias },
    { "DescribeAlias", rpc_describe_alias },
    { "ListAliases", rpc_list_aliases },
};

bool sx__grpc_rpc_served(const char *method)
{
    for (size_t i = 0; i < sizeof RPCS / sizeof RPCS[0]; i++)
        if (!strcmp(RPCS[i].method, method))
            return true;
    return false;
}

/* The answer of a declared RPC we do not serve: its response message with a Status error (or
 * the Status itself). */
static void *unsupported(rpc *r, const ProtobufCMessageDescriptor *out)
{
    PM(Status) *s = status_new(&r->a, SX__MC_UNSUPPORTED,
                               astrf(&r->a, "%s is not supported by Sextant", r->call->method));
    if (!s || out == DESC(status))
        return s;
    void *m = anew(&r->a, out);
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(out, "status");
    if (!m || !f || f->type != PROTOBUF_C_TYPE_MESSAGE || f->descriptor != DESC(status))
        return m;
    *(PM(Status) **)(void *)((char *)m + f->offset) = s;
    return m;
}

static void reply_status(sx__grpc_reply *out, int status, const char *msg)
{
    out->grpc_status = status;
    snprintf(out->message, sizeof out->message, "%s", msg);
}

void sx__grpc_milvus(const sx__svc *service, const sx__grpc_call *call, sx__grpc_reply *out)
{
    const ProtobufCServiceDescriptor *svc = &sx_pb__milvus_service__descriptor;
    const ProtobufCMethodDescriptor *md =
        protobuf_c_service_descriptor_get_method_by_name(svc, call->method);
    if (!md) {
        char m[SX__GRPC_MSG_MAX];
        snprintf(m, sizeof m, "unknown method %s", call->method);
        reply_status(out, SX__GRPC_UNIMPLEMENTED, m);
        return;
    }
    if (!wire_depth(md->input, call->msg, call->len, MAX_DEPTH)) {
        reply_status(out, SX__GRPC_INVALID_ARGUMENT,
                     "request is not a valid protobuf message or is nested too deeply");
        return;
    }
    ProtobufCMessage *req = protobuf_c_message_unpack(md->input, NULL, call->len, call->msg);
    if (!req) {
        reply_status(out, SX__GRPC_INVALID_ARGUMENT, "cannot decode the request message");
        return;
    }
    rpc r;
    memset(&r, 0, sizeof r);
    r.svc = service;
    r.call = call;
    r.req = req;
    r.out = out;
    const char *db = str_field(req, "db_name");
    snprintf(r.db, sizeof r.db, "%s", *db ? db : call->db);
    rpc_fn fn = NULL;
    for (size_t i = 0; i < sizeof RPCS / sizeof RPCS[0]; i++)
        if (!strcmp(RPCS[i].method, call->method))
            fn = RPCS[i].fn;
    void *resp = fn ? fn(&r) : unsupported(&r, md->output);
    if (!resp || r.a.oom) {
        reply_status(out, SX__GRPC_RESOURCE_EXHAUSTED, "server out of memory for the answer");
    } else {
        size_t n = protobuf_c_message_get_packed_size(resp);
        out->body = sx__malloc(n ? n : 1);
        if (!out->body) {
            reply_status(out, SX__GRPC_RESOURCE_EXHAUSTED, "server out of memory for the answer");
        } else {
            out->len = protobuf_c_message_pack(resp, out->body);
            out->grpc_status = 0;
        }
    }
    arena_free(&r.a);
    protobuf_c_message_free_unpacked(req, NULL);
}
