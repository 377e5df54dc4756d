/* merge.c: STUB (being written): no merging, every call searches alone. */
#include "server/server.h"

sx_status sx__merger_new(const sx_server_options *o, sx__merger **out) { (void)o; *out = NULL; return SX_OK; }
void sx__merger_free(sx__merger *m) { (void)m; }
sx_status sx__merger_search(sx__merger *m, sx_collection *c, const char *key, const sx_search_req *req, sx_rowset **out)
{
    (void)m; (void)key;
    return sx_search(c, req, out);
}
void sx__merger_stats(sx__merger *m, uint64_t *batches, uint64_t *merged_requests) { (void)m; *batches = 0; *merged_requests = 0; }
