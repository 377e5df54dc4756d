/*
 * datasets.h: readers for the vector file formats `sextant` accepts, and a TEXMEX writer.
 *
 * Formats, chosen by the file name:
 *
 *   name ends in   format                                   loaded as
 *   .fvecs         TEXMEX, records (int32 d, d x float32)   float
 *   .bvecs         TEXMEX, records (int32 d, d x uint8)     float (0..255)
 *   .ivecs         TEXMEX, records (int32 d, d x int32)     int32 (ground-truth ids)
 *   .npy           NumPy v1/v2/v3, 2-D, C order;            float for <f4 and |u1,
 *                  dtype <f4, |u1 or <i4                    int32 for <i4
 *   .gz, -ubyte,   IDX (MNIST / Fashion-MNIST), optionally  float (0..255)
 *   .idx           gzip'd (zlib): big-endian magic
 *                  0x00000803 (uint8, 3 dims), N x dims
 *   .hdf5, .h5     HDF5, ann-benchmarks layout: 2-D         float (float types) or int32
 *   [:DATASET]     datasets train, test, neighbors,         (integer types), converted by
 *                  distances; root attribute `distance`     libhdf5; the default dataset is
 *                  ("euclidean", "angular", ...)            train ("FILE.hdf5:test" picks one)
 *
 * Every reader validates the whole file before trusting it: TEXMEX files must be a whole number
 * of records and every record must carry the same d; NumPy files must be exactly header + data;
 * IDX files must hold N rows after the header and nothing after them. A limit (> 0) keeps only
 * the first `limit` rows: the file-size checks still cover the whole file, but the records past
 * the limit are not read (their TEXMEX d fields and a gzip stream's tail go unchecked).
 *
 * All multi-byte values are decoded explicitly (little-endian for TEXMEX/NumPy, big-endian for
 * IDX), never by casting the buffer.
 *
 * Errors: functions return 0 or -1 and write a message naming the file into err[err_len].
 * Ownership: a loaded ds_matrix owns its buffer; free it with ds_free.
 * Thread-safety: reentrant; no shared state.
 */
#ifndef SX_TOOLS_DATASETS_H
#define SX_TOOLS_DATASETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest dimension (record length) the readers accept. */
#define DS_MAX_DIM (1u << 20)

typedef enum ds_type { DS_F32 = 0, DS_I32 = 1 } ds_type;

typedef struct ds_matrix {
    size_t n;   /* rows */
    size_t dim; /* values per row */
    ds_type type;
    float *f;   /* n*dim values, row-major, when type == DS_F32 (else NULL) */
    int32_t *i; /* n*dim values, row-major, when type == DS_I32 (else NULL) */
    /* ds_open_float of a .fvecs/.bvecs file: f is NULL, rows are read on demand (ds_rows) */
    bool streamed;
    int fd;
    bool byte_src; /* .bvecs */
    uint64_t rec;  /* bytes per record */
    unsigned char *rowbuf;
} ds_matrix;

/* Loads `path` (format from its name, table above), keeping at most `limit` rows (0 = all).
 * Returns 0 and fills *out, or -1 with a message in err. */
int ds_load(const char *path, size_t limit, ds_matrix *out, char *err, size_t err_len);

/* Like ds_load, and converts int32 data to float so the result is always DS_F32. */
int ds_load_float(const char *path, size_t limit, ds_matrix *out, char *err, size_t err_len);

/* Like ds_load_float, but a .fvecs or .bvecs file is not read into memory: its size and first
 * record are checked here, every record's dimension when ds_rows reads it (an import of a file
 * larger than memory). Other formats are loaded whole. */
int ds_open_float(const char *path, size_t limit, ds_matrix *out, char *err, size_t err_len);

/* Rows [first, first + count) as count*dim floats: a pointer into the matrix, or, for a
 * streamed one, into buf (count*dim floats, the caller's). NULL with a message on a read error
 * or a record of another dimension. */
const float *
ds_rows(ds_matrix *m, size_t first, size_t count, float *buf, char *err, size_t err_len);

/* Frees the buffer (closes a streamed file); the matrix is zeroed. NULL is a no-op. */
void ds_free(ds_matrix *m);

/* Writes n rows of dim values as TEXMEX: `.ivecs` from ints, `.fvecs` from floats (exactly one
 * of f / i non-NULL, matching the extension). Writes PATH.tmp.PID and renames it over path, so
 * an interrupted write never leaves a truncated cache file. Returns 0 or -1 with a message. */
int ds_write_vecs(const char *path,
                  size_t n,
                  size_t dim,
                  const float *f,
                  const int32_t *i,
                  char *err,
                  size_t err_len);

/*
 * Synthetic data, generator "sx-gmm-1": a deterministic clustered, anisotropic Gaussian mixture,
 * for benchmarks at a scale no shipped dataset has. The model is a function of (n_base, dim,
 * seed) only, so base rows (stream 0) and queries (stream 1) come from the same distribution:
 *
 *   C = clamp(round(sqrt(n_base)), 1, 4096) components; a random permutation p of the dimensions
 *   gives a decaying variance spectrum lambda_j = 1 / sqrt(1 + p(j) / 16) (so the data has a lower
 *   intrinsic dimension than dim, as embeddings and SIFT do, without sorting variance by axis);
 *   component c has centre mu_cj = lambda_j * g, per-dimension scale
 *   s_cj = 1.4 * lambda_j * exp(0.35 * g) (anisotropic, differing per component) and weight
 *   w_c = exp(0.5 * g) (unequal cluster sizes), each g a fresh N(0,1) draw from the model RNG.
 *   Row r of a stream picks c with probability w_c / sum(w) and is x_j = mu_cj + s_cj * g.
 *
 * Calibration: the spread 1.4 makes the components overlap the way real data's clusters do. At
 * 50,000 x 128 (seed 3, 200 queries) IVF_FLAT with nlist=256 reaches recall@10 0.80 / 0.91 /
 * 0.96 at nprobe 1 / 4 / 16 and HNSW (M=16, efConstruction=200) 0.77 at ef=10, near SIFT's
 * difficulty; with spread 0.7 the components separate, k-means finds them and every index is
 * near-exact at its cheapest setting (recall 0.999 at nprobe=4 of 512 at 200,000 rows).
 *
 * RNG: splitmix64 (Steele, Lea, Flood 2014); the model from seed, each row from its own state
 * mix(seed, stream, r), so a row does not depend on how many rows are generated. Normals by
 * Box-Muller in double. Bit-identical for the same inputs and libm.
 * Returns 0 and fills *out (DS_F32, n_rows x dim), or -1 with a message.
 */
int ds_synthetic(size_t n_base,
                 size_t dim,
                 uint64_t seed,
                 unsigned stream,
                 size_t n_rows,
                 ds_matrix *out,
                 char *err,
                 size_t err_len);

/* Generators (datasets.c). All share sx-gmm-1's RNG scheme (a row depends only on seed, stream
 * and its row number) and mixture (C = clamp(round(sqrt(n_base)), 1, 4096) components, weights
 * exp(0.5 g)); they differ in the shape of the components:
 *
 *   clustered    sx-gmm-1            axis-aligned components (above)
 *   anisotropic  sx-gmm-rot-1        component c: x = mu_c + H_c2 H_c1 (s_c * g), then the whole
 *                                    point is rotated by G = H_1 ... H_8. H = I - 2 v v^T with v
 *                                    a random unit vector (per component: 2, global: 8), so each
 *                                    component has its own orientation and no axis is a principal
 *                                    direction (what PQ / SQ8 meet in real embeddings: correlated
 *                                    dimensions). Spectrum lambda_j = 1 / sqrt(1 + j / 16),
 *                                    mu_cj = lambda_j g, s_cj = 1.4 lambda_j exp(0.35 g)
 *   cosine       sx-gmm-rot-unit-1   as anisotropic plus a common offset o_j = 2 lambda_j g (a
 *                                    shared mean direction, as embedding models have), each row
 *                                    then normalised to unit length; meant for metric cosine/ip
 *
 * Cost per row O(10 * dim) for the rotated ones. Bit-identical for the same inputs and libm. */
typedef enum ds_gen { DS_GEN_CLUSTERED = 0, DS_GEN_ANISOTROPIC = 1, DS_GEN_COSINE = 2 } ds_gen;

/* Generates n_rows rows of stream `stream` (0 = base, 1 = queries) of the model (gen, n_base,
 * dim, seed). Returns 0 and fills *out (DS_F32), or -1 with a message. ds_synthetic(...) is
 * ds_generate(DS_GEN_CLUSTERED, ...). */
int ds_generate(ds_gen gen,
                size_t n_base,
                size_t dim,
                uint64_t seed,
                unsigned stream,
                size_t n_rows,
                ds_matrix *out,
                char *err,
                size_t err_len);
/* Rows first_row .. first_row + n_rows - 1 of the same model and stream: what ds_generate gives
 * for those rows, so a large dataset can be generated in pieces of bounded memory (each call
 * rebuilds the model: O(C * dim) normals). */
int ds_generate_rows(ds_gen gen,
                     size_t n_base,
                     size_t dim,
                     uint64_t seed,
                     unsigned stream,
                     size_t first_row,
                     size_t n_rows,
                     ds_matrix *out,
                     char *err,
                     size_t err_len);
/* "sx-gmm-1", "sx-gmm-rot-1", "sx-gmm-rot-unit-1" (the name caches are keyed by). */
const char *ds_gen_name(ds_gen gen);
/* "clustered", "anisotropic", "cosine" (the --generate value). */
const char *ds_gen_kind(ds_gen gen);
/* Parses a kind or a name. Returns 0, or -1 when unknown. */
int ds_gen_parse(const char *s, ds_gen *out);

/* HDF5 paths: "FILE.hdf5" or "FILE.hdf5:DATASET" (also .h5). */
bool ds_is_hdf5(const char *path);
/* 1 when the HDF5 path's file opens and has the dataset, else 0 (never prints). */
int ds_hdf5_has(const char *path);
/* Reads the file's root attribute "distance" (ann-benchmarks: "euclidean", "angular", "dot",
 * "hamming", "jaccard") into out. Returns 0, or -1 when absent or unreadable. */
int ds_hdf5_distance(const char *path, char *out, size_t out_len);

/* FNV-1a 64-bit hashing: data identity (dataset.data_hash) and cache checksums. */
uint64_t ds_hash_init(void);
uint64_t ds_hash_bytes(uint64_t h, const void *p, size_t len);
/* Folds the values' 32-bit patterns, little-endian, row by row. */
uint64_t ds_hash_matrix(uint64_t h, const ds_matrix *m);
/* Hash of a whole file's bytes. Returns 0, or -1 with a message. */
int ds_hash_file(const char *path, uint64_t *out, char *err, size_t err_len);

/* Returns the last path component (borrowed from path). */
const char *ds_basename(const char *path);
/* The well-known data set a vector file belongs to, recognised from its file and directory names
 * (case-insensitive):
 * "Fashion-MNIST" for .../fashion-mnist/train-images-idx3-ubyte.gz, "BIGANN-10k" for
 * bigann10k_base.bvecs, "SIFT1M", "GIST1M", ...; NULL when unknown. Borrowed: a static string.
 * Fashion-MNIST and MNIST share file names, so only the directory tells them apart. */
const char *ds_known_name(const char *path);

#endif /* SX_TOOLS_DATASETS_H */
