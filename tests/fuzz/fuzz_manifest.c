/*
 * fuzz_manifest.c: libFuzzer harness for the manifest reader (src/storage/manifest.h). The input
 * is written as a MANIFEST file and read with sx__manifest_read. A manifest that reads is written
 * back with sx__manifest_write and read again: the second read must succeed with the same counts
 * (the reader accepts what the writer writes from anything the reader accepted); a mismatch
 * aborts (a finding). Other errors are normal outcomes. Each input runs twice: as is, and with
 * its CRC recomputed (so mutations reach the parser behind the checksum).
 */
#include "fuzz_common.h"
#include "storage/manifest.h"

static char g_in[600];
static char g_out[600];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = fz_tmpdir("manifest");
    snprintf(g_in, sizeof g_in, "%s/MANIFEST", tmp);
    snprintf(g_out, sizeof g_out, "%s/MANIFEST2", tmp);
    return 0;
}

static void one(const uint8_t *data, size_t size)
{
    if (!fz_write_file(g_in, data, size))
        return;
    sx__manifest m;
    memset(&m, 0, sizeof m);
    if (sx__manifest_read(g_in, &m) != SX_OK) {
        sx__manifest_fini(&m);
        return;
    }
    /* touch everything the reader handed out */
    volatile size_t sink = strlen(m.name);
    for (size_t i = 0; i < m.n_fields; i++)
        sink += strlen(m.fields[i].name) + m.fields[i].dim;
    for (size_t v = 0; v < m.n_vec; v++) {
        for (size_t i = 0; i < m.vec[v].n_index_params; i++)
            sink += strlen(m.vec[v].index_params[i].key) + strlen(m.vec[v].index_params[i].value);
        if (m.vec[v].index_type)
            sink += strlen(m.vec[v].index_type);
    }
    for (size_t i = 0; i < m.n_segs; i++)
        sink += (size_t)m.segs[i].id;
    (void)sink;

    if (sx__manifest_write(g_out, &m) == SX_OK) {
        sx__manifest m2;
        memset(&m2, 0, sizeof m2);
        if (sx__manifest_read(g_out, &m2) != SX_OK) {
            fprintf(stderr, "fuzz_manifest: re-read of a written manifest failed: %s\n",
                    sx_errmsg());
            abort();
        }
        bool same = m2.n_fields == m.n_fields && m2.n_segs == m.n_segs &&
                    m2.generation == m.generation && m2.n_vec == m.n_vec;
        for (size_t v = 0; same && v < m.n_vec; v++)
            same = m2.vec[v].metric == m.vec[v].metric &&
                   m2.vec[v].n_index_params == m.vec[v].n_index_params &&
                   !m2.vec[v].index_type == !m.vec[v].index_type &&
                   (!m.vec[v].index_type || !strcmp(m2.vec[v].index_type, m.vec[v].index_type));
        if (!same) {
            fprintf(stderr, "fuzz_manifest: round trip changed the manifest\n");
            abort();
        }
        sx__manifest_fini(&m2);
    }
    sx__manifest_fini(&m);
}

/* The input as is, then with its trailing CRC (over everything before it) recomputed. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one(data, size);
    if (size >= 4) {
        uint8_t *c = fz_dup(data, size);
        if (!c)
            return 0;
        fz_fix_crc(c, size, 0, size - 4, size - 4);
        if (memcmp(c, data, size) != 0)
            one(c, size);
        free(c);
    }
    return 0;
}
