/*
 * cli_common.c: argument, number, metric and parameter helpers shared by the `sextant`
 * subcommands (declared in cli.h).
 *
 * Why hand-rolled parsing rather than getopt_long: every subcommand needs repeatable options
 * (`--param k=v` several times) and must report errors with the subcommand's name and exit 2;
 * a small matcher keeps that uniform and keeps the option tables next to each command's usage
 * text. Numbers go through strtoull with full-string and range checks (no atoi: it cannot
 * report garbage or overflow).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli.h"

/* the analyzer-only macros of cli.h: these are the definitions */
#undef cli_fail
#undef cli_sx_fail
#undef cli_usage_error

int cli_take(int argc, char **argv, int *i, const char *cmd, const char *name, const char **val)
{
    const char *a = argv[*i];
    size_t nlen = strlen(name);
    if (strncmp(a, name, nlen) != 0)
        return 0;
    if (a[nlen] == '=') {
        *val = a + nlen + 1;
        *i += 1;
        return 1;
    }
    if (a[nlen] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "sextant %s: option %s needs a value\n", cmd, name);
        return -1;
    }
    *val = argv[*i + 1];
    *i += 2;
    return 1;
}

bool cli_flag(char **argv, int *i, const char *name)
{
    if (strcmp(argv[*i], name) != 0)
        return false;
    *i += 1;
    return true;
}

int cli_parse_u64(
    const char *cmd, const char *what, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    const char *p = s;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '-' || *p == '\0') {
        fprintf(stderr, "sextant %s: %s: '%s' is not a non-negative integer\n", cmd, what, s);
        return -1;
    }
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno != 0 || end == p || *end != '\0') {
        fprintf(stderr, "sextant %s: %s: '%s' is not a non-negative integer\n", cmd, what, s);
        return -1;
    }
    if ((uint64_t)v < lo || (uint64_t)v > hi) {
        fprintf(stderr, "sextant %s: %s: %llu is out of range %llu..%llu\n", cmd, what, v,
                (unsigned long long)lo, (unsigned long long)hi);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

int cli_parse_metric(const char *cmd, const char *s, sx_metric *out)
{
    if (strcasecmp(s, "l2") == 0) {
        *out = SX_METRIC_L2;
    } else if (strcasecmp(s, "ip") == 0) {
        *out = SX_METRIC_IP;
    } else if (strcasecmp(s, "cosine") == 0) {
        *out = SX_METRIC_COSINE;
    } else {
        fprintf(stderr, "sextant %s: --metric: '%s' is not one of l2, ip, cosine\n", cmd, s);
        return -1;
    }
    return 0;
}

const char *cli_metric_name(sx_metric m)
{
    switch (m) {
    case SX_METRIC_L2:
        return "l2";
    case SX_METRIC_IP:
        return "ip";
    case SX_METRIC_COSINE:
        return "cosine";
    case SX_METRIC_HAMMING:
        return "hamming";
    case SX_METRIC_JACCARD:
        return "jaccard";
    }
    return "?";
}

int cli_params_add(cli_params *ps, const char *cmd, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (eq == NULL || eq == kv) {
        fprintf(stderr, "sextant %s: parameter '%s' is not of the form key=value\n", cmd, kv);
        return -1;
    }
    char *key = strndup(kv, (size_t)(eq - kv));
    char *value = strdup(eq + 1);
    if (key == NULL || value == NULL) {
        free(key);
        free(value);
        fprintf(stderr, "sextant %s: out of memory\n", cmd);
        return -1;
    }
    for (size_t j = 0; j < ps->n; j++) {
        if (strcmp(ps->p[j].key, key) == 0) {
            free(key);
            free((char *)ps->p[j].value);
            ps->p[j].value = value;
            return 0;
        }
    }
    if (ps->n == CLI_MAX_PARAMS) {
        free(key);
        free(value);
        fprintf(stderr, "sextant %s: more than %u parameters\n", cmd, CLI_MAX_PARAMS);
        return -1;
    }
    ps->p[ps->n].key = key;
    ps->p[ps->n].value = value;
    ps->n++;
    return 0;
}

const char *cli_params_get(const cli_params *ps, const char *key)
{
    for (size_t j = 0; j < ps->n; j++) {
        if (strcmp(ps->p[j].key, key) == 0)
            return ps->p[j].value;
    }
    return NULL;
}

void cli_params_fini(cli_params *ps)
{
    for (size_t j = 0; j < ps->n; j++) {
        free((char *)ps->p[j].key);
        free((char *)ps->p[j].value);
    }
    ps->n = 0;
}

int cli_fail(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "sextant %s: ", cmd);
    va_start(ap, fmt);
    (void)vfprintf(stderr, fmt, ap);
    va_end(ap);
    (void)fputc('\n', stderr);
    return CLI_EXIT_FAIL;
}

int cli_sx_fail(const char *cmd, const char *what, sx_status st)
{
    const char *msg = sx_errmsg();
    if (msg == NULL || msg[0] == '\0')
        fprintf(stderr, "sextant %s: %s: %s\n", cmd, what, sx_status_str(st));
    else
        fprintf(stderr, "sextant %s: %s: %s: %s\n", cmd, what, sx_status_str(st), msg);
    return CLI_EXIT_FAIL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "sextant %s: ", cmd);
    va_start(ap, fmt);
    (void)vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nRun 'sextant %s --help' for usage.\n", cmd);
    return CLI_EXIT_USAGE;
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *cli_human_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}

int cli_split_list(const char *cmd,
                   const char *what,
                   const char *s,
                   char *store,
                   size_t store_len,
                   const char **items,
                   size_t max_items)
{
    size_t len = strlen(s);
    if (len + 1 > store_len) {
        fprintf(stderr, "sextant %s: %s: list too long\n", cmd, what);
        return -1;
    }
    memcpy(store, s, len + 1);
    size_t n = 0;
    char *p = store;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma != NULL)
            *comma = '\0';
        if (*p == '\0') {
            fprintf(stderr, "sextant %s: %s: empty item in '%s'\n", cmd, what, s);
            return -1;
        }
        if (n == max_items) {
            fprintf(stderr, "sextant %s: %s: more than %zu items\n", cmd, what, max_items);
            return -1;
        }
        items[n++] = p;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    return (int)n;
}

void cli_print_memory(FILE *out, const char *indent, sx_db *db)
{
    sx_memory_stats m;
    char a[32], b[32], c[32];
    sx_db_memory_stats(db, &m);
    if (m.limit_bytes)
        fprintf(out, "%smemory budget: %s (%s)\n", indent,
                cli_human_bytes(m.limit_bytes, a, sizeof a), m.source);
    else
        fprintf(out, "%smemory budget: unlimited (%s)\n", indent, m.source);
    fprintf(out, "%s  used %s, peak %s, refused %" PRIu64 " charges\n", indent,
            cli_human_bytes(m.used_bytes, b, sizeof b), cli_human_bytes(m.peak_bytes, c, sizeof c),
            m.refusals);

    const struct {
        const char *name;
        uint64_t v;
    } kinds[] = {
        { "growing segments", m.growing_bytes }, { "sealed heap", m.sealed_bytes },
        { "primary-key map", m.pkmap_bytes },    { "indexes", m.index_bytes },
        { "index builds", m.build_bytes },       { "caches (block, node)", m.cache_bytes },
        { "bulk import", m.import_bytes },       { "search scratch", m.scratch_bytes }
    };

    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        if (kinds[k].v)
            fprintf(out, "%s  %-17s %s (%" PRIu64 " bytes)\n", indent, kinds[k].name,
                    cli_human_bytes(kinds[k].v, a, sizeof a), kinds[k].v);
}

/* ------------------------------------------------------------------ sizes */

int cli_parse_size(const char *cmd, const char *what, const char *s, uint64_t lo, uint64_t *out)
{
    if (strcasecmp(s, "unlimited") == 0 || strcasecmp(s, "none") == 0) {
        *out = SX_MEMORY_UNLIMITED;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno != 0 || !(v >= 0) || v > 1.8e19) {
        fprintf(stderr, "sextant %s: %s: '%s' is not a size (3G, 512M, 100MiB, bytes)\n", cmd, what,
                s);
        return -1;
    }

    static const struct {
        const char *suffix;
        double mul;
    } units[] = { { "", 1.0 },
                  { "b", 1.0 },
                  { "k", 1024.0 },
                  { "kb", 1024.0 },
                  { "kib", 1024.0 },
                  { "m", 1048576.0 },
                  { "mb", 1048576.0 },
                  { "mib", 1048576.0 },
                  { "g", 1073741824.0 },
                  { "gb", 1073741824.0 },
                  { "gib", 1073741824.0 },
                  { "t", 1099511627776.0 },
                  { "tb", 1099511627776.0 },
                  { "tib", 1099511627776.0 } };

    double mul = 0;
    for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
        if (strcasecmp(end, units[k].suffix) == 0)
            mul = units[k].mul;
    if (mul == 0 || v * mul > 1.8e19) {
        fprintf(stderr, "sextant %s: %s: '%s' is not a size (3G, 512M, 100MiB, bytes)\n", cmd, what,
                s);
        return -1;
    }
    uint64_t b = (uint64_t)(v * mul);
    if (b < lo) {
        fprintf(stderr, "sextant %s: %s: %s is below the minimum of %llu bytes\n", cmd, what, s,
                (unsigned long long)lo);
        return -1;
    }
    *out = b;
    return 0;
}

/* ------------------------------------------------------------------ object storage */

int cli_take_storage(int argc, char **argv, int *i, const char *cmd, cli_storage *s)
{
    const char *v = NULL;
    int r;
    if ((r = cli_take(argc, argv, i, cmd, "--storage", &s->url)) != 0 ||
        (r = cli_take(argc, argv, i, cmd, "--s3-endpoint", &s->endpoint)) != 0 ||
        (r = cli_take(argc, argv, i, cmd, "--s3-region", &s->region)) != 0)
        return r;
    if ((r = cli_take(argc, argv, i, cmd, "--memory-limit", &v)) != 0) {
        if (r < 0 || cli_parse_size(cmd, "--memory-limit", v, 16u << 20, &s->memory_limit) != 0)
            return -1;
        return 1;
    }
    if ((r = cli_take(argc, argv, i, cmd, "--cache-mb", &v)) != 0) {
        if (r < 0 || cli_parse_u64(cmd, "--cache-mb", v, 0, UINT64_MAX >> 20, &s->cache_mb) != 0)
            return -1;
        return 1;
    }
    return 0;
}

int cli_storage_check(const char *cmd, const cli_storage *s)
{
    if (!s->url && (s->endpoint || s->region || s->cache_mb)) {
        fprintf(stderr, "sextant %s: --s3-endpoint, --s3-region and --cache-mb need --storage\n",
                cmd);
        return -1;
    }
    if (s->url && strncmp(s->url, "s3://", 5) != 0 && strncmp(s->url, "file:///", 8) != 0) {
        fprintf(stderr,
                "sextant %s: --storage: '%s' is not s3://BUCKET[/PREFIX] or "
                "file:///abs/dir\n",
                cmd, s->url);
        return -1;
    }
    return 0;
}

void cli_storage_apply(const cli_storage *s, sx_db_options *o)
{
    o->storage_url = s->url;
    o->s3_endpoint = s->endpoint;
    o->s3_region = s->region;
    o->cache_limit_bytes = s->cache_mb << 20;
    if (s->memory_limit)
        o->memory_limit_bytes = s->memory_limit;
}
