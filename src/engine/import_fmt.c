/*
 * import_fmt.c: the bulk import's file readers (import_fmt.h): row-based JSON (jansson), NumPy
 * .npy per field, TEXMEX .fvecs/.bvecs and HDF5 (libhdf5, when built with it); Parquet is
 * refused (Debian has no Arrow library).
 *
 * Byte sources. A path names a local file, an object in the database's store (a relative key
 * when the database has one) or "s3://BUCKET/KEY" (a store opened for that bucket with the
 * database's endpoint and region). Every source is read through one bounded window
 * (IMP_BUF_BYTES) by pread or ranged GET, so memory does not grow with the file; large column
 * reads (vectors) go straight into the batch. HDF5 needs a local file (libhdf5 does its own
 * I/O): an object is downloaded to "<db>/import-<pid>-<n>.h5.tmp" first and removed at close.
 *
 * JSON is streamed too: a small scanner finds the rows array ({"rows": [...]} or a top-level
 * array) and cuts it into one text per row object (string- and escape-aware bracket matching,
 * at most IMP_ROW_MAX bytes a row), and jansson parses each row alone. Rejected: json_load_file
 * on the whole document (memory = several times the file), and a hand-written value parser
 * (jansson's number and UTF-8 handling is what Milvus users' files were tested with).
 *
 * Checks before any row is read (sx__imp_group_open): every field of the schema except an
 * auto-id key is given by exactly one file; file names and datasets name fields of the schema;
 * NumPy headers are parsed in full (vecfile.c: magic, version, dict, shape, exact data size) and
 * their dtype and shape must fit the field; TEXMEX files must be whole records of the
 * collection's dim; all files of a group hold the same number of rows. Value checks (finite
 * floats, norms, string lengths, keys) are import.c's, on each batch, for every format alike.
 *
 * HDF5 calls are serialised by hdf5_mu: Debian's libhdf5 is built without its thread-safety
 * option, and the CLI may read HDF5 files on other threads of the same process.
 */
#include "engine/import_fmt.h"

#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#ifdef SX_HAVE_HDF5
# include <hdf5.h>
#endif

#include "engine/engine.h"
#include "platform/fs.h"
#include "storage/objstore.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/hash.h"
#include "util/vecfile.h"

#define IMP_BUF_BYTES ((size_t)1 << 20)
#define IMP_ROW_MAX   ((size_t)16 << 20)
#define IMP_MAX_FILES 64

/* ---------------------------------------------------------------- byte sources */

typedef struct bsrc {
    char name[1024]; /* the path as given, for messages */
    sx__file *f;     /* local file, or NULL */
    sx__objstore *o; /* store, or NULL */
    bool own_o;      /* o was opened for an s3:// path */
    char *key;       /* owned */
    uint64_t size;
    uint64_t pos;       /* next byte to deliver */
    unsigned char *buf; /* IMP_BUF_BYTES window: [bstart, bstart + blen) */
    uint64_t bstart;
    size_t blen;
    char *tmp; /* a downloaded local copy (removed at close), owned */
    sx_status err;
} bsrc;

/* The message of the last error, copied (sx__err overwrites it). */
static void last_msg(char *buf, size_t n)
{
    (void)snprintf(buf, n, "%s", sx_errmsg());
}

static sx_status raw_read(bsrc *s, void *dst, size_t n, uint64_t off)
{
    if (n == 0)
        return SX_OK;
    sx_status st;
    char msg[512];
    if (s->o) {
        st = sx__objstore_get_range(s->o, s->key, off, n, dst);
        if (st != SX_OK) {
            last_msg(msg, sizeof msg);
            return sx__err(st, "import: reading %s failed: %s", s->name, msg);
        }
        return SX_OK;
    }
    size_t done = 0;
    while (done < n) {
        size_t got = 0;
        st = sx__file_pread(s->f, (char *)dst + done, n - done, off + done, &got);
        if (st != SX_OK) {
            last_msg(msg, sizeof msg);
            return sx__err(st, "import: reading %s failed: %s", s->name, msg);
        }
        if (got == 0)
            return sx__err(SX_EIO, "import: %s: short read at byte %llu (file changed?)", s->name,
                           (unsigned long long)(off + done));
        done += got;
    }
    return SX_OK;
}

/* Exactly n bytes at pos (SX_EINVAL "truncated" past the end). */
static sx_status bsrc_read(bsrc *s, void *dst, size_t n)
{
    if (n > s->size || s->pos > s->size - n)
        return sx__err(SX_EINVAL, "import: %s is truncated: %zu bytes wanted at byte %llu of %llu",
                       s->name, n, (unsigned long long)s->pos, (unsigned long long)s->size);
    unsigned char *d = dst;
    /* what the window holds */
    if (s->pos >= s->bstart && s->pos < s->bstart + s->blen) {
        size_t off = (size_t)(s->pos - s->bstart);
        size_t k = s->blen - off < n ? s->blen - off : n;
        memcpy(d, s->buf + off, k);
        d += k;
        n -= k;
        s->pos += k;
    }
    if (n == 0)
        return SX_OK;
    if (n >= IMP_BUF_BYTES / 2) {
        sx_status st = raw_read(s, d, n, s->pos);
        if (st == SX_OK)
            s->pos += n;
        return st;
    }
    size_t want = s->size - s->pos < IMP_BUF_BYTES ? (size_t)(s->size - s->pos) : IMP_BUF_BYTES;
    sx_status st = raw_read(s, s->buf, want, s->pos);
    if (st != SX_OK) {
        s->blen = 0;
        return st;
    }
    s->bstart = s->pos;
    s->blen = want;
    memcpy(d, s->buf, n);
    s->pos += n;
    return SX_OK;
}

/* The next byte, -1 at the end, -2 on an error (s->err). */
static int bsrc_getc(bsrc *s)
{
    if (s->pos >= s->bstart && s->pos < s->bstart + s->blen)
        return s->buf[s->pos++ - s->bstart];
    if (s->pos >= s->size)
        return -1;
    unsigned char ch = 0;
    sx_status st = bsrc_read(s, &ch, 1);
    if (st != SX_OK) {
        s->err = st;
        return -2;
    }
    return ch;
}

static bool has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static bool has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static void bsrc_close(bsrc *s)
{
    if (s->f)
        (void)sx__file_close(s->f);
    if (s->own_o)
        sx__objstore_free(s->o);
    if (s->tmp)
        sx__ignore(sx__fs_unlink(s->tmp));
    sx__free(s->tmp);
    sx__free(s->key);
    sx__free(s->buf);
    memset(s, 0, sizeof *s);
}

static atomic_uint tmp_seq;

/* Opens the source of `path`; need_local: the caller needs a local file (s->tmp or the path). */
static sx_status bsrc_open(sx_collection *c, const char *path, bool need_local, bsrc *s)
{
    memset(s, 0, sizeof *s);
    (void)snprintf(s->name, sizeof s->name, "%s", path);
    char msg[512];
    sx_status st = SX_OK;
    s->buf = sx__malloc(IMP_BUF_BYTES);
    if (!s->buf)
        return sx__err(SX_ENOMEM, "import: read buffer of %s", path);
    const char *local = NULL;
    if (has_prefix(path, "s3://")) {
        const char *b = path + 5, *slash = strchr(b, '/');
        if (!slash || slash == b || !slash[1]) {
            st = sx__err(SX_EINVAL, "import: %s: want s3://BUCKET/KEY", path);
            goto fail;
        }
        char url[512];
        (void)snprintf(url, sizeof url, "s3://%.*s", (int)(slash - b), b);
        sx__objstore_config cfg = { c->db->opts.s3_endpoint, c->db->opts.s3_region, false };
        st = sx__objstore_open(url, &cfg, &s->o);
        if (st != SX_OK) {
            last_msg(msg, sizeof msg);
            st = sx__err(st, "import: %s: %s", path, msg);
            goto fail;
        }
        s->own_o = true;
        s->key = sx__strdup(slash + 1);
    } else if (has_prefix(path, "file://")) {
        local = path + 7;
    } else if (path[0] != '/' && c->db->store) {
        s->o = c->db->store;
        s->key = sx__strdup(path);
    } else {
        local = path;
    }
    if (s->o && !s->key) {
        st = sx__err(SX_ENOMEM, "import");
        goto fail;
    }
    if (s->o) {
        st = sx__objstore_head(s->o, s->key, &s->size);
        if (st == SX_ENOTFOUND) {
            st = sx__err(SX_ENOTFOUND, "import: file %s does not exist in the object store", path);
            goto fail;
        }
        if (st != SX_OK) {
            last_msg(msg, sizeof msg);
            st = sx__err(st, "import: %s: %s", path, msg);
            goto fail;
        }
        if (need_local) {
            char tmp[4096];
            (void)snprintf(tmp, sizeof tmp, "%s/import-%ld-%u.h5.tmp", c->db->dir, (long)getpid(),
                           atomic_fetch_add(&tmp_seq, 1));
            s->tmp = sx__strdup(tmp);
            if (!s->tmp) {
                st = sx__err(SX_ENOMEM, "import");
                goto fail;
            }
            st = sx__objstore_get_file(s->o, s->key, s->tmp);
            if (st != SX_OK) {
                last_msg(msg, sizeof msg);
                st = sx__err(st, "import: downloading %s failed: %s", path, msg);
                goto fail;
            }
        }
        return SX_OK;
    }
    if (!sx__fs_exists(local)) {
        st = sx__err(SX_ENOTFOUND, "import: file %s does not exist", path);
        goto fail;
    }
    st = sx__file_open(local, SX__F_READ, &s->f);
    if (st == SX_OK)
        st = sx__file_size(s->f, &s->size);
    if (st != SX_OK) {
        last_msg(msg, sizeof msg);
        st = sx__err(st, "import: cannot open %s: %s", path, msg);
        goto fail;
    }
    return SX_OK;
fail:
    bsrc_close(s);
    return st;
}

/* The local file to hand to a library (HDF5). */
static const char *bsrc_local_path(const bsrc *s)
{
    if (s->tmp)
        return s->tmp;
    return has_prefix(s->name, "file://") ? s->name + 7 : s->name;
}

/* ---------------------------------------------------------------- providers */

typedef enum pkind { P_JSON, P_NPY, P_VECS, P_HDF5 } pkind;

#define FILLED (-2) /* owner of a field the group fills itself (dynamic field, constants) */

typedef struct prov {
    pkind kind;
    bsrc src;
    uint64_t n_rows; /* JSON: rows read so far */
    uint64_t row;    /* next row */
    size_t field;    /* NPY, VECS: the field given */
    unsigned char *scratch;
    /* NPY */
    sx__npy h;
    size_t row_bytes;
    /* VECS */
    size_t elem;
    /* JSON */
    bool done;
    sx__wbuf text;
#ifdef SX_HAVE_HDF5
    hid_t file;
    hid_t dset[SX_MAX_FIELDS]; /* per field, -1 none */
#endif
} prov;

struct sx__imp_group {
    sx_collection *c;
    size_t n;
    prov p[IMP_MAX_FILES];
    int owner[SX_MAX_FIELDS];        /* provider of each field, -1 none (auto id), FILLED below */
    int dyn;                         /* the dynamic field, -1 none */
    const char *cval[SX_MAX_FIELDS]; /* FILLED constant fields: the value (borrowed) */
    int route_f, route_k;            /* hash routing: the filled field and its key, -1 none */
    const char *route_prefix;        /* borrowed from the opts */
    uint32_t route_parts;
    uint64_t rows; /* 0 for JSON */
    uint64_t bytes;
    bool json;
};

static const char *type_name(sx_field_type t)
{
    switch (t) {
    case SX_FIELD_INT64:
        return "INT64";
    case SX_FIELD_DOUBLE:
        return "DOUBLE";
    case SX_FIELD_BOOL:
        return "BOOL";
    case SX_FIELD_VARCHAR:
        return "VARCHAR";
    case SX_FIELD_FLOAT_VECTOR:
        return "FLOAT_VECTOR";
    case SX_FIELD_FLOAT16_VECTOR:
        return "FLOAT16_VECTOR";
    case SX_FIELD_BFLOAT16_VECTOR:
        return "BFLOAT16_VECTOR";
    case SX_FIELD_BINARY_VECTOR:
        return "BINARY_VECTOR";
    }
    return "?";
}

static int field_index(const sx_collection *c, const char *name, size_t len)
{
    for (size_t f = 0; f < c->n_fields; f++)
        if (strlen(c->names[f]) == len && strncmp(c->names[f], name, len) == 0)
            return (int)f;
    return -1;
}

static bool is_auto_pk(const sx_collection *c, size_t f)
{
    return f == c->pk && c->fields[f].auto_id;
}

/* ---- JSON */

static sx_status json_syntax(prov *p, const char *what)
{
    if (p->src.err != SX_OK)
        return p->src.err;
    return sx__err(SX_EINVAL, "import: %s: bad JSON at byte %llu: %s", p->src.name,
                   (unsigned long long)p->src.pos, what);
}

static int skip_ws(prov *p)
{
    for (;;) {
        int ch = bsrc_getc(&p->src);
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r')
            return ch;
    }
}

/* Past a string whose opening quote was read; into w when non-NULL. */
static bool skip_string(prov *p, sx__wbuf *w)
{
    bool esc = false;
    for (;;) {
        int ch = bsrc_getc(&p->src);
        if (ch < 0)
            return false;
        if (w)
            sx__wbuf_u8(w, (uint8_t)ch);
        if (esc)
            esc = false;
        else if (ch == '\\')
            esc = true;
        else if (ch == '"')
            return true;
    }
}

/* Copies (w) or skips the object or array whose opening bracket `open` was read. */
static sx_status skip_nested(prov *p, int open, sx__wbuf *w, const char *what)
{
    int depth = 1;
    if (w)
        sx__wbuf_u8(w, (uint8_t)open);
    while (depth > 0) {
        int ch = bsrc_getc(&p->src);
        if (ch < 0)
            return json_syntax(p, what);
        if (w) {
            sx__wbuf_u8(w, (uint8_t)ch);
            if (w->len > IMP_ROW_MAX)
                return sx__err(SX_EINVAL, "import: %s: row %llu is larger than %zu bytes",
                               p->src.name, (unsigned long long)p->n_rows, IMP_ROW_MAX);
        }
        if (ch == '"') {
            if (!skip_string(p, w))
                return json_syntax(p, what);
        } else if (ch == '{' || ch == '[') {
            depth++;
        } else if (ch == '}' || ch == ']') {
            depth--;
        }
    }
    return SX_OK;
}

/* Positions p at the first element of the rows array. */
static sx_status json_open(prov *p)
{
    int ch = skip_ws(p);
    if (ch == 0xEF) { /* UTF-8 byte-order mark */
        (void)bsrc_getc(&p->src);
        (void)bsrc_getc(&p->src);
        ch = skip_ws(p);
    }
    if (ch == '[')
        return SX_OK;
    if (ch != '{')
        return json_syntax(p, "a row-based JSON file is {\"rows\": [...]} or an array of rows");
    for (;;) {
        ch = skip_ws(p);
        if (ch == '}')
            return sx__err(SX_EINVAL, "import: %s: the JSON object has no \"rows\" array",
                           p->src.name);
        if (ch != '"')
            return json_syntax(p, "expected a key");
        char key[8];
        size_t kl = 0;
        bool esc = false;
        for (;;) {
            ch = bsrc_getc(&p->src);
            if (ch < 0)
                return json_syntax(p, "the file ends inside a key");
            if (!esc && ch == '"')
                break;
            esc = !esc && ch == '\\';
            if (kl < sizeof key - 1)
                key[kl] = (char)ch;
            kl++;
        }
        key[kl < sizeof key ? kl : sizeof key - 1] = '\0';
        if (skip_ws(p) != ':')
            return json_syntax(p, "expected ':'");
        ch = skip_ws(p);
        if (kl == 4 && strcmp(key, "rows") == 0) {
            if (ch != '[')
                return json_syntax(p, "\"rows\" must be an array");
            return SX_OK;
        }
        sx_status st = SX_OK;
        if (ch == '"') {
            if (!skip_string(p, NULL))
                st = json_syntax(p, "the file ends inside a string");
        } else if (ch == '{' || ch == '[') {
            st = skip_nested(p, ch, NULL, "the file ends inside a value");
        } else {
            while (ch >= 0 && ch != ',' && ch != '}')
                ch = bsrc_getc(&p->src);
            if (ch >= 0)
                p->src.pos--; /* give back the delimiter (it is in the window) */
        }
        if (st != SX_OK)
            return st;
        ch = skip_ws(p);
        if (ch == '}')
            return sx__err(SX_EINVAL, "import: %s: the JSON object has no \"rows\" array",
                           p->src.name);
        if (ch != ',')
            return json_syntax(p, "expected ',' or '}'");
    }
}

/* Converts one parsed row object into batch row `at`. */
/* The dynamic field's text of a row: the keys not in the schema, as compact JSON. */
static sx_status
json_dyn(const prov *p, json_t *o, sx__imp_batch *b, size_t at, int dyn, const sx_collection *c)
{
    json_t *extra = json_object();
    if (!extra)
        return sx__err(SX_ENOMEM, "import");
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        if (field_index(c, key, strlen(key)) >= 0)
            continue;
        /* Milvus's explicit form: "$meta": {...} holds the dynamic fields */
        bool meta = strcmp(key, "$meta") == 0 && json_is_object(v);
        if ((meta ? json_object_update(extra, v) : json_object_set(extra, key, v)) != 0) {
            json_decref(extra);
            return sx__err(SX_ENOMEM, "import");
        }
    }
    size_t len = json_dumpb(extra, NULL, 0, JSON_COMPACT);
    char *s = sx__malloc(len + 1);
    if (s && json_dumpb(extra, s, len, JSON_COMPACT) != len) {
        sx__free(s);
        s = NULL;
    }
    json_decref(extra);
    if (!s)
        return sx__err(SX_ENOMEM, "import: row %llu of %s", (unsigned long long)p->n_rows,
                       p->src.name);
    s[len] = '\0';
    uint32_t ml = c->fields[dyn].max_length ? c->fields[dyn].max_length : SX_MAX_VARCHAR;
    if (len > ml) {
        sx__free(s);
        return sx__err(SX_EINVAL,
                       "import: %s: row %llu: its dynamic fields take %zu bytes, more than %u",
                       p->src.name, (unsigned long long)p->n_rows, len, ml);
    }
    ((char **)b->col[dyn])[at] = s;
    return SX_OK;
}

static sx_status json_row(
    sx_collection *c, const int *owner, int dyn, prov *p, sx__imp_batch *b, size_t at, json_t *o)
{
    const char *fn = p->src.name;
    unsigned long long rn = (unsigned long long)p->n_rows;
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        int f = field_index(c, key, strlen(key));
        if (f < 0 && dyn < 0)
            return sx__err(SX_EINVAL,
                           "import: %s: row %llu: field \"%s\" is not in the schema of %s", fn, rn,
                           key, c->name);
        if (f >= 0 && is_auto_pk(c, (size_t)f))
            return sx__err(SX_EINVAL,
                           "import: %s: row %llu: primary key \"%s\" is auto-generated: omit it",
                           fn, rn, key);
        if (f >= 0 && owner[f] == FILLED)
            return sx__err(SX_EINVAL, "import: %s: row %llu: field \"%s\" is set by the import", fn,
                           rn, key);
    }
    if (dyn >= 0) {
        sx_status st = json_dyn(p, o, b, at, dyn, c);
        if (st != SX_OK)
            return st;
    }
    for (size_t f = 0; f < c->n_fields; f++) {
        if (is_auto_pk(c, f) || owner[f] == FILLED)
            continue;
        const char *name = c->names[f];
        v = json_object_get(o, name);
        if (b->nulls[f] && (!v || json_is_null(v))) { /* a nullable field: missing or null */
            b->nulls[f][at / 64] |= (uint64_t)1 << (at % 64);
            if (c->types[f] == SX_FIELD_VARCHAR) {
                char *s = sx__strdup("");
                if (!s)
                    return sx__err(SX_ENOMEM, "import");
                ((char **)b->col[f])[at] = s;
            } else {
                memset((char *)b->col[f] + at * sx__field_width(c, f), 0, sx__field_width(c, f));
            }
            continue;
        }
        if (!v)
            return sx__err(SX_EINVAL, "import: %s: row %llu: field \"%s\" is missing", fn, rn,
                           name);
        bool ok = true;
        switch (c->types[f]) {
        case SX_FIELD_INT64:
            ok = json_is_integer(v);
            if (ok)
                ((int64_t *)b->col[f])[at] = (int64_t)json_integer_value(v);
            break;
        case SX_FIELD_DOUBLE:
            ok = json_is_number(v);
            if (ok)
                ((double *)b->col[f])[at] = json_number_value(v);
            break;
        case SX_FIELD_BOOL:
            ok = json_is_boolean(v);
            if (ok)
                ((bool *)b->col[f])[at] = json_is_true(v);
            break;
        case SX_FIELD_VARCHAR: {
            ok = json_is_string(v);
            if (!ok)
                break;
            char *s = sx__strndup(json_string_value(v), json_string_length(v));
            if (!s)
                return sx__err(SX_ENOMEM, "import");
            ((char **)b->col[f])[at] = s;
            break;
        }
        case SX_FIELD_FLOAT_VECTOR: {
            ok = json_is_array(v);
            if (!ok)
                break;
            const uint32_t dim = c->fields[f].dim;
            if (json_array_size(v) != dim)
                return sx__err(SX_EINVAL,
                               "import: %s: row %llu: field \"%s\" has %zu values, its dim is %u",
                               fn, rn, name, json_array_size(v), dim);
            float *dst = (float *)b->col[f] + at * dim;
            for (size_t j = 0; j < dim; j++) {
                json_t *e = json_array_get(v, j);
                if (!json_is_number(e))
                    return sx__err(SX_EINVAL,
                                   "import: %s: row %llu: field \"%s\": element %zu is not a "
                                   "number",
                                   fn, rn, name, j);
                dst[j] = (float)json_number_value(e);
            }
            break;
        }
        case SX_FIELD_FLOAT16_VECTOR:
        case SX_FIELD_BFLOAT16_VECTOR:
        case SX_FIELD_BINARY_VECTOR:
            ok = false; /* sx_import_run refuses such collections first */
            break;
        }
        if (!ok)
            return sx__err(SX_EINVAL, "import: %s: row %llu: field \"%s\" must be %s", fn, rn, name,
                           c->types[f] == SX_FIELD_FLOAT_VECTOR ? "an array of numbers"
                                                                : type_name(c->types[f]));
    }
    return SX_OK;
}

static sx_status
json_read(sx_collection *c, const int *owner, int dyn, prov *p, sx__imp_batch *b, size_t *got)
{
    size_t k = 0;
    while (!p->done && b->n + k < b->cap) {
        int ch = skip_ws(p);
        if (ch == ']') {
            p->done = true;
            break;
        }
        if (p->n_rows > 0) {
            if (ch != ',')
                return json_syntax(p, p->src.err != SX_OK ? "read error"
                                      : ch < 0            ? "the file ends after a row (truncated?)"
                                                          : "expected ',' or ']' after a row");
            ch = skip_ws(p);
        }
        if (ch != '{')
            return json_syntax(p, ch < 0 ? "the file ends inside the rows array (truncated?)"
                                         : "a row must be an object");
        sx__wbuf_reset(&p->text);
        sx_status st = skip_nested(p, '{', &p->text, "the file ends inside a row (truncated?)");
        if (st == SX_OK && !sx__wbuf_ok(&p->text))
            st = sx__err(SX_ENOMEM, "import");
        if (st != SX_OK)
            return st;
        json_error_t je;
        json_t *o = json_loadb((const char *)p->text.data, p->text.len, 0, &je);
        if (!o)
            return sx__err(SX_EINVAL, "import: %s: row %llu: bad JSON: %s", p->src.name,
                           (unsigned long long)p->n_rows, je.text);
        st = json_row(c, owner, dyn, p, b, b->n + k, o);
        json_decref(o);
        if (st != SX_OK)
            return st;
        p->n_rows++;
        k++;
    }
    *got = k;
    return SX_OK;
}

/* ---- NumPy */

static sx_status npy_check(const sx_collection *c, prov *p)
{
    const sx__npy *h = &p->h;
    size_t f = p->field;
    const char *fn = p->src.name, *name = c->names[f];
    bool le = h->order == '<' || h->order == '|' || h->order == '=';
    bool ok = false;
    const char *want = "";
    switch (c->types[f]) {
    case SX_FIELD_INT64:
        ok = h->kind == 'i' && (h->itemsize == 8 || h->itemsize == 4);
        want = "<i8 or <i4";
        break;
    case SX_FIELD_DOUBLE:
        ok = h->kind == 'f' && (h->itemsize == 8 || h->itemsize == 4);
        want = "<f8 or <f4";
        break;
    case SX_FIELD_BOOL:
        ok = h->kind == 'b' && h->itemsize == 1;
        want = "|b1";
        break;
    case SX_FIELD_VARCHAR:
        ok = h->kind == 'U';
        want = "<U (unicode strings)";
        break;
    case SX_FIELD_FLOAT_VECTOR:
        ok = h->kind == 'f' && h->itemsize == 4;
        want = "<f4";
        break;
    case SX_FIELD_FLOAT16_VECTOR:
    case SX_FIELD_BFLOAT16_VECTOR:
    case SX_FIELD_BINARY_VECTOR:
        want = "a float32 vector field"; /* sx_import_run refuses such collections first */
        break;
    }
    if (!ok || !le)
        return sx__err(SX_EINVAL, "import: %s: field \"%s\" (%s) needs dtype %s; the file has %s",
                       fn, name, type_name(c->types[f]), want, h->descr);
    if (h->fortran)
        return sx__err(SX_EINVAL, "import: %s: field \"%s\": Fortran-order arrays are not read", fn,
                       name);
    if (c->types[f] == SX_FIELD_FLOAT_VECTOR) {
        if (h->ndim != 2 || h->shape[1] != c->fields[f].dim)
            return sx__err(SX_EINVAL,
                           "import: %s: field \"%s\" needs shape (rows, %u); the file has %zu "
                           "dimension(s)%s%llu",
                           fn, name, c->fields[f].dim, h->ndim,
                           h->ndim == 2 ? ", dim " : ", shape[0] ",
                           (unsigned long long)(h->ndim == 2 ? h->shape[1] : h->shape[0]));
    } else if (h->ndim != 1) {
        return sx__err(SX_EINVAL,
                       "import: %s: field \"%s\" needs a 1-D array; the file has %zu "
                       "dimensions",
                       fn, name, h->ndim);
    }
    if (c->types[f] == SX_FIELD_VARCHAR) {
        uint32_t maxlen = c->fields[f].max_length ? c->fields[f].max_length : SX_MAX_VARCHAR;
        if (h->itemsize / 4 > (size_t)maxlen * 4)
            return sx__err(SX_EINVAL, "import: %s: field \"%s\": %s strings are longer than %u", fn,
                           name, h->descr, maxlen);
    }
    p->n_rows = h->shape[0];
    p->row_bytes = h->itemsize * (h->ndim == 2 ? (size_t)h->shape[1] : 1);
    return SX_OK;
}

static sx_status npy_open(const sx_collection *c, prov *p)
{
    size_t len = p->src.size < SX__NPY_PREFIX ? (size_t)p->src.size : SX__NPY_PREFIX;
    unsigned char *hb = sx__malloc(len ? len : 1);
    if (!hb)
        return sx__err(SX_ENOMEM, "import");
    sx_status st = bsrc_read(&p->src, hb, len);
    if (st == SX_OK) {
        st = sx__npy_parse(p->src.name, hb, len, p->src.size, &p->h);
        if (st != SX_OK) {
            char msg[768];
            last_msg(msg, sizeof msg);
            st = sx__err(st, "import: %s", msg);
        }
    }
    sx__free(hb);
    if (st == SX_OK)
        st = npy_check(c, p);
    p->src.pos = p->h.data_off;
    return st;
}

/* UTF-32LE (NUL-padded) to a new UTF-8 string. */
static sx_status utf32_to_utf8(const prov *p, const unsigned char *u, size_t chars, char **out)
{
    char *s = sx__malloc(chars * 4 + 1);
    if (!s)
        return sx__err(SX_ENOMEM, "import");
    size_t o = 0;
    for (size_t i = 0; i < chars; i++) {
        uint32_t cp = (uint32_t)u[4 * i] | (uint32_t)u[4 * i + 1] << 8 |
                      (uint32_t)u[4 * i + 2] << 16 | (uint32_t)u[4 * i + 3] << 24;
        if (cp == 0)
            break;
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            sx__free(s);
            return sx__err(SX_EINVAL, "import: %s: row %llu: invalid code point U+%X", p->src.name,
                           (unsigned long long)p->row, (unsigned)cp);
        }
        if (cp < 0x80) {
            s[o++] = (char)cp;
        } else if (cp < 0x800) {
            s[o++] = (char)(0xC0 | cp >> 6);
            s[o++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            s[o++] = (char)(0xE0 | cp >> 12);
            s[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            s[o++] = (char)(0x80 | (cp & 0x3F));
        } else {
            s[o++] = (char)(0xF0 | cp >> 18);
            s[o++] = (char)(0x80 | ((cp >> 12) & 0x3F));
            s[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            s[o++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    s[o] = '\0';
    *out = s;
    return SX_OK;
}

static sx_status npy_read(const sx_collection *c, prov *p, sx__imp_batch *b, size_t k)
{
    size_t f = p->field;
    const sx__npy *h = &p->h;
    if (c->types[f] == SX_FIELD_FLOAT_VECTOR) {
        sx_status st =
            bsrc_read(&p->src, (float *)b->col[f] + b->n * c->fields[f].dim, k * p->row_bytes);
        if (st == SX_OK)
            p->row += k;
        return st;
    }
    size_t per = IMP_BUF_BYTES / p->row_bytes;
    if (per == 0)
        per = 1;
    for (size_t done = 0; done < k;) {
        size_t m = k - done < per ? k - done : per;
        sx_status st = bsrc_read(&p->src, p->scratch, m * p->row_bytes);
        if (st != SX_OK)
            return st;
        const unsigned char *u = p->scratch;
        size_t at = b->n + done;
        for (size_t i = 0; i < m; i++, u += p->row_bytes) {
            switch (c->types[f]) {
            case SX_FIELD_INT64:
                if (h->itemsize == 8) {
                    int64_t v;
                    memcpy(&v, u, 8);
                    ((int64_t *)b->col[f])[at + i] = v;
                } else {
                    int32_t v;
                    memcpy(&v, u, 4);
                    ((int64_t *)b->col[f])[at + i] = v;
                }
                break;
            case SX_FIELD_DOUBLE:
                if (h->itemsize == 8) {
                    double v;
                    memcpy(&v, u, 8);
                    ((double *)b->col[f])[at + i] = v;
                } else {
                    float v;
                    memcpy(&v, u, 4);
                    ((double *)b->col[f])[at + i] = (double)v;
                }
                break;
            case SX_FIELD_BOOL:
                ((bool *)b->col[f])[at + i] = u[0] != 0;
                break;
            case SX_FIELD_VARCHAR: {
                char *s = NULL;
                st = utf32_to_utf8(p, u, h->itemsize / 4, &s);
                if (st != SX_OK)
                    return st;
                ((char **)b->col[f])[at + i] = s;
                break;
            }
            case SX_FIELD_FLOAT_VECTOR:
            case SX_FIELD_FLOAT16_VECTOR:
            case SX_FIELD_BFLOAT16_VECTOR:
            case SX_FIELD_BINARY_VECTOR:
                break;
            }
            p->row++;
        }
        done += m;
    }
    return SX_OK;
}

/* ---- TEXMEX */

static sx_status vecs_open(const sx_collection *c, prov *p)
{
    unsigned char first[4] = { 0, 0, 0, 0 };
    if (p->src.size >= 4) {
        sx_status st = bsrc_read(&p->src, first, 4);
        if (st != SX_OK)
            return st;
    }
    uint32_t dim = 0;
    sx_status st = sx__vecs_shape(p->src.name, p->elem == 1 ? "bvecs" : "fvecs", first, p->src.size,
                                  p->elem, SX_MAX_DIM, &dim, &p->n_rows);
    if (st != SX_OK) {
        char msg[768];
        last_msg(msg, sizeof msg);
        return sx__err(SX_EINVAL, "import: %s", msg);
    }
    if (c->n_vf == 0)
        return sx__err(SX_EINVAL, "import: %s: collection %s has no FLOAT_VECTOR field",
                       p->src.name, c->name);
    if (dim != c->vfs[0].dim)
        return sx__err(SX_EINVAL, "import: %s: vectors of dim %u; field \"%s\" has dim %u",
                       p->src.name, dim, c->names[c->vfs[0].field], c->vfs[0].dim);
    p->src.pos = 0;
    p->row_bytes = 4 + (size_t)dim * p->elem;
    return SX_OK;
}

static sx_status vecs_read(const sx_collection *c, prov *p, sx__imp_batch *b, size_t k)
{
    size_t per = IMP_BUF_BYTES / p->row_bytes;
    if (per == 0)
        per = 1;
    for (size_t done = 0; done < k;) {
        size_t m = k - done < per ? k - done : per;
        sx_status st = bsrc_read(&p->src, p->scratch, m * p->row_bytes);
        if (st != SX_OK)
            return st;
        const unsigned char *u = p->scratch;
        const uint32_t dim = c->fields[p->field].dim;
        for (size_t i = 0; i < m; i++, u += p->row_bytes) {
            uint32_t d =
                (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
            if (d != dim)
                return sx__err(SX_EINVAL,
                               "import: %s: record %llu has dimension %u, the first has %u: "
                               "corrupt file",
                               p->src.name, (unsigned long long)p->row, d, dim);
            float *dst = (float *)b->col[p->field] + (b->n + done + i) * dim;
            if (p->elem == 4)
                memcpy(dst, u + 4, (size_t)dim * 4);
            else
                for (size_t j = 0; j < dim; j++)
                    dst[j] = (float)u[4 + j];
            p->row++;
        }
        done += m;
    }
    return SX_OK;
}

/* ---- HDF5 */

#ifdef SX_HAVE_HDF5
static pthread_mutex_t hdf5_mu = PTHREAD_MUTEX_INITIALIZER;

static sx_status hdf5_dset_dims(prov *p, hid_t d, int *rank, hsize_t dims[2], H5T_class_t *cls)
{
    hid_t sp = H5Dget_space(d);
    hid_t t = H5Dget_type(d);
    *rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (*rank >= 1 && *rank <= 2)
        (void)H5Sget_simple_extent_dims(sp, dims, NULL);
    *cls = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    if (t >= 0)
        (void)H5Tclose(t);
    if (sp >= 0)
        (void)H5Sclose(sp);
    if (*rank < 0)
        return sx__err(SX_EINVAL, "import: %s: cannot read a dataset's shape", p->src.name);
    return SX_OK;
}

static sx_status hdf5_open_locked(sx_collection *c, prov *p, int *owner, int me)
{
    const char *fn = p->src.name;
    const char *path = bsrc_local_path(&p->src);
    (void)H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    for (size_t f = 0; f < SX_MAX_FIELDS; f++)
        p->dset[f] = -1;
    if (H5Fis_hdf5(path) <= 0)
        return sx__err(SX_EINVAL, "import: %s: not an HDF5 file (no HDF5 signature)", fn);
    p->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (p->file < 0)
        return sx__err(SX_EINVAL, "import: %s: cannot open the HDF5 file (corrupt?)", fn);
    if (c->n_vf == 0)
        return sx__err(SX_EINVAL, "import: %s: collection %s has no FLOAT_VECTOR field for HDF5",
                       fn, c->name);
    const size_t vf0 = c->vfs[0].field; /* the first vector field may be read from "train" */
    const char *vname = c->names[vf0];
    if (H5Lexists(p->file, vname, H5P_DEFAULT) <= 0)
        vname = "train";
    if (H5Lexists(p->file, vname, H5P_DEFAULT) <= 0)
        return sx__err(SX_EINVAL, "import: %s: no dataset \"%s\" or \"train\" for the vectors", fn,
                       c->names[vf0]);
    p->n_rows = 0;
    for (size_t f = 0; f < c->n_fields; f++) {
        if (is_auto_pk(c, f))
            continue;
        if (owner[f] == FILLED)
            continue;
        const char *dn = f == vf0 ? vname : c->names[f];
        if (f != vf0 && H5Lexists(p->file, dn, H5P_DEFAULT) <= 0)
            continue;
        if (owner[f] >= 0)
            return sx__err(SX_EINVAL, "import: %s: field \"%s\" is given twice in the group", fn,
                           c->names[f]);
        hid_t d = H5Dopen2(p->file, dn, H5P_DEFAULT);
        if (d < 0)
            return sx__err(SX_EINVAL, "import: %s: \"%s\" is not a readable dataset", fn, dn);
        p->dset[f] = d;
        int rank;
        hsize_t dims[2] = { 0, 0 };
        H5T_class_t cls;
        sx_status st = hdf5_dset_dims(p, d, &rank, dims, &cls);
        if (st != SX_OK)
            return st;
        bool num = cls == H5T_FLOAT || cls == H5T_INTEGER;
        if (c->types[f] == SX_FIELD_FLOAT_VECTOR) {
            if (rank != 2 || dims[1] != c->fields[f].dim || !num)
                return sx__err(SX_EINVAL,
                               "import: %s: dataset \"%s\" needs numbers of shape (rows, %u); it "
                               "has rank %d%s",
                               fn, dn, c->fields[f].dim, rank, num ? "" : " and is not numeric");
        } else {
            if (c->types[f] == SX_FIELD_VARCHAR)
                return sx__err(SX_EINVAL,
                               "import: %s: field \"%s\" (VARCHAR) is not read from HDF5: give it "
                               "as %s.npy in the group",
                               fn, dn, dn);
            bool tok = c->types[f] == SX_FIELD_DOUBLE ? num : cls == H5T_INTEGER;
            if (rank != 1 || !tok)
                return sx__err(SX_EINVAL, "import: %s: dataset \"%s\" needs a 1-D %s array", fn, dn,
                               c->types[f] == SX_FIELD_DOUBLE ? "numeric" : "integer");
        }
        if (p->n_rows && p->n_rows != dims[0])
            return sx__err(SX_EINVAL, "import: %s: dataset \"%s\" has %llu rows, the vectors %llu",
                           fn, dn, (unsigned long long)dims[0], (unsigned long long)p->n_rows);
        p->n_rows = dims[0];
        owner[f] = me;
    }
    return SX_OK;
}

static sx_status hdf5_open(sx_collection *c, prov *p, int *owner, int me)
{
    pthread_mutex_lock(&hdf5_mu);
    sx_status st = hdf5_open_locked(c, p, owner, me);
    pthread_mutex_unlock(&hdf5_mu);
    return st;
}

static sx_status hdf5_read(const sx_collection *c, prov *p, sx__imp_batch *b, size_t k)
{
    sx_status st = SX_OK;
    pthread_mutex_lock(&hdf5_mu);
    for (size_t f = 0; st == SX_OK && f < c->n_fields; f++) {
        if (p->dset[f] < 0)
            continue;
        hsize_t start[2] = { p->row, 0 }, count[2] = { k, c->fields[f].dim };
        int rank = c->types[f] == SX_FIELD_FLOAT_VECTOR ? 2 : 1;
        hid_t fs = H5Dget_space(p->dset[f]);
        hid_t ms = H5Screate_simple(rank, count, NULL);
        hid_t mt;
        void *dst;
        switch (c->types[f]) {
        case SX_FIELD_FLOAT_VECTOR:
            mt = H5T_NATIVE_FLOAT;
            dst = (float *)b->col[f] + b->n * c->fields[f].dim;
            break;
        case SX_FIELD_INT64:
            mt = H5T_NATIVE_INT64;
            dst = (int64_t *)b->col[f] + b->n;
            break;
        case SX_FIELD_DOUBLE:
            mt = H5T_NATIVE_DOUBLE;
            dst = (double *)b->col[f] + b->n;
            break;
        default: /* BOOL (VARCHAR was refused at open): bytes, then to bool */
            mt = H5T_NATIVE_UINT8;
            dst = p->scratch;
            break;
        }
        bool ok = fs >= 0 && ms >= 0 &&
                  H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) >= 0;
        if (ok && c->types[f] == SX_FIELD_BOOL) {
            for (size_t done = 0; ok && done < k;) {
                hsize_t m = k - done < IMP_BUF_BYTES ? k - done : IMP_BUF_BYTES;
                hsize_t st2[1] = { p->row + done }, ct[1] = { m };
                hid_t ms2 = H5Screate_simple(1, ct, NULL);
                ok = ms2 >= 0 &&
                     H5Sselect_hyperslab(fs, H5S_SELECT_SET, st2, NULL, ct, NULL) >= 0 &&
                     H5Dread(p->dset[f], mt, ms2, fs, H5P_DEFAULT, p->scratch) >= 0;
                if (ms2 >= 0)
                    (void)H5Sclose(ms2);
                for (size_t i = 0; ok && i < m; i++)
                    ((bool *)b->col[f])[b->n + done + i] = p->scratch[i] != 0;
                done += m;
            }
        } else if (ok) {
            ok = H5Dread(p->dset[f], mt, ms, fs, H5P_DEFAULT, dst) >= 0;
        }
        if (ms >= 0)
            (void)H5Sclose(ms);
        if (fs >= 0)
            (void)H5Sclose(fs);
        if (!ok)
            st = sx__err(SX_EINVAL,
                         "import: %s: reading rows %llu..%llu of field \"%s\" failed "
                         "(truncated or corrupt HDF5 file?)",
                         p->src.name, (unsigned long long)p->row, (unsigned long long)(p->row + k),
                         c->names[f]);
    }
    pthread_mutex_unlock(&hdf5_mu);
    if (st == SX_OK)
        p->row += k;
    return st;
}

static void hdf5_close(prov *p)
{
    pthread_mutex_lock(&hdf5_mu);
    for (size_t f = 0; f < SX_MAX_FIELDS; f++)
        if (p->dset[f] >= 0)
            (void)H5Dclose(p->dset[f]);
    if (p->file >= 0)
        (void)H5Fclose(p->file);
    pthread_mutex_unlock(&hdf5_mu);
}
#endif

/* ---------------------------------------------------------------- groups */

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static void prov_close(prov *p)
{
#ifdef SX_HAVE_HDF5
    if (p->kind == P_HDF5)
        hdf5_close(p);
#endif
    bsrc_close(&p->src);
    sx__free(p->scratch);
    sx__wbuf_fini(&p->text);
}

void sx__imp_group_close(sx__imp_group *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n; i++)
        prov_close(&g->p[i]);
    sx__free(g);
}

/* Opens one file of the group as provider `me`. */
static sx_status prov_open(sx_collection *c, sx__imp_group *g, const char *path, int me)
{
    prov *p = &g->p[me];
    const char *bn = base_name(path);
    memset(p, 0, sizeof *p);
    sx__wbuf_init(&p->text);
#ifdef SX_HAVE_HDF5
    p->file = -1;
    for (size_t f = 0; f < SX_MAX_FIELDS; f++)
        p->dset[f] = -1;
#endif
    if (has_suffix(bn, ".parquet"))
        return sx__err(SX_EINVAL,
                       "import: %s: Parquet files are not supported: reading them needs an Arrow "
                       "library, and Debian has none; convert to NumPy (.npy per field) or JSON",
                       path);
    if (has_suffix(bn, ".json"))
        p->kind = P_JSON;
    else if (has_suffix(bn, ".npy"))
        p->kind = P_NPY;
    else if (has_suffix(bn, ".fvecs") || has_suffix(bn, ".bvecs"))
        p->kind = P_VECS;
    else if (has_suffix(bn, ".hdf5") || has_suffix(bn, ".h5"))
        p->kind = P_HDF5;
    else
        return sx__err(SX_EINVAL,
                       "import: %s: unknown file type (want .json, .npy, .fvecs, .bvecs, .hdf5 or "
                       ".h5)",
                       path);
#ifndef SX_HAVE_HDF5
    if (p->kind == P_HDF5)
        return sx__err(SX_EINVAL, "import: %s: this build has no HDF5 (libhdf5-dev)", path);
#endif
    if (p->kind == P_JSON && g->n != 1)
        return sx__err(SX_EINVAL,
                       "import: %s: a JSON file holds whole rows and must be alone in its group",
                       path);
    int field = -1;
    if (p->kind == P_NPY) {
        field = field_index(c, bn, strlen(bn) - 4);
        if (field < 0)
            return sx__err(SX_EINVAL,
                           "import: %s: a NumPy file is named after its field (<field>.npy); "
                           "\"%.*s\" is not a field of %s",
                           path, (int)(strlen(bn) - 4), bn, c->name);
        if (is_auto_pk(c, (size_t)field))
            return sx__err(SX_EINVAL, "import: %s: primary key \"%s\" is auto-generated: omit it",
                           path, c->names[field]);
    } else if (p->kind == P_VECS) {
        if (c->n_vf == 0)
            return sx__err(SX_EINVAL, "import: %s: collection %s has no FLOAT_VECTOR field", path,
                           c->name);
        field = (int)c->vfs[0].field;
        p->elem = has_suffix(bn, ".bvecs") ? 1 : 4;
    }
    if (field >= 0) {
        if (g->owner[field] == FILLED)
            return sx__err(SX_EINVAL, "import: %s: field \"%s\" is set by the import", path,
                           c->names[field]);
        if (g->owner[field] >= 0)
            return sx__err(SX_EINVAL, "import: %s: field \"%s\" is given twice in the group", path,
                           c->names[field]);
        p->field = (size_t)field;
        g->owner[field] = me;
    }
    sx_status st = bsrc_open(c, path, p->kind == P_HDF5, &p->src);
    if (st != SX_OK)
        return st;
    g->bytes += p->src.size;
    p->scratch = sx__malloc(IMP_BUF_BYTES);
    if (!p->scratch)
        return sx__err(SX_ENOMEM, "import");
    switch (p->kind) {
    case P_JSON:
        for (size_t f = 0; f < c->n_fields; f++)
            if (!is_auto_pk(c, f) && g->owner[f] != FILLED)
                g->owner[f] = me;
        return json_open(p);
    case P_NPY:
        return npy_open(c, p);
    case P_VECS:
        return vecs_open(c, p);
    case P_HDF5:
#ifdef SX_HAVE_HDF5
        return hdf5_open(c, p, g->owner, me);
#else
        return SX_OK;
#endif
    }
    return SX_OK;
}

/* The fields the group fills itself (opts' dynamic field and constants). */
static sx_status set_filled(sx_collection *c, sx__imp_group *g, const sx_import_opts *o)
{
    g->dyn = -1;
    g->route_f = g->route_k = -1;
    if (!o)
        return SX_OK;
    if (o->route_field) {
        const char *rk = o->route_key ? o->route_key : "";
        int f = field_index(c, o->route_field, strlen(o->route_field));
        int k = field_index(c, rk, strlen(rk));
        if (f < 0 || c->types[f] != SX_FIELD_VARCHAR || (size_t)f == c->pk)
            return sx__err(SX_EINVAL,
                           "import: the routed field \"%s\" is not a VARCHAR field of %s",
                           o->route_field, c->name);
        if (k < 0 || k == f || c->nullable[k] ||
            (c->types[k] != SX_FIELD_INT64 && c->types[k] != SX_FIELD_VARCHAR))
            return sx__err(SX_EINVAL,
                           "import: the routing key \"%s\" is not a non-nullable INT64 or VARCHAR "
                           "field of %s",
                           rk, c->name);
        if (o->route_parts == 0)
            return sx__err(SX_EINVAL, "import: hash routing into 0 partitions");
        g->owner[f] = FILLED;
        g->route_f = f;
        g->route_k = k;
        g->route_prefix = o->route_prefix ? o->route_prefix : "";
        g->route_parts = o->route_parts;
    }
    for (size_t i = 0; i <= o->n_consts; i++) {
        bool is_dyn = i == o->n_consts;
        const char *name = is_dyn ? o->dynamic_field : o->consts[i].key;
        if (!name)
            continue;
        int f = field_index(c, name, strlen(name));
        if (f < 0 || c->types[f] != SX_FIELD_VARCHAR || (size_t)f == c->pk)
            return sx__err(SX_EINVAL, "import: %s field \"%s\" is not a VARCHAR field of %s",
                           is_dyn ? "the dynamic" : "the constant", name, c->name);
        if (g->owner[f] == FILLED)
            return sx__err(SX_EINVAL, "import: field \"%s\" is set twice", name);
        g->owner[f] = FILLED;
        if (is_dyn) {
            g->dyn = f;
            continue;
        }
        const char *v = o->consts[i].value ? o->consts[i].value : "";
        uint32_t ml = c->fields[f].max_length ? c->fields[f].max_length : SX_MAX_VARCHAR;
        if (strlen(v) > ml)
            return sx__err(SX_EINVAL, "import: the value of field \"%s\" is longer than %u", name,
                           ml);
        g->cval[f] = v;
    }
    return SX_OK;
}

/* Fills rows [at, at + k) of the fields the group sets itself (JSON rows have their dynamic
 * field already). */
static sx_status fill_rows(const sx__imp_group *g, sx__imp_batch *b, size_t at, size_t k)
{
    const sx_collection *c = g->c;
    for (size_t f = 0; f < c->n_fields; f++) {
        if (g->owner[f] != FILLED || ((int)f == g->dyn && g->json))
            continue;
        if ((int)f == g->route_f) {
            const void *key = b->col[g->route_k];
            bool is_int = c->types[g->route_k] == SX_FIELD_INT64;
            for (size_t i = 0; i < k; i++) {
                const char *ks = is_int ? NULL : ((char *const *)key)[at + i];
                uint32_t p = sx__key_bucket(is_int ? ((const int64_t *)key)[at + i] : 0,
                                            is_int ? NULL : (ks ? ks : ""), g->route_parts);
                char name[SX_MAX_NAME + 1];
                int w = snprintf(name, sizeof name, "%s%u", g->route_prefix, p);
                char *s = w > 0 && (size_t)w < sizeof name ? sx__strdup(name) : NULL;
                if (!s)
                    return sx__err(SX_ENOMEM, "import");
                ((char **)b->col[f])[at + i] = s;
            }
            continue;
        }
        const char *v = (int)f == g->dyn ? "{}" : g->cval[f];
        for (size_t i = 0; i < k; i++) {
            char *s = sx__strdup(v);
            if (!s)
                return sx__err(SX_ENOMEM, "import");
            ((char **)b->col[f])[at + i] = s;
        }
    }
    return SX_OK;
}

sx_status sx__imp_group_open(sx_collection *c,
                             const sx_import_group *gi,
                             const sx_import_opts *opts,
                             sx__imp_group **out)
{
    if (!gi || gi->n_paths == 0 || !gi->paths)
        return sx__err(SX_EINVAL, "import: a group of files is empty");
    if (gi->n_paths > IMP_MAX_FILES)
        return sx__err(SX_EINVAL, "import: a group has %zu files, the limit is %u", gi->n_paths,
                       IMP_MAX_FILES);
    sx__imp_group *g = sx__calloc(1, sizeof *g);
    if (!g)
        return sx__err(SX_ENOMEM, "import");
    g->c = c;
    for (size_t f = 0; f < SX_MAX_FIELDS; f++)
        g->owner[f] = -1;
    sx_status st = set_filled(c, g, opts);
    for (size_t i = 0; st == SX_OK && i < gi->n_paths; i++) {
        if (!gi->paths[i] || !*gi->paths[i]) {
            st = sx__err(SX_EINVAL, "import: an empty file name");
            break;
        }
        g->n = i + 1;
        st = prov_open(c, g, gi->paths[i], (int)i);
        if (st == SX_OK && g->p[i].kind == P_JSON && gi->n_paths != 1)
            st = sx__err(SX_EINVAL,
                         "import: %s: a JSON file holds whole rows and must be alone in its group",
                         gi->paths[i]);
    }
    g->json = st == SX_OK && g->p[0].kind == P_JSON;
    for (size_t f = 0; st == SX_OK && f < c->n_fields; f++)
        if (g->owner[f] == -1 && !is_auto_pk(c, f))
            st = sx__err(SX_EINVAL,
                         "import: field \"%s\" (%s) is missing from the group %s%s (give %s.npy "
                         "or a JSON file)",
                         c->names[f], type_name(c->types[f]), gi->paths[0],
                         gi->n_paths > 1 ? ", ..." : "", c->names[f]);
    for (size_t i = 0; st == SX_OK && !g->json && i < g->n; i++) {
        if (i == 0)
            g->rows = g->p[0].n_rows;
        else if (g->p[i].n_rows != g->rows)
            st = sx__err(SX_EINVAL,
                         "import: %s has %llu rows but %s has %llu: the files of a group "
                         "must hold the same rows",
                         g->p[i].src.name, (unsigned long long)g->p[i].n_rows, g->p[0].src.name,
                         (unsigned long long)g->rows);
    }
    if (st != SX_OK) {
        sx__imp_group_close(g);
        return st;
    }
    *out = g;
    return SX_OK;
}

sx_status sx__imp_group_read(sx__imp_group *g, sx__imp_batch *b, size_t *got)
{
    sx_collection *c = g->c;
    *got = 0;
    if (g->json) {
        sx_status st = json_read(c, g->owner, g->dyn, &g->p[0], b, got);
        if (st == SX_OK)
            st = fill_rows(g, b, b->n, *got);
        return st;
    }
    uint64_t left = g->rows - g->p[0].row;
    size_t k = b->cap - b->n;
    if (left < k)
        k = (size_t)left;
    if (k == 0)
        return SX_OK;
    for (size_t i = 0; i < g->n; i++) {
        prov *p = &g->p[i];
        sx_status st = SX_OK;
        if (p->kind == P_NPY)
            st = npy_read(c, p, b, k);
        else if (p->kind == P_VECS)
            st = vecs_read(c, p, b, k);
#ifdef SX_HAVE_HDF5
        else if (p->kind == P_HDF5)
            st = hdf5_read(c, p, b, k);
#endif
        if (st != SX_OK)
            return st;
    }
    sx_status st = fill_rows(g, b, b->n, k);
    if (st != SX_OK)
        return st;
    *got = k;
    return SX_OK;
}

uint64_t sx__imp_group_rows(const sx__imp_group *g)
{
    return g->rows;
}

uint64_t sx__imp_group_bytes(const sx__imp_group *g)
{
    return g->bytes;
}

uint64_t sx__imp_group_bytes_read(const sx__imp_group *g)
{
    uint64_t n = 0;
    for (size_t i = 0; i < g->n; i++) {
        const prov *p = &g->p[i];
        if (p->kind == P_HDF5)
            n += g->rows ? (uint64_t)((double)p->src.size * (double)p->row / (double)g->rows) : 0;
        else
            n += p->src.pos;
    }
    return n;
}

void sx__imp_batch_clear(const sx_collection *c, sx__imp_batch *b)
{
    for (size_t f = 0; f < c->n_fields; f++) {
        if (b->nulls[f])
            memset(b->nulls[f], 0, ((b->cap + 63) / 64) * sizeof(uint64_t));
        if (c->types[f] != SX_FIELD_VARCHAR || !b->col[f])
            continue;
        char **s = b->col[f];
        for (size_t i = 0; i < b->cap; i++) {
            sx__free(s[i]);
            s[i] = NULL;
        }
    }
    b->n = 0;
}
