# Thin delegating Makefile: no build logic lives here (see CMakeLists.txt).
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS       ?= $(shell nproc)

.PHONY: all deps test test-release test-asan test-tsan demo clean bench-peers fuzz cuda-check lint

all: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DSX_WERROR=ON
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@./tools/deps.sh

test: all
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	$(MAKE) lint
	@test -f $(ASAN_BUILD)/CMakeCache.txt || cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSX_SANITIZE=ON -DSX_WERROR=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) -LE slow
	$(MAKE) test-tsan
	$(MAKE) fuzz
	$(MAKE) cuda-check

# ThreadSanitizer pass over the concurrency-relevant tests (the stress and model tests, the
# engine, compaction, the lock-rank checker, group-commit WAL, the block cache, the search merger,
# the server, the graph builds' property test, kill -9 recovery, the server's connection reaper,
# database drop with requests in flight, deadlines in the engine's worker threads). RelWithDebInfo keeps SX_DEBUG,
# so the lock-rank checker runs here too. OPENBLAS_NUM_THREADS=1: OpenBLAS's own thread pool
# hands sgemm results back through spin-waits in uninstrumented code, so TSan reports every read
# of them (seen: test_flat, test_kmeans, test_cagra); with one thread sgemm runs on the caller.
# SX_DISKANN_IO=pread: liburing (2.3, Debian 12) maps its rings with raw mmap/munmap syscalls that
# TSan does not intercept, so TSan's shadow of a ring outlives it: when a search thread's ring is
# freed at its exit and a later thread's ring lands at the same address, TSan reports that later
# thread's SQE writes as racing with the earlier thread's (test_graph_prop, SX_SEED=1796177255:
# two search threads of one sx_search, the first already exited). Rings are per thread, so
# nothing crosses threads there; DISKANN reads with pread here, through the same scratch and
# thread-local code, and the release and ASan passes run the io_uring path.
# tests/tsan.supp lists third-party suppressions only, each justified there.
TSAN_TESTS ?= test_sparse|test_vectypes|test_stress|test_model|test_nullable|test_engine$$|test_compact|test_lockrank|test_wal|test_blockcache|test_merge|test_server_entities|test_server_collections|test_server_catalog|test_server_http|test_crash|test_consistency|test_store_cache|test_flat|test_kmeans|test_graph_prop|test_server_conn|test_server_ddl|test_deadline|test_server_console|node_grpc_e2e|test_store_fence|test_etcd|test_cluster_writer|test_db_refresh|test_cluster_cli|test_cluster_shards|test_shard$$|node_cluster_grpc|test_cluster_netns|test_index_builder|test_cluster_index|test_cluster_replicas|test_cluster_adopt
test-tsan:
	@test -f $(TSAN_BUILD)/CMakeCache.txt || cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DSX_TSAN=ON -DSX_WERROR=ON -DSX_CUDA=OFF -DSX_BUILD_PEERS=OFF
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	OPENBLAS_NUM_THREADS=1 SX_DISKANN_IO=pread SX_MODEL_STEPS=2000 \
	  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(abspath tests/tsan.supp)" \
	  ctest --test-dir $(TSAN_BUILD) --output-on-failure -j $(JOBS) -R '$(TSAN_TESTS)'

# Compile-only check of the CUDA sources (issues 7, 12): when nvcc exists (PATH or /usr/local/cuda),
# a separate SX_CUDA=ON build in $(CUDA_BUILD) compiles src/gpu/*.cu with warnings as errors into
# the plugin libsextant_cuda.so, links the libraries, sextant and test_gpu, then runs the checks
# that need no GPU: lint_needed (no CUDA library in the NEEDED entries of sextant and
# libsextant.so; the plugin exports one symbol) and test_gpu_loader (the plugin is mapped on first
# use only). scripts/gpu-check.sh runs the GPU tests on a GPU machine.
CUDA_BUILD ?= build-cuda
NVCC       ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)

cuda-check:
	@if [ -z "$(NVCC)" ]; then echo "cuda-check: skipped (no nvcc on PATH or in /usr/local/cuda/bin)"; exit 0; fi; \
	  set -e; test -f $(CUDA_BUILD)/CMakeCache.txt || cmake -S . -B $(CUDA_BUILD) -DCMAKE_BUILD_TYPE=Release \
	    -DSX_WERROR=ON -DSX_CUDA=ON -DSX_BUILD_PEERS=OFF -DCMAKE_CUDA_COMPILER=$(NVCC); \
	  cmake --build $(CUDA_BUILD) -j $(JOBS) --target sextant_cuda sextant_static sextant_shared sextant \
	    test_gpu test_gpu_loader; \
	  ctest --test-dir $(CUDA_BUILD) --output-on-failure -R '^(lint_needed|test_gpu_loader)$$'; \
	  echo "cuda-check: CUDA sources compiled into $(CUDA_BUILD)/libsextant_cuda.so and linked ($(NVCC))"

# clang-tidy with the repo's .clang-tidy over the .c files of src/ and tools/, JOBS at a time,
# against the release build's compile_commands.json (issue 12): any finding fails. One line of
# summary (files, findings, seconds). The format check is the ctest lint_format.
lint: all
	./tests/lint/check_tidy.sh -j $(JOBS) $(BUILD)

demo: all
	./tools/demo.sh $(BUILD)

# libFuzzer harnesses under ASan+UBSan (tests/fuzz/fuzz.cmake): clang build in $(FUZZ_BUILD), each
# harness runs FUZZ_SECONDS on a copy of its seed corpus; any crash, sanitizer report, leak or
# timeout fails (the input is left in $(FUZZ_BUILD)/artifacts/<harness>/).
FUZZ_BUILD     ?= build-fuzz
FUZZ_SECONDS   ?= 60
FUZZ_HARNESSES ?= fuzz_filter fuzz_rest_json fuzz_wal fuzz_manifest fuzz_segment fuzz_index_load \
                  fuzz_s3_xml fuzz_grpc fuzz_sparse

fuzz: deps
	@test -f $(FUZZ_BUILD)/CMakeCache.txt || CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) \
	  -DSX_FUZZ=ON -DSX_BUILD_PEERS=OFF -DCMAKE_BUILD_TYPE=Debug -DSX_WERROR=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_all
	@set -e; for h in $(FUZZ_HARNESSES); do \
	  rm -rf $(FUZZ_BUILD)/corpus/$$h $(FUZZ_BUILD)/artifacts/$$h; \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$h $(FUZZ_BUILD)/artifacts/$$h $(FUZZ_BUILD)/fuzztmp; \
	  cp tests/fuzz/corpus/$$h/* $(FUZZ_BUILD)/corpus/$$h/; \
	  echo "== $$h: $(FUZZ_SECONDS) s"; \
	  if ! SX_TMPDIR=$(abspath $(FUZZ_BUILD))/fuzztmp $(FUZZ_BUILD)/$$h -max_total_time=$(FUZZ_SECONDS) \
	      -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	      -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$h/ $(FUZZ_BUILD)/corpus/$$h \
	      > $(FUZZ_BUILD)/artifacts/$$h.log 2>&1; then \
	    tail -n 60 $(FUZZ_BUILD)/artifacts/$$h.log; \
	    echo "$$h: FAILED (input in $(FUZZ_BUILD)/artifacts/$$h/)"; exit 1; \
	  fi; \
	  grep -E '^#[0-9]+[[:space:]]+DONE|^Done|stat::number_of_executed_units|stat::peak_rss_mb' \
	    $(FUZZ_BUILD)/artifacts/$$h.log || true; \
	done; echo "fuzz: all harnesses ran $(FUZZ_SECONDS) s without a finding"

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
