/* metrics.c: STUB (being written). */
#include "server/server.h"

sx_status sx__metrics_new(sx__metrics **out) { *out = NULL; return SX_OK; }
void sx__metrics_free(sx__metrics *m) { (void)m; }
void sx__metrics_request(sx__metrics *m, const char *route, int http_status, int code, double secs) { (void)m; (void)route; (void)http_status; (void)code; (void)secs; }
void sx__metrics_rows(sx__metrics *m, uint64_t inserted, uint64_t deleted, uint64_t searched_nq) { (void)m; (void)inserted; (void)deleted; (void)searched_nq; }
sx_status sx__metrics_render(sx__metrics *m, sx__catalog *cat, sx__merger *mg, char **text, size_t *len) { (void)m; (void)cat; (void)mg; (void)text; (void)len; return SX_EINVAL; }
