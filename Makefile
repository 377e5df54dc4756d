# Thin delegating Makefile: no build logic lives here (see CMakeLists.txt).
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)

.PHONY: all deps test test-release test-asan demo clean bench-peers

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

demo: all
	./tools/demo.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
