/*
 * s3rver.h: runs the pinned S3 server (@20minutes/s3rver, tests/e2e/node/package.json) for the
 * S3 tests: node on 127.0.0.1, a free port chosen by the server (-p 0), a fresh data directory,
 * its built-in account S3RVER / S3RVER (SigV4 signatures are verified).
 *
 *   th_s3rver srv;
 *   int rc = th_s3rver_start(dir, &srv);   0 ok; 77 skip (no node or no node_modules); 1 error
 *   ... http://127.0.0.1:<srv.port> ...
 *   th_s3rver_stop(&srv);
 *
 * The repository root comes from $SX_SOURCE_DIR (set by ctest), else the current directory and
 * its parents are searched for tests/e2e/node. The package ships no bin/ script, so the server
 * is started through its lib/cli.js (commander program) with `node -e`, with
 * --openssl-legacy-provider: s3rver makes ListObjectsV2 continuation tokens with DES, which
 * Node 17+ (OpenSSL 3) refuses otherwise (every truncated listing would answer 500). The child's
 * output goes to DIR/s3rver.log; the "listening on ADDR:PORT" line gives the port. The child gets
 * PR_SET_PDEATHSIG so a crashed test does not leave it behind.
 */
#ifndef SX_TEST_S3RVER_H
#define SX_TEST_S3RVER_H
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TH_S3RVER_PKG    "tests/e2e/node/node_modules/@20minutes/s3rver/lib/cli.js"
#define TH_S3RVER_ACCESS "S3RVER"
#define TH_S3RVER_SECRET "S3RVER"

typedef struct th_s3rver {
    pid_t pid;
    int port;
    char endpoint[64]; /* "http://127.0.0.1:PORT" */
    char dir[512];
    char log[600];
} th_s3rver;

static int th_s3rver_find_cli(char *out, size_t n)
{
    const char *root = getenv("SX_SOURCE_DIR");
    if (root && *root) {
        snprintf(out, n, "%s/%s", root, TH_S3RVER_PKG);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
    const char *ups[] = { ".", "..", "../..", "../../.." };
    for (size_t i = 0; i < sizeof ups / sizeof ups[0]; i++) {
        snprintf(out, n, "%s/%s", ups[i], TH_S3RVER_PKG);
        if (access(out, R_OK) == 0)
            return 0;
    }
    return -1;
}

static int th_have_node(void)
{
    return system("node --version >/dev/null 2>&1") == 0;
}

static int th_port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Starts the server with data under dir (created). Returns 0, 77 (skip: message printed) or 1. */
static int th_s3rver_start(const char *dir, th_s3rver *out)
{
    memset(out, 0, sizeof *out);
    char cli[1024];
    if (!th_have_node()) {
        fprintf(stderr, "SKIP: node is not installed (the S3 tests need it for s3rver)\n");
        return 77;
    }
    if (th_s3rver_find_cli(cli, sizeof cli) != 0) {
        fprintf(stderr,
                "SKIP: %s not found (run `npm ci` in tests/e2e/node, or set "
                "SX_SOURCE_DIR)\n",
                TH_S3RVER_PKG);
        return 77;
    }
    snprintf(out->dir, sizeof out->dir, "%s/s3data", dir);
    snprintf(out->log, sizeof out->log, "%s/s3rver.log", dir);
    mkdir(dir, 0755);
    mkdir(out->dir, 0755);
    char script[1400];
    snprintf(script, sizeof script,
             "require(%s%s%s).parseAsync(['node','s3rver'].concat(process.argv.slice(1)))"
             ".catch(e=>{console.error(e);process.exit(1)})",
             "'", cli, "'");
    pid_t ppid = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != ppid)
            _exit(1);
        int fd = open(out->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        if (getenv("SX_S3RVER_VERBOSE")) /* request log in DIR/s3rver.log */
            execlp("node", "node", "--openssl-legacy-provider", "-e", script, "--", "-d", out->dir,
                   "-a", "127.0.0.1", "-p", "0", (char *)NULL);
        else
            execlp("node", "node", "--openssl-legacy-provider", "-e", script, "--", "-d", out->dir,
                   "-a", "127.0.0.1", "-p", "0", "--silent", (char *)NULL);
        _exit(127);
    }
    out->pid = pid;
    /* wait for "listening on 127.0.0.1:PORT" (up to 30 s) */
    for (int i = 0; i < 300; i++) {
        int wst;
        if (waitpid(pid, &wst, WNOHANG) == pid) {
            fprintf(stderr, "s3rver exited early; log %s:\n", out->log);
            char cmd[700];
            snprintf(cmd, sizeof cmd, "cat '%s' >&2", out->log);
            if (system(cmd) != 0) {
            }
            out->pid = 0;
            return 1;
        }
        FILE *f = fopen(out->log, "r");
        if (f) {
            char line[512];
            while (fgets(line, sizeof line, f)) {
                const char *p = strstr(line, "listening on ");
                const char *c = p ? strrchr(p, ':') : NULL;
                if (c)
                    out->port = (int)strtol(c + 1, NULL, 10);
            }
            fclose(f);
        }
        if (out->port > 0 && th_port_open(out->port)) {
            snprintf(out->endpoint, sizeof out->endpoint, "http://127.0.0.1:%d", out->port);
            return 0;
        }
        struct timespec ts = { 0, 100 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "s3rver did not start within 30 s (log %s)\n", out->log);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    out->pid = 0;
    return 1;
}

static void th_s3rver_stop(th_s3rver *s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 50; i++) {
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0;
            return;
        }
        struct timespec ts = { 0, 100 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}
#endif
