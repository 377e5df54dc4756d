/*
 * diskann.h: internal interface of the DISKANN index family (Subramanya, Devvrit, Kadekodi,
 * Krishnaswamy, Simhadri, "DiskANN: Fast Accurate Billion-point Nearest Neighbor Search on a
 * Single Node", NeurIPS 2019). The vtable is sx__diskann_index_ops (index.h), name "DISKANN".
 *
 * What lives where.
 *   RAM   PQ codebooks (vector/quant_pq.h) and the PQ code of every row (n*m bytes), the medoid
 *         (entry point), the file layout and the I/O counters. memory_bytes counts exactly these.
 *   disk  <file_prefix>.diskann: a 4 KiB header sector, then every node's full-precision vector
 *         and neighbour list packed into 4 KiB-aligned slots with a CRC-32C each (diskann_io.c
 *         has the byte format). Search reads slots, never the segment's vectors, so the ops set
 *         reads_own_vectors: the engine may leave the segment's vectors unloaded once built.
 *
 * Files, one per life-cycle phase:
 *   vamana_build.c   parameters, the build plan under the memory limit, Vamana (Alg. 3 with
 *                    RobustPrune, Alg. 2), in-memory and partitioned (sharded) builds, the vtable
 *   diskann_search.c beam search over PQ distances with W slot reads per hop (io_uring or
 *                    pread), exact re-rank from the slots read, per-thread scratch
 *   diskann_io.c     the file format: layout, writer, header, slot validation, open/close, the
 *                    serialized in-RAM part (serialize / deserialize / load_files)
 *   diskann_check.c  sx__diskann_check: the structural oracle over the whole file
 *
 * Parameters (Milvus names). Build: max_degree R in [1, 512] (56), search_list_size L in
 * [1, 65536] (100), alpha in [1.0, 2.0] (1.2), pq_code_budget_gb_ratio in (0, 0.25] (0.125): the PQ
 * code gets m bytes per vector with m the largest divisor of dim not above ratio * dim * 4 (the
 * raw float32 vector is dim*4 bytes, so the codes take about `ratio` of the raw vector bytes; at
 * least 1). Search: search_list in [k, 65536] (max(k, 16)), beam_width W in [1, 128] (4).
 *
 * Invariants (checked by sx__diskann_check; load validates 1-4, search re-validates 2-3 on every
 * slot it reads and returns SX_ECORRUPT instead of using a bad one):
 *   1. layout: node_bytes = 4*dim + 4 + 4*R; nodes_per_slot >= 1 nodes fit in slot_bytes - 4;
 *      slot_bytes is a multiple of 4096; n_slots = ceil(n / nodes_per_slot); the file holds at
 *      least 4096 + n_slots * slot_bytes bytes;
 *   2. every slot's last 4 bytes are the CRC-32C of the rest of the slot;
 *   3. every node's degree is <= R, its neighbours are < n, distinct, and not itself;
 *   4. n > 0 <=> medoid < n; every PQ code byte < ksub; the file header's build id equals the
 *      RAM part's (a file from another build is rejected);
 *   5. every node is reachable from the medoid, where every search starts (invariant R of
 *      graph.h; made by the build's repair, sx__graph_repair, in memory or on the partitioned
 *      build's file, and checked right after it), so with search_list = n a search expands every
 *      node and returns the exact top-k. Load does not re-check 5 (it would read the whole file,
 *      possibly from the object store); sx__diskann_check (tests, `sextant check`) does.
 *
 * Thread-safety: a built or loaded index is immutable except for the relaxed I/O counters; any
 * number of threads may search it at once (each with its own scratch and io_uring ring).
 */
#ifndef SX_INDEX_DISKANN_H
#define SX_INDEX_DISKANN_H
#include <sextant.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index/index.h"
#include "util/heap.h"
#include "vector/dist.h"
#include "vector/quant_pq.h"

#define SX__DISKANN_MAGIC           0x41445853u /* "SXDA": the file header */
#define SX__DISKANN_RAM_MAGIC       0x52445853u /* "SXDR": the serialized in-RAM part */
#define SX__DISKANN_VERSION         1u
#define SX__DISKANN_SECTOR          4096u
#define SX__DISKANN_EXT             ".diskann"
#define SX__DISKANN_R_MAX           512
#define SX__DISKANN_R_DEF           56
#define SX__DISKANN_L_MAX           65536
#define SX__DISKANN_L_DEF           100
#define SX__DISKANN_ALPHA_DEF       1.2
#define SX__DISKANN_ALPHA_MIN       1.0
#define SX__DISKANN_ALPHA_MAX       2.0
#define SX__DISKANN_PQ_RATIO_DEF    0.125
#define SX__DISKANN_PQ_RATIO_MAX    0.25
#define SX__DISKANN_CACHE_RATIO_MAX 0.3
#define SX__DISKANN_RAM_VERSION     2u /* the serialized RAM part: 2 adds the cache ratio */
#define SX__DISKANN_SL_MIN_DEF      16 /* search_list default: max(k, 16), as Milvus */
#define SX__DISKANN_SL_MAX          65536
#define SX__DISKANN_W_DEF           4
#define SX__DISKANN_W_MAX           128
#define SX__DISKANN_NONE            UINT32_MAX
/* Node ids use 31 bits: the top bit marks "expanded" in search pools (graph.h). */
#define SX__DISKANN_MAX_N           ((size_t)0x7FFFFFFF)

/* How slots are read. */
typedef enum sx__diskann_io_mode {
    SX__DISKANN_IO_PREAD = 0,
    SX__DISKANN_IO_URING = 1,
    SX__DISKANN_IO_READER = 2 /* through an sx__diskann_reader (the file is remote) */
} sx__diskann_io_mode;

/* A read hook replacing the local file (sx__diskann_load_reader): the engine backs it with the
 * object-store block cache (storage/blockcache.h) so a DISKANN file can stay in the store. The
 * same bytes as the file are read at the same offsets (the header sector, whole slots), so search
 * results are identical to the local path; slot CRCs are checked as for a local file. */
typedef struct sx__diskann_reader {
    void *ctx;
    /* Reads exactly len bytes at off into buf; any failure is returned as is. Thread-safe. */
    sx_status (*read)(void *ctx, uint64_t off, size_t len, void *buf);
    /* Optional: forget any cached copy of [off, off+len) (a slot failed its CRC). */
    void (*invalidate)(void *ctx, uint64_t off, size_t len);
    /* Optional: called once when the index is freed. */
    void (*close)(void *ctx);
    uint64_t size;    /* bytes of the file */
    const char *name; /* for messages (copied) */
} sx__diskann_reader;

/* Placement of nodes in the file (invariant 1). */
typedef struct sx__diskann_layout {
    uint32_t dim, R;
    uint32_t node_bytes;     /* 4*dim + 4 + 4*R */
    uint32_t nodes_per_slot; /* >= 1 */
    uint32_t slot_bytes;     /* multiple of SX__DISKANN_SECTOR */
    uint64_t n_slots;
} sx__diskann_layout;

/* Computes the layout for n nodes. Errors: SX_EINVAL when a node cannot be placed (too large). */
sx_status sx__diskann_layout_init(sx__diskann_layout *lay, size_t n, size_t dim, uint32_t R);

static inline uint64_t sx__diskann_slot_of(const sx__diskann_layout *lay, uint32_t id)
{
    return id / lay->nodes_per_slot;
}

static inline uint64_t sx__diskann_slot_offset(const sx__diskann_layout *lay, uint64_t slot)
{
    return SX__DISKANN_SECTOR + slot * lay->slot_bytes;
}

static inline uint64_t sx__diskann_file_bytes(const sx__diskann_layout *lay)
{
    return SX__DISKANN_SECTOR + lay->n_slots * lay->slot_bytes;
}

typedef struct sx__diskann {
    size_t n, dim;
    sx_metric metric;
    sx__dist_fn dist; /* "smaller is better" kernel for metric (re-rank) */
    uint32_t R;       /* max_degree */
    uint32_t L_build; /* search_list_size used by the build */
    float alpha;
    float pq_ratio;    /* pq_code_budget_gb_ratio used by the build */
    uint32_t medoid;   /* entry point; SX__DISKANN_NONE iff n == 0 */
    uint64_t build_id; /* ties the file to this RAM part (invariant 4) */
    sx__diskann_layout lay;
    sx__pq pq;           /* codebooks, owned */
    uint8_t *codes;      /* n * pq.m, owned (sx__free_aligned) */
    char *path;          /* <prefix>.diskann, owned */
    bool remove_on_free; /* built without a prefix: a private temporary file */
    int fd;              /* read-only; O_DIRECT when is_direct */
    bool is_direct;
    sx__diskann_io_mode io_mode;
    sx__diskann_reader rd;    /* io_mode READER: the file's bytes come from rd (fd stays -1) */
    char io_note[160];        /* why O_DIRECT or io_uring is not used ("" when both are) */
    atomic_uint_fast64_t ios; /* slot reads since load (relaxed: statistics only) */
    atomic_uint_fast64_t bytes_read;
    /* build statistics (0 for a loaded index) */
    uint64_t build_peak_bytes; /* peak bytes the build itself accounted (allocations) */
    uint32_t build_shards;     /* 1: in-memory build; > 1: partitioned */
    /* The node cache (diskann_cache.c): the slots of the nodes nearest the medoid in hops, read
     * once when the index is built or loaded, up to cache_ratio x the raw vector bytes
     * (search_cache_budget_gb_ratio, Milvus's name; 0: none). Immutable after that, so searches
     * read it without a lock. cache_slots is sorted; cache_data holds cache_n slots, the i-th
     * sorted slot at cache_data + cache_pos[i] * slot_bytes. */
    float cache_ratio;
    size_t cache_n;
    uint64_t *cache_slots;
    uint32_t *cache_pos;
    uint8_t *cache_data;
    void *cache_raw;                 /* what to free for cache_data (4096-aligned) */
    atomic_uint_fast64_t cache_hits; /* slot reads answered by the cache (relaxed) */
} sx__diskann;

/* ---- vamana_build.c */
sx_status sx__diskann_check_build_params(const sx_param *p, size_t np);
sx_status sx__diskann_build(const sx_param *p,
                            size_t np,
                            const float *vecs,
                            size_t n,
                            size_t dim,
                            sx_metric metric,
                            const sx__build_ctx *ctx,
                            sx__index **out);
uint64_t sx__diskann_estimate_build_bytes(const sx_param *p, size_t np, size_t n, size_t dim);
/* The PQ sub-quantizer count for dim and pq_code_budget_gb_ratio (see the header comment). */
uint32_t sx__diskann_choose_m(size_t dim, double ratio);

/* ---- diskann_search.c */
sx_status sx__diskann_check_search_params(const sx_param *p, size_t np, size_t k);
sx_status sx__diskann_search(const sx__index *idx,
                             const float *query,
                             size_t k,
                             const sx_param *sp,
                             size_t nsp,
                             const uint64_t *allow,
                             sx__topk *out);

/* ---- diskann_io.c */
/* Writes the header sector for the layout into buf (4096 bytes). */
void sx__diskann_header_encode(const sx__diskann_layout *lay,
                               size_t n,
                               uint32_t medoid,
                               uint64_t build_id,
                               sx_metric metric,
                               uint8_t *buf);
/* Checks the CRC of one slot. */
bool sx__diskann_slot_ok(const sx__diskann_layout *lay, const uint8_t *slot);
/* Seals a slot: writes its CRC (its last 4 bytes). */
void sx__diskann_slot_seal(const sx__diskann_layout *lay, uint8_t *slot);
/* Encodes node (vector, degree, neighbour ids) at its place in the slot buffer. */
void sx__diskann_node_encode(const sx__diskann_layout *lay,
                             uint8_t *slot,
                             uint32_t id,
                             const float *vec,
                             const uint32_t *nbrs,
                             uint32_t degree);
/* Decodes node `id` from its slot: the vector into vec (dim floats, may be NULL) and the
 * neighbours into nbrs (R ids); returns the degree. Validates invariant 3 against n:
 * SX_ECORRUPT naming the node otherwise. */
sx_status sx__diskann_node_decode(const sx__diskann_layout *lay,
                                  const uint8_t *slot,
                                  uint32_t id,
                                  size_t n,
                                  float *vec,
                                  uint32_t *nbrs,
                                  uint32_t *degree);
/* Opens <path> for search: O_DIRECT unless refused or SX_DISKANN_DIRECT=0, io_uring unless
 * SX_DISKANN_IO=pread or unavailable; validates the header against d's fields. */
sx_status sx__diskann_open_file(sx__diskann *d);
/* "<prefix>.diskann", owned (sx__free); NULL on ENOMEM. */
char *sx__diskann_path(const char *prefix);
sx_status sx__diskann_serialize(const sx__index *idx, sx__wbuf *w);
/* serialize as three pieces: header + codebooks, the codes (borrowed from idx), the CRC. */
sx_status sx__diskann_serialize_parts(
    const sx__index *idx, sx__wbuf *head, const void **big, size_t *big_len, sx__wbuf *tail);
sx_status sx__diskann_deserialize(const void *data,
                                  size_t len,
                                  const float *vecs,
                                  size_t n,
                                  size_t dim,
                                  sx_metric metric,
                                  sx__index **out);
sx_status sx__diskann_load_files(const void *data,
                                 size_t len,
                                 const char *file_prefix,
                                 const float *vecs,
                                 size_t n,
                                 size_t dim,
                                 sx_metric metric,
                                 sx__index **out);
/* As load_files, but the file's bytes come from `rd` instead of <file_prefix>.diskann (whose name
 * is only used in messages unless rd->name is set). On SX_OK the index owns rd (rd->close is
 * called when it is freed); on failure the caller still does. */
sx_status sx__diskann_load_reader(const void *data,
                                  size_t len,
                                  const sx__diskann_reader *rd,
                                  size_t n,
                                  size_t dim,
                                  sx_metric metric,
                                  sx__index **out);
/* load_files / load_reader taking over `data` (allocated with sx__malloc; rd as load_reader):
 * the PQ codes are moved to the front of data and the buffer shrunk to them, instead of being
 * copied, so opening holds the codes once, not twice. data is the index's on SX_OK and freed
 * here on failure. */
sx_status sx__diskann_load_files_owned(void *data,
                                       size_t len,
                                       const char *file_prefix,
                                       size_t n,
                                       size_t dim,
                                       sx_metric metric,
                                       sx__index **out);
sx_status sx__diskann_load_reader_owned(void *data,
                                        size_t len,
                                        const sx__diskann_reader *rd,
                                        size_t n,
                                        size_t dim,
                                        sx_metric metric,
                                        sx__index **out);
/* Reads [off, off+len) of the index's file (pread or the reader): the one place both paths meet
 * outside the search's batched reads (header, check). */
sx_status sx__diskann_read_at(const sx__diskann *d, uint64_t off, size_t len, void *buf);
void sx__diskann_remove_files(const char *file_prefix);
uint64_t sx__diskann_disk_bytes(const sx__index *idx);
void sx__diskann_io_stats(const sx__index *idx, uint64_t *ios, uint64_t *bytes);
size_t sx__diskann_memory_bytes(const sx__index *idx);
/* Closes the file (removing it when remove_on_free), frees everything. NULL is a no-op. */
void sx__diskann_free(sx__index *idx);
/* A zeroed index with fd -1 (for build and load). NULL on ENOMEM. */
sx__diskann *sx__diskann_new(void);

/* Sequential writer of a whole file: header, then nodes 0..n-1 in id order (diskann_io.c). */
typedef struct sx__diskann_writer sx__diskann_writer;
/* Bytes a writer allocates for a batch of about batch_bytes. */
size_t sx__diskann_writer_bytes(const sx__diskann_layout *lay, size_t batch_bytes);
/* Creates <path>.tmp and writes the header. `lay` must outlive the writer. Ownership: *out is
 * released by finish or abort. */
sx_status sx__diskann_writer_open(const char *path,
                                  const sx__diskann_layout *lay,
                                  size_t n,
                                  uint32_t medoid,
                                  uint64_t build_id,
                                  sx_metric metric,
                                  size_t batch_bytes,
                                  sx__diskann_writer **out);
/* Adds node `id` (must be the next id). */
sx_status sx__diskann_writer_put(
    sx__diskann_writer *w, uint32_t id, const float *vec, const uint32_t *nbrs, uint32_t degree);
/* After the last put: writes every pending slot, so the tmp file is complete and may be read
 * and patched (pread/pwrite on sx__diskann_writer_file) before finish. */
sx_status sx__diskann_writer_flush(sx__diskann_writer *w);
struct sx__file *sx__diskann_writer_file(sx__diskann_writer *w);
/* Flushes, fdatasyncs, renames <path>.tmp to <path>, fsyncs the directory; frees w (also on
 * failure, removing the tmp file). */
sx_status sx__diskann_writer_finish(sx__diskann_writer *w);
/* Frees w and removes its tmp file. NULL is a no-op. */
void sx__diskann_writer_abort(sx__diskann_writer *w);
/* bytes rounded into a 4096-aligned block (for O_DIRECT); *raw is what to sx__free. */
void *sx__diskann_sector_alloc(size_t bytes, void **raw);

/* ---- diskann_cache.c */
/* Fills the node cache for d->cache_ratio (breadth-first from the medoid, by slot, each slot's
 * CRC checked). A failure leaves no cache and is returned (the caller may go on without one). */
sx_status sx__diskann_cache_warm(sx__diskann *d);
/* ops->set_cache_bytes: with cache_ratio 0, a cache of at most `bytes` warmed as above (slots). */
sx_status sx__diskann_set_cache_bytes(sx__index *idx, uint64_t bytes);
/* The cached copy of `slot`, or NULL. */
const uint8_t *sx__diskann_cache_get(const sx__diskann *d, uint64_t slot);
void sx__diskann_cache_free(sx__diskann *d);
size_t sx__diskann_cache_bytes(const sx__diskann *d);

/* ---- diskann_check.c */
/* Verifies invariants 1-5 by reading the whole file (sequentially, with its own buffer).
 * Returns SX_OK, SX_ECORRUPT with the first violation in sx_errmsg(), SX_EIO or SX_ENOMEM. */
SX_NODISCARD sx_status sx__diskann_check(const sx__index *idx);

#endif
