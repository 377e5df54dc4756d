/* http.c: STUB (being written). */
#include "server/server.h"
#include "util/err.h"

const char *const sx__open_paths[] = {"/livez", "/readyz", "/healthz", NULL};
const sx__route *sx__server_routes(size_t *n) { *n = 0; return NULL; }
sx_status sx_server_start(const sx_server_options *opts, sx_server **out) { (void)opts; (void)out; return sx__err(SX_EINVAL, "server: not implemented"); }
uint16_t sx_server_port(const sx_server *s) { (void)s; return 0; }
sx_status sx_server_stop(sx_server *s) { (void)s; return SX_OK; }
