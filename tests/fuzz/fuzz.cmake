# tests/fuzz/fuzz.cmake: libFuzzer harnesses under ASan + UBSan (reliability.md T6), included
# at the end of CMakeLists.txt.
#
# Harnesses (tests/fuzz/fuzz_<name>.c; each file's header says what the input means):
#   fuzz_filter      filter-expression parser + evaluator (src/engine/expr.h)
#   fuzz_rest_json   the REST handlers on a JSON body, route picked by byte 0 (src/server/)
#   fuzz_wal         WAL decoder and reader (src/storage/wal.h) and the engine's WAL replay
#   fuzz_manifest    MANIFEST reader, with a write/re-read round trip (src/storage/manifest.h)
#   fuzz_segment     segment, delete-bitmap and index-file readers (src/storage/segfile.h)
#   fuzz_index_load  index deserializers / DISKANN load_files, then searches (src/index/)
#   fuzz_s3_xml      the S3 client's XML response parsing, kind picked by byte 0 (src/storage/s3.c)
#   fuzz_grpc        the MilvusService RPCs on a protobuf message, RPC picked by byte 0
#                    (src/server/grpc_milvus.c: pre-scan, protobuf-c unpack, REST handlers)
#   fuzz_sparse      the sparse-vector text reader and writer (src/engine/sparse.c)
# Seed corpora: tests/fuzz/corpus/<harness>/seed-* (written by gen_corpus.c with the real writers:
# `build-fuzz/fuzz_gen_corpus tests/fuzz/corpus`; fuzz_s3_xml's are hand-written S3 responses)
# and regress-* (inputs that once crashed).
#
# Two uses:
#  * Every build (gcc, the default): fuzz_replay_<harness> = the harness + replay_main.c, and a
#    ctest of the same name (label "fuzz") feeding every corpus file once. So the corpora are
#    regression tests in the normal run and in the ASan+UBSan pass of `make test`.
#  * -DSX_FUZZ=ON with clang 14 (`make fuzz`: CC=clang CXX=clang++, Debug, build-fuzz/): the
#    library objects (every layer's sx_LAYER and sx_server) get -fsanitize=fuzzer-no-link,address,undefined and
#    one executable per harness is linked with -fsanitize=fuzzer,address,undefined.
#    `make fuzz FUZZ_SECONDS=60` runs each for FUZZ_SECONDS on a copy of its seed corpus
#    (build-fuzz/corpus/<harness>, crash inputs in build-fuzz/artifacts/<harness>/) and fails on
#    any crash, sanitizer report, leak, timeout (> 10 s per input) or RSS over 2 GiB.
#    By hand: build-fuzz/fuzz_filter -max_total_time=3600 build-fuzz/corpus/fuzz_filter
#    A crash: copy the artifact to tests/fuzz/corpus/<harness>/regress-<what>, fix, re-run.
# With SX_FUZZ=OFF nothing here changes the other targets' flags.

option(SX_FUZZ "Build the libFuzzer harnesses (clang only; see tests/fuzz/fuzz.cmake)" OFF)

set(SX_FUZZ_HARNESSES fuzz_filter fuzz_rest_json fuzz_wal fuzz_manifest fuzz_segment fuzz_index_load
    fuzz_s3_xml fuzz_grpc fuzz_sparse)
set(SX_FUZZ_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz)

if(SX_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "SX_FUZZ=ON needs clang (libFuzzer): configure with CC=clang CXX=clang++")
  endif()
  set(SX_FUZZ_CFLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
      -fno-omit-frame-pointer -g -Wno-unknown-warning-option -Wno-cast-align
      -Wno-format-nonliteral)
  foreach(layer ${SX_LAYERS} server)
    target_compile_options(sx_${layer} PRIVATE ${SX_FUZZ_CFLAGS})
  endforeach()
  # The CUDA plugin's C part (built with the libraries, not instrumented): GCC-only warning
  # flags of the directory are unknown to clang.
  if(TARGET sx_cuda_plan)
    target_compile_options(sx_cuda_plan PRIVATE -Wno-unknown-warning-option)
  endif()
  # Anything linking the instrumented libraries needs the sanitizer runtimes.
  target_link_options(sextant_static INTERFACE -fsanitize=fuzzer-no-link,address,undefined)
  target_link_options(sextant_shared PRIVATE -fsanitize=fuzzer-no-link,address,undefined)
  foreach(h ${SX_FUZZ_HARNESSES})
    add_executable(${h} ${SX_FUZZ_DIR}/${h}.c)
    target_include_directories(${h} PRIVATE ${CMAKE_SOURCE_DIR}/src ${SX_FUZZ_DIR})
    target_compile_options(${h} PRIVATE ${SX_FUZZ_CFLAGS})
    target_link_options(${h} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(${h} PRIVATE sextant_server sextant_static)
    add_dependencies(${h} sx_proto)
    target_include_directories(${h} SYSTEM PRIVATE ${SX_PROTO_OUT} ${PROTOBUFC_INCLUDE_DIR})
  endforeach()
  # Seed writer (not a fuzzer): `fuzz_gen_corpus tests/fuzz/corpus`.
  add_executable(fuzz_gen_corpus ${SX_FUZZ_DIR}/gen_corpus.c)
  target_include_directories(fuzz_gen_corpus PRIVATE ${CMAKE_SOURCE_DIR}/src ${SX_FUZZ_DIR})
  target_compile_options(fuzz_gen_corpus PRIVATE ${SX_FUZZ_CFLAGS})
  target_link_libraries(fuzz_gen_corpus PRIVATE sextant_server sextant_static)
  add_custom_target(fuzz_all DEPENDS ${SX_FUZZ_HARNESSES} fuzz_gen_corpus)
endif()

# Corpus replay in every build (see above).
foreach(h ${SX_FUZZ_HARNESSES})
  add_executable(fuzz_replay_${h} ${SX_FUZZ_DIR}/${h}.c ${SX_FUZZ_DIR}/replay_main.c)
  target_include_directories(fuzz_replay_${h} PRIVATE ${CMAKE_SOURCE_DIR}/src ${SX_FUZZ_DIR})
  target_link_libraries(fuzz_replay_${h} PRIVATE sextant_server sextant_static)
  add_dependencies(fuzz_replay_${h} sx_proto)
  target_include_directories(fuzz_replay_${h} SYSTEM PRIVATE ${SX_PROTO_OUT} ${PROTOBUFC_INCLUDE_DIR})
  if(SX_FUZZ)
    target_compile_options(fuzz_replay_${h} PRIVATE -Wno-unknown-warning-option)
  endif()
  add_test(NAME fuzz_replay_${h} COMMAND fuzz_replay_${h} ${SX_FUZZ_DIR}/corpus/${h})
  set_tests_properties(fuzz_replay_${h} PROPERTIES LABELS "fuzz" TIMEOUT 300
    ENVIRONMENT "SX_TMPDIR=${CMAKE_BINARY_DIR}/testtmp")
endforeach()
