# Thin delegating Makefile: no build logic lives here (see CMakeLists.txt).
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)

.PHONY: all deps test test-release test-asan demo clean bench-peers fuzz

all: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DSX_WERROR=ON
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@./tools/deps.sh

test: all
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	@test -f $(ASAN_BUILD)/CMakeCache.txt || cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSX_SANITIZE=ON -DSX_WERROR=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) -LE slow
	$(MAKE) fuzz

demo: all
	./tools/demo.sh $(BUILD)

# libFuzzer harnesses under ASan+UBSan (tests/fuzz/fuzz.cmake): clang build in $(FUZZ_BUILD), each
# harness runs FUZZ_SECONDS on a copy of its seed corpus; any crash, sanitizer report, leak or
# timeout fails (the input is left in $(FUZZ_BUILD)/artifacts/<harness>/).
FUZZ_BUILD     ?= build-fuzz
FUZZ_SECONDS   ?= 60
FUZZ_HARNESSES ?= fuzz_filter fuzz_rest_json fuzz_wal fuzz_manifest fuzz_segment fuzz_index_load

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
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
