/*
 * check.c: `sextant check DIR [--salvage]`, an offline integrity check of a data directory (like
 * SQLite's PRAGMA integrity_check): every database (DIR itself and DIR/databases/NAME, the
 * server's layout), every collection's manifest, WAL, segment, delete and index files (checksums
 * and cross-references, through sx_db_check), and the server's collection metadata files
 * (the JSON files in DIR/rest/ must parse). Opens read-only: nothing is modified.
 *
 * --salvage: for a WAL whose middle is corrupt (which makes open refuse, naming file and
 * offset), reopen with sx_db_options.wal_salvage: the log is cut at the first invalid record,
 * the dropped bytes are kept as "<wal file>.salvaged", and the check runs again. Records after
 * the cut are lost: that is why it is never automatic.
 *
 * Exit status: 0 everything checked is sound, 1 a problem was found (each printed), 2 usage.
 */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: sextant check DIR [--salvage]\n"
            "       sextant check --data DIR [--salvage]\n"
            "\n"
            "Verifies every checksum, manifest reference and index file of the databases\n"
            "in DIR (and DIR/databases/*), and the server's metadata files, without\n"
            "modifying anything. Exit 0 when sound, 1 when a problem is found.\n"
            "\n"
            "  --salvage   cut a WAL with a corrupt middle at the first bad record (records\n"
            "              after it are lost; the dropped bytes are kept as *.salvaged), then\n"
            "              check again\n");
}

static bool is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* Checks the REST metadata files of one database directory. Returns the problems found. */
static int check_rest(const char *dbdir)
{
    char rest[4096];
    snprintf(rest, sizeof rest, "%s/rest", dbdir);
    DIR *d = opendir(rest);
    if (!d)
        return 0;
    int bad = 0, n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0)
            continue;
        char p[8192];
        snprintf(p, sizeof p, "%s/%s", rest, e->d_name);
        json_error_t err;
        json_t *j = json_load_file(p, 0, &err);
        if (!j || !json_is_object(j)) {
            printf("  BAD  %s: %s (line %d)\n", p, j ? "not a JSON object" : err.text, err.line);
            bad++;
        }
        json_decref(j);
        n++;
    }
    closedir(d);
    if (n)
        printf("  %s metadata files: %d, %d bad\n", rest, n, bad);
    return bad;
}

/* Checks one database directory. Returns the number of problems. */
static int check_db(const char *dir, bool salvage)
{
    sx_db_options o = { 0 };
    o.read_only = !salvage;
    o.wal_salvage = salvage;
    sx_db *db = NULL;
    printf("database %s\n", dir);
    sx_status st = sx_db_open(dir, &o, &db);
    if (st != SX_OK) {
        printf("  BAD  open: %s: %s\n", sx_status_str(st), sx_errmsg());
        if (st == SX_ECORRUPT && !salvage && strstr(sx_errmsg(), "WAL"))
            printf("       (a WAL with a corrupt middle: `sextant check --salvage %s` cuts it at "
                   "the first bad record)\n",
                   dir);
        return 1;
    }
    int bad = 0;
    char **names = NULL;
    size_t n = 0;
    if (sx_collection_list(db, &names, &n) == SX_OK) {
        for (size_t i = 0; i < n; i++) {
            sx_collection *c = NULL;
            if (sx_collection_open(db, names[i], &c) != SX_OK) {
                printf("  BAD  collection %s: %s\n", names[i], sx_errmsg());
                bad++;
                continue;
            }
            sx_collection_info info;
            sx_index_info ii;
            if (sx_collection_describe(c, &info) == SX_OK) {
                bool has_idx = sx_index_describe(c, &ii) == SX_OK && ii.state != SX_INDEX_NONE;
                printf("  collection %s: %llu rows, %u sealed segments, %llu growing rows, index "
                       "%s\n",
                       names[i], (unsigned long long)info.n_rows, info.n_segments,
                       (unsigned long long)info.growing_rows, has_idx ? ii.type : "none");
            }
            sx_collection_release(c);
        }
        sx_strings_free(names, n);
    }
    st = sx_db_check(db);
    if (st != SX_OK) {
        printf("  BAD  %s: %s\n", sx_status_str(st), sx_errmsg());
        bad++;
    } else {
        printf("  checksums, manifests, segments, delete and index files: ok\n");
    }
    sx_db_close(db);
    bad += check_rest(dir);
    return bad;
}

int cli_check(int argc, char **argv)
{
    const char *dir = NULL;
    bool salvage = false;
    for (int i = 1; i < argc;) {
        const char *v = NULL;
        int r;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (cli_flag(argv, &i, "--salvage")) {
            salvage = true;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, "check", "--data", &v)) != 0) {
            if (r < 0)
                return CLI_EXIT_USAGE;
            dir = v;
            continue;
        }
        if (argv[i][0] != '-' && !dir) {
            dir = argv[i++];
            continue;
        }
        fprintf(stderr, "sextant check: unexpected argument '%s'\n", argv[i]);
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!dir) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!is_dir(dir)) {
        fprintf(stderr, "sextant check: %s is not a directory\n", dir);
        return CLI_EXIT_FAIL;
    }
    int bad = check_db(dir, salvage);
    char dbs[4096];
    snprintf(dbs, sizeof dbs, "%s/databases", dir);
    DIR *d = opendir(dbs);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char p[8192];
            snprintf(p, sizeof p, "%s/%s", dbs, e->d_name);
            if (is_dir(p))
                bad += check_db(p, salvage);
        }
        closedir(d);
    }
    printf("%s: %d problem%s found\n", bad ? "FAILED" : "ok", bad, bad == 1 ? "" : "s");
    return bad ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
