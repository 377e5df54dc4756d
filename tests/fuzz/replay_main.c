/*
 * replay_main.c: a main() for the fuzz harnesses without libFuzzer. `fuzz_replay_<harness> PATH...`
 * calls LLVMFuzzerInitialize once, then LLVMFuzzerTestOneInput once per file (a directory: every
 * regular file in it, in name order). Registered as ctests by fuzz.cmake in every build, so the
 * committed corpora (seeds and regress-* crash inputs) are regression tests of the normal and the
 * sanitizer pass. A crash or sanitizer report fails the test; any other outcome is a pass.
 */
#include <dirent.h>

#include "fuzz_common.h"

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_file(const char *path)
{
    size_t n = 0;
    uint8_t *data = fz_read_file(path, &n);
    if (!data) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    /* an exact-size copy so ASan catches reads past the input's end, as under libFuzzer */
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy) {
        free(data);
        return 1;
    }
    memcpy(copy, data, n);
    free(data);
    LLVMFuzzerTestOneInput(copy, n);
    free(copy);
    return 0;
}

static int run_path(const char *path, size_t *count)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        perror(path);
        return 1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        (*count)++;
        return run_file(path);
    }
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn)
                break;
            names = nn;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, name_cmp);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, names[i]);
        if (stat(full, &sb) == 0 && S_ISREG(sb.st_mode)) {
            (*count)++;
            rc |= run_file(full);
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    LLVMFuzzerInitialize(&argc, &argv);
    size_t count = 0;
    int rc = 0;
    for (int i = 1; i < argc; i++)
        rc |= run_path(argv[i], &count);
    printf("%s: %zu inputs replayed\n", argv[0], count);
    if (count == 0) {
        fprintf(stderr, "no inputs found\n");
        return 1;
    }
    return rc;
}
