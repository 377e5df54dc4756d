/*
 * manifest.c: manifest encoding (see manifest.h).
 *
 * Layout (little-endian): "SXMAN001" | u32 version(3; 1 and 2 are still read) | u64 generation |
 * str name | u8 metric | u32 n_fields | per field: str name, u8 type, u8 flags(1 primary, 2
 * auto_id, 4 nullable: version 2 on; other bits are refused), u32 dim, u32 max_length | u8
 * has_index | [str type | u32 n | n x (str key, str value)] | version 3 only: u8 n_more, n_more x
 * (u8 metric | u8 has_index | [str type | u32 n | n x (str key, str value)]) | u64 checkpoint_lsn
 * | u64 next_auto_id | u64 next_seg_id | u32 n_segs | n_segs x (u64 id, u64 n_rows, u64 del_gen)
 * | u32 crc32c(everything before)
 *
 * The metric and index block after the header belong to the first vector field; version 3 adds
 * one (metric, index) entry per further vector field, in schema order. A collection with one
 * vector field is still written as version 2 (the bytes of the build before several vector
 * fields, which can read it), and only a collection with several gets version 3, which older
 * builds refuse ("unsupported version") instead of misreading.
 */
#include "storage/manifest.h"

#include <string.h>

#include "platform/fs.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/crc32c.h"
#include "util/err.h"

#define MAGIC            "SXMAN001"
#define MANIFEST_VERSION 4 /* 2: one vector field, 3: several, 4: none (2026-12-06) */

static void put_index(sx__wbuf *w, const sx__mvec *v)
{
    sx__wbuf_u8(w, v->index_type ? 1 : 0);
    if (v->index_type) {
        sx__wbuf_str(w, v->index_type);
        sx__wbuf_u32(w, (uint32_t)v->n_index_params);
        for (size_t i = 0; i < v->n_index_params; i++) {
            sx__wbuf_str(w, v->index_params[i].key);
            sx__wbuf_str(w, v->index_params[i].value);
        }
    }
}

sx_status sx__manifest_write(const char *path, const sx__manifest *m)
{
    if (m->n_vec > SX_MAX_VECTOR_FIELDS)
        return sx__err(SX_EINVAL, "%s: %zu vector fields", path, m->n_vec);
    sx__wbuf w;
    sx__wbuf_init(&w);
    sx__wbuf_put(&w, MAGIC, 8);
    /* the oldest version that can say it: older builds keep reading what they wrote, and refuse
     * (unsupported version) what they could not understand */
    sx__wbuf_u32(&w, m->n_vec == 0 ? 4 : m->n_vec > 1 ? 3 : 2);
    sx__wbuf_u64(&w, m->generation);
    sx__wbuf_str(&w, m->name);
    sx__wbuf_u8(&w, (uint8_t)m->vec[0].metric);
    sx__wbuf_u32(&w, (uint32_t)m->n_fields);
    for (size_t i = 0; i < m->n_fields; i++) {
        const sx_field_def *f = &m->fields[i];
        sx__wbuf_str(&w, f->name);
        sx__wbuf_u8(&w, (uint8_t)f->type);
        sx__wbuf_u8(
            &w, (uint8_t)((f->is_primary ? 1 : 0) | (f->auto_id ? 2 : 0) | (f->nullable ? 4 : 0)));
        sx__wbuf_u32(&w, f->dim);
        sx__wbuf_u32(&w, f->max_length);
    }
    put_index(&w, &m->vec[0]);
    if (m->n_vec > 1) {
        sx__wbuf_u8(&w, (uint8_t)(m->n_vec - 1));
        for (size_t v = 1; v < m->n_vec; v++) {
            sx__wbuf_u8(&w, (uint8_t)m->vec[v].metric);
            put_index(&w, &m->vec[v]);
        }
    }
    sx__wbuf_u64(&w, m->checkpoint_lsn);
    sx__wbuf_u64(&w, m->next_auto_id);
    sx__wbuf_u64(&w, m->next_seg_id);
    sx__wbuf_u32(&w, (uint32_t)m->n_segs);
    for (size_t i = 0; i < m->n_segs; i++) {
        sx__wbuf_u64(&w, m->segs[i].id);
        sx__wbuf_u64(&w, m->segs[i].n_rows);
        sx__wbuf_u64(&w, m->segs[i].del_gen);
    }
    if (sx__wbuf_ok(&w))
        sx__wbuf_u32(&w, sx__crc32c(0, w.data, w.len));
    sx_status st = sx__wbuf_ok(&w) ? sx__fs_write_atomic(path, w.data, w.len)
                                   : sx__err(SX_ENOMEM, "encoding %s", path);
    sx__wbuf_fini(&w);
    return st;
}

void sx__manifest_fini(sx__manifest *m)
{
    sx__free(m->name);
    for (size_t i = 0; i < m->n_fields; i++)
        sx__free((char *)m->fields[i].name);
    sx__free(m->fields);
    for (size_t v = 0; v < SX_MAX_VECTOR_FIELDS; v++) {
        sx__mvec *x = &m->vec[v];
        sx__free(x->index_type);
        for (size_t i = 0; i < x->n_index_params; i++) {
            sx__free((char *)x->index_params[i].key);
            sx__free((char *)x->index_params[i].value);
        }
        sx__free(x->index_params);
    }
    sx__free(m->segs);
    memset(m, 0, sizeof *m);
}

/* Reads an index block (has_index byte first) into v. SX_ECORRUPT / SX_ENOMEM, no message. */
static sx_status get_index(sx__rbuf *r, sx__mvec *v)
{
    if (!sx__rbuf_u8(r))
        return sx__rbuf_ok(r) ? SX_OK : SX_ECORRUPT;
    v->index_type = sx__rbuf_str(r, 64, NULL);
    uint32_t np = sx__rbuf_u32(r);
    if (!sx__rbuf_ok(r) || !v->index_type || np > 64)
        return SX_ECORRUPT;
    v->index_params = sx__calloc(np ? np : 1, sizeof *v->index_params);
    if (!v->index_params)
        return SX_ENOMEM;
    v->n_index_params = np;
    for (uint32_t i = 0; i < np; i++) {
        v->index_params[i].key = sx__rbuf_str(r, 256, NULL);
        v->index_params[i].value = sx__rbuf_str(r, 4096, NULL);
        if (!sx__rbuf_ok(r) || !v->index_params[i].key || !v->index_params[i].value)
            return SX_ECORRUPT;
    }
    return SX_OK;
}

sx_status sx__manifest_read(const char *path, sx__manifest *m)
{
    void *data = NULL;
    size_t len = 0;
    memset(m, 0, sizeof *m);
    sx_status st = sx__fs_read_all(path, 64u << 20, &data, &len);
    if (st != SX_OK)
        return st;
    if (len < 16 || memcmp(data, MAGIC, 8) != 0) {
        st = sx__err(SX_ECORRUPT, "%s: not a manifest", path);
        goto out;
    }
    if (sx__le32((const uint8_t *)data + len - 4) != sx__crc32c(0, data, len - 4)) {
        st = sx__err(SX_ECORRUPT, "%s: checksum mismatch", path);
        goto out;
    }
    sx__rbuf r;
    sx__rbuf_init(&r, data, len - 4);
    (void)sx__rbuf_bytes(&r, 8);
    uint32_t version = sx__rbuf_u32(&r);
    if (version < 1 || version > MANIFEST_VERSION) {
        st = sx__err(SX_ECORRUPT, "%s: unsupported version %u (this build reads 1 to %u)", path,
                     version, MANIFEST_VERSION);
        goto out;
    }
    m->generation = sx__rbuf_u64(&r);
    m->name = sx__rbuf_str(&r, SX_MAX_NAME, NULL);
    m->vec[0].metric = (sx_metric)sx__rbuf_u8(&r);
    uint32_t nf = sx__rbuf_u32(&r);
    if (!sx__rbuf_ok(&r) || nf == 0 || nf > SX_MAX_FIELDS || m->vec[0].metric > SX_METRIC_JACCARD)
        goto corrupt;
    m->fields = sx__calloc(nf, sizeof *m->fields);
    if (!m->fields)
        goto nomem;
    m->n_fields = nf;
    for (uint32_t i = 0; i < nf; i++) {
        sx_field_def *f = &m->fields[i];
        f->name = sx__rbuf_str(&r, SX_MAX_NAME, NULL);
        f->type = (sx_field_type)sx__rbuf_u8(&r);
        uint8_t flags = sx__rbuf_u8(&r);
        f->is_primary = flags & 1;
        f->auto_id = (flags & 2) != 0;
        f->nullable = (flags & 4) != 0;
        if (flags & ~(version >= 2 ? 7u : 3u))
            goto corrupt;
        f->dim = sx__rbuf_u32(&r);
        f->max_length = sx__rbuf_u32(&r);
        if (!sx__rbuf_ok(&r) || !f->name)
            goto corrupt;
        if (sx_field_is_vector(f->type) && ++m->n_vec > SX_MAX_VECTOR_FIELDS)
            goto corrupt;
    }
    sx_status ist = get_index(&r, &m->vec[0]);
    size_t more = 0;
    if (version == 4) { /* no vector field: the first slot is a placeholder without an index */
        if (ist == SX_ENOMEM)
            goto nomem;
        if (ist != SX_OK || m->n_vec != 0 || m->vec[0].index_type)
            goto corrupt;
    } else if (ist == SX_OK && version >= 3) {
        more = sx__rbuf_u8(&r);
        if (!sx__rbuf_ok(&r) || more + 1 != m->n_vec)
            goto corrupt;
    }
    for (size_t v = 1; ist == SX_OK && v <= more; v++) {
        m->vec[v].metric = (sx_metric)sx__rbuf_u8(&r);
        if (!sx__rbuf_ok(&r) || m->vec[v].metric > SX_METRIC_JACCARD)
            goto corrupt;
        ist = get_index(&r, &m->vec[v]);
    }
    if (ist == SX_ENOMEM)
        goto nomem;
    if (ist != SX_OK || (version != 4 && m->n_vec != more + 1))
        goto corrupt;
    m->checkpoint_lsn = sx__rbuf_u64(&r);
    m->next_auto_id = sx__rbuf_u64(&r);
    m->next_seg_id = sx__rbuf_u64(&r);
    uint32_t ns = sx__rbuf_u32(&r);
    if (!sx__rbuf_ok(&r) || ns > sx__rbuf_left(&r) / 24)
        goto corrupt;
    m->segs = sx__calloc(ns ? ns : 1, sizeof *m->segs);
    if (!m->segs)
        goto nomem;
    m->n_segs = ns;
    for (uint32_t i = 0; i < ns; i++) {
        m->segs[i].id = sx__rbuf_u64(&r);
        m->segs[i].n_rows = sx__rbuf_u64(&r);
        m->segs[i].del_gen = sx__rbuf_u64(&r);
    }
    if (!sx__rbuf_ok(&r) || sx__rbuf_left(&r) != 0)
        goto corrupt;
    st = SX_OK;
    goto out;
corrupt:
    st = sx__err(SX_ECORRUPT, "%s: malformed manifest", path);
    goto out;
nomem:
    st = sx__err(SX_ENOMEM, "reading %s", path);
out:
    if (st != SX_OK)
        sx__manifest_fini(m);
    sx__free(data);
    return st;
}
