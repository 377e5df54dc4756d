/*
 * fuzz_rest_common.h: the route table of fuzz_rest_json.c and gen_corpus.c. Input byte 0 of the
 * REST harness picks a route by its index in this table (modulo its size): the four handler
 * tables of src/server/server.h concatenated in a fixed order, so seeds written by gen_corpus.c
 * keep their meaning as long as the tables keep their order (a reordered table only changes
 * which route an old seed reaches; nothing breaks).
 */
#ifndef SX_FUZZ_REST_COMMON_H
#define SX_FUZZ_REST_COMMON_H
#include <string.h>

#include "server/server.h"

#define FZ_MAX_ROUTES 128

static const sx__route *fz_routes[FZ_MAX_ROUTES];
static size_t fz_n_routes;

static inline void fz_routes_init(void)
{
    const sx__route *tables[] = { sx__routes_collections, sx__routes_indexes, sx__routes_admin,
                                  sx__routes_entities };
    fz_n_routes = 0;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const sx__route *r = tables[t]; r->path && fz_n_routes < FZ_MAX_ROUTES; r++)
            fz_routes[fz_n_routes++] = r;
}

/* Index of a route by its path suffix after "/v2/vectordb/" ("entities/search"), or -1. */
static inline int fz_route_index(const char *suffix)
{
    static const char pre[] = "/v2/vectordb/";
    for (size_t i = 0; i < fz_n_routes; i++)
        if (strncmp(fz_routes[i]->path, pre, sizeof pre - 1) == 0 &&
            strcmp(fz_routes[i]->path + sizeof pre - 1, suffix) == 0)
            return (int)i;
    return -1;
}

#endif
