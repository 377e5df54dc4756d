/*
 * indexjob.h: index builds on index workers (docs/internals/CLUSTER.md, "Index workers").
 *
 * A writer hands the index builds of its sealed segments to index workers through etcd and the
 * store, and keeps every other part of the path it has without them: the engine's slot thread
 * (sx_index_builder, build.c) offers a build, the writer posts a job, a worker claims it with a
 * txn, reads the segment file from the store, builds (sx_index_build_segment_file: on a GPU for
 * GPU_* types where the worker has one), uploads the index file and answers; the writer
 * downloads it, the engine checks it against the index spec, loads it, and the store sync
 * uploads it under the writer's epoch and commits it with the fenced manifest update. So a
 * worker never writes anything a manifest names, and a fenced writer's jobs die with its lease.
 *
 * Keys (prefix /sextant/<uuid>/; <job> = <db>/<collection>/<segment id>.<field>):
 *   job/index/<job>    the job, JSON, on the writer's lease (the writer gone: the job is gone)
 *   claim/index/<job>  the worker's node id, on the worker's lease (create-if-absent txn that
 *                      also compares the job's create_revision); a dead worker's claim expires
 *                      with its lease and another worker claims the job again
 *   done/index/<job>   the answer, JSON {"job":rev,"worker","object"} or {"job":rev,"error"},
 *                      put on the writer's lease by a txn comparing the job's create_revision
 *                      (a withdrawn or re-posted job is not answered)
 * The worker's output object is <collection>/jobs/seg-<id>.<field>.<worker>.<rev>.idx under the
 * database's store root (never named by a manifest; the writer deletes it once downloaded, and a
 * collection's drop or a later writer's first-sync GC removes leftovers).
 *
 * Threads: a writer's build() runs on the engine's slot threads, several at once; each job's
 * polling is its own. The worker runs one job at a time on its own thread. Each side has its own
 * etcd client (requests serialized inside it).
 */
#ifndef SX_CLUSTER_INDEXJOB_H
#define SX_CLUSTER_INDEXJOB_H
#include <sextant.h>

#include "cluster/fence.h"

typedef struct sx__ijobs sx__ijobs;
typedef struct sx__iworker sx__iworker;

/* The writer side over fence f (borrowed: it must outlive the result). Errors: SX_ENOMEM,
 * SX_EINVAL (etcd URLs). */
SX_NODISCARD sx_status sx__ijobs_new(sx__fence *f, const char *s3_endpoint, sx__ijobs **out);
const sx_index_builder *sx__ijobs_iface(sx__ijobs *j);
void sx__ijobs_free(sx__ijobs *j);

/* An index worker over fence f (registered with role "index"): takes jobs until stopped. Local
 * files go to data_dir/jobs/. threads: build threads (0: all cores). */
SX_NODISCARD sx_status sx__iworker_start(sx__fence *f,
                                         const char *data_dir,
                                         const char *s3_endpoint,
                                         uint32_t threads,
                                         sx__iworker **out);
void sx__iworker_stop(sx__iworker *w);

#endif
