/* catalog.c: STUB (being written). */
#include "server/server.h"
#include "util/err.h"

sx_status sx__cat_open(const char *dir, const sx_db_options *opts, sx__catalog **out)
{
    (void)dir; (void)opts; (void)out;
    return sx__err(SX_EINVAL, "catalog: not implemented");
}
sx_status sx__cat_close(sx__catalog *cat) { (void)cat; return SX_OK; }
sx_status sx__cat_db_list(sx__catalog *cat, char ***names, size_t *n) { (void)cat; (void)names; (void)n; return SX_EINVAL; }
sx_status sx__cat_db_create(sx__catalog *cat, const char *db) { (void)cat; (void)db; return SX_EINVAL; }
sx_status sx__cat_db_drop(sx__catalog *cat, const char *db) { (void)cat; (void)db; return SX_EINVAL; }
bool sx__cat_db_exists(sx__catalog *cat, const char *db) { (void)cat; (void)db; return false; }
sx_status sx__cat_coll_get(sx__catalog *cat, const char *db, const char *name, sx_collection **h, sx__coll_meta *meta) { (void)cat; (void)db; (void)name; (void)h; (void)meta; return SX_ENOTFOUND; }
sx_status sx__cat_coll_create(sx__catalog *cat, const char *db, sx__coll_meta *meta) { (void)cat; (void)db; (void)meta; return SX_EINVAL; }
sx_status sx__cat_coll_drop(sx__catalog *cat, const char *db, const char *name) { (void)cat; (void)db; (void)name; return SX_EINVAL; }
sx_status sx__cat_coll_update(sx__catalog *cat, const char *db, const sx__coll_meta *meta) { (void)cat; (void)db; (void)meta; return SX_EINVAL; }
sx_status sx__cat_coll_rename(sx__catalog *cat, const char *db, const char *name, const char *new_db, const char *new_name) { (void)cat; (void)db; (void)name; (void)new_db; (void)new_name; return SX_EINVAL; }
sx_status sx__cat_coll_list(sx__catalog *cat, const char *db, char ***names, size_t *n) { (void)cat; (void)db; (void)names; (void)n; return SX_EINVAL; }
sx_status sx__cat_foreach(sx__catalog *cat, sx__cat_visit_fn fn, void *ctx) { (void)cat; (void)fn; (void)ctx; return SX_OK; }
