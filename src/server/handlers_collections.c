/* handlers_collections.c: STUB (being written). */
#include "server/server.h"

const sx__route sx__routes_collections[] = {{NULL, NULL, false}};
