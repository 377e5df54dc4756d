/*
 * index.c: index registry and parameter helpers (see index.h).
 */
#include "index/index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/err.h"

const sx__index_ops *sx__index_lookup(const char *type)
{
    if (!type)
        return NULL;
    if (strcasecmp(type, "FLAT") == 0)
        return &sx__flat_index_ops;
    if (strcasecmp(type, "HNSW") == 0 || strcasecmp(type, "AUTOINDEX") == 0)
        return &sx__hnsw_index_ops;

    static const struct {
        const char *name;
        const sx__index_ops *ops;
    } more[] = {
        { "IVF_FLAT", &sx__ivf_flat_index_ops },
        { "IVF_SQ8", &sx__ivf_sq8_index_ops },
        { "IVF_PQ", &sx__ivf_pq_index_ops },
        { "HNSW_SQ", &sx__hnsw_sq_index_ops },
        { "DISKANN", &sx__diskann_index_ops },
        { "GPU_CAGRA", &sx__cagra_index_ops },
        { "GPU_IVF_FLAT", &sx__gpu_ivf_flat_index_ops },
        { "GPU_IVF_PQ", &sx__gpu_ivf_pq_index_ops },
        { "GPU_BRUTE_FORCE", &sx__gpu_brute_force_index_ops },
        { "BIN_FLAT", &sx__bin_flat_index_ops },
        { "BIN_IVF_FLAT", &sx__bin_ivf_flat_index_ops },
    };

    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        if (strcasecmp(type, more[i].name) == 0)
            return more[i].ops;
    return NULL;
}

const sx__index_ops *sx__index_lookup_vt(const char *type, sx__vtype vt)
{
    if (type && vt == SX__VT_BIN && strcasecmp(type, "AUTOINDEX") == 0)
        return &sx__bin_ivf_flat_index_ops;
    return sx__index_lookup(type);
}

const char *sx__index_type_list(void)
{
    return "FLAT, HNSW (or AUTOINDEX), HNSW_SQ, IVF_FLAT, IVF_SQ8, IVF_PQ, DISKANN, GPU_CAGRA, "
           "GPU_IVF_FLAT, GPU_IVF_PQ, GPU_BRUTE_FORCE, BIN_FLAT, BIN_IVF_FLAT";
}

/* The index types a field of element type vt takes, for messages. */
static const char *types_for(sx__vtype vt)
{
    switch (vt) {
    case SX__VT_F16:
    case SX__VT_BF16:
        return "FLAT, HNSW (or AUTOINDEX)";
    case SX__VT_BIN:
        return "BIN_FLAT (or FLAT), BIN_IVF_FLAT (or AUTOINDEX)";
    case SX__VT_F32:
        break;
    }
    return sx__index_type_list();
}

sx_status sx__index_check_build(const sx__index_ops *ops,
                                sx__vtype vt,
                                const sx_param *p,
                                size_t np,
                                size_t dim,
                                sx_metric metric)
{
    if (!sx__index_takes(ops, vt))
        return sx__err(SX_EINVAL, "index type %s does not support %s fields (supported: %s)",
                       ops->name, sx__vtype_name(vt), types_for(vt));
    for (size_t i = 0; i < np; i++)
        if (!p[i].key || !p[i].value)
            return sx__err(SX_EINVAL, "%s: index parameter %zu has no %s", ops->name, i,
                           p[i].key ? "value" : "key");
    sx_status rc = ops->check_build_params(p, np);
    if (rc != SX_OK)
        return rc;
    if (vt == SX__VT_BIN && (dim == 0 || dim % 8 != 0 || dim > SX_MAX_DIM))
        return sx__err(SX_EINVAL, "%s: dim %zu must be a multiple of 8 in [8, %u]", ops->name, dim,
                       SX_MAX_DIM);
    if (vt != SX__VT_BIN && (dim == 0 || dim > SX_MAX_DIM))
        return sx__err(SX_EINVAL, "%s: dim %zu is out of range [1, %u]", ops->name, dim,
                       SX_MAX_DIM);
    if (!sx__metric_fits(vt, metric))
        return sx__err(SX_EINVAL, "%s: metric must be %s for %s fields", ops->name,
                       vt == SX__VT_BIN ? "HAMMING or JACCARD" : "L2, IP or COSINE",
                       sx__vtype_name(vt));
    return ops->check_build_shape ? ops->check_build_shape(p, np, dim, metric) : SX_OK;
}

sx_status
sx__param_int(const sx_param *p, size_t np, const char *key, long lo, long hi, long def, long *out)
{
    for (size_t i = 0; i < np; i++) {
        if (strcmp(p[i].key, key) != 0)
            continue;
        const char *s = p[i].value;
        char *end = NULL;
        errno = 0;
        long v = s ? strtol(s, &end, 10) : 0;
        if (!s || end == s || *end != '\0' || errno != 0 || v < lo || v > hi)
            return sx__err(SX_EINVAL, "%s must be an integer in [%ld, %ld], got \"%s\"", key, lo,
                           hi, s ? s : "");
        *out = v;
        return SX_OK;
    }
    *out = def;
    return SX_OK;
}
