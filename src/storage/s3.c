/* s3.c: STUB (being written by the s3 helper): every call fails with SX_EREMOTE. */
#include "storage/s3.h"
#include "util/err.h"

sx_status sx__s3_new(const sx__s3_config *cfg, sx__s3 **out) { (void)cfg; (void)out; return sx__err(SX_EREMOTE, "s3: not implemented yet"); }
void sx__s3_free(sx__s3 *s) { (void)s; }
sx_status sx__s3_create_bucket(sx__s3 *s) { (void)s; return SX_EREMOTE; }
sx_status sx__s3_put(sx__s3 *s, const char *key, const void *data, size_t len) { (void)s; (void)key; (void)data; (void)len; return SX_EREMOTE; }
sx_status sx__s3_put_file(sx__s3 *s, const char *key, const char *path) { (void)s; (void)key; (void)path; return SX_EREMOTE; }
sx_status sx__s3_get(sx__s3 *s, const char *key, uint64_t off, uint64_t len, void **data, size_t *n) { (void)s; (void)key; (void)off; (void)len; (void)data; (void)n; return SX_EREMOTE; }
sx_status sx__s3_get_range(sx__s3 *s, const char *key, uint64_t off, size_t len, void *buf) { (void)s; (void)key; (void)off; (void)len; (void)buf; return SX_EREMOTE; }
sx_status sx__s3_get_file(sx__s3 *s, const char *key, const char *path) { (void)s; (void)key; (void)path; return SX_EREMOTE; }
sx_status sx__s3_head(sx__s3 *s, const char *key, uint64_t *size) { (void)s; (void)key; (void)size; return SX_EREMOTE; }
sx_status sx__s3_delete(sx__s3 *s, const char *key) { (void)s; (void)key; return SX_EREMOTE; }
sx_status sx__s3_list(sx__s3 *s, const char *prefix, char ***keys, uint64_t **sizes, size_t *n) { (void)s; (void)prefix; (void)keys; (void)sizes; (void)n; return SX_EREMOTE; }
sx_status sx__s3_abort_orphans(sx__s3 *s, const char *prefix, uint64_t older_than_s, size_t *n_aborted) { (void)s; (void)prefix; (void)older_than_s; (void)n_aborted; return SX_EREMOTE; }
void sx__s3_stats_get(sx__s3 *s, sx__s3_stats *out) { (void)s; (void)out; }
