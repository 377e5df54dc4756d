/*
 * etcd.h: runs a real etcd cluster (Debian's etcd-server, /usr/bin/etcd) for the cluster tests:
 * n members on 127.0.0.1, client and peer ports picked free by the kernel, one data directory
 * each under DIR, logs in DIR/mI.log. Members get PR_SET_PDEATHSIG so a crashed test leaves
 * none behind; th_etcd_stop kills with SIGKILL after 3 s of SIGTERM (a member can linger once
 * its peers are gone).
 *
 *   th_etcd ec;
 *   int rc = th_etcd_start(dir, 3, &ec);   0 ok; 77 skip (no etcd binary); 1 error
 *   ... ec.endpoints: "http://127.0.0.1:P1,http://127.0.0.1:P2,http://127.0.0.1:P3" ...
 *   th_etcd_kill(&ec, i, SIGKILL); th_etcd_restart(&ec, i);
 *   th_etcd_stop(&ec);
 */
#ifndef SX_TEST_ETCD_H
#define SX_TEST_ETCD_H
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

#define TH_ETCD_MAX 5

typedef struct th_etcd {
    int n;
    pid_t pid[TH_ETCD_MAX];
    int cport[TH_ETCD_MAX], pport[TH_ETCD_MAX];
    char dir[512];
    char endpoints[512];
    char ep[TH_ETCD_MAX][64];
    char initial[1024];
} th_etcd;

static inline const char *th_etcd_bin(void)
{
    const char *b = getenv("SX_ETCD_BIN");
    return b && *b ? b : "/usr/bin/etcd";
}

/* A port the kernel says is free now (bound to 0, read back, closed). */
static inline int th_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* GET /health answers {"health":"true"} (the member is part of a cluster with a leader). */
static inline int th_etcd_healthy(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct timeval tv = { 1, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        const char *req = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
        if (write(fd, req, strlen(req)) == (ssize_t)strlen(req)) {
            char buf[2048];
            size_t n = 0;
            ssize_t r;
            while (n + 1 < sizeof buf && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
                n += (size_t)r;
            buf[n] = '\0';
            ok = strstr(buf, "\"health\":\"true\"") != NULL;
        }
    }
    close(fd);
    return ok;
}

static inline pid_t th_etcd_spawn(th_etcd *ec, int i, const char *state)
{
    char name[16], data[700], log[700], curl[64], purl[64];
    snprintf(name, sizeof name, "m%d", i + 1);
    snprintf(data, sizeof data, "%s/m%d", ec->dir, i + 1);
    snprintf(log, sizeof log, "%s/m%d.log", ec->dir, i + 1);
    snprintf(curl, sizeof curl, "http://127.0.0.1:%d", ec->cport[i]);
    snprintf(purl, sizeof purl, "http://127.0.0.1:%d", ec->pport[i]);
    pid_t ppid = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != ppid)
        _exit(1);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    execl(th_etcd_bin(), "etcd", "--name", name, "--data-dir", data, "--listen-client-urls", curl,
          "--advertise-client-urls", curl, "--listen-peer-urls", purl,
          "--initial-advertise-peer-urls", purl, "--initial-cluster", ec->initial,
          "--initial-cluster-state", state, "--initial-cluster-token", "sx-test",
          "--heartbeat-interval", "100", "--election-timeout", "1000", "--log-level", "warn",
          (char *)NULL);
    _exit(127);
}

/* Waits until every running member reports healthy (up to 30 s). 0 or 1. */
static inline int th_etcd_wait(th_etcd *ec)
{
    for (int t = 0; t < 300; t++) {
        int up = 0;
        for (int i = 0; i < ec->n; i++)
            up += ec->pid[i] == 0 || th_etcd_healthy(ec->cport[i]);
        if (up == ec->n)
            return 0;
        struct timespec ts = { 0, 100000000L };
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "etcd: members not healthy after 30 s (logs in %s)\n", ec->dir);
    return 1;
}

static inline int th_etcd_start(const char *dir, int n, th_etcd *ec)
{
    memset(ec, 0, sizeof *ec);
    if (n < 1 || n > TH_ETCD_MAX)
        return 1;
    if (access(th_etcd_bin(), X_OK) != 0) {
        fprintf(stderr, "SKIP: %s is not installed (Debian etcd-server; `make deps`)\n",
                th_etcd_bin());
        return 77;
    }
    ec->n = n;
    snprintf(ec->dir, sizeof ec->dir, "%s", dir);
    mkdir(dir, 0755);
    size_t off = 0, eoff = 0;
    for (int i = 0; i < n; i++) {
        ec->cport[i] = th_free_port();
        ec->pport[i] = th_free_port();
        if (ec->cport[i] <= 0 || ec->pport[i] <= 0 || ec->cport[i] == ec->pport[i])
            return 1;
        off += (size_t)snprintf(ec->initial + off, sizeof ec->initial - off,
                                "%sm%d=http://127.0.0.1:%d", i ? "," : "", i + 1, ec->pport[i]);
        snprintf(ec->ep[i], sizeof ec->ep[i], "http://127.0.0.1:%d", ec->cport[i]);
        eoff += (size_t)snprintf(ec->endpoints + eoff, sizeof ec->endpoints - eoff, "%s%s",
                                 i ? "," : "", ec->ep[i]);
    }
    for (int i = 0; i < n; i++) {
        ec->pid[i] = th_etcd_spawn(ec, i, "new");
        if (ec->pid[i] < 0)
            return 1;
    }
    return th_etcd_wait(ec);
}

static inline void th_etcd_kill(th_etcd *ec, int i, int sig)
{
    if (ec->pid[i] > 0) {
        kill(ec->pid[i], sig);
        if (sig == SIGKILL || sig == SIGTERM) {
            waitpid(ec->pid[i], NULL, 0);
            ec->pid[i] = 0;
        }
    }
}

/* Restarts a killed member on its data directory. 0 or 1 (after waiting for health). */
static inline int th_etcd_restart(th_etcd *ec, int i)
{
    if (ec->pid[i] > 0)
        return 1;
    ec->pid[i] = th_etcd_spawn(ec, i, "existing");
    return ec->pid[i] > 0 ? th_etcd_wait(ec) : 1;
}

static inline void th_etcd_stop(th_etcd *ec)
{
    for (int i = 0; i < ec->n; i++)
        if (ec->pid[i] > 0)
            kill(ec->pid[i], SIGTERM);
    for (int i = 0; i < ec->n; i++) {
        if (ec->pid[i] <= 0)
            continue;
        int done = 0;
        for (int t = 0; t < 30 && !done; t++) {
            done = waitpid(ec->pid[i], NULL, WNOHANG) == ec->pid[i];
            if (!done) {
                struct timespec ts = { 0, 100000000L };
                nanosleep(&ts, NULL);
            }
        }
        if (!done) {
            kill(ec->pid[i], SIGKILL);
            waitpid(ec->pid[i], NULL, 0);
        }
        ec->pid[i] = 0;
    }
}

#endif
