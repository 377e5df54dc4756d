/*
 * cluster.c: `sextant cluster up|status|down`: a whole local cluster (docs/internals/CLUSTER.md)
 * started, supervised and stopped as one.
 *
 *   up --dir D --port P [--etcd 3] [--writers 1] [--query-nodes 0] [--index-workers 0]
 *      [--storage URL --s3-endpoint URL] [--lease-ttl 5] [--build-threads N] [--segment-mb N]
 *      [--sync-ms N]
 *   status --dir D      one line per process: role, name, pid=N, addr, state, restarts
 *   down --dir D        stops every process (writers first, etcd last) and the supervisor
 *
 * Layout of D: etcd/m<i>/ (member data), w<i>/ (writer data directories), s3/ (s3rver's data:
 * the store when no --storage is given; s3://sextant/cluster on port P + 300, the built-in
 * S3RVER account, when node and the npm package @20minutes/s3rver are found), or store/ (a
 * file:// store, when they are not), logs/<name>.log, supervisor.pid, cluster.state (the
 * process table, rewritten atomically on every change), supervisor.log.
 *
 * Ports: the proxy (`serve --proxy`: Milvus REST and gRPC, writes to the holding writer, reads to
 * it or to query nodes, sharded collections fanned out) on P, the clients' one address; writer i
 * on P + i, query node i on P + 50 + i - 1; etcd member i on P + 100 + i (client) and P + 200 + i
 * (peer); s3rver on P + 300.
 *
 * Supervision. `up` forks a supervisor (setsid, its own session: the terminal's ^C does not reach
 * it), which starts the etcd members, waits until they elect a leader, then the writers, and
 * waits for children. A child that exits while the cluster is up is started again, with the same
 * arguments and directory (so a killed writer replays its WAL, a fenced one reconciles, a killed
 * etcd member rejoins on its data), after a backoff of 0.5 s doubling to 30 s when it keeps
 * dying within 10 s of its start. SIGTERM (`down`) stops the writers (SIGTERM: they flush and
 * revoke their leases), then the etcd members, each SIGKILLed after 10 s; then the supervisor
 * removes supervisor.pid and exits. `up` returns once every writer answers /readyz (exit 0), or
 * prints the supervisor's log and exits 1 if that does not happen within 60 s.
 *
 * etcd members run with --auto-compaction-mode revision --auto-compaction-retention 1000 and
 * --quota-backend-bytes 2 GiB (scale-out.md: Milvus's "mvcc: database space exceeded" outages).
 *
 * Index workers x<i> (`serve --index-worker`, data D/x<i>/, no port) start with the nodes; `up`
 * also waits for each one's D/x<i>/READY (written once it registered in etcd).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define MAXP 96

typedef struct proc {
    char role[16], name[32], addr[64], log[PATH_MAX];
    char *argv[48];
    int argc;
    char *own[48]; /* the argv strings this entry allocated */
    int n_own;
    pid_t pid;
    int restarts;
    double started, backoff;
    bool waiting; /* dead, restart due at `due` */
    double due;
} proc;

typedef struct cluster {
    char dir[PATH_MAX], self[PATH_MAX], storage[PATH_MAX + 16], endpoint[512], etcd_eps[512];
    char s3rver_cli[PATH_MAX]; /* "": no s3rver of our own */
    unsigned port, n_etcd, n_writers, n_query, n_index, lease_ttl, build_threads, segment_mb;
    unsigned sync_ms; /* writers' --sync-ms (0: none) */
    proc p[MAXP];
    int n;
} cluster;

static volatile sig_atomic_t stopping;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_term(int sig)
{
    (void)sig;
    stopping = 1;
}

static char *dupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *dupf(const char *fmt, ...)
{
    char buf[PATH_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *s = strdup(buf);
    if (!s) {
        fprintf(stderr, "sextant cluster: out of memory\n");
        exit(1);
    }
    return s;
}

static void mkdirs(const char *path)
{
    char buf[PATH_MAX];
    (void)snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            (void)mkdir(buf, 0755);
            *p = '/';
        }
    (void)mkdir(buf, 0755);
}

/* ---------------------------------------------------------------- the process table */

static void write_state(const cluster *c)
{
    char path[PATH_MAX + 32], tmp[PATH_MAX + 32];
    (void)snprintf(path, sizeof path, "%s/cluster.state", c->dir);
    (void)snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    for (int i = 0; i < c->n; i++) {
        const proc *p = &c->p[i];
        fprintf(f, "%s %s %d %s %s %d\n", p->role, p->name, p->waiting ? 0 : (int)p->pid, p->addr,
                p->waiting ? "restarting" : "running", p->restarts);
    }
    if (fclose(f) == 0)
        (void)rename(tmp, path);
}

static void add_proc(cluster *c, const char *role, const char *name, const char *addr)
{
    proc *p = &c->p[c->n++];
    memset(p, 0, sizeof *p);
    (void)snprintf(p->role, sizeof p->role, "%s", role);
    (void)snprintf(p->name, sizeof p->name, "%s", name);
    (void)snprintf(p->addr, sizeof p->addr, "%s", addr);
    char log[PATH_MAX];
    (void)snprintf(log, sizeof log, "%s/logs/%s.log", c->dir, name);
    memcpy(p->log, log, sizeof p->log);
    p->backoff = 0.5;
}

/* s: a literal or a string that outlives the table (not freed) */
static void arg(proc *p, char *s)
{
    p->argv[p->argc++] = s;
    p->argv[p->argc] = NULL;
}

/* s: from dupf (freed by free_procs) */
static void argd(proc *p, char *s)
{
    p->own[p->n_own++] = s;
    arg(p, s);
}

static void free_procs(cluster *c)
{
    for (int i = 0; i < c->n; i++)
        for (int k = 0; k < c->p[i].n_own; k++)
            free(c->p[i].own[k]);
    c->n = 0;
}

/* The arguments every cluster node gets: its data directory, the store, etcd, its id, the lease
 * and the build threads. */
static void node_args(cluster *c, proc *p, const char *name)
{
    arg(p, "--data");
    argd(p, dupf("%s/%s", c->dir, name));
    arg(p, "--storage");
    arg(p, c->storage);
    if (c->endpoint[0]) {
        arg(p, "--s3-endpoint");
        arg(p, c->endpoint);
    }
    arg(p, "--etcd");
    arg(p, c->etcd_eps);
    arg(p, "--node-id");
    argd(p, dupf("%s", name));
    arg(p, "--lease-ttl");
    argd(p, dupf("%u", c->lease_ttl));
    if (c->build_threads) {
        arg(p, "--build-threads");
        argd(p, dupf("%u", c->build_threads));
    }
}

/* writer i (`serve --etcd ...`) or query node i (`serve --query ...`) on port */
static void add_node(cluster *c, bool query, unsigned i, unsigned port)
{
    char name[16], addr[64];
    (void)snprintf(name, sizeof name, "%c%u", query ? 'q' : 'w', i);
    (void)snprintf(addr, sizeof addr, "127.0.0.1:%u", port);
    add_proc(c, query ? "query" : "writer", name, addr);
    proc *p = &c->p[c->n - 1];
    arg(p, c->self);
    arg(p, "serve");
    if (query)
        arg(p, "--query");
    arg(p, "--port");
    argd(p, dupf("%u", port));
    node_args(c, p, name);
    if (c->segment_mb && !query) {
        arg(p, "--segment-mb");
        argd(p, dupf("%u", c->segment_mb));
    }
    if (c->sync_ms && !query) {
        arg(p, "--sync-ms");
        argd(p, dupf("%u", c->sync_ms));
    }
    arg(p, "--quiet");
}

/* index worker i (`serve --index-worker ...`): no port; D/x<i>/READY while registered */
static void add_index_worker(cluster *c, unsigned i)
{
    char name[16];
    (void)snprintf(name, sizeof name, "x%u", i);
    add_proc(c, "index", name, "-");
    proc *p = &c->p[c->n - 1];
    arg(p, c->self);
    arg(p, "serve");
    arg(p, "--index-worker");
    node_args(c, p, name);
}

static void build(cluster *c)
{
    c->n = 0;
    char initial[2048] = "";
    size_t off = 0;
    c->etcd_eps[0] = '\0';
    size_t eoff = 0;
    for (unsigned i = 1; i <= c->n_etcd; i++) {
        off += (size_t)snprintf(initial + off, sizeof initial - off, "%sm%u=http://127.0.0.1:%u",
                                i > 1 ? "," : "", i, c->port + 200 + i);
        eoff += (size_t)snprintf(c->etcd_eps + eoff, sizeof c->etcd_eps - eoff,
                                 "%shttp://127.0.0.1:%u", i > 1 ? "," : "", c->port + 100 + i);
    }
    for (unsigned i = 1; i <= c->n_etcd; i++) {
        char name[16], addr[64];
        (void)snprintf(name, sizeof name, "etcd-m%u", i);
        (void)snprintf(addr, sizeof addr, "127.0.0.1:%u", c->port + 100 + i);
        add_proc(c, "etcd", name, addr);
        proc *p = &c->p[c->n - 1];
        arg(p, "etcd");
        arg(p, "--name");
        argd(p, dupf("m%u", i));
        arg(p, "--data-dir");
        argd(p, dupf("%s/etcd/m%u", c->dir, i));
        arg(p, "--listen-client-urls");
        argd(p, dupf("http://127.0.0.1:%u", c->port + 100 + i));
        arg(p, "--advertise-client-urls");
        argd(p, dupf("http://127.0.0.1:%u", c->port + 100 + i));
        arg(p, "--listen-peer-urls");
        argd(p, dupf("http://127.0.0.1:%u", c->port + 200 + i));
        arg(p, "--initial-advertise-peer-urls");
        argd(p, dupf("http://127.0.0.1:%u", c->port + 200 + i));
        arg(p, "--initial-cluster");
        argd(p, dupf("%s", initial));
        arg(p, "--initial-cluster-state");
        arg(p, "new"); /* ignored once the member has data: a restart rejoins */
        arg(p, "--initial-cluster-token");
        argd(p, dupf("sextant-%u", c->port));
        arg(p, "--auto-compaction-mode");
        arg(p, "revision");
        arg(p, "--auto-compaction-retention");
        arg(p, "1000");
        arg(p, "--quota-backend-bytes");
        arg(p, "2147483648");
        arg(p, "--log-level");
        arg(p, "warn");
    }
    if (c->s3rver_cli[0]) {
        char addr[64];
        (void)snprintf(addr, sizeof addr, "127.0.0.1:%u", c->port + 300);
        add_proc(c, "s3", "s3rver", addr);
        proc *p = &c->p[c->n - 1];
        arg(p, "node");
        arg(p, "--openssl-legacy-provider"); /* s3rver's continuation tokens use DES */
        arg(p, "-e");
        argd(p, dupf("require('%s').parseAsync(['node','s3rver'].concat(process.argv.slice(1)))"
                     ".catch(e=>{console.error(e);process.exit(1)})",
                     c->s3rver_cli));
        arg(p, "--");
        arg(p, "-d");
        argd(p, dupf("%s/s3", c->dir));
        arg(p, "-a");
        arg(p, "127.0.0.1");
        arg(p, "-p");
        argd(p, dupf("%u", c->port + 300));
        arg(p, "--silent");
        arg(p, "--configure-bucket");
        arg(p, "sextant");
    }
    for (unsigned i = 1; i <= c->n_writers; i++)
        add_node(c, false, i, c->port + i);
    for (unsigned i = 1; i <= c->n_query; i++)
        add_node(c, true, i, c->port + 50 + i - 1);
    for (unsigned i = 1; i <= c->n_index; i++)
        add_index_worker(c, i);
    char addr[64];
    (void)snprintf(addr, sizeof addr, "127.0.0.1:%u", c->port);
    add_proc(c, "proxy", "proxy", addr);
    proc *p = &c->p[c->n - 1];
    arg(p, c->self);
    arg(p, "serve");
    arg(p, "--proxy");
    arg(p, "--etcd");
    arg(p, c->etcd_eps);
    arg(p, "--port");
    argd(p, dupf("%u", c->port));
}

/* In a child: stdout and stderr appended to log, stdin from /dev/null. */
static void redirect_stdio(const char *log)
{
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    fd = open("/dev/null", O_RDONLY);
    if (fd >= 0) {
        dup2(fd, 0);
        close(fd);
    }
}

static pid_t start_proc(proc *p)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    redirect_stdio(p->log);
    if (strcmp(p->role, "etcd") == 0) {
        const char *b = getenv("SEXTANT_ETCD_BIN");
        execv(b && *b ? b : "/usr/bin/etcd", p->argv);
    } else if (strcmp(p->role, "s3") == 0) {
        execvp("node", p->argv);
    } else {
        execv(p->argv[0], p->argv);
    }
    fprintf(stderr, "sextant cluster: cannot run %s: %s\n", p->argv[0], strerror(errno));
    _exit(127);
}

static void slog(const cluster *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void slog(const cluster *c, const char *fmt, ...)
{
    (void)c;
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    char ts[32];
    (void)strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(stderr, "%s ", ts);
    va_list ap;
    va_start(ap, fmt);
    (void)vfprintf(stderr, fmt, ap);
    va_end(ap);
    (void)fputc('\n', stderr);
    (void)fflush(stderr);
}

/* GET path on 127.0.0.1:port answers HTTP 200 with `want` in the body (NULL: any). */
static bool http_ok(unsigned port, const char *path, const char *want)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    struct timeval tv = { 1, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = false;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        char req[256];
        int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
        if (write(fd, req, (size_t)n) == n) {
            char buf[4096];
            size_t got = 0;
            ssize_t r;
            while (got + 1 < sizeof buf && (r = read(fd, buf + got, sizeof buf - 1 - got)) > 0)
                got += (size_t)r;
            buf[got] = '\0';
            ok = strncmp(buf, "HTTP/1.", 7) == 0 && strstr(buf, " 200 ") &&
                 (!want || strstr(buf, want));
        }
    }
    close(fd);
    return ok;
}

/* writers, query nodes and the proxy: started after etcd (and s3rver), stopped before them */
static bool is_node(const proc *p)
{
    return strcmp(p->role, "writer") == 0 || strcmp(p->role, "query") == 0 ||
           strcmp(p->role, "proxy") == 0 || strcmp(p->role, "index") == 0;
}

static bool port_open(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static int supervise(cluster *c)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGTERM, &sa, NULL);
    (void)sigaction(SIGINT, &sa, NULL);
    /* etcd first; writers once a leader is elected (their start checks the cluster UUID) */
    for (int i = 0; i < c->n; i++) {
        proc *p = &c->p[i];
        if (is_node(p))
            continue;
        p->pid = start_proc(p);
        p->started = now_s();
        slog(c, "started %s pid=%d", p->name, (int)p->pid);
    }
    double t0 = now_s();
    bool healthy = false;
    while (!healthy && !stopping && now_s() - t0 < 30) {
        healthy = http_ok(c->port + 101, "/health", "\"health\":\"true\"") &&
                  (!c->s3rver_cli[0] || port_open(c->port + 300));
        if (!healthy)
            usleep(100000);
    }
    if (!healthy)
        slog(c, "etcd%s not ready within 30 s (logs in %s/logs)",
             c->s3rver_cli[0] ? " or s3rver" : "", c->dir);
    for (int i = 0; i < c->n && !stopping; i++) {
        proc *p = &c->p[i];
        if (!is_node(p))
            continue;
        p->pid = start_proc(p);
        p->started = now_s();
        slog(c, "started %s pid=%d on %s", p->name, (int)p->pid, p->addr);
    }
    write_state(c);
    while (!stopping) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid > 0) {
            for (int i = 0; i < c->n; i++) {
                proc *p = &c->p[i];
                if (p->pid != pid || p->waiting)
                    continue;
                double ran = now_s() - p->started;
                p->backoff = ran < 10 ? (p->backoff * 2 > 30 ? 30 : p->backoff * 2) : 0.5;
                p->waiting = true;
                p->due = now_s() + (ran < 10 ? p->backoff : 0.5);
                if (WIFEXITED(st))
                    slog(c, "%s pid=%d exited with status %d after %.1f s; restart in %.1f s",
                         p->name, (int)pid, WEXITSTATUS(st), ran, p->due - now_s());
                else
                    slog(c, "%s pid=%d killed by signal %d after %.1f s; restart in %.1f s",
                         p->name, (int)pid, WTERMSIG(st), ran, p->due - now_s());
                write_state(c);
            }
            continue;
        }
        for (int i = 0; i < c->n; i++) {
            proc *p = &c->p[i];
            if (p->waiting && now_s() >= p->due) {
                p->pid = start_proc(p);
                p->started = now_s();
                p->waiting = false;
                p->restarts++;
                slog(c, "restarted %s pid=%d (restart %d)", p->name, (int)p->pid, p->restarts);
                write_state(c);
            }
        }
        usleep(50000);
    }
    /* down: writers and query nodes first (writers flush and revoke their leases), then etcd and
     * s3rver */
    for (int pass = 0; pass < 2; pass++) {
        bool nodes = pass == 0;
        for (int i = 0; i < c->n; i++) {
            bool node = is_node(&c->p[i]);
            if (node == nodes && !c->p[i].waiting && c->p[i].pid > 0)
                kill(c->p[i].pid, SIGTERM);
        }
        double t1 = now_s();
        for (int i = 0; i < c->n; i++) {
            proc *p = &c->p[i];
            bool node = is_node(p);
            if (node != nodes || p->waiting || p->pid <= 0)
                continue;
            while (waitpid(p->pid, NULL, WNOHANG) == 0) {
                if (now_s() - t1 > 10) {
                    slog(c, "%s pid=%d did not stop within 10 s: SIGKILL", p->name, (int)p->pid);
                    kill(p->pid, SIGKILL);
                    waitpid(p->pid, NULL, 0);
                    break;
                }
                usleep(50000);
            }
            slog(c, "stopped %s", p->name);
            p->pid = 0;
        }
    }
    char path[PATH_MAX + 32];
    (void)snprintf(path, sizeof path, "%s/cluster.state", c->dir);
    (void)unlink(path);
    (void)snprintf(path, sizeof path, "%s/supervisor.pid", c->dir);
    (void)unlink(path);
    slog(c, "cluster down");
    return 0;
}

/* ---------------------------------------------------------------- commands */

/* alive and not a zombie (a supervisor whose `up` exited is reparented; where nothing reaps,
 * it would linger as a zombie after exiting) */
static bool alive(pid_t pid)
{
    if (pid <= 0 || kill(pid, 0) != 0)
        return false;
    char path[64], buf[512];
    (void)snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    (void)fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

static pid_t read_pid(const char *dir)
{
    char path[PATH_MAX + 32];
    (void)snprintf(path, sizeof path, "%s/supervisor.pid", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[64] = "";
    long pid = fgets(line, sizeof line, f) ? strtol(line, NULL, 10) : 0;
    (void)fclose(f);
    return alive((pid_t)pid) ? (pid_t)pid : 0;
}

/* s3rver's lib/cli.js: $SEXTANT_S3RVER_CLI, else the source tree's npm packages beside the
 * build directory (BUILD/../tests/e2e/node/node_modules, `make deps` installs them); node must
 * be on PATH. */
static bool find_s3rver(const char *self, char *out, size_t cap)
{
    if (system("node --version >/dev/null 2>&1") != 0)
        return false;
    const char *env = getenv("SEXTANT_S3RVER_CLI");
    if (env && *env) {
        (void)snprintf(out, cap, "%s", env);
        return access(out, R_OK) == 0;
    }
    char dir[PATH_MAX];
    (void)snprintf(dir, sizeof dir, "%s", self);
    char *sl = strrchr(dir, '/');
    if (!sl)
        return false;
    *sl = '\0';
    const char *ups[] = { "..", "../..", "." };
    for (size_t i = 0; i < sizeof ups / sizeof ups[0]; i++) {
        char cand[PATH_MAX + 128];
        (void)snprintf(cand, sizeof cand,
                       "%s/%s/tests/e2e/node/node_modules/@20minutes/s3rver/lib/cli.js", dir,
                       ups[i]);
        char real[PATH_MAX];
        if (access(cand, R_OK) == 0 && realpath(cand, real)) {
            (void)snprintf(out, cap, "%s", real);
            return true;
        }
    }
    return false;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: sextant cluster up --dir D --port P [options]\n"
            "       sextant cluster status --dir D\n"
            "       sextant cluster down --dir D\n"
            "\n"
            "Runs a local Sextant cluster in the background (docs/internals/CLUSTER.md): etcd\n"
            "members, shard writers fenced on etcd and query nodes, supervised (a process that\n"
            "dies is restarted on its directory). The proxy serves the Milvus REST and gRPC APIs\n"
            "on port P and routes to them: writer i on port P + i, query node i on\n"
            "P + 50 + i - 1; etcd member i listens on P + 100 + i (peers P + 200 + i).\n"
            "\n"
            "  --dir D              the cluster's directory (created)\n"
            "  --port P             the proxy's port, REST and gRPC (default 19530)\n"
            "  --etcd N             etcd members (default 3; 1 for a toy)\n"
            "  --writers N          shard writers (default 1)\n"
            "  --query-nodes N      query nodes (default 0): read-only, each follows the\n"
            "                       committed manifests of every collection; node i on\n"
            "                       port P + 50 + i - 1\n"
            "  --index-workers N    index workers (default 0): they claim the writers' index\n"
            "                       builds from etcd, read the segments from the store,\n"
            "                       build and upload the index files (writers build\n"
            "                       themselves while none is alive); no port\n"
            "  --build-threads N    threads of each index build, on writers and index\n"
            "                       workers (default: every core)\n"
            "  --segment-mb N       writers seal growing segments past N MiB of vectors\n"
            "                       (default 256)\n"
            "  --sync-ms N          writers flush what they acknowledged every N ms (default:\n"
            "                       only on flush, seal and index builds): the bound on what\n"
            "                       a lost writer machine takes with it\n"
            "  --storage URL        s3://BUCKET[/PREFIX] or file:///abs/dir (default: an\n"
            "                       s3rver started here on P + 300, bucket 'sextant', data\n"
            "                       in D/s3, when node and the npm package are found (see\n"
            "                       SEXTANT_S3RVER_CLI); else file://D/store)\n"
            "  --s3-endpoint URL    S3 endpoint (default $SEXTANT_S3_ENDPOINT, else AWS)\n"
            "  --lease-ttl S        writers' etcd lease TTL (default 5)\n"
            "\n"
            "status prints one line per process: role name pid=N addr state restarts=N.\n");
}

static int cmd_up(int argc, char **argv)
{
    const char *cmd = "cluster up";
    const char *dir = NULL, *storage = NULL, *endpoint = NULL, *v;
    uint64_t port = 19530, n_etcd = 3, n_writers = 1, n_query = 0, n_index = 0, ttl = 5;
    uint64_t build_threads = 0, segment_mb = 0, sync_ms = 0;
    for (int i = 1; i < argc;) {
        int r;
        if (cli_flag(argv, &i, "--help")) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--dir", &dir)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--storage", &storage)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--s3-endpoint", &endpoint)) != 0) {
            if (r < 0)
                return CLI_EXIT_USAGE;
            continue;
        }

        struct {
            const char *name;
            uint64_t lo, hi, *out;
        } nums[] = {
            { "--port", 1, 65000 - 300, &port },
            { "--etcd", 1, 5, &n_etcd },
            { "--writers", 1, 30, &n_writers },
            { "--query-nodes", 0, 64, &n_query },
            { "--index-workers", 0, 16, &n_index },
            { "--lease-ttl", 1, 3600, &ttl },
            { "--build-threads", 1, 1024, &build_threads },
            { "--segment-mb", 1, 1u << 20, &segment_mb },
            { "--sync-ms", 10, 86400000, &sync_ms },
        };

        bool matched = false;
        for (size_t k = 0; k < sizeof nums / sizeof nums[0] && !matched; k++) {
            r = cli_take(argc, argv, &i, cmd, nums[k].name, &v);
            if (r == 0)
                continue;
            if (r < 0 ||
                cli_parse_u64(cmd, nums[k].name, v, nums[k].lo, nums[k].hi, nums[k].out) != 0)
                return CLI_EXIT_USAGE;
            matched = true;
        }
        if (matched)
            continue;
        return cli_usage_error(cmd, "unknown argument '%s'", argv[i]);
    }
    if (!dir)
        return cli_usage_error(cmd, "--dir is required");
    if (n_query > 40)
        return cli_usage_error(cmd, "--query-nodes: at most 40");
    if (n_writers > 20)
        return cli_usage_error(cmd, "--writers: at most 20");
    cluster *c = calloc(1, sizeof *c);
    if (!c)
        return cli_fail(cmd, "out of memory");
    mkdirs(dir);
    if (!realpath(dir, c->dir)) {
        free(c);
        return cli_fail(cmd, "%s: %s", dir, strerror(errno));
    }
    if (read_pid(c->dir)) {
        free(c);
        return cli_fail(cmd, "a cluster is already up in %s (sextant cluster status --dir %s)", dir,
                        dir);
    }
    ssize_t sl = readlink("/proc/self/exe", c->self, sizeof c->self - 1);
    if (sl <= 0) {
        free(c);
        return cli_fail(cmd, "cannot find the sextant binary (/proc/self/exe)");
    }
    c->self[sl] = '\0';
    const char *eb = getenv("SEXTANT_ETCD_BIN");
    if (access(eb && *eb ? eb : "/usr/bin/etcd", X_OK) != 0) {
        free(c);
        return cli_fail(cmd, "etcd is not installed (Debian: apt-get install etcd-server)");
    }
    c->port = (unsigned)port;
    c->n_etcd = (unsigned)n_etcd;
    c->n_writers = (unsigned)n_writers;
    c->n_query = (unsigned)n_query;
    c->n_index = (unsigned)n_index;
    c->build_threads = (unsigned)build_threads;
    c->segment_mb = (unsigned)segment_mb;
    c->sync_ms = (unsigned)sync_ms;
    c->lease_ttl = (unsigned)ttl;
    if (storage) {
        (void)snprintf(c->storage, sizeof c->storage, "%s", storage);
        if (endpoint)
            (void)snprintf(c->endpoint, sizeof c->endpoint, "%s", endpoint);
    } else if (find_s3rver(c->self, c->s3rver_cli, sizeof c->s3rver_cli)) {
        /* no bucket named: an S3 server of our own (s3rver, its built-in account) */
        (void)snprintf(c->storage, sizeof c->storage, "s3://sextant/cluster");
        (void)snprintf(c->endpoint, sizeof c->endpoint, "http://127.0.0.1:%u", c->port + 300);
        char sd[PATH_MAX + 8];
        (void)snprintf(sd, sizeof sd, "%s/s3", c->dir);
        mkdirs(sd);
        setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1); /* inherited by the supervisor's writers */
        setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
    } else {
        char sd[PATH_MAX + 8];
        (void)snprintf(sd, sizeof sd, "%s/store", c->dir);
        mkdirs(sd);
        (void)snprintf(c->storage, sizeof c->storage, "file://%s", sd);
        fprintf(stderr,
                "sextant cluster up: no --storage and no s3rver (node and the npm package "
                "@20minutes/s3rver; SEXTANT_S3RVER_CLI names its lib/cli.js): the store is %s\n",
                c->storage);
    }
    char logs[PATH_MAX + 8];
    (void)snprintf(logs, sizeof logs, "%s/logs", c->dir);
    mkdirs(logs);
    build(c);

    char slogp[PATH_MAX + 32];
    (void)snprintf(slogp, sizeof slogp, "%s/supervisor.log", c->dir);
    (void)fflush(NULL);
    pid_t sup = fork();
    if (sup < 0) {
        free_procs(c);
        free(c);
        return cli_fail(cmd, "fork: %s", strerror(errno));
    }
    if (sup == 0) {
        setsid();
        redirect_stdio(slogp);
        char pidp[PATH_MAX + 32];
        (void)snprintf(pidp, sizeof pidp, "%s/supervisor.pid", c->dir);
        FILE *f = fopen(pidp, "w");
        if (f) {
            fprintf(f, "%d\n", (int)getpid());
            (void)fclose(f);
        }
        _exit(supervise(c));
    }
    /* wait for every writer's and query node's /readyz */
    double t0 = now_s();
    unsigned ready = 0;
    while (now_s() - t0 < 60) {
        ready = 0;
        for (unsigned i = 0; i < c->n_writers; i++)
            ready += http_ok(c->port + 1 + i, "/readyz", NULL);
        for (unsigned i = 0; i < c->n_query; i++)
            ready += http_ok(c->port + 50 + i, "/readyz", NULL);
        ready += http_ok(c->port, "/readyz", NULL);
        for (unsigned i = 1; i <= c->n_index; i++) {
            char rp[PATH_MAX + 32];
            (void)snprintf(rp, sizeof rp, "%s/x%u/READY", c->dir, i);
            ready += access(rp, F_OK) == 0;
        }
        if (ready == c->n_writers + c->n_query + c->n_index + 1)
            break;
        int st;
        if (waitpid(sup, &st, WNOHANG) == sup)
            break;
        usleep(100000);
    }
    if (ready != c->n_writers + c->n_query + c->n_index + 1) {
        fprintf(stderr, "sextant cluster up: %u of %u nodes ready after 60 s; %s:\n", ready,
                c->n_writers + c->n_query + c->n_index + 1, slogp);
        char cmdl[PATH_MAX + 64];
        (void)snprintf(cmdl, sizeof cmdl, "tail -n 20 '%s' >&2", slogp);
        if (system(cmdl) != 0) {
        }
        free_procs(c);
        free(c);
        return CLI_EXIT_FAIL;
    }
    char qs[160] = "";
    if (c->n_query)
        (void)snprintf(qs, sizeof qs, ", %u query node(s) on 127.0.0.1:%u..%u", c->n_query,
                       c->port + 50, c->port + 50 + c->n_query - 1);
    if (c->n_index)
        (void)snprintf(qs + strlen(qs), sizeof qs - strlen(qs), ", %u index worker(s)", c->n_index);
    printf("cluster up in %s: the proxy (REST and gRPC) on 127.0.0.1:%u, %u etcd members (%s), "
           "%u writer(s) on 127.0.0.1:%u..%u%s, store %s%s%s\n",
           c->dir, c->port, c->n_etcd, c->etcd_eps, c->n_writers, c->port + 1,
           c->port + c->n_writers, qs, c->storage, c->s3rver_cli[0] ? " on s3rver " : "",
           c->s3rver_cli[0] ? c->endpoint : "");
    free_procs(c);
    free(c);
    return CLI_EXIT_OK;
}

/* `--dir D` and nothing else. */
static int only_dir(int argc, char **argv, const char *cmd, const char **dir)
{
    for (int i = 1; i < argc;) {
        int r = cli_take(argc, argv, &i, cmd, "--dir", dir);
        if (r < 0)
            return CLI_EXIT_USAGE;
        if (r == 0)
            return cli_usage_error(cmd, "unknown argument '%s'", argv[i]);
    }
    return *dir ? CLI_EXIT_OK : cli_usage_error(cmd, "--dir is required");
}

static int cmd_status(int argc, char **argv)
{
    const char *cmd = "cluster status", *dir = NULL;
    int rc = only_dir(argc, argv, cmd, &dir);
    if (rc != CLI_EXIT_OK)
        return rc;
    pid_t sup = read_pid(dir);
    if (!sup) {
        printf("supervisor - pid=0 - down restarts=0\n");
        return CLI_EXIT_FAIL;
    }
    printf("supervisor - pid=%d - running restarts=0\n", (int)sup);
    char path[PATH_MAX + 32];
    (void)snprintf(path, sizeof path, "%s/cluster.state", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return CLI_EXIT_OK; /* starting */
    char line[512];
    while (fgets(line, sizeof line, f)) {
        /* role name pid addr state restarts */
        char *tok[6] = { 0 }, *save = NULL;
        int k = 0;
        for (char *t = strtok_r(line, " \n", &save); t && k < 6; t = strtok_r(NULL, " \n", &save))
            tok[k++] = t;
        if (k != 6)
            continue;
        int pid = (int)strtol(tok[2], NULL, 10);
        printf("%s %s pid=%d %s %s restarts=%s\n", tok[0], tok[1], pid, tok[3],
               strcmp(tok[4], "running") == 0 && !alive((pid_t)pid) ? "dead" : tok[4], tok[5]);
    }
    (void)fclose(f);
    return CLI_EXIT_OK;
}

static int cmd_down(int argc, char **argv)
{
    const char *cmd = "cluster down", *dir = NULL;
    int rc = only_dir(argc, argv, cmd, &dir);
    if (rc != CLI_EXIT_OK)
        return rc;
    pid_t sup = read_pid(dir);
    if (!sup) {
        printf("no cluster is up in %s\n", dir);
        return CLI_EXIT_OK;
    }
    kill(sup, SIGTERM);
    double t0 = now_s();
    while (alive(sup) && now_s() - t0 < 60)
        usleep(50000);
    if (alive(sup))
        return cli_fail(cmd, "the supervisor (pid %d) did not stop within 60 s", (int)sup);
    printf("cluster in %s is down\n", dir);
    return CLI_EXIT_OK;
}

int cli_cluster(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "up") == 0)
        return cmd_up(argc - 1, argv + 1);
    if (strcmp(argv[1], "status") == 0)
        return cmd_status(argc - 1, argv + 1);
    if (strcmp(argv[1], "down") == 0)
        return cmd_down(argc - 1, argv + 1);
    fprintf(stderr, "sextant cluster: unknown command '%s' (up, status, down)\n", argv[1]);
    return CLI_EXIT_USAGE;
}
