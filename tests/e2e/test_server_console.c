/*
 * test_server_console.c: the web console's server side (docs/internals/WEBUI.md), through an
 * in-process server: the /v2/sextant/... routes, exact search, the /webui files.
 *
 *   segments      a collection's segments as it grows, seals, gets its index and loses rows:
 *                 the growing segment alone (no files), then one sealed segment whose files are
 *                 the ones in the collection's directory with the sizes stat gives, index state
 *                 Pending -> Built, deleted rows counted; server/describe's summary agrees
 *                 (rows, segments, index Finished, disk bytes = the files' sum) and the data
 *                 directory's total is at least that.
 *   exact         searchParams.exact answers equal a brute force computed here (L2, 16 queries,
 *                 top 10, with and without a filter, over sealed and growing rows); a bad value
 *                 is refused (1100).
 *   filters       parse errors of a filter the dynamic field rewrote (an unknown name becomes a
 *                 key of the hidden column) name the user's position and token, never the hidden
 *                 columns, with and without partitionNames (query, search, delete).
 *   bench         bench/list shows the *.json regular files of <data>/bench only (not a link,
 *                 not a bad name); bench/get returns the parsed file, refuses a path, a missing
 *                 file, a link and a file that is not JSON.
 *   webui         /webui redirects to /webui/; index.html, app.js, app.css come with their
 *                 types, the CSP and nosniff headers and an ETag that answers 304; unknown and
 *                 nested names are 404; no credentials needed for them.
 *   read_only     with a users file: a :ro user's server/describe says canWrite false, the full
 *                 user's true; an API user's canWrite follows its roles (none: false, admin:
 *                 true); no credentials: 401 on the routes.
 *   store         with an object store (file://): the segment and index files are listed as
 *                 local+store once uploaded; server/describe names the store.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "http.h"

#define DIM 16
#define N1  1200 /* sealed */
#define N2  300  /* growing, after the flush */

static const char *g_dir;
static sx_server *g_srv;
static float g_v[N1 + N2][DIM];
static bool g_deleted[N1 + N2];

/* GET with the response headers in th_last.text, one extra request header (or NULL). */
static th_resp *get_with_headers(const char *path, const char *hdr)
{
    const char *hs[2] = { hdr, NULL };
    return th_send("GET", path, NULL, 0, hs, true);
}

static const char *header_of(const char *text, const char *name, char *out, size_t cap)
{
    out[0] = 0;
    size_t nl = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n')) {
        if (*p == '\n')
            p++;
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ')
                v++;
            size_t n = strcspn(v, "\r\n");
            snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), v);
            return out;
        }
    }
    return NULL;
}

static void insert_chunk(size_t from, size_t to)
{
    static char body[1 << 17]; /* th_postf's limit too: 200 rows of 16 floats fit */
    size_t n = (size_t)snprintf(body, sizeof body, "{`collectionName`:`cc`,`data`:[");
    for (size_t i = from; i < to; i++) {
        n += (size_t)snprintf(body + n, sizeof body - n, "%s{`id`:%zu,`vector`:[",
                              i > from ? "," : "", i);
        for (int d = 0; d < DIM; d++)
            n += (size_t)snprintf(body + n, sizeof body - n, "%s%.9g", d ? "," : "",
                                  (double)g_v[i][d]);
        n += (size_t)snprintf(body + n, sizeof body - n, "]}");
    }
    snprintf(body + n, sizeof body - n, "]}");
    (void)th_post_ok("/v2/vectordb/entities/insert", body);
}

static void insert_range(size_t from, size_t to)
{
    for (size_t i = from; i < to; i += 200)
        insert_chunk(i, i + 200 < to ? i + 200 : to);
}

static json_t *segments(void)
{
    return th_post_ok("/v2/sextant/collections/segments", "{`collectionName`:`cc`}");
}

static const char *seg_index_state(json_t *seg)
{
    return json_string_value(
        json_object_get(json_array_get(json_object_get(seg, "indexes"), 0), "state"));
}

static json_t *summary_of(const char *name)
{
    json_t *d = th_post_ok("/v2/sextant/server/describe", "{}");
    json_t *dbs = json_object_get(d, "databases");
    json_t *colls = json_object_get(json_array_get(dbs, 0), "collections");
    for (size_t i = 0; i < json_array_size(colls); i++) {
        json_t *c = json_array_get(colls, i);
        if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0)
            return c;
    }
    FAILF("collection %s not in server/describe: %s", name, th_last.text);
}

static long long jint(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v))
        FAILF("%s is not an integer in %s", k, th_last.text);
    return (long long)json_integer_value(v);
}

static void test_segments(void)
{
    uint64_t s = 0x5eed1234ull;
    for (size_t i = 0; i < N1 + N2; i++)
        for (int d = 0; d < DIM; d++)
            g_v[i][d] = test_randf(&s);
    (void)th_post_ok("/v2/vectordb/collections/create",
                     "{`collectionName`:`cc`,`dimension`:16,`metricType`:`L2`}");
    insert_range(0, N1);
    json_t *segs = segments();
    ASSERT_EQ(json_array_size(segs = json_object_get(segs, "segments")), 1);
    json_t *g = json_array_get(segs, 0);
    ASSERT(strcmp(json_string_value(json_object_get(g, "state")), "Growing") == 0);
    ASSERT_EQ(jint(g, "rows"), N1);
    ASSERT_EQ(json_array_size(json_object_get(g, "files")), 0);

    (void)th_post_ok("/v2/vectordb/collections/flush", "{`collectionName`:`cc`}");
    /* the index builds in the background: Pending (or Built on a fast machine), then Built */
    json_t *sealed = NULL;
    for (int t = 0; t < 600; t++) {
        json_t *d = segments();
        segs = json_object_get(d, "segments");
        ASSERT_EQ(json_array_size(segs), 2);
        sealed = json_array_get(segs, 0);
        const char *st = seg_index_state(sealed);
        ASSERT(strcmp(st, "Pending") == 0 || strcmp(st, "Built") == 0);
        if (strcmp(st, "Built") == 0)
            break;
        usleep(100 * 1000);
    }
    ASSERT(strcmp(seg_index_state(sealed), "Built") == 0);
    ASSERT(strcmp(json_string_value(json_object_get(sealed, "state")), "Sealed") == 0);
    ASSERT(json_is_true(json_object_get(sealed, "persisted")));
    ASSERT_EQ(jint(sealed, "rows"), N1);
    ASSERT_EQ(jint(sealed, "deletedRows"), 0);
    /* every file listed is in the collection's directory with that size */
    json_t *files = json_object_get(sealed, "files");
    ASSERT(json_array_size(files) >= 1);
    char cdir[700];
    snprintf(cdir, sizeof cdir, "%s/collections/cc", g_dir);
    struct stat sb;
    if (stat(cdir, &sb) != 0)
        snprintf(cdir, sizeof cdir, "%s/cc", g_dir);
    long long file_sum = 0;
    bool has_seg = false;
    for (size_t i = 0; i < json_array_size(files); i++) {
        json_t *f = json_array_get(files, i);
        const char *nm = json_string_value(json_object_get(f, "name"));
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", cdir, nm);
        if (stat(path, &sb) != 0)
            FAILF("listed file %s is not in %s", nm, cdir);
        ASSERT_EQ(jint(f, "bytes"), sb.st_size);
        ASSERT(strcmp(json_string_value(json_object_get(f, "location")), "local") == 0);
        has_seg |= strstr(nm, ".sxs") != NULL;
        file_sum += sb.st_size;
    }
    ASSERT(has_seg);

    insert_range(N1, N1 + N2);
    (void)th_post_ok("/v2/vectordb/entities/delete",
                     "{`collectionName`:`cc`,`filter`:`id in [3, 5, 7, 1250]`}");
    g_deleted[3] = g_deleted[5] = g_deleted[7] = g_deleted[1250] = true;
    segs = json_object_get(segments(), "segments");
    ASSERT_EQ(json_array_size(segs), 2);
    ASSERT_EQ(jint(json_array_get(segs, 0), "deletedRows"), 3);
    g = json_array_get(segs, 1);
    ASSERT_EQ(jint(g, "rows"), N2);
    ASSERT_EQ(jint(g, "deletedRows"), 1);

    json_t *c = summary_of("cc");
    ASSERT_EQ(jint(c, "rows"), N1 + N2 - 4);
    ASSERT_EQ(jint(c, "segments"), 1);
    ASSERT_EQ(jint(c, "growingRows"), N2);
    ASSERT(jint(c, "diskBytes") >= file_sum);
    json_t *ix = json_array_get(json_object_get(c, "indexes"), 0);
    ASSERT(strcmp(json_string_value(json_object_get(ix, "state")), "Finished") == 0);
    ASSERT_EQ(jint(ix, "indexedRows"), N1);
    ASSERT_EQ(jint(ix, "totalRows"), N1);
    ASSERT_EQ(jint(ix, "growingRows"), N2);
    json_t *d = th_post_ok("/v2/sextant/server/describe", "{}");
    ASSERT(strcmp(json_string_value(json_object_get(d, "version")), sx_version()) == 0);
    ASSERT(json_is_true(json_object_get(d, "canWrite")));
    ASSERT(json_is_null(json_object_get(d, "user"))); /* no credentials on this server */
    ASSERT(json_number_value(json_object_get(d, "uptimeSeconds")) >= 0);
    ASSERT(jint(json_object_get(d, "disk"), "dataBytes") >= file_sum);
    ASSERT(jint(json_object_get(d, "memory"), "rssBytes") > 0);
    ASSERT(strcmp(json_string_value(json_object_get(d, "storage")), "local") == 0);
    th_expect("/v2/sextant/collections/segments", "{`collectionName`:`nope`}", 100,
              "can't find collection");
}

typedef struct hit {
    float d;
    int id;
} hit;

static int hit_cmp(const void *a, const void *b)
{
    const hit *x = a, *y = b;
    return x->d < y->d ? -1 : x->d > y->d ? 1 : x->id - y->id;
}

static void check_exact(size_t q, const char *filter, int id_below)
{
    static hit all[N1 + N2];
    size_t n = 0;
    for (size_t i = 0; i < N1 + N2; i++) {
        if (g_deleted[i] || (int)i >= id_below)
            continue;
        float s = 0;
        for (int d = 0; d < DIM; d++) {
            float t = g_v[i][d] - g_v[q][d];
            s += t * t;
        }
        all[n++] = (hit){ s, (int)i };
    }
    qsort(all, n, sizeof *all, hit_cmp);
    char body[2048];
    size_t b = (size_t)snprintf(body, sizeof body, "{`collectionName`:`cc`,`data`:[[");
    for (int d = 0; d < DIM; d++)
        b += (size_t)snprintf(body + b, sizeof body - b, "%s%.9g", d ? "," : "", (double)g_v[q][d]);
    snprintf(body + b, sizeof body - b,
             "]],`limit`:10,`searchParams`:{`exact`:true,`params`:{`ef`:10}}%s%s%s}",
             filter ? ",`filter`:`" : "", filter ? filter : "", filter ? "`" : "");
    json_t *h = th_post_ok("/v2/vectordb/entities/search", body);
    ASSERT_EQ(json_array_size(h), 10);
    for (size_t k = 0; k < 10; k++) {
        json_t *e = json_array_get(h, k);
        long long id = jint(e, "id");
        if (id != all[k].id)
            FAILF("query %zu hit %zu: id %lld, the brute force has %d (distance %.6g vs %.6g)", q,
                  k, id, all[k].id, json_number_value(json_object_get(e, "distance")),
                  (double)all[k].d);
        ASSERT_NEAR(json_number_value(json_object_get(e, "distance")), all[k].d, 1e-4);
    }
}

static void test_exact(void)
{
    for (size_t q = 0; q < 16; q++)
        check_exact(q * 91 % (N1 + N2), NULL, 1 << 30);
    for (size_t q = 0; q < 4; q++)
        check_exact(q * 37 + 11, "id < 700", 700);
    th_expect("/v2/vectordb/entities/search",
              "{`collectionName`:`cc`,`data`:[[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]],`limit`:3,"
              "`searchParams`:{`exact`:`maybe`}}",
              1100, "exact must be true or false");
}

/* A filter on a collection with the dynamic field is rewritten before the engine parses it
 * (`foo` -> the hidden column's key); a parse error must still name the user's position and
 * token, which the console draws its caret under. */
static void test_filter_positions(void)
{
    (void)th_post_ok("/v2/vectordb/collections/create",
                     "{`collectionName`:`dyn`,`dimension`:4,`enableDynamicField`:true}");
    (void)th_post_ok("/v2/vectordb/entities/insert",
                     "{`collectionName`:`dyn`,`data`:[{`id`:1,`vector`:[1,2,3,4],`foo`:5}]}");
    const char *none = "{`collectionName`:`dyn`,`limit`:3,";
    char body[512];

    const struct {
        const char *filter, *parts, *want;
    } cases[] = {
        { "tags contains", "", "unexpected 'contains' at position 5" },
        { "id > 0 and foo == ", "", "unexpected end of expression at position 18" },
        { "foo bar", "", "unexpected 'bar' at position 4" },
        { "$meta[\\`a\\`] ==", "", "unexpected end of expression at position 13" },
        { "foo ==", ",`partitionNames`:[`_default`]",
          "unexpected end of expression at position 6" },
        { "foo == 5 and (id > ", ",`partitionNames`:[`_default`]",
          "unexpected end of expression at position 19" },
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(body, sizeof body, "%s`filter`:`%s`%s}", none, cases[i].filter, cases[i].parts);
        th_expect("/v2/vectordb/entities/query", body, 1100, cases[i].want);
        const char *m = json_string_value(json_object_get(th_last.json, "message"));
        if (strstr(m, "sx_meta_") || strstr(m, "sx_part_"))
            FAILF("the message names a hidden column: %s", m);
    }
    th_expect("/v2/vectordb/entities/search",
              "{`collectionName`:`dyn`,`data`:[[1,2,3,4]],`limit`:3,`filter`:`foo bar`}", 1100,
              "unexpected 'bar' at position 4");
    th_expect("/v2/vectordb/entities/delete", "{`collectionName`:`dyn`,`filter`:`x == 1 or`}", 1100,
              "at position 9");
    /* a valid rewritten filter still finds the row */
    json_t *d = th_post_ok("/v2/vectordb/entities/query",
                           "{`collectionName`:`dyn`,`filter`:`foo == 5`,`outputFields`:[`id`]}");
    ASSERT_EQ(json_array_size(d), 1);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fputs(text, f);
    fclose(f);
}

static void test_bench(void)
{
    json_t *l = th_post_ok("/v2/sextant/bench/list", "{}");
    ASSERT_EQ(json_array_size(l), 0); /* no bench/ directory yet */
    char p[1200];
    snprintf(p, sizeof p, "%s/bench", g_dir);
    ASSERT(mkdir(p, 0755) == 0);
    snprintf(p, sizeof p, "%s/bench/run_1.json", g_dir);
    write_file(p, "{\"dataset\":\"x\",\"runs\":[1,2]}");
    snprintf(p, sizeof p, "%s/bench/broken.json", g_dir);
    write_file(p, "{\"dataset\":");
    snprintf(p, sizeof p, "%s/bench/notes.txt", g_dir);
    write_file(p, "not listed");
    snprintf(p, sizeof p, "%s/bench/link.json", g_dir);
    ASSERT(symlink("/etc/hostname", p) == 0);
    l = th_post_ok("/v2/sextant/bench/list", "{}");
    ASSERT_EQ(json_array_size(l), 2);
    bool run1 = false, broken = false;
    for (size_t i = 0; i < 2; i++) {
        const char *nm = json_string_value(json_object_get(json_array_get(l, i), "name"));
        run1 |= strcmp(nm, "run_1.json") == 0;
        broken |= strcmp(nm, "broken.json") == 0;
    }
    ASSERT(run1 && broken);
    json_t *g = th_post_ok("/v2/sextant/bench/get", "{`name`:`run_1.json`}");
    ASSERT(strcmp(json_string_value(json_object_get(g, "dataset")), "x") == 0);
    ASSERT_EQ(json_array_size(json_object_get(g, "runs")), 2);
    th_expect("/v2/sextant/bench/get", "{`name`:`broken.json`}", 1100, "is not JSON");
    th_expect("/v2/sextant/bench/get", "{`name`:`../rest/x.json`}", 1100, "is named");
    th_expect("/v2/sextant/bench/get", "{`name`:`link.json`}", 1100, "no bench result");
    th_expect("/v2/sextant/bench/get", "{`name`:`absent.json`}", 1100, "no bench result");
    th_expect("/v2/sextant/bench/get", "{}", 1802, "Name");
}

static void test_webui(void)
{
    char h[512];
    th_resp *r = get_with_headers("/webui", NULL);
    ASSERT_EQ(r->status, 301);
    ASSERT(header_of(r->text, "Location", h, sizeof h) && strcmp(h, "/webui/") == 0);
    r = get_with_headers("/webui/", NULL);
    ASSERT_EQ(r->status, 200);
    ASSERT(header_of(r->text, "Content-Type", h, sizeof h) && strstr(h, "text/html"));
    ASSERT(header_of(r->text, "Content-Security-Policy", h, sizeof h) &&
           strstr(h, "script-src 'self'") && !strstr(h, "unsafe-inline"));
    ASSERT(header_of(r->text, "X-Content-Type-Options", h, sizeof h) && strcmp(h, "nosniff") == 0);
    ASSERT(strstr(r->text, "app.js") && strstr(r->text, "app.css"));
    const char *names[] = { "app.js", "app.css" };
    const char *types[] = { "text/javascript", "text/css" };
    for (int i = 0; i < 2; i++) {
        char path[64], etag[128], inm[200];
        snprintf(path, sizeof path, "/webui/%s", names[i]);
        r = get_with_headers(path, NULL);
        ASSERT_EQ(r->status, 200);
        ASSERT(header_of(r->text, "Content-Type", h, sizeof h) && strstr(h, types[i]));
        ASSERT(header_of(r->text, "ETag", etag, sizeof etag) && etag[0] == '"');
        ASSERT(r->len > 1000); /* the console itself, not a stub */
        snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
        r = get_with_headers(path, inm);
        ASSERT_EQ(r->status, 304);
    }
    ASSERT_EQ(get_with_headers("/webui/nope.js", NULL)->status, 404);
    ASSERT_EQ(get_with_headers("/webui/a/app.js", NULL)->status, 404);
    ASSERT_EQ(get_with_headers("/webuix", NULL)->status, 404);
}

static void test_read_only(void)
{
    ASSERT_OK(sx_server_stop(g_srv));
    g_srv = NULL;
    char users[1200];
    snprintf(users, sizeof users, "%s/users.txt", g_dir);
    write_file(users, "root:rootpw\nviewer:viewpw:ro\n");
    sx_server_options o = { 0 };
    o.users_file = users;
    g_srv = th_server_start(g_dir, &o);
    ASSERT(g_srv != NULL);
    th_resp *r = th_post("/v2/sextant/server/describe", "{}", "Bearer viewer:viewpw");
    ASSERT_EQ(r->status, 200);
    ASSERT_EQ(th_code(), 0);
    json_t *d = json_object_get(r->json, "data");
    ASSERT(json_is_false(json_object_get(d, "canWrite")));
    ASSERT(json_is_true(json_object_get(d, "readOnly")));
    ASSERT(strcmp(json_string_value(json_object_get(d, "user")), "viewer") == 0);
    r = th_post("/v2/sextant/collections/segments", "{\"collectionName\":\"cc\"}",
                "Bearer viewer:viewpw");
    ASSERT_EQ(th_code(), 0);
    r = th_post("/v2/vectordb/entities/delete", "{\"collectionName\":\"cc\",\"filter\":\"id < 2\"}",
                "Bearer viewer:viewpw");
    ASSERT_EQ(r->status, 403);
    ASSERT_EQ(th_code(), 1401);
    r = th_post("/v2/sextant/server/describe", "{}", "Bearer root:rootpw");
    ASSERT_EQ(th_code(), 0);
    ASSERT(json_is_true(json_object_get(json_object_get(r->json, "data"), "canWrite")));
    /* an API user: what its roles grant decides (public: reads only; admin: everything) */
    r = th_post("/v2/vectordb/users/create", "{\"userName\":\"alice\",\"password\":\"alicepw12\"}",
                "Bearer root:rootpw");
    ASSERT_EQ(th_code(), 0);
    r = th_post("/v2/sextant/server/describe", "{}", "Bearer alice:alicepw12");
    ASSERT_EQ(th_code(), 0);
    d = json_object_get(r->json, "data");
    ASSERT(json_is_false(json_object_get(d, "canWrite")));
    ASSERT(strcmp(json_string_value(json_object_get(d, "user")), "alice") == 0);
    r = th_post("/v2/vectordb/users/grant_role", "{\"userName\":\"alice\",\"roleName\":\"admin\"}",
                "Bearer root:rootpw");
    ASSERT_EQ(th_code(), 0);
    r = th_post("/v2/sextant/server/describe", "{}", "Bearer alice:alicepw12");
    ASSERT_EQ(th_code(), 0);
    ASSERT(json_is_true(json_object_get(json_object_get(r->json, "data"), "canWrite")));
    r = th_post("/v2/sextant/server/describe", "{}", NULL);
    ASSERT_EQ(r->status, 401);
    ASSERT_EQ(th_code(), 1800);
    r = th_post("/v2/sextant/bench/list", "{}", "Bearer viewer:wrong");
    ASSERT_EQ(r->status, 401);
    /* the console's files need none */
    ASSERT_EQ(get_with_headers("/webui/", NULL)->status, 200);
    ASSERT_EQ(get_with_headers("/metrics", NULL)->status, 401);
}

/* With an object store (the file:// one): files uploaded at the flush are listed as held by the
 * store and kept locally; server/describe names the store. */
static void test_store(void)
{
    ASSERT_OK(sx_server_stop(g_srv));
    g_srv = NULL;
    char data[1200], url[1300];
    snprintf(data, sizeof data, "%s/stored", g_dir);
    snprintf(url, sizeof url, "file://%s/bucket", g_dir);
    sx_server_options o = { 0 };
    o.db.storage_url = url;
    g_srv = th_server_start(data, &o);
    ASSERT(g_srv != NULL);
    (void)th_post_ok("/v2/vectordb/collections/create",
                     "{`collectionName`:`cc`,`dimension`:16,`metricType`:`L2`}");
    insert_range(0, 400);
    (void)th_post_ok("/v2/vectordb/collections/flush", "{`collectionName`:`cc`}");
    json_t *d = th_post_ok("/v2/sextant/server/describe", "{}");
    ASSERT(strcmp(json_string_value(json_object_get(d, "storage")), url) == 0);
    /* the segment file at once; the index file once built and uploaded */
    bool seg_held = false, idx_held = false;
    for (int t = 0; t < 300 && !(seg_held && idx_held); t++) {
        json_t *segs = json_object_get(segments(), "segments");
        json_t *files = json_object_get(json_array_get(segs, 0), "files");
        for (size_t i = 0; i < json_array_size(files); i++) {
            json_t *f = json_array_get(files, i);
            const char *nm = json_string_value(json_object_get(f, "name"));
            bool held =
                strcmp(json_string_value(json_object_get(f, "location")), "local+store") == 0;
            if (strstr(nm, ".sxs"))
                seg_held |= held;
            if (strstr(nm, ".idx"))
                idx_held |= held;
        }
        if (!(seg_held && idx_held))
            usleep(100 * 1000);
    }
    if (!seg_held || !idx_held)
        FAILF("files not listed as in the store: segment %d, index %d: %s", seg_held, idx_held,
              th_last.text);
}

int main(void)
{
    g_dir = test_tmpdir("srv_console");
    g_srv = th_server_start(g_dir, NULL);
    if (!g_srv)
        return 1;
    RUN(test_segments);
    RUN(test_exact);
    RUN(test_filter_positions);
    RUN(test_bench);
    RUN(test_webui);
    RUN(test_read_only);
    RUN(test_store);
    if (g_srv && sx_server_stop(g_srv) != SX_OK) {
        fprintf(stderr, "FAIL sx_server_stop: %s\n", sx_errmsg());
        return 1;
    }
    return TEST_DONE();
}
