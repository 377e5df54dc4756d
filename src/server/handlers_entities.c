/* handlers_entities.c: STUB (being written). */
#include "server/server.h"

const sx__route sx__routes_entities[] = {{NULL, NULL, false}};
