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
    };

    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        if (strcasecmp(type, more[i].name) == 0)
            return more[i].ops;
    return NULL;
}

const char *sx__index_type_list(void)
{
    return "FLAT, HNSW (or AUTOINDEX), HNSW_SQ, IVF_FLAT, IVF_SQ8, IVF_PQ, DISKANN, GPU_CAGRA, "
           "GPU_IVF_FLAT, GPU_IVF_PQ, GPU_BRUTE_FORCE";
}

sx_status sx__index_check_build(
    const sx__index_ops *ops, const sx_param *p, size_t np, size_t dim, sx_metric metric)
{
    for (size_t i = 0; i < np; i++)
        if (!p[i].key || !p[i].value)
            return sx__err(SX_EINVAL, "%s: index parameter %zu has no %s", ops->name, i,
                           p[i].key ? "value" : "key");
    sx_status rc = ops->check_build_params(p, np);
    if (rc != SX_OK)
        return rc;
    if (dim == 0 || dim > SX_MAX_DIM)
        return sx__err(SX_EINVAL, "%s: dim %zu is out of range [1, %u]", ops->name, dim,
                       SX_MAX_DIM);
    if (metric != SX_METRIC_L2 && metric != SX_METRIC_IP && metric != SX_METRIC_COSINE)
        return sx__err(SX_EINVAL, "%s: metric must be L2, IP or COSINE", ops->name);
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
