/*
 * fuzz_s3_xml.c: libFuzzer harness for the S3 client's XML response parsing (src/storage/s3.c,
 * through sx__s3_xml_parse: the same expat walk, callbacks and checks the client runs on a
 * response body). Byte 0 picks the response kind (modulo SX__S3_XML_KINDS: 0 error body,
 * 1 ListObjectsV2 page, 2 CreateMultipartUpload, 3 CompleteMultipartUpload, 4
 * ListMultipartUploads); the rest is the body. Parse errors are normal outcomes; the summary's
 * strings must be NUL-terminated within their arrays, the error-body parse never fails, and a
 * successful CreateMultipartUpload parse yields an UploadId. Findings: crashes, sanitizer reports,
 * leaks, hangs. Seeds: tests/fuzz/corpus/fuzz_s3_xml/ (hand-written real-shaped responses).
 */
#include "fuzz_common.h"
#include "storage/s3.h"
#include "util/err.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static void parse_one(int kind, const uint8_t *xml, size_t len)
{
    sx__s3_xml_result r;
    memset(&r, 0x5A, sizeof r);
    sx_status st = sx__s3_xml_parse(kind, xml, len, &r);
    if (memchr(r.code, 0, sizeof r.code) == NULL || memchr(r.value, 0, sizeof r.value) == NULL)
        __builtin_trap(); /* an unterminated summary string */
    if (kind == SX__S3_XML_ERROR && st != SX_OK)
        __builtin_trap(); /* the error-body parse is best effort: never fails */
    if (st == SX_OK && kind == SX__S3_XML_CREATE_MP && r.value[0] == 0)
        __builtin_trap(); /* success means an UploadId */
    volatile size_t sink = strlen(sx_errmsg());
    (void)sink;
    sx__err_clear();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int kind = data[0] % SX__S3_XML_KINDS;
    /* an exact-size copy of the body: reads past its end are caught */
    size_t len = size - 1;
    uint8_t *xml = malloc(len ? len : 1);
    if (!xml)
        return 0;
    memcpy(xml, data + 1, len);
    parse_one(kind, xml, len);
    free(xml);
    return 0;
}
