/*
 * s3.h: an S3 client on libcurl (SigV4 via CURLOPT_AWS_SIGV4, x-amz-content-sha256 computed and
 * sent by us), for AWS S3, MinIO, Ceph RGW and s3rver. XML responses and errors are parsed with
 * expat. Path-style addressing (http://endpoint/bucket/key) unless virtual_host is set.
 *
 * Retries: 5xx, SlowDown / RequestTimeout / InternalError / ServiceUnavailable, connection resets,
 * timeouts and truncated bodies are retried with exponential backoff and full jitter (base
 * 100 ms, cap 5 s) up to max_retries; other 4xx are not. A failure returns SX_EREMOTE (message:
 * operation, key, HTTP status, S3 error code and message), SX_ENOTFOUND (404 / NoSuchKey),
 * SX_ETIMEDOUT (the last attempt timed out).
 *
 * Thread-safety: one sx__s3 may be used from many threads at once; connections are reused
 * through a curl share handle / per-thread easy handles (implementation's choice, documented in
 * s3.c). Every call is synchronous.
 */
#ifndef SX_STORAGE_S3_H
#define SX_STORAGE_S3_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sx__s3_config {
    const char *endpoint;      /* "http://127.0.0.1:4569" or "https://s3.us-east-1.amazonaws.com" */
    const char *region;        /* NULL: "us-east-1" */
    const char *bucket;        /* required */
    const char *access_key;    /* NULL: AWS_ACCESS_KEY_ID, then the config file */
    const char *secret_key;    /* NULL: AWS_SECRET_ACCESS_KEY, then the config file */
    const char *session_token; /* NULL: AWS_SESSION_TOKEN (optional) */
    bool virtual_host;         /* false: path-style */
    uint32_t timeout_ms;       /* per attempt, 0: 30000 */
    uint32_t connect_timeout_ms;  /* 0: 5000 */
    uint32_t max_retries;         /* 0: 6 */
    uint64_t multipart_threshold; /* put_file above this uses multipart, 0: 64 MiB */
    uint64_t part_size;           /* 0: 16 MiB (S3 minimum is 5 MiB except the last part) */
    uint32_t parallel_parts;      /* parts uploaded at once, 0: 4 */
} sx__s3_config;

typedef struct sx__s3 sx__s3;

/* Credentials: config fields, else environment, else the file named by SEXTANT_S3_CREDENTIALS or
 * ~/.aws/credentials ([default] aws_access_key_id / aws_secret_access_key). Strings are copied.
 * Errors: SX_EINVAL (no bucket/endpoint/credentials). Ownership: free with sx__s3_free. */
SX_NODISCARD sx_status sx__s3_new(const sx__s3_config *cfg, sx__s3 **out);
void sx__s3_free(sx__s3 *s);

/* Creates the bucket (tests, s3rver); an existing bucket owned by us is success. */
SX_NODISCARD sx_status sx__s3_create_bucket(sx__s3 *s);

SX_NODISCARD sx_status sx__s3_put(sx__s3 *s, const char *key, const void *data, size_t len);
/* Uploads a local file: one PUT below multipart_threshold, else a multipart upload with
 * parallel_parts parts in flight (aborted on failure, so no orphan is left behind). */
SX_NODISCARD sx_status sx__s3_put_file(sx__s3 *s, const char *key, const char *path);
/* Reads [off, off+len) of an object (len 0: to the end). *data owned: free with sx__free. A body
 * shorter than asked (truncated) is retried, then SX_EREMOTE. */
SX_NODISCARD sx_status
sx__s3_get(sx__s3 *s, const char *key, uint64_t off, uint64_t len, void **data, size_t *n);
/* Reads exactly len bytes at off into buf (ranged GET). */
SX_NODISCARD sx_status
sx__s3_get_range(sx__s3 *s, const char *key, uint64_t off, size_t len, void *buf);
/* Downloads an object to a local file atomically (tmp, fsync, rename, fsync dir). */
SX_NODISCARD sx_status sx__s3_get_file(sx__s3 *s, const char *key, const char *path);
/* Object size. SX_ENOTFOUND when absent. */
SX_NODISCARD sx_status sx__s3_head(sx__s3 *s, const char *key, uint64_t *size);
/* Deletes an object; absent is success. */
SX_NODISCARD sx_status sx__s3_delete(sx__s3 *s, const char *key);
/* Lists keys under prefix (ListObjectsV2, following continuation tokens). keys: owned, free
 * with sx_strings_free(keys, n); sizes (optional) owned, free with sx__free. */
SX_NODISCARD sx_status
sx__s3_list(sx__s3 *s, const char *prefix, char ***keys, uint64_t **sizes, size_t *n);
/* Aborts in-progress multipart uploads under prefix started more than older_than_s seconds ago
 * (ListMultipartUploads + AbortMultipartUpload): the GC of orphans a crash left behind. */
SX_NODISCARD sx_status sx__s3_abort_orphans(sx__s3 *s,
                                            const char *prefix,
                                            uint64_t older_than_s,
                                            size_t *n_aborted);

/* Counters for the I/O profile (cumulative): requests by kind, bytes, retries. */
typedef struct sx__s3_stats {
    uint64_t puts, gets, heads, deletes, lists, multipart_parts;
    uint64_t bytes_up, bytes_down;
    uint64_t retries, failures;
} sx__s3_stats;

void sx__s3_stats_get(sx__s3 *s, sx__s3_stats *out);

/* For tests and fuzzers (tests/fuzz/fuzz_s3_xml.c): parses one response body of kind `which` with
 * the exact code the client runs on it (ERROR: the best-effort error-body parse, always SX_OK),
 * then frees everything it built. out (optional) receives a summary. Errors: SX_EREMOTE (malformed
 * or unexpected XML), SX_ENOMEM, SX_EINVAL (unknown kind). Thread-safe. */
enum {
    SX__S3_XML_ERROR,       /* <Error><Code/><Message/></Error> */
    SX__S3_XML_LIST,        /* ListObjectsV2 page */
    SX__S3_XML_CREATE_MP,   /* CreateMultipartUpload */
    SX__S3_XML_COMPLETE_MP, /* CompleteMultipartUpload (200 with <Error> is a failure) */
    SX__S3_XML_LIST_MP,     /* ListMultipartUploads page */
    SX__S3_XML_KINDS
};

typedef struct sx__s3_xml_result {
    size_t n;        /* LIST: keys, LIST_MP: uploads */
    bool truncated;  /* LIST, LIST_MP */
    char code[64];   /* ERROR, COMPLETE_MP: the S3 error code */
    char value[256]; /* ERROR, COMPLETE_MP: message; CREATE_MP: UploadId; LIST: next token;
                      * LIST_MP: next key marker */
} sx__s3_xml_result;

SX_NODISCARD sx_status sx__s3_xml_parse(int which,
                                        const void *xml,
                                        size_t len,
                                        sx__s3_xml_result *out);

#endif
