/*
 * version.c: library version string.
 */
#include <sextant.h>

const char *sx_version(void)
{
    return "0.1.0";
}
