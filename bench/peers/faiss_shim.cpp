/*
 * faiss_shim.cpp: the FAISS half of bench/peers/peer.h, over Debian's libfaiss-dev 1.7.3
 * (/usr/include/faiss, the static libfaiss.a: a generic build without AVX2, so its figures are a
 * floor for FAISS, not its best). Built into build/sx_peer_faiss.so and loaded with dlopen by
 * `sextant bench`; benchmark-only, nothing in libsextant depends on it.
 *
 * Indexes, each the FAISS counterpart of a Milvus type (Jegou et al., "Product quantization for
 * nearest neighbor search", PAMI 2011, for IVF/IVFPQ; Malkov & Yashunin, TPAMI 2018, for HNSW):
 *   IVF_FLAT -> IndexIVFFlat(IndexFlat{L2,IP} quantizer, nlist)
 *   IVF_SQ8  -> IndexIVFScalarQuantizer(quantizer, nlist, QT_8bit) (per-dimension ranges,
 *               residual encoding: FAISS's default, as Milvus's knowhere builds it), wrapped
 *               in IndexRefineFlat when refine is on
 *   IVF_PQ   -> IndexIVFPQ(quantizer, nlist, m, nbits) (residual encoding, FAISS defaults:
 *               precomputed tables when they fit), wrapped in IndexRefineFlat when refine is on
 *               (k * k_factor candidates re-ranked with the exact vectors)
 *   HNSW     -> IndexHNSWFlat(dim, M) with hnsw.efConstruction
 *   HNSW on FLOAT16_VECTOR -> IndexHNSWSQ(dim, QT_fp16, M): the graph over float16 codes
 *   BIN_FLAT -> IndexBinaryFlat(dim bits); BIN_IVF_FLAT -> IndexBinaryIVF(IndexBinaryFlat, nlist)
 *               (the sx_peer_faiss_bin_* functions: byte rows, Hamming distances)
 * Training uses FAISS's defaults (k-means on at most nlist * 256 sampled rows, 10 iterations for
 * the coarse quantizer, 25 for PQ); seed from the params when nonzero.
 *
 * Invariants:
 *   1. Labels are row numbers (FAISS's sequential ids: nothing is remapped).
 *   2. build runs with `threads` OpenMP threads on the calling thread's ICV and then sets the
 *      calling thread back to 1 thread: a search of one query never forks a team, so a
 *      single-thread QPS figure is single-threaded. (The bench loads the shim with
 *      OMP_WAIT_POLICY=passive unless set: libgomp's spin-waiting made a 2-thread k-means 10x
 *      slower than 1 thread on a loaded 2-core machine.)
 *   3. No exception crosses the C ABI.
 *
 * Memory (sx_peer_faiss_memory) is computed from the structures, not from the allocator:
 * IVF: quantizer ntotal*d*4 + sum over lists of size*(code_size + 8) (FAISS keeps an int64 id per
 * entry) [+ PQ centroids + precomputed table] [+ refine: ntotal*d*4]; HNSW: storage ntotal*d*4 +
 * neighbours*4 + offsets*8 + levels*4. Vector capacity slack is not counted.
 *
 * Thread-safety: new/build/set/free must not overlap anything else on the handle; search is
 * const in FAISS and may run concurrently with search.
 */
#include <cstdio>
#include <exception>
#include <faiss/IndexBinaryFlat.h>
#include <faiss/IndexBinaryIVF.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/IndexRefine.h>
#include <faiss/IndexScalarQuantizer.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/invlists/InvertedLists.h>
#include <new>
#include <omp.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "peer.h"

namespace {

static_assert(sizeof(faiss::Index::idx_t) == sizeof(int64_t), "FAISS ids are 64-bit");

struct peer {
    sx_peer_faiss_params p{};
    faiss::Index *quantizer = nullptr;        /* owned here (IVF) */
    faiss::Index *base = nullptr;             /* IVF or HNSW index, owned here */
    faiss::IndexRefineFlat *refine = nullptr; /* wraps base when refine; owned here */
    faiss::Index *top = nullptr;              /* what search calls: refine or base */
    std::string desc;
};

void set_err(char *err, size_t len, const char *msg)
{
    if (err && len)
        std::snprintf(err, len, "%s", msg);
}

faiss::MetricType metric_of(int m)
{
    return m == 1 ? faiss::METRIC_INNER_PRODUCT : faiss::METRIC_L2;
}

void destroy(peer *p)
{
    if (!p)
        return;
    delete p->refine; /* own_fields is false: base is deleted below */
    delete p->base;
    delete p->quantizer;
    delete p;
}

size_t flat_bytes(const faiss::Index *ix)
{
    return ix ? (size_t)ix->ntotal * (size_t)ix->d * sizeof(float) : 0;
}

size_t ivf_bytes(const faiss::IndexIVF *ivf)
{
    size_t bytes = flat_bytes(ivf->quantizer);
    const faiss::InvertedLists *il = ivf->invlists;
    for (size_t l = 0; il && l < il->nlist; l++)
        bytes += il->list_size(l) * (il->code_size + sizeof(faiss::Index::idx_t));
    if (auto *pq = dynamic_cast<const faiss::IndexIVFPQ *>(ivf)) {
        bytes += pq->pq.centroids.size() * sizeof(float);
        bytes += pq->precomputed_table.size() * sizeof(float);
    }
    if (auto *sq = dynamic_cast<const faiss::IndexIVFScalarQuantizer *>(ivf))
        bytes += sq->sq.trained.size() * sizeof(float);
    return bytes;
}

/* The valid hits at the front of a FAISS answer of k slots (FAISS pads with -1). */
size_t valid_hits(const int64_t *ids, size_t k)
{
    size_t m = 0;
    while (m < k && ids[m] >= 0)
        m++;
    return m;
}

/* One query through ix (with params, or FAISS's defaults when null): up to k hits, best first;
 * the count of valid ones (FAISS pads with -1). No exception escapes. */
size_t search_one(const faiss::Index *ix,
                  const float *q,
                  size_t k,
                  int64_t *ids,
                  float *dists,
                  const faiss::SearchParameters *sp)
{
    try {
        std::vector<float> d(dists ? 0 : k);
        float *dd = dists ? dists : d.data();
        ix->search(1, q, (faiss::Index::idx_t)k, dd, reinterpret_cast<faiss::Index::idx_t *>(ids),
                   sp);
        return valid_hits(ids, k);
    } catch (...) {
        return 0;
    }
}

} // namespace

extern "C" {

int sx_peer_faiss_abi(void)
{
    return SX_PEER_FAISS_ABI;
}

void *sx_peer_faiss_new(const sx_peer_faiss_params *prm, char *err, size_t err_len)
{
    if (!prm || prm->dim <= 0 || (prm->metric != 0 && prm->metric != 1)) {
        set_err(err, err_len, "faiss peer: bad dim or metric");
        return nullptr;
    }
    peer *p = new (std::nothrow) peer;
    if (!p) {
        set_err(err, err_len, "faiss peer: out of memory");
        return nullptr;
    }
    p->p = *prm;
    char buf[160];
    try {
        faiss::MetricType mt = metric_of(prm->metric);
        switch (prm->kind) {
        case SX_PEER_FAISS_IVF_FLAT:
        case SX_PEER_FAISS_IVF_SQ8:
        case SX_PEER_FAISS_IVF_PQ: {
            if (prm->nlist < 1)
                throw std::invalid_argument("nlist must be >= 1");
            if (mt == faiss::METRIC_L2)
                p->quantizer = new faiss::IndexFlatL2(prm->dim);
            else
                p->quantizer = new faiss::IndexFlatIP(prm->dim);
            faiss::IndexIVF *ivf;
            if (prm->kind == SX_PEER_FAISS_IVF_FLAT) {
                ivf =
                    new faiss::IndexIVFFlat(p->quantizer, (size_t)prm->dim, (size_t)prm->nlist, mt);
                std::snprintf(buf, sizeof buf, "IndexIVFFlat(nlist=%d)", prm->nlist);
            } else if (prm->kind == SX_PEER_FAISS_IVF_SQ8) {
                ivf = new faiss::IndexIVFScalarQuantizer(p->quantizer, (size_t)prm->dim,
                                                         (size_t)prm->nlist,
                                                         faiss::ScalarQuantizer::QT_8bit, mt);
                std::snprintf(buf, sizeof buf, "IndexIVFScalarQuantizer(nlist=%d,QT_8bit)%s",
                              prm->nlist, prm->refine ? "+IndexRefineFlat" : "");
            } else {
                if (prm->m < 1 || prm->dim % prm->m != 0)
                    throw std::invalid_argument("m must divide dim");
                int nbits = prm->nbits > 0 ? prm->nbits : 8;
                ivf = new faiss::IndexIVFPQ(p->quantizer, (size_t)prm->dim, (size_t)prm->nlist,
                                            (size_t)prm->m, (size_t)nbits, mt);
                std::snprintf(buf, sizeof buf, "IndexIVFPQ(nlist=%d,m=%d,nbits=%d)%s", prm->nlist,
                              prm->m, nbits, prm->refine ? "+IndexRefineFlat" : "");
            }
            p->base = ivf;
            if (prm->seed != 0) {
                ivf->cp.seed = (int)(prm->seed & 0x7fffffff);
                if (auto *pq = dynamic_cast<faiss::IndexIVFPQ *>(ivf))
                    pq->pq.cp.seed = (int)((prm->seed >> 1) & 0x7fffffff);
            }
            if (prm->kind != SX_PEER_FAISS_IVF_FLAT && prm->refine) {
                p->refine = new faiss::IndexRefineFlat(p->base);
                p->refine->own_fields = false;
            }
            break;
        }
        case SX_PEER_FAISS_HNSW_FP16: {
            if (prm->M < 2 || prm->ef_construction < 1)
                throw std::invalid_argument("M must be >= 2 and efConstruction >= 1");
            auto *h = new faiss::IndexHNSWSQ(prm->dim, faiss::ScalarQuantizer::QT_fp16, prm->M, mt);
            h->hnsw.efConstruction = prm->ef_construction;
            p->base = h;
            std::snprintf(buf, sizeof buf, "IndexHNSWSQ(QT_fp16,M=%d,efConstruction=%d)", prm->M,
                          prm->ef_construction);
            break;
        }
        case SX_PEER_FAISS_HNSW_FLAT: {
            if (prm->M < 2 || prm->ef_construction < 1)
                throw std::invalid_argument("M must be >= 2 and efConstruction >= 1");
            auto *h = new faiss::IndexHNSWFlat(prm->dim, prm->M, mt);
            h->hnsw.efConstruction = prm->ef_construction;
            p->base = h;
            std::snprintf(buf, sizeof buf, "IndexHNSWFlat(M=%d,efConstruction=%d)", prm->M,
                          prm->ef_construction);
            break;
        }
        default:
            throw std::invalid_argument("unknown index kind");
        }
        p->top = p->refine ? static_cast<faiss::Index *>(p->refine) : p->base;
        p->desc = buf;
    } catch (const std::exception &e) {
        std::snprintf(buf, sizeof buf, "faiss peer: %s", e.what());
        set_err(err, err_len, buf);
        destroy(p);
        return nullptr;
    } catch (...) {
        set_err(err, err_len, "faiss peer: unknown exception");
        destroy(p);
        return nullptr;
    }
    return p;
}

int sx_peer_faiss_build(void *h, const float *vecs, size_t n, char *err, size_t err_len)
{
    peer *p = static_cast<peer *>(h);
    if (!p || (n > 0 && !vecs)) {
        set_err(err, err_len, "faiss peer: bad arguments");
        return -1;
    }
    int rc = 0;
    int threads = p->p.threads > 0 ? p->p.threads : 1;
    omp_set_num_threads(threads);
    try {
        if (!p->top->is_trained)
            p->top->train((faiss::Index::idx_t)n, vecs);
        p->top->add((faiss::Index::idx_t)n, vecs);
    } catch (const std::exception &e) {
        char buf[256];
        std::snprintf(buf, sizeof buf, "faiss peer: %s", e.what());
        set_err(err, err_len, buf);
        rc = -1;
    } catch (...) {
        set_err(err, err_len, "faiss peer: unknown exception");
        rc = -1;
    }
    omp_set_num_threads(1); /* invariant 2 */
    return rc;
}

int sx_peer_faiss_set(void *h, const char *key, double value)
{
    peer *p = static_cast<peer *>(h);
    if (!p || !key)
        return -1;
    std::string k(key);
    if (k == "nprobe") {
        auto *ivf = dynamic_cast<faiss::IndexIVF *>(p->base);
        if (!ivf || value < 1)
            return -1;
        ivf->nprobe = (size_t)value;
        if (ivf->nprobe > ivf->nlist)
            ivf->nprobe = ivf->nlist;
        return 0;
    }
    if (k == "efSearch") {
        auto *hn = dynamic_cast<faiss::IndexHNSW *>(p->base);
        if (!hn || value < 1)
            return -1;
        hn->hnsw.efSearch = (int)value;
        return 0;
    }
    if (k == "k_factor") {
        if (!p->refine || value < 1)
            return -1;
        p->refine->k_factor = (float)value;
        return 0;
    }
    return -1;
}

size_t sx_peer_faiss_search(void *h, const float *q, size_t k, int64_t *ids, float *dists)
{
    peer *p = static_cast<peer *>(h);
    if (!p || k == 0 || !ids)
        return 0;
    return search_one(p->top, q, k, ids, dists, nullptr);
}

size_t sx_peer_faiss_search_range(
    void *h, const float *q, size_t k, int64_t imin, int64_t imax, int64_t *ids, float *dists)
{
    peer *p = static_cast<peer *>(h);
    if (!p || k == 0 || !ids)
        return 0;
    if (p->refine)
        return (size_t)-1;
    try {
        faiss::IDSelectorRange sel((faiss::Index::idx_t)imin, (faiss::Index::idx_t)imax);
        faiss::SearchParametersHNSW sh;
        faiss::SearchParametersIVF si;
        faiss::SearchParameters *sp = nullptr;
        if (auto *hn = dynamic_cast<const faiss::IndexHNSW *>(p->base)) {
            sh.efSearch = hn->hnsw.efSearch;
            sh.sel = &sel;
            sp = &sh;
        } else if (auto *ivf = dynamic_cast<const faiss::IndexIVF *>(p->base)) {
            si.nprobe = ivf->nprobe;
            si.sel = &sel;
            sp = &si;
        } else {
            return (size_t)-1;
        }
        return search_one(p->base, q, k, ids, dists, sp);
    } catch (...) {
        return 0;
    }
}

size_t sx_peer_faiss_memory(void *h)
{
    peer *p = static_cast<peer *>(h);
    if (!p)
        return 0;
    size_t bytes = 0;
    if (auto *ivf = dynamic_cast<const faiss::IndexIVF *>(p->base)) {
        bytes = ivf_bytes(ivf);
    } else if (auto *hn = dynamic_cast<const faiss::IndexHNSW *>(p->base)) {
        auto *sq = dynamic_cast<const faiss::IndexScalarQuantizer *>(hn->storage);
        bytes = (sq ? sq->codes.size() : flat_bytes(hn->storage)) +
                hn->hnsw.neighbors.size() * sizeof(int32_t) +
                hn->hnsw.offsets.size() * sizeof(size_t) + hn->hnsw.levels.size() * sizeof(int);
    }
    if (p->refine)
        bytes += flat_bytes(p->refine->refine_index);
    return bytes;
}

const char *sx_peer_faiss_describe(void *h)
{
    peer *p = static_cast<peer *>(h);
    return p ? p->desc.c_str() : "";
}

void sx_peer_faiss_free(void *h)
{
    destroy(static_cast<peer *>(h));
}

/* ---- binary: IndexBinaryFlat / IndexBinaryIVF */

struct bin_peer {
    faiss::IndexBinaryFlat *quantizer = nullptr; /* IVF only; owned */
    faiss::IndexBinary *index = nullptr;         /* owned */
    int threads = 1;
};

void *sx_peer_faiss_bin_new(int dim_bits, int nlist, int threads, char *err, size_t err_len)
{
    if (dim_bits <= 0 || dim_bits % 8 != 0 || nlist < 0) {
        set_err(err, err_len, "faiss peer: bad binary dim or nlist");
        return nullptr;
    }
    auto *b = new (std::nothrow) bin_peer;
    if (!b) {
        set_err(err, err_len, "faiss peer: out of memory");
        return nullptr;
    }
    b->threads = threads > 0 ? threads : 1;
    try {
        if (nlist == 0) {
            b->index = new faiss::IndexBinaryFlat(dim_bits);
        } else {
            b->quantizer = new faiss::IndexBinaryFlat(dim_bits);
            b->index = new faiss::IndexBinaryIVF(b->quantizer, (size_t)dim_bits, (size_t)nlist);
        }
    } catch (const std::exception &e) {
        set_err(err, err_len, e.what());
        delete b->index;
        delete b->quantizer;
        delete b;
        return nullptr;
    }
    return b;
}

int sx_peer_faiss_bin_build(void *h, const uint8_t *rows, size_t n, char *err, size_t err_len)
{
    auto *b = static_cast<bin_peer *>(h);
    if (!b || (n > 0 && !rows)) {
        set_err(err, err_len, "faiss peer: bad arguments");
        return -1;
    }
    int rc = 0;
    omp_set_num_threads(b->threads);
    try {
        if (!b->index->is_trained)
            b->index->train((faiss::Index::idx_t)n, rows);
        b->index->add((faiss::Index::idx_t)n, rows);
    } catch (const std::exception &e) {
        set_err(err, err_len, e.what());
        rc = -1;
    } catch (...) {
        set_err(err, err_len, "faiss peer: unknown exception");
        rc = -1;
    }
    omp_set_num_threads(1);
    return rc;
}

void sx_peer_faiss_bin_set_nprobe(void *h, int nprobe)
{
    auto *b = static_cast<bin_peer *>(h);
    auto *ivf = b ? dynamic_cast<faiss::IndexBinaryIVF *>(b->index) : nullptr;
    if (ivf && nprobe > 0)
        ivf->nprobe = (size_t)nprobe < ivf->nlist ? (size_t)nprobe : ivf->nlist;
}

size_t sx_peer_faiss_bin_search(void *h, const uint8_t *q, size_t k, int64_t *ids, int32_t *dists)
{
    auto *b = static_cast<bin_peer *>(h);
    if (!b || k == 0 || !ids || !dists)
        return 0;
    try {
        b->index->search(1, q, (faiss::Index::idx_t)k, dists,
                         reinterpret_cast<faiss::Index::idx_t *>(ids));
        return valid_hits(ids, k);
    } catch (...) {
        return 0;
    }
}

size_t sx_peer_faiss_bin_memory(void *h)
{
    auto *b = static_cast<bin_peer *>(h);
    if (!b)
        return 0;
    if (auto *fl = dynamic_cast<const faiss::IndexBinaryFlat *>(b->index))
        return fl->xb.size();
    size_t bytes = 0;
    if (auto *ivf = dynamic_cast<const faiss::IndexBinaryIVF *>(b->index)) {
        bytes = b->quantizer ? b->quantizer->xb.size() : 0;
        for (size_t l = 0; l < ivf->invlists->nlist; l++)
            bytes += ivf->invlists->list_size(l) *
                     (ivf->invlists->code_size + sizeof(faiss::Index::idx_t));
    }
    return bytes;
}

void sx_peer_faiss_bin_free(void *h)
{
    auto *b = static_cast<bin_peer *>(h);
    if (!b)
        return;
    delete b->index; /* IndexBinaryIVF does not own its quantizer by default */
    delete b->quantizer;
    delete b;
}

} // extern "C"
