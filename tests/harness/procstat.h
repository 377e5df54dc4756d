/*
 * procstat.h: this process's memory from /proc (test_vm_kb, test_reset_hwm), for the tests
 * (through harness.h) and the fuzz harnesses' resource bounds.
 */
#ifndef SX_TEST_PROCSTAT_H
#define SX_TEST_PROCSTAT_H
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A "Vm...:" line of /proc/self/status ("VmRSS", "VmHWM") in KiB, 0 when absent. */
static inline uint64_t test_vm_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    uint64_t v = 0;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = strtoull(line + kl + 1, NULL, 10);
            break;
        }
    (void)fclose(f);
    return v;
}

/* Resets VmHWM to the current RSS (Linux >= 4.0); false where /proc/self/clear_refs is not
 * writable. */
static inline bool test_reset_hwm(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    if (fd < 0)
        return false;
    bool ok = write(fd, "5", 1) == 1;
    close(fd);
    return ok;
}

#endif /* SX_TEST_PROCSTAT_H */
