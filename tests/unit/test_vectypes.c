/*
 * test_vectypes.c: FLOAT16, BFLOAT16 and BINARY vector fields, from the bits up.
 *
 *   half_roundtrip   every float16 and bfloat16 bit pattern widens and narrows back to itself
 *                    (NaNs stay NaN), and every ISA table widens it as the scalar code does
 *   half_rounding    narrowing is round-to-nearest-even: against a search over all float16
 *                    values for 200,000 floats and the edges (65504, 65520, subnormals, ties);
 *                    bfloat16 against the RNE rule on the bits
 *   kernels          every ISA table's float16 / bfloat16 kernels against a double oracle on the
 *                    widened values (dims 1..130 and 768), and HAMMING / JACCARD bit-exact against
 *                    a bit-by-bit count (1..100 bytes)
 *   engine_typed     a collection with a FLOAT16 (L2), a BFLOAT16 (IP) and a BINARY (HAMMING)
 *                    field: exact search before any index against a brute-force oracle over the
 *                    stored values, get returns the inserted bits, then HNSW / FLAT /
 *                    BIN_IVF_FLAT indexes (FLAT and BIN_IVF_FLAT probing every list exact, HNSW
 *                    recall@10 >= 0.95, BIN_IVF_FLAT with 2 of 8 lists >= 0.8 on clustered bits),
 *                    a filter, deletes,
 *                    a reopen that loads the index files, and a WAL tail replayed bit for bit
 *   cosine_jaccard   COSINE on float16 (rows stored normalised, similarities as the oracle's) and
 *                    JACCARD with BIN_FLAT, exact
 *   typed_errors     what is refused and how: binary dims not a multiple of 8, NaN / infinite
 *                    16-bit values, bfloat16 norms past SX_MAX_SQNORM, float queries on a binary
 *                    field, index types and metrics that do not fit the field's type, bulk import
 *   bin_ivf_io       BIN_IVF_FLAT serialize / deserialize round trip; nprobe 1 with k over a list
 *                    (more lists fill k) and a 3-row filter (those 3); every truncation and a
 *                    flipped byte refused as SX_ECORRUPT
 */
#include <math.h>
#include <sextant.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "index/flat/flat.h"
#include "index/index.h"
#include "util/buf.h"
#include "util/half.h"
#include "vector/dist.h"

static uint64_t rng;

/* ---------------------------------------------------------------- conversions */

static bool f16_is_nan(uint16_t h)
{
    return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0;
}

static bool bf16_is_nan(uint16_t b)
{
    return (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) != 0;
}

static void half_roundtrip(void)
{
    const sx__dist_ops *tabs[3] = { sx__dist_scalar(), sx__dist_avx2(), sx__dist_avx512() };
    static uint16_t all[65536];
    static float wide[3][65536];
    for (uint32_t u = 0; u < 65536; u++)
        all[u] = (uint16_t)u;
    for (int bf = 0; bf < 2; bf++) {
        for (int t = 0; t < 3; t++)
            if (tabs[t])
                (bf ? tabs[t]->bf16_to_f32 : tabs[t]->f16_to_f32)(all, wide[t], 65536);
        for (uint32_t u = 0; u < 65536; u++) {
            uint16_t h = (uint16_t)u;
            float f = bf ? sx__bf16_to_f32(h) : sx__f16_to_f32(h);
            bool nan = bf ? bf16_is_nan(h) : f16_is_nan(h);
            ASSERT_EQ(isnan(f) != 0, nan);
            uint16_t back = bf ? sx__f32_to_bf16(f) : sx__f32_to_f16(f);
            if (nan)
                ASSERT(bf ? bf16_is_nan(back) : f16_is_nan(back));
            else if (back != h)
                FAILF("%s 0x%04x -> %g -> 0x%04x", bf ? "bfloat16" : "float16", u, (double)f, back);
            for (int t = 1; t < 3; t++) {
                if (!tabs[t])
                    continue;
                uint32_t a = sx__f32_bits(wide[0][u]), b = sx__f32_bits(wide[t][u]);
                if (!nan && a != b)
                    FAILF("%s table %s widens 0x%04x to 0x%08x, scalar to 0x%08x",
                          bf ? "bfloat16" : "float16", tabs[t]->isa, u, b, a);
            }
        }
    }
}

/* The float16 nearest to x (round half to even), by binary search over the positive patterns
 * (their values increase with the bits). */
static uint16_t f16_oracle(float x)
{
    uint16_t sign = signbit(x) ? 0x8000u : 0;
    double a = fabs((double)x);
    if (a >= 65520.0)
        return sign | 0x7C00u;
    uint32_t lo = 0, hi = 0x7BFFu; /* largest h with value <= a */
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if ((double)sx__f16_to_f32((uint16_t)mid) <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    double below = (double)sx__f16_to_f32((uint16_t)lo);
    if (below == a || lo == 0x7BFFu)
        return sign | (uint16_t)lo;
    double above = (double)sx__f16_to_f32((uint16_t)(lo + 1));
    double dl = a - below, du = above - a;
    uint32_t pick = dl < du ? lo : du < dl ? lo + 1 : ((lo & 1u) ? lo + 1 : lo);
    return sign | (uint16_t)pick;
}

static uint16_t bf16_oracle(float x)
{
    uint32_t u = sx__f32_bits(x);
    uint32_t lo = u >> 16, rest = u & 0xFFFFu;
    if (rest > 0x8000u || (rest == 0x8000u && (lo & 1u)))
        lo++;
    return (uint16_t)lo;
}

static void half_rounding(void)
{
    const float edges[] = { 65504.0f,  65519.99f,      65520.0f,      65536.0f,   1e-8f,
                            5.96e-8f,  2.98e-8f,       2.99e-8f,      6.1035e-5f, 6.1e-5f,
                            1.0f,      1.00048828125f, 1.0009765625f, 0.1f,       -0.1f,
                            -65519.0f, 3.0e38f,        -3.4e38f,      1e-40f,     0.0f,
                            -0.0f,     2049.0f,        2051.0f,       4097.0f };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        ASSERT_EQ(sx__f32_to_f16(edges[i]), f16_oracle(edges[i]));
        ASSERT_EQ(sx__f32_to_bf16(edges[i]), bf16_oracle(edges[i]));
    }
    for (int i = 0; i < 200000; i++) {
        /* random bits in a range that covers subnormal float16 to past its overflow */
        uint32_t u = (uint32_t)test_rand(&rng);
        uint32_t e = 100u + (uint32_t)(test_rand(&rng) % 50u); /* 2^-27 .. 2^22 */
        float x = sx__f32_from_bits((u & 0x807FFFFFu) | e << 23);
        if (sx__f32_to_f16(x) != f16_oracle(x))
            FAILF("float16 of %.9g: 0x%04x, oracle 0x%04x", (double)x, sx__f32_to_f16(x),
                  f16_oracle(x));
        float y = sx__f32_from_bits(u & 0xFF7FFFFFu); /* any finite float */
        if (sx__f32_to_bf16(y) != bf16_oracle(y))
            FAILF("bfloat16 of %.9g: 0x%04x, oracle 0x%04x", (double)y, sx__f32_to_bf16(y),
                  bf16_oracle(y));
    }
}

/* ---------------------------------------------------------------- kernels */

static void kernels(void)
{
    const sx__dist_ops *tabs[3] = { sx__dist_scalar(), sx__dist_avx2(), sx__dist_avx512() };
    size_t dims[140];
    size_t nd = 0;
    for (size_t d = 1; d <= 130; d++)
        dims[nd++] = d;
    dims[nd++] = 768;
    dims[nd++] = 1000;
    float *q = malloc(1000 * sizeof *q);
    uint16_t *x = malloc(1000 * sizeof *x);
    for (size_t di = 0; di < nd; di++) {
        size_t dim = dims[di];
        for (int bf = 0; bf < 2; bf++) {
            double l2 = 0, ip = 0, mag = 0;
            for (size_t i = 0; i < dim; i++) {
                q[i] = test_randf(&rng) * 4.0f - 2.0f;
                float v = test_randf(&rng) * 4.0f - 2.0f;
                x[i] = bf ? sx__f32_to_bf16(v) : sx__f32_to_f16(v);
                double w = (double)(bf ? sx__bf16_to_f32(x[i]) : sx__f16_to_f32(x[i]));
                l2 += ((double)q[i] - w) * ((double)q[i] - w);
                ip += (double)q[i] * w;
                mag += fabs((double)q[i] * w) + ((double)q[i] - w) * ((double)q[i] - w);
            }
            double tol = 1e-6 * mag + 1e-12;
            for (int t = 0; t < 3; t++) {
                const sx__dist_ops *o = tabs[t];
                if (!o)
                    continue;
                float a = bf ? o->l2sq_bf16(q, x, dim) : o->l2sq_f16(q, x, dim);
                float b = bf ? o->ip_bf16(q, x, dim) : o->ip_f16(q, x, dim);
                float c = bf ? o->nip_bf16(q, x, dim) : o->nip_f16(q, x, dim);
                if (fabs((double)a - l2) > tol || fabs((double)b - ip) > tol || c != -b)
                    FAILF("%s %s dim %zu: l2 %.9g (want %.9g) ip %.9g (want %.9g) nip %.9g", o->isa,
                          bf ? "bf16" : "f16", dim, (double)a, l2, (double)b, ip, (double)c);
            }
        }
    }
    uint8_t a[100], b[100];
    for (size_t n = 1; n <= 100; n++) {
        for (int rep = 0; rep < 4; rep++) {
            for (size_t i = 0; i < n; i++) {
                a[i] = (uint8_t)test_rand(&rng);
                b[i] = rep == 3 ? 0 : (uint8_t)test_rand(&rng);
                if (rep == 3)
                    a[i] = 0; /* both empty: JACCARD 0 */
            }
            unsigned ham = 0, both = 0, any = 0;
            for (size_t i = 0; i < n * 8; i++) {
                unsigned x1 = a[i / 8] >> (7 - i % 8) & 1u, x2 = b[i / 8] >> (7 - i % 8) & 1u;
                ham += x1 != x2;
                both += x1 & x2;
                any += x1 | x2;
            }
            float jac = any ? (float)(1.0 - (double)both / (double)any) : 0.0f;
            for (int t = 0; t < 3; t++) {
                if (!tabs[t])
                    continue;
                float blk[2];
                tabs[t]->hamming_n(a, b, 1, n, blk);
                tabs[t]->jaccard_n(a, b, 1, n, blk + 1);
                ASSERT_EQ((long)blk[0], (long)ham);
                ASSERT(blk[1] == jac);
                ASSERT_EQ((long)tabs[t]->hamming(a, b, n), (long)ham);
                if (tabs[t]->jaccard(a, b, n) != jac)
                    FAILF("%s jaccard of %zu bytes: %.9g, want %.9g", tabs[t]->isa, n,
                          (double)tabs[t]->jaccard(a, b, n), (double)jac);
            }
        }
    }
    /* the block forms over many rows: each row's distance as the one-row kernel's */
    static uint8_t rows[300][80], qq[80];
    for (size_t i = 0; i < 300; i++)
        for (size_t j = 0; j < 80; j++)
            rows[i][j] = (uint8_t)test_rand(&rng);
    for (size_t j = 0; j < 80; j++)
        qq[j] = (uint8_t)test_rand(&rng);
    static float outh[300], outj[300];
    for (int t = 0; t < 3; t++) {
        if (!tabs[t])
            continue;
        for (size_t nb = 16; nb <= 80; nb += 64) {
            /* rows nb bytes apart: the first nb bytes of each 80-byte row, packed */
            static uint8_t packed[300 * 80];
            for (size_t i = 0; i < 300; i++)
                memcpy(packed + i * nb, rows[i], nb);
            tabs[t]->hamming_n(qq, packed, 300, nb, outh);
            tabs[t]->jaccard_n(qq, packed, 300, nb, outj);
            for (size_t i = 0; i < 300; i++) {
                ASSERT(outh[i] == tabs[0]->hamming(qq, packed + i * nb, nb));
                ASSERT(outj[i] == tabs[0]->jaccard(qq, packed + i * nb, nb));
            }
        }
    }
    free(q);
    free(x);
}

/* ---------------------------------------------------------------- engine */

#define N  2400
#define DH 40  /* float16 "h", L2 */
#define DB 33  /* bfloat16 "b", IP */
#define DX 136 /* binary "x", HAMMING: 17 bytes */
#define XB (DX / 8)
#define NQ 12
#define K  10

static uint16_t vh[N + 200][DH], vb[N + 200][DB];
static uint8_t vx[N + 200][XB];
/* binary rows and queries: one of 8 random centres with each bit flipped with probability 1/8,
 * so that lists mean something (uniform random bits have no clusters to find) */
static uint8_t centres[8][XB];

static void near_centre(uint8_t *out)
{
    const uint8_t *c = centres[test_rand(&rng) % 8];
    for (size_t d = 0; d < XB; d++) {
        uint8_t flip = 0;
        for (int b = 0; b < 8; b++)
            flip |= (uint8_t)((test_rand(&rng) % 8 == 0) << b);
        out[d] = c[d] ^ flip;
    }
}

static bool live[N + 200];
static char dir[512];

static sx_db_options opts(void)
{
    sx_db_options o = { 0 };
    o.sync_mode = SX_SYNC_NONE;
    o.build_threads = 2;
    o.segment_max_bytes = (uint64_t)(DH * 2 + DB * 2 + XB) * 900; /* a few segments */
    return o;
}

static void fill_row(size_t i)
{
    for (size_t d = 0; d < DH; d++)
        vh[i][d] = sx__f32_to_f16(test_randf(&rng) * 2.0f - 1.0f);
    for (size_t d = 0; d < DB; d++)
        vb[i][d] = sx__f32_to_bf16(test_randf(&rng) * 2.0f - 1.0f);
    near_centre(vx[i]);
    live[i] = true;
}

static void insert_rows(sx_collection *c, size_t from, size_t to)
{
    for (size_t i0 = from; i0 < to; i0 += 400) {
        size_t n = to - i0 < 400 ? to - i0 : 400;
        int64_t ids[400];
        for (size_t i = 0; i < n; i++) {
            fill_row(i0 + i);
            ids[i] = (int64_t)(i0 + i);
        }
        sx_column cols[4] = {
            { .name = "id", .type = SX_FIELD_INT64, .data = ids },
            { .name = "h", .type = SX_FIELD_FLOAT16_VECTOR, .data = vh[i0] },
            { .name = "b", .type = SX_FIELD_BFLOAT16_VECTOR, .data = vb[i0] },
            { .name = "x", .type = SX_FIELD_BINARY_VECTOR, .data = vx[i0] },
        };
        sx_batch b = { n, cols, 4 };
        ASSERT_OK(sx_insert(c, &b, NULL));
    }
}

/* The oracle's internal distance ("smaller is better") of row i to query q of field f. */
static double oracle(char f, const void *q, size_t i)
{
    double s = 0;
    if (f == 'h') {
        const float *qq = q;
        for (size_t d = 0; d < DH; d++) {
            double t = (double)qq[d] - (double)sx__f16_to_f32(vh[i][d]);
            s += t * t;
        }
    } else if (f == 'b') {
        const float *qq = q;
        for (size_t d = 0; d < DB; d++)
            s -= (double)qq[d] * (double)sx__bf16_to_f32(vb[i][d]);
    } else {
        const uint8_t *qq = q;
        for (size_t d = 0; d < XB; d++)
            s += __builtin_popcount((unsigned)(qq[d] ^ vx[i][d]));
    }
    return s;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Searches field f with NQ random queries; exact: every hit's distance is the oracle's and the
 * k distances are the oracle's k smallest (ties may pick either row); else recall@K >= min_rec.
 * filter_lt: only ids below it (0: none). */
static void check_search(sx_collection *c,
                         char f,
                         const sx_param *sp,
                         size_t nsp,
                         bool exact,
                         double min_rec,
                         int64_t filter_lt)
{
    static float qf[NQ][DH > DB ? DH : DB];
    static uint8_t qx[NQ][XB];
    size_t dim = f == 'h' ? DH : DB;
    for (size_t q = 0; q < NQ; q++) {
        for (size_t d = 0; d < dim; d++)
            qf[q][d] = test_randf(&rng) * 2.0f - 1.0f;
        near_centre(qx[q]);
    }
    /* queries packed at their own stride */
    float *qs = malloc(NQ * dim * sizeof *qs);
    for (size_t q = 0; q < NQ; q++)
        memcpy(qs + q * dim, qf[q], dim * sizeof(float));
    char filter[64] = "";
    if (filter_lt)
        (void)snprintf(filter, sizeof filter, "id < %lld", (long long)filter_lt);
    const char *fname = f == 'h' ? "h" : f == 'b' ? "b" : "x";
    sx_search_req req = { .queries = f == 'x' ? NULL : qs,
                          .bqueries = f == 'x' ? &qx[0][0] : NULL,
                          .nq = NQ,
                          .k = K,
                          .filter = filter_lt ? filter : NULL,
                          .params = sp,
                          .n_params = nsp,
                          .metric = -1,
                          .anns_field = fname };
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_search(c, &req, &rs));
    double *all = malloc((N + 200) * sizeof *all);
    size_t base = 0, found = 0, want = 0;
    for (size_t q = 0; q < NQ; q++) {
        const void *qv = f == 'x' ? (const void *)qx[q] : (const void *)qf[q];
        size_t na = 0;
        for (size_t i = 0; i < N + 200; i++)
            if (live[i] && (!filter_lt || (int64_t)i < filter_lt))
                all[na++] = oracle(f, qv, i);
        qsort(all, na, sizeof *all, cmp_d);
        size_t k = na < K ? na : K;
        ASSERT_EQ(rs->topks[q], k);
        double kth = all[k - 1];
        for (size_t h = 0; h < k; h++) {
            int64_t id = ((const int64_t *)rs->cols[0].data)[base + h];
            ASSERT(id >= 0 && id < N + 200 && live[id]);
            if (filter_lt)
                ASSERT(id < filter_lt);
            double od = oracle(f, qv, (size_t)id);
            double user = f == 'b' ? -od : od; /* IP is answered as a similarity */
            double tol = f == 'x' ? 0 : 1e-4 * (1 + fabs(od));
            if (fabs((double)rs->distances[base + h] - user) > tol)
                FAILF("field %c query %zu hit %zu: distance %.9g, oracle %.9g", f, q, h,
                      (double)rs->distances[base + h], user);
            if (exact && fabs(od - all[h]) > tol)
                FAILF("field %c query %zu rank %zu: %.9g, the oracle's %.9g", f, q, h, od, all[h]);
            found += od <= kth + tol;
        }
        want += k;
        base += rs->topks[q];
    }
    double rec = (double)found / (double)want;
    if (getenv("SX_VT_VERBOSE"))
        fprintf(stderr, "field %c: recall@%d %.3f (%zu params)\n", f, K, rec, nsp);
    if (rec < min_rec)
        FAILF("field %c: recall@%d %.3f < %.3f", f, K, rec, min_rec);
    free(all);
    free(qs);
    sx_rowset_free(rs);
}

static void check_get(sx_collection *c, size_t from, size_t to)
{
    size_t n = to - from;
    int64_t *keys = malloc(n * sizeof *keys);
    for (size_t i = 0; i < n; i++)
        keys[i] = (int64_t)(from + i);
    sx_keys k = { n, keys, NULL };
    const char *outs[3] = { "h", "b", "x" };
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_get(c, &k, outs, 3, &rs));
    size_t r = 0;
    for (size_t i = from; i < to; i++) {
        if (!live[i])
            continue;
        ASSERT(r < rs->n_rows);
        ASSERT_EQ(((const int64_t *)rs->cols[0].data)[r], (int64_t)i);
        ASSERT_EQ(rs->cols[1].type, SX_FIELD_FLOAT16_VECTOR);
        ASSERT_EQ(rs->dims[1], DH);
        ASSERT(memcmp((const uint16_t *)rs->cols[1].data + r * DH, vh[i], sizeof vh[i]) == 0);
        ASSERT(memcmp((const uint16_t *)rs->cols[2].data + r * DB, vb[i], sizeof vb[i]) == 0);
        ASSERT(memcmp((const uint8_t *)rs->cols[3].data + r * XB, vx[i], XB) == 0);
        r++;
    }
    ASSERT_EQ(rs->n_rows, r);
    sx_rowset_free(rs);
    free(keys);
}

static void engine_typed(void)
{
    snprintf(dir, sizeof dir, "%s", test_tmpdir("vectypes"));
    for (size_t c8 = 0; c8 < 8; c8++)
        for (size_t d = 0; d < XB; d++)
            centres[c8][d] = (uint8_t)test_rand(&rng);
    sx_db_options o = opts();
    sx_db *db = NULL;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    sx_field_def fields[4] = {
        { .name = "id", .type = SX_FIELD_INT64, .is_primary = true },
        { .name = "h", .type = SX_FIELD_FLOAT16_VECTOR, .dim = DH },
        { .name = "b", .type = SX_FIELD_BFLOAT16_VECTOR, .dim = DB },
        { .name = "x", .type = SX_FIELD_BINARY_VECTOR, .dim = DX },
    };
    sx_collection_def def = { "t", fields, 4, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &def));
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "t", &c));
    ASSERT_OK(sx_collection_set_metric_on(c, "b", SX_METRIC_IP));
    sx_index_info ii;
    ASSERT_OK(sx_index_describe_on(c, "x", &ii));
    ASSERT_EQ(ii.metric, SX_METRIC_HAMMING); /* a binary field's default under an L2 def */

    insert_rows(c, 0, N);
    check_get(c, 0, N);
    check_search(c, 'h', NULL, 0, true, 1.0, 0);
    check_search(c, 'b', NULL, 0, true, 1.0, 0);
    check_search(c, 'x', NULL, 0, true, 1.0, 0);

    sx_param hp[2] = { { "M", "16" }, { "efConstruction", "100" } };
    ASSERT_OK(sx_index_create_on(c, "h", "HNSW", hp, 2));
    ASSERT_OK(sx_index_create_on(c, "b", "FLAT", NULL, 0));
    sx_param xp[1] = { { "nlist", "8" } };
    ASSERT_OK(sx_index_create_on(c, "x", "BIN_IVF_FLAT", xp, 1));
    ASSERT_OK(sx_flush(c));
    ASSERT_OK(sx_index_wait(c, 120000));
    ASSERT_OK(sx_index_describe_on(c, "x", &ii));
    ASSERT_EQ(ii.state, SX_INDEX_FINISHED);
    if (getenv("SX_VT_VERBOSE"))
        fprintf(stderr, "x index: %s, %llu of %llu rows indexed\n", ii.type,
                (unsigned long long)ii.indexed_rows, (unsigned long long)ii.total_rows);

    sx_param ef[1] = { { "ef", "200" } }, all8[1] = { { "nprobe", "8" } },
             two[1] = { { "nprobe", "2" } };
    check_search(c, 'h', ef, 1, false, 0.95, 0);
    check_search(c, 'b', NULL, 0, true, 1.0, 0);
    check_search(c, 'x', all8, 1, true, 1.0, 0);
    check_search(c, 'x', two, 1, false, 0.8, 0);
    check_search(c, 'x', all8, 1, true, 1.0, 1000); /* a filter */
    check_search(c, 'b', NULL, 0, true, 1.0, 700);

    /* deletes: every third row of the first 600 */
    int64_t del[200];
    for (int i = 0; i < 200; i++) {
        del[i] = i * 3;
        live[i * 3] = false;
    }
    sx_keys dk = { 200, del, NULL };
    ASSERT_OK(sx_delete(c, &dk, NULL));
    check_search(c, 'x', all8, 1, true, 1.0, 600);
    check_search(c, 'b', NULL, 0, true, 1.0, 0);

    /* reopen: the index files load (typed deserialize); a WAL tail replays bit for bit */
    sx_collection_release(c);
    sx_db_close(db);
    ASSERT_OK(sx_db_open(dir, &o, &db));
    ASSERT_OK(sx_collection_open(db, "t", &c));
    ASSERT_OK(sx_index_wait(c, 120000));
    check_search(c, 'h', ef, 1, false, 0.95, 0);
    check_search(c, 'x', all8, 1, true, 1.0, 0);
    insert_rows(c, N, N + 200);
    sx_collection_release(c);
    sx_db_close(db);
    ASSERT_OK(sx_db_open(dir, &o, &db));
    ASSERT_OK(sx_collection_open(db, "t", &c));
    check_get(c, N - 100, N + 200);
    check_search(c, 'b', NULL, 0, true, 1.0, 0);
    check_search(c, 'x', all8, 1, true, 1.0, 0);
    /* compaction rewrites the typed columns (deleted rows go) */
    ASSERT_OK(sx_compact(c));
    ASSERT_OK(sx_index_wait(c, 120000));
    check_get(c, 0, 300);
    check_search(c, 'x', all8, 1, true, 1.0, 0);
    check_search(c, 'h', ef, 1, false, 0.95, 0);
    sx_collection_release(c);
    sx_db_close(db);
}

static void cosine_jaccard(void)
{
    const char *d = test_tmpdir("vectypes_cj");
    sx_db_options o = opts();
    sx_db *db = NULL;
    ASSERT_OK(sx_db_open(d, &o, &db));
    sx_field_def fields[3] = {
        { .name = "id", .type = SX_FIELD_INT64, .is_primary = true },
        { .name = "h", .type = SX_FIELD_FLOAT16_VECTOR, .dim = 24 },
        { .name = "x", .type = SX_FIELD_BINARY_VECTOR, .dim = 64 },
    };
    sx_collection_def def = { "cj", fields, 3, SX_METRIC_JACCARD };
    ASSERT_OK(sx_collection_create(db, &def));
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "cj", &c));
    sx_index_info ii;
    ASSERT_OK(sx_index_describe_on(c, "h", &ii));
    ASSERT_EQ(ii.metric, SX_METRIC_L2); /* a float field's default under a binary def */
    ASSERT_OK(sx_collection_set_metric_on(c, "h", SX_METRIC_COSINE));

    enum { M = 500 };

    static uint16_t h[M][24];
    static uint8_t x[M][8];
    static float hf[M][24];
    int64_t ids[M];
    for (int i = 0; i < M; i++) {
        ids[i] = i;
        for (int k = 0; k < 24; k++) {
            hf[i][k] = (test_randf(&rng) - 0.5f) * 40.0f;
            h[i][k] = sx__f32_to_f16(hf[i][k]);
            hf[i][k] = sx__f16_to_f32(h[i][k]);
        }
        for (int k = 0; k < 8; k++)
            x[i][k] = (uint8_t)(test_rand(&rng) & test_rand(&rng)); /* sparse-ish bits */
    }
    x[7][0] = x[7][1] = x[7][2] = x[7][3] = x[7][4] = x[7][5] = x[7][6] = x[7][7] = 0;
    sx_column cols[3] = { { .name = "id", .type = SX_FIELD_INT64, .data = ids },
                          { .name = "h", .type = SX_FIELD_FLOAT16_VECTOR, .data = h },
                          { .name = "x", .type = SX_FIELD_BINARY_VECTOR, .data = x } };
    sx_batch b = { M, cols, 3 };
    ASSERT_OK(sx_insert(c, &b, NULL));
    ASSERT_OK(sx_index_create_on(c, "x", "BIN_FLAT", NULL, 0));
    ASSERT_OK(sx_flush(c));
    ASSERT_OK(sx_index_wait(c, 60000));
    /* stored normalised: |row| = 1 within float16 rounding */
    const char *oh = "h";
    sx_rowset *rs = NULL;
    sx_keys k = { 3, ids, NULL };
    ASSERT_OK(sx_get(c, &k, &oh, 1, &rs));
    for (size_t r = 0; r < 3; r++) {
        double n2 = 0;
        for (int j = 0; j < 24; j++) {
            double v = (double)sx__f16_to_f32(((const uint16_t *)rs->cols[1].data)[r * 24 + j]);
            n2 += v * v;
        }
        ASSERT_NEAR(sqrt(n2), 1.0, 4e-3);
    }
    sx_rowset_free(rs);
    /* COSINE: similarity to the (unnormalised) query, as the oracle over the inserted values */
    float q[24];
    for (int j = 0; j < 24; j++)
        q[j] = test_randf(&rng) - 0.5f;
    sx_search_req req = { .queries = q, .nq = 1, .k = 5, .metric = -1, .anns_field = "h" };
    ASSERT_OK(sx_search(c, &req, &rs));
    double qn = 0;
    for (int j = 0; j < 24; j++)
        qn += (double)q[j] * (double)q[j];
    double best = -2;
    for (int i = 0; i < M; i++) {
        double dot = 0, rn = 0;
        for (int j = 0; j < 24; j++) {
            dot += (double)q[j] * (double)hf[i][j];
            rn += (double)hf[i][j] * (double)hf[i][j];
        }
        double cs = dot / sqrt(qn * rn);
        best = cs > best ? cs : best;
    }
    ASSERT_EQ(rs->topks[0], 5);
    ASSERT_NEAR(rs->distances[0], best, 3e-3);
    for (int h2 = 1; h2 < 5; h2++)
        ASSERT(rs->distances[h2] <= rs->distances[h2 - 1]);
    sx_rowset_free(rs);
    /* JACCARD with BIN_FLAT: exact, the empty row is at distance 1 from any non-empty query and
     * 0 from the empty query */
    uint8_t bq[2][8] = { { 0 }, { 0xF0, 0x0F, 0, 0xFF, 1, 2, 3, 4 } };
    sx_search_req jr = { .bqueries = &bq[0][0], .nq = 2, .k = 3, .metric = -1, .anns_field = "x" };
    ASSERT_OK(sx_search(c, &jr, &rs));
    ASSERT_EQ(((const int64_t *)rs->cols[0].data)[0], 7);
    ASSERT_NEAR(rs->distances[0], 0.0, 0);
    size_t at = rs->topks[0];
    double bestj = 2;
    for (int i = 0; i < M; i++) {
        unsigned both = 0, any = 0;
        for (int j = 0; j < 8; j++) {
            both += (unsigned)__builtin_popcount((unsigned)(x[i][j] & bq[1][j]));
            any += (unsigned)__builtin_popcount((unsigned)(x[i][j] | bq[1][j]));
        }
        double jd = any ? 1.0 - (double)both / any : 0.0;
        bestj = jd < bestj ? jd : bestj;
    }
    ASSERT_NEAR(rs->distances[at], bestj, 1e-6);
    sx_rowset_free(rs);
    sx_collection_release(c);
    sx_db_close(db);
}

static void typed_errors(void)
{
    const char *d = test_tmpdir("vectypes_err");
    sx_db_options o = opts();
    sx_db *db = NULL;
    ASSERT_OK(sx_db_open(d, &o, &db));
    sx_field_def bad[2] = { { .name = "id", .type = SX_FIELD_INT64, .is_primary = true },
                            { .name = "x", .type = SX_FIELD_BINARY_VECTOR, .dim = 12 } };
    sx_collection_def bdef = { "bad", bad, 2, SX_METRIC_HAMMING };
    ASSERT_STATUS(sx_collection_create(db, &bdef), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "multiple of 8") != NULL);

    sx_field_def fields[4] = {
        { .name = "id", .type = SX_FIELD_INT64, .is_primary = true },
        { .name = "h", .type = SX_FIELD_FLOAT16_VECTOR, .dim = 4 },
        { .name = "b", .type = SX_FIELD_BFLOAT16_VECTOR, .dim = 4 },
        { .name = "x", .type = SX_FIELD_BINARY_VECTOR, .dim = 16 },
    };
    sx_collection_def def = { "e", fields, 4, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &def));
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "e", &c));
    int64_t id[1] = { 1 };
    uint16_t h[4] = { 0x3C00, 0x3C00, 0x3C00, 0x3C00 }, bv[4] = { 0x3F80, 0, 0, 0 };
    uint8_t x[2] = { 1, 2 };
    sx_column cols[4] = { { .name = "id", .type = SX_FIELD_INT64, .data = id },
                          { .name = "h", .type = SX_FIELD_FLOAT16_VECTOR, .data = h },
                          { .name = "b", .type = SX_FIELD_BFLOAT16_VECTOR, .data = bv },
                          { .name = "x", .type = SX_FIELD_BINARY_VECTOR, .data = x } };
    sx_batch b = { 1, cols, 4 };
    h[2] = 0x7E00; /* NaN */
    ASSERT_STATUS(sx_insert(c, &b, NULL), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "NaN or infinite") != NULL);
    h[2] = 0xFC00; /* -inf */
    ASSERT_STATUS(sx_insert(c, &b, NULL), SX_EINVAL);
    h[2] = 0x3C00;
    bv[0] = bv[1] = bv[2] = bv[3] = 0x7F7F; /* ~3.39e38 each: the squared norm overflows */
    ASSERT_STATUS(sx_insert(c, &b, NULL), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "squared norm") != NULL);
    bv[0] = 0x3F80;
    bv[1] = bv[2] = bv[3] = 0;
    ASSERT_OK(sx_insert(c, &b, NULL));
    /* a float column on a binary field: the wrong type */
    cols[3].type = SX_FIELD_FLOAT_VECTOR;
    id[0] = 2;
    ASSERT_STATUS(sx_insert(c, &b, NULL), SX_EINVAL);

    float qf[16] = { 0 };
    sx_search_req r1 = { .queries = qf, .nq = 1, .k = 1, .metric = -1, .anns_field = "x" };
    sx_rowset *rs = NULL;
    ASSERT_STATUS(sx_search(c, &r1, &rs), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "binary queries") != NULL);
    uint8_t bq[2] = { 0 };
    sx_search_req r2 = { .bqueries = bq, .nq = 1, .k = 1, .metric = -1, .anns_field = "h" };
    ASSERT_STATUS(sx_search(c, &r2, &rs), SX_EINVAL);
    sx_search_req r3 = {
        .queries = qf, .nq = 1, .k = 1, .metric = SX_METRIC_L2, .anns_field = "x", .bqueries = bq
    };
    ASSERT_STATUS(sx_search(c, &r3, &rs), SX_EINVAL); /* the field's metric is HAMMING */

    ASSERT_STATUS(sx_index_create_on(c, "x", "HNSW", NULL, 0), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "BIN_IVF_FLAT") != NULL);
    ASSERT_STATUS(sx_index_create_on(c, "h", "IVF_FLAT", NULL, 0), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "FLOAT16_VECTOR") != NULL);
    ASSERT_STATUS(sx_index_create_on(c, "b", "BIN_IVF_FLAT", NULL, 0), SX_EINVAL);
    ASSERT_STATUS(sx_index_create_on(c, "h", "DISKANN", NULL, 0), SX_EINVAL);
    ASSERT_STATUS(sx_collection_set_metric_on(c, "x", SX_METRIC_L2), SX_EINVAL);
    ASSERT_STATUS(sx_collection_set_metric_on(c, "h", SX_METRIC_HAMMING), SX_EINVAL);
    ASSERT_OK(sx_collection_set_metric_on(c, "x", SX_METRIC_JACCARD));
    ASSERT_OK(sx_index_create_on(c, "x", "AUTOINDEX", NULL, 0)); /* BIN_IVF_FLAT there */
    sx_index_info ii;
    ASSERT_OK(sx_index_describe_on(c, "x", &ii));
    ASSERT_EQ(ii.metric, SX_METRIC_JACCARD);
    ASSERT_STATUS(
        sx_index_check_params_for("HNSW", SX_FIELD_BINARY_VECTOR, NULL, 0, 16, SX_METRIC_HAMMING),
        SX_EINVAL);
    ASSERT_OK(
        sx_index_check_params_for("HNSW", SX_FIELD_BFLOAT16_VECTOR, NULL, 0, 16, SX_METRIC_IP));
    ASSERT_STATUS(sx_index_check_params_for("BIN_IVF_FLAT", SX_FIELD_BINARY_VECTOR, NULL, 0, 16,
                                            SX_METRIC_L2),
                  SX_EINVAL);

    /* bulk import reads float32 vectors only: refused before any file is read */
    const char *files[1] = { "/nonexistent.npy" };
    sx_import_group g = { files, 1 };
    sx_import_opts io = { 0 };
    sx_import_result res;
    ASSERT_STATUS(sx_import_run(c, &g, 1, &io, &res), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "float32 vectors only") != NULL);
    sx_collection_release(c);
    sx_db_close(db);
}

static void bin_ivf_io(void)
{
    enum { R = 700, NB = 8 };

    static uint8_t rows[R][NB];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < NB; j++)
            rows[i][j] = (uint8_t)test_rand(&rng);
    const sx__index_ops *ops = sx__index_lookup("BIN_IVF_FLAT");
    ASSERT(ops != NULL);
    ASSERT(sx__index_takes(ops, SX__VT_BIN) && !sx__index_takes(ops, SX__VT_F32));
    sx_param p[1] = { { "nlist", "16" } };
    sx__build_ctx ctx = { .threads = 2 };
    sx__index *idx = NULL;
    ASSERT_OK(ops->build_typed(p, 1, rows, SX__VT_BIN, R, NB * 8, SX_METRIC_HAMMING, &ctx, &idx));
    sx__wbuf w;
    sx__wbuf_init(&w);
    ASSERT_OK(ops->serialize(idx, &w));
    sx__index *back = NULL;
    ASSERT_OK(ops->deserialize_typed(w.data, w.len, rows, SX__VT_BIN, R, NB * 8, SX_METRIC_HAMMING,
                                     &back));
    /* the same answers, and with every list probed the exact ones */
    sx_param all[1] = { { "nprobe", "16" } };
    for (int q = 0; q < 20; q++) {
        sx__hit h1[5], h2[5], h3[5];
        sx__topk t1, t2, t3;
        sx__topk_init(&t1, h1, 5);
        sx__topk_init(&t2, h2, 5);
        sx__topk_init(&t3, h3, 5);
        ASSERT_OK(ops->search_typed(idx, rows[q * 7], 5, all, 1, NULL, &t1));
        ASSERT_OK(ops->search_typed(back, rows[q * 7], 5, all, 1, NULL, &t2));
        ASSERT_OK(sx__flat_scan_typed(rows, SX__VT_BIN, R, NB * 8, SX_METRIC_HAMMING, 0, NULL,
                                      rows[q * 7], 1, &t3));
        sx__topk_sort(&t1);
        sx__topk_sort(&t2);
        sx__topk_sort(&t3);
        ASSERT_EQ(t1.n, 5);
        for (int i = 0; i < 5; i++) {
            ASSERT_EQ(h1[i].id, h2[i].id);
            ASSERT(h1[i].dist == h3[i].dist);
        }
        ASSERT_EQ(h1[0].dist, 0);
    }
    /* nprobe 1 and k over a list's rows: the next lists fill the answer (Milvus answers k when
     * k rows exist); a filter admitting 3 rows answers those 3 */
    {
        static sx__hit hk[200];
        sx__topk tk;
        sx_param one[1] = { { "nprobe", "1" } };
        sx__topk_init(&tk, hk, 200);
        ASSERT_OK(ops->search_typed(idx, rows[3], 200, one, 1, NULL, &tk));
        ASSERT_EQ(tk.n, 200);
        uint64_t allow[(R + 63) / 64] = { 0 };
        const int keep[3] = { 5, 333, 699 };
        for (int i = 0; i < 3; i++)
            allow[keep[i] >> 6] |= 1ull << (keep[i] & 63);
        sx__topk_init(&tk, hk, 200);
        ASSERT_OK(ops->search_typed(idx, rows[3], 200, one, 1, allow, &tk));
        ASSERT_EQ(tk.n, 3);
        sx__topk_sort(&tk);
        for (size_t i = 0; i < 3; i++)
            ASSERT(hk[i].id == 5 || hk[i].id == 333 || hk[i].id == 699);
    }
    /* every truncation, a flipped byte, the wrong shape */
    sx__index *x = NULL;
    for (size_t len = 0; len < w.len; len += 1 + len / 8)
        ASSERT_STATUS(
            ops->deserialize_typed(w.data, len, rows, SX__VT_BIN, R, NB * 8, SX_METRIC_HAMMING, &x),
            SX_ECORRUPT);
    uint8_t *cp = malloc(w.len);
    memcpy(cp, w.data, w.len);
    cp[w.len / 2] ^= 0x40;
    ASSERT_STATUS(
        ops->deserialize_typed(cp, w.len, rows, SX__VT_BIN, R, NB * 8, SX_METRIC_HAMMING, &x),
        SX_ECORRUPT);
    ASSERT_STATUS(
        ops->deserialize_typed(w.data, w.len, rows, SX__VT_BIN, R, NB * 8, SX_METRIC_JACCARD, &x),
        SX_ECORRUPT);
    ASSERT_STATUS(ops->deserialize_typed(w.data, w.len, rows, SX__VT_BIN, R - 1, NB * 8,
                                         SX_METRIC_HAMMING, &x),
                  SX_ECORRUPT);
    free(cp);
    /* FLAT records the element type: a float16 FLAT index does not load as bfloat16 */
    const sx__index_ops *flat = sx__index_lookup("FLAT");
    sx__index *fi = NULL;
    static uint16_t hv[10][4];
    ASSERT_OK(flat->build_typed(NULL, 0, hv, SX__VT_F16, 10, 4, SX_METRIC_L2, &ctx, &fi));
    sx__wbuf fw;
    sx__wbuf_init(&fw);
    ASSERT_OK(flat->serialize(fi, &fw));
    ASSERT_STATUS(
        flat->deserialize_typed(fw.data, fw.len, hv, SX__VT_BF16, 10, 4, SX_METRIC_L2, &x),
        SX_ECORRUPT);
    ASSERT_STATUS(flat->deserialize(fw.data, fw.len, (const float *)(const void *)hv, 10, 4,
                                    SX_METRIC_L2, &x),
                  SX_ECORRUPT);
    flat->free(fi);
    sx__wbuf_fini(&fw);
    ops->free(idx);
    ops->free(back);
    sx__wbuf_fini(&w);
}

int main(void)
{
    rng = test_seed() | 1;
    RUN(half_roundtrip);
    RUN(half_rounding);
    RUN(kernels);
    RUN(engine_typed);
    RUN(cosine_jaccard);
    RUN(typed_errors);
    RUN(bin_ivf_io);
    return TEST_DONE();
}
