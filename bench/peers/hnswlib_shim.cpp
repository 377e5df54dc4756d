/*
 * hnswlib_shim.cpp: bench/peers/peer.h implemented over Debian's header-only hnswlib
 * (libhnswlib-dev, /usr/include/hnswlib), for side-by-side benchmarks only. Built into
 * build/sx_peer_hnswlib.so (-O3 -march=native) and loaded with dlopen by `sextant bench`, or linked
 * directly by bench/hnsw_vs_hnswlib. Nothing in libsextant depends on it.
 *
 * Metric 0 = L2Space (squared L2), 1 = InnerProductSpace (hnswlib returns 1 - <a,b>).
 * Insertion with `threads` std::threads pulling row numbers from an atomic counter, the way
 * hnswlib's own ParallelFor (python bindings) does; labels are the row numbers.
 * Memory reported = what hnswlib allocates for the index proper: max_elements *
 * size_data_per_element (level-0 links + the vector copy + the label) + the upper-level link
 * lists (size_links_per_element * level + 1 per node with level > 0). Its per-node mutexes and
 * label hash map are not counted.
 * Thread-safety: add and set_ef must not run concurrently with anything else on the handle;
 * search may run concurrently with search.
 */
#include <hnswlib/hnswlib.h>

#include <atomic>
#include <exception>
#include <new>
#include <thread>
#include <vector>

/* The project compiles with -fvisibility=hidden; the C ABI must stay visible to dlopen. */
#pragma GCC visibility push(default)
#include "peer.h"
#pragma GCC visibility pop

namespace {

struct peer {
    int dim = 0;
    hnswlib::SpaceInterface<float> *space = nullptr;
    hnswlib::HierarchicalNSW<float> *alg = nullptr;
};

} // namespace

extern "C" {

void *sx_peer_hnsw_new(int dim, int metric, size_t max_n, int M, int ef_construction)
{
    if (dim <= 0 || (metric != 0 && metric != 1) || M < 2 || ef_construction < 1)
        return nullptr;
    peer *p = new (std::nothrow) peer;
    if (!p)
        return nullptr;
    try {
        p->dim = dim;
        if (metric == 1)
            p->space = new hnswlib::InnerProductSpace((size_t)dim);
        else
            p->space = new hnswlib::L2Space((size_t)dim);
        p->alg = new hnswlib::HierarchicalNSW<float>(p->space, max_n ? max_n : 1, (size_t)M,
                                                     (size_t)ef_construction);
    } catch (...) {
        delete p->alg;
        delete p->space;
        delete p;
        return nullptr;
    }
    return p;
}

int sx_peer_hnsw_add(void *h, const float *vecs, size_t n, int threads)
{
    peer *p = static_cast<peer *>(h);
    if (!p || (n > 0 && !vecs))
        return -1;
    if (threads < 1)
        threads = 1;
    std::atomic<size_t> next(0);
    std::atomic<bool> failed(false);
    auto work = [&]() {
        for (;;) {
            size_t i = next.fetch_add(1);
            if (i >= n || failed.load())
                return;
            try {
                p->alg->addPoint(vecs + i * (size_t)p->dim, (hnswlib::labeltype)i);
            } catch (...) {
                failed.store(true);
                return;
            }
        }
    };
    if (threads == 1) {
        work();
    } else {
        std::vector<std::thread> pool;
        try {
            for (int t = 0; t < threads; t++)
                pool.emplace_back(work);
        } catch (...) {
            failed.store(true);
        }
        for (auto &t : pool)
            t.join();
    }
    return failed.load() ? -1 : 0;
}

void sx_peer_hnsw_set_ef(void *h, int ef)
{
    peer *p = static_cast<peer *>(h);
    if (p && ef > 0)
        p->alg->setEf((size_t)ef);
}

size_t sx_peer_hnsw_search(void *h, const float *q, size_t k, int64_t *ids, float *dists)
{
    peer *p = static_cast<peer *>(h);
    if (!p || k == 0)
        return 0;
    try {
        auto res = p->alg->searchKnn(q, k);
        size_t m = res.size();
        /* the priority queue pops the farthest first */
        for (size_t i = m; i-- > 0;) {
            ids[i] = (int64_t)res.top().second;
            if (dists)
                dists[i] = res.top().first;
            res.pop();
        }
        return m;
    } catch (...) {
        return 0;
    }
}

size_t sx_peer_hnsw_memory(void *h)
{
    peer *p = static_cast<peer *>(h);
    if (!p)
        return 0;
    const hnswlib::HierarchicalNSW<float> *a = p->alg;
    size_t bytes = a->max_elements_ * a->size_data_per_element_;
    for (size_t i = 0; i < a->cur_element_count; i++)
        if (a->element_levels_[i] > 0)
            bytes += a->size_links_per_element_ * (size_t)a->element_levels_[i] + 1;
    return bytes;
}

void sx_peer_hnsw_free(void *h)
{
    peer *p = static_cast<peer *>(h);
    if (!p)
        return;
    delete p->alg;
    delete p->space;
    delete p;
}

} // extern "C"
