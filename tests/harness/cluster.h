/*
 * cluster.h: what the `sextant cluster` tests share: running the CLI, reading `cluster status`,
 * checking pids, a free port base for a whole cluster, requests through the proxy with the
 * X-Sextant-Node header read back. The test sets
 * th_cl_bin (the sextant binary) and th_cl_dir (the cluster's directory).
 *
 *   th_cl_run(out, cap, "cluster up --dir ...")   exit status, stdout+stderr in out
 *   th_cl_status(lines, max)                     the parsed `cluster status` lines
 *   th_cl_find(lines, n, "w1")                   a line by process name
 *   th_cl_alive(pid)                             running and not a zombie
 *   th_cl_via(path, body, node)                  POST at th_base: code, node = X-Sextant-Node
 *   th_cl_logs_clean(why, cap)                   no sanitizer report in the processes' logs
 */
#ifndef SX_TEST_CLUSTER_H
#define SX_TEST_CLUSTER_H
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "etcd.h"
#include "harness.h"
#include "http.h"

static const char *th_cl_bin;
static char th_cl_dir[600];

/* runs `sextant ARGS` and captures stdout+stderr into out; returns the exit status */
static inline int th_cl_run(char *out, size_t cap, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", th_cl_bin, args);
    FILE *p = popen(cmd, "r");
    if (!p) {
        snprintf(out, cap, "popen: %s", strerror(errno));
        return -1;
    }
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

typedef struct th_cl_line {
    char role[16], name[32], addr[64], state[16];
    int pid, restarts;
} th_cl_line;

static inline int th_cl_status(th_cl_line *ls, int max)
{
    char out[8192], args[800];
    snprintf(args, sizeof args, "cluster status --dir '%s'", th_cl_dir);
    th_cl_run(out, sizeof out, args);
    int n = 0;
    char *save = NULL;
    for (char *l = strtok_r(out, "\n", &save); l && n < max; l = strtok_r(NULL, "\n", &save)) {
        th_cl_line *x = &ls[n];
        if (sscanf(l, "%15s %31s pid=%d %63s %15s restarts=%d", x->role, x->name, &x->pid, x->addr,
                   x->state, &x->restarts) == 6)
            n++;
    }
    return n;
}

static inline const th_cl_line *th_cl_find(const th_cl_line *ls, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(ls[i].name, name) == 0)
            return &ls[i];
    return NULL;
}

static inline bool th_cl_alive(int pid)
{
    if (pid <= 0 || kill(pid, 0) != 0)
        return false;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return !(rp && rp[2] == 'Z');
}

/* POST at th_base: the Milvus code, node = X-Sextant-Node (64 bytes, or the cap given);
 * th_last.json = the body */
static inline long long th_cl_via_n(const char *path, const char *body, char *node, size_t cap)
{
    th_send("POST", path, body, strlen(body), NULL, true);
    node[0] = '\0';
    const char *t = th_last.text ? th_last.text : "";
    const char *h = strcasestr(t, "X-Sextant-Node:");
    if (h) {
        h += 15;
        while (*h == ' ')
            h++;
        size_t l = strcspn(h, "\r\n");
        snprintf(node, cap, "%.*s", (int)l, h);
    }
    const char *b = strstr(t, "\r\n\r\n");
    json_decref(th_last.json);
    th_last.json = b ? json_loads(b + 4, 0, NULL) : NULL;
    return th_code();
}

static inline long long th_cl_via(const char *path, const char *body, char *node)
{
    return th_cl_via_n(path, body, node, 64);
}

static inline double th_cl_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* a port base with P (the proxy), P+1.. (writers), P+50.. (query nodes), P+101..103,
 * P+201..203 (etcd), P+300 (s3rver) free */
static inline unsigned th_cl_pick_base(unsigned salt)
{
    for (int tries = 0; tries < 200; tries++) {
        unsigned b = 10000 + (unsigned)((getpid() * 7919 + (int)salt * 613 + tries * 104729) %
                                        20000); /* below the ephemeral range */
        unsigned ports[] = { b,       b + 1,   b + 2,   b + 3,   b + 50,  b + 51, b + 101,
                             b + 102, b + 103, b + 201, b + 202, b + 203, b + 300 };
        bool ok = true;
        for (size_t i = 0; i < sizeof ports / sizeof ports[0] && ok; i++) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a;
            memset(&a, 0, sizeof a);
            a.sin_family = AF_INET;
            a.sin_port = htons((uint16_t)ports[i]);
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
            if (fd >= 0)
                close(fd);
        }
        if (ok)
            return b;
    }
    return 0;
}

/* The test's set-up: th_cl_bin from $SX_SEXTANT_BIN, th_cl_dir a fresh directory named name.
 * 0, or 77 (skip: no binary, or no etcd; the reason on stderr). */
static inline int th_cl_init(const char *name)
{
    th_cl_bin = getenv("SX_SEXTANT_BIN");
    if (!th_cl_bin || access(th_cl_bin, X_OK) != 0) {
        fprintf(stderr, "SKIP: SX_SEXTANT_BIN not set (run through ctest)\n");
        return 77;
    }
    if (access(th_etcd_bin(), X_OK) != 0) {
        fprintf(stderr, "SKIP: %s is not installed (Debian etcd-server)\n", th_etcd_bin());
        return 77;
    }
    snprintf(th_cl_dir, sizeof th_cl_dir, "%s", test_tmpdir(name));
    return 0;
}

/* Whether the cluster's process logs (the files in th_cl_dir/logs) are free of sanitizer reports
 * (ASan, LSan, TSan, UBSan): the nodes are child processes, so a report there would otherwise
 * not fail the test. false: why names the log and the report's line. */
static inline bool th_cl_logs_clean(char *why, size_t cap)
{
    static const char *const marks[] = { "ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                                         "WARNING: ThreadSanitizer", "runtime error:" };
    char dir[700];
    snprintf(dir, sizeof dir, "%s/logs", th_cl_dir);
    DIR *d = opendir(dir);
    if (!d)
        return true;
    bool clean = true;
    struct dirent *e;
    while (clean && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[1000];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        char line[1024];
        while (f && clean && fgets(line, sizeof line, f))
            for (size_t i = 0; i < sizeof marks / sizeof marks[0] && clean; i++)
                if (strstr(line, marks[i])) {
                    snprintf(why, cap, "%s: %s", path, line);
                    clean = false;
                }
        if (f)
            fclose(f);
    }
    closedir(d);
    return clean;
}

/* `cluster down` on th_cl_dir, whatever happened: leave nothing running. */
static inline void th_cl_down(void)
{
    char out[4096], args[800];
    snprintf(args, sizeof args, "cluster down --dir '%s'", th_cl_dir);
    (void)th_cl_run(out, sizeof out, args);
}

#endif /* SX_TEST_CLUSTER_H */
