/* handlers_admin.c: STUB (being written). */
#include "server/server.h"

const sx__route sx__routes_admin[] = {{NULL, NULL, false}};
