/* handlers_indexes.c: STUB (being written). */
#include "server/server.h"

const sx__route sx__routes_indexes[] = {{NULL, NULL, false}};
