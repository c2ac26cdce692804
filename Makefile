# ruda: rudad (the daemon), libruda (the client library), rudactl, tests.
#
#   make            build everything into build/
#   make run        install missing packages, build, run rudad in the foreground
#   make check      install missing packages, build, run every test
#   make check-python  the Python package's tests (python/tests) only
#   make deps       install the Debian packages the build and tests need
#   make deb        build the Debian packages (debian/) into build/deb
#   make V=1 ...    show every command instead of one line per file

VERSION := 0.1.0
# libruda's ABI: 1 since the growing structs got their struct_size
# (ruda.h); the file is libruda.so.$(LIBVERSION)
SOVERSION := 1
LIBVERSION := $(SOVERSION).0.0
BUILD ?= build
PREFIX ?= /usr/local
SYSCONFDIR ?= /etc

CC ?= cc
PKG_CONFIG ?= pkg-config
PROTOC_C ?= protoc-c
GLSLC ?= glslc

# procps: kill(1) for the service tests; python3-*: the Python package's tests
DEB_PACKAGES := build-essential pkgconf libuv1-dev libprotobuf-c-dev protobuf-c-compiler \
	libvulkan-dev mesa-vulkan-drivers glslc spirv-tools check valgrind \
	libsystemd-dev systemd man-db procps python3-numpy python3-pytest

# one line per file built unless V=1
V ?= 0
ifeq ($(V),1)
Q :=
say := @:
else
Q := @
say := @printf '  %-6s %s\n'
endif
JOBS ?= $(shell nproc 2>/dev/null || echo 1)

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-missing-field-initializers
CFLAGS ?= -O2 -g
SAN ?=
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) -fPIC -pthread -DRUDA_VERSION='"$(VERSION)"' \
	-DRUDA_CONFIG_PATH='"$(SYSCONFDIR)/ruda/rudad.conf"' \
	-Iproto/include -I$(BUILD)/gen $(SAN)
LDFLAGS_ALL := -pthread $(SAN)

comma := ,
pc = $(shell $(PKG_CONFIG) $(1) $(2) 2>/dev/null)
DAEMON_LIBS = $(call pc,--libs,libuv libprotobuf-c vulkan SPIRV-Tools libsystemd) -lstdc++ -lm
CLIENT_LIBS = $(call pc,--libs,libprotobuf-c)
CHECK_LIBS = $(call pc,--libs,check)
DEP_CFLAGS = $(call pc,--cflags,libuv libprotobuf-c vulkan check libsystemd)

PROTOS := $(wildcard proto/*.proto)
GEN := $(PROTOS:proto/%.proto=$(BUILD)/gen/%.pb-c.c) $(PROTOS:proto/%.proto=$(BUILD)/gen/%.pb-c.h) \
	$(BUILD)/gen/ruda/status.h $(BUILD)/gen/status_table.c

DAEMON_SRC := $(wildcard daemon/*/*.c)
PROTO_SRC := proto/frame.c proto/sha256.c proto/socket_path.c
CLIENT_SRC := $(wildcard libclient/*.c)
RUDACTL_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard rudactl/*.c))

DAEMON_OBJ := $(DAEMON_SRC:%.c=$(BUILD)/obj/%.o)
# daemon sources name each other by layer: "device/device.h"
$(DAEMON_OBJ): BASE_CFLAGS += -Idaemon
# status_table: ruda_strerror, in libruda, rudactl and rudad alike
PROTO_OBJ := $(PROTO_SRC:%.c=$(BUILD)/obj/%.o) $(PROTOS:proto/%.proto=$(BUILD)/obj/gen/%.pb-c.o) \
	$(BUILD)/obj/gen/status_table.o
CLIENT_OBJ := $(CLIENT_SRC:%.c=$(BUILD)/obj/%.o)

SHADERS := $(filter-out shaders/reduce.comp,$(wildcard shaders/*.comp))
# reduce.comp is built once per operation and element type
REDUCE_OPS := sum prod max min mean
REDUCE_TYPES := f32 i32 u32 f16
REDUCE_SPIRV := $(foreach o,$(REDUCE_OPS),$(foreach t,$(REDUCE_TYPES),$(BUILD)/shaders/reduce_$(o)_$(t).spv))
SPIRV := $(SHADERS:shaders/%.comp=$(BUILD)/shaders/%.spv) $(REDUCE_SPIRV)
TEST_SPIRV := $(patsubst tests/shaders/%.comp,$(BUILD)/tests/shaders/%.spv,$(wildcard tests/shaders/*.comp))

UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
INTEGRATION_TESTS := $(patsubst tests/integration/%.c,$(BUILD)/tests/%,$(wildcard tests/integration/test_*.c))
TEST_HELPERS := $(patsubst tests/integration/%.c,$(BUILD)/tests/%,$(wildcard tests/integration/helper_*.c))
# both kinds build to $(BUILD)/tests/<name>: one name would shadow the other
$(if $(filter $(UNIT_TESTS),$(INTEGRATION_TESTS)),$(error tests/unit and tests/integration \
	both have $(notdir $(filter $(UNIT_TESTS),$(INTEGRATION_TESTS)))))

.PHONY: all run check check-python deps clean install uninstall include-graph
.DELETE_ON_ERROR:

RUDACTL := $(if $(wildcard rudactl/*.c),$(BUILD)/rudactl)

all: $(BUILD)/rudad $(RUDACTL) $(BUILD)/libruda.so $(BUILD)/libruda.a $(SPIRV) $(BUILD)/example \
	$(BUILD)/ruda-uninstalled.pc

# ---- generated protocol code -------------------------------------------

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: proto/%.proto
	@mkdir -p $(BUILD)/gen
	$(say) PROTOC $@
	$(Q)$(PROTOC_C) --proto_path=proto --c_out=$(BUILD)/gen $<

# The status codes have one definition, enum Status of the proto: from it
# come ruda_status of <ruda/status.h> (installed beside <ruda/ruda.h>, which
# includes it) and ruda_strerror's table. rudad includes <ruda/status.h>,
# never <ruda/ruda.h>.
$(BUILD)/gen/ruda/status.h: proto/ruda.proto proto/gen_status.awk
	@mkdir -p $(dir $@)
	$(say) GEN $@
	$(Q)awk -v what=header -f proto/gen_status.awk $< > $@

$(BUILD)/gen/status_table.c: proto/ruda.proto proto/gen_status.awk
	@mkdir -p $(dir $@)
	$(say) GEN $@
	$(Q)awk -v what=table -f proto/gen_status.awk $< > $@

$(BUILD)/obj/gen/status_table.o: BASE_CFLAGS += -Iproto

# rudad's own kernel (dynamic counts), compiled into it as C words
$(BUILD)/gen/indirect_clamp.spv.inc: daemon/exec/indirect_clamp.comp
	@mkdir -p $(BUILD)/gen
	$(say) GLSLC $@
	$(Q)$(GLSLC) --target-env=vulkan1.2 -O -mfmt=c -o $@ $<

$(BUILD)/obj/daemon/exec/indirect.o: $(BUILD)/gen/indirect_clamp.spv.inc

# and the combine kernel of all-reduce between logical devices of one GPU,
# with f32 subnormals kept (for devices that can), without, and flushed
# (for tests)
$(BUILD)/gen/combine.spv.inc: daemon/exec/combine.comp
	@mkdir -p $(BUILD)/gen
	$(say) GLSLC $@
	$(Q)$(GLSLC) --target-env=vulkan1.2 -O -mfmt=c -o $@ $<

$(BUILD)/gen/combine_subnormals.spv.inc: daemon/exec/combine.comp
	@mkdir -p $(BUILD)/gen
	$(say) GLSLC $@
	$(Q)$(GLSLC) --target-env=vulkan1.2 -O -DKEEP_SUBNORMALS -mfmt=c -o $@ $<

$(BUILD)/gen/combine_flushing.spv.inc: daemon/exec/combine.comp
	@mkdir -p $(BUILD)/gen
	$(say) GLSLC $@
	$(Q)$(GLSLC) --target-env=vulkan1.2 -O -DTEST_FLUSH -mfmt=c -o $@ $<

$(BUILD)/obj/daemon/exec/combine.o: $(BUILD)/gen/combine.spv.inc \
	$(BUILD)/gen/combine_subnormals.spv.inc $(BUILD)/gen/combine_flushing.spv.inc

# and the copy kernel of large device-local copies (RUDA_DEVICE_COPY=kernel)
$(BUILD)/gen/copy_kernel.spv.inc: daemon/exec/copy_kernel.comp
	@mkdir -p $(BUILD)/gen
	$(say) GLSLC $@
	$(Q)$(GLSLC) --target-env=vulkan1.2 -O -mfmt=c -o $@ $<

$(BUILD)/obj/daemon/exec/copy_kernel.o: $(BUILD)/gen/copy_kernel.spv.inc

# ---- objects ------------------------------------------------------------

# <ruda/ruda.h> is libruda's: rudad's objects are compiled without it (they
# include <ruda/status.h> and <ruda/common.h>, the definitions both share)
CLIENT_INC := -Ilibclient/include
$(BUILD)/obj/daemon/%.o: CLIENT_INC :=

$(BUILD)/obj/%.o: %.c $(GEN)
	@mkdir -p $(dir $@)
	$(say) CC $@
	$(Q)$(CC) $(BASE_CFLAGS) $(CLIENT_INC) $(DEP_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c $(GEN)
	@mkdir -p $(dir $@)
	$(say) CC $@
	$(Q)$(CC) $(BASE_CFLAGS) $(DEP_CFLAGS) $(CFLAGS) -Wno-unused-parameter -c $< -o $@

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# The gather kernel, embedded in libruda for strided tensor reads.
$(BUILD)/gen/gather_spv.h: $(BUILD)/shaders/gather.spv
	@mkdir -p $(BUILD)/gen
	$(say) GEN $@
	$(Q){ echo 'static const uint32_t ruda_gather_spv[] = {'; \
	  od -An -v -tx4 $< | sed 's/\([0-9a-f]\{8\}\)/0x\1u,/g'; echo '};'; } > $@

$(BUILD)/obj/libclient/tensor.o: $(BUILD)/gen/gather_spv.h

# ---- programs and libraries --------------------------------------------

$(BUILD)/rudad: $(DAEMON_OBJ) $(PROTO_OBJ)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS_ALL) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS)

# rudactl speaks the protocol through libruda's internal protocol code
# (libclient/wire.h: connect, framing, Hello), linked from libruda.a, not
# through its public API.
$(BUILD)/rudactl: $(RUDACTL_OBJ) $(BUILD)/libruda.a
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS_ALL) $(LDFLAGS) -o $@ $^ $(CLIENT_LIBS) -lm

$(BUILD)/libruda.so.$(LIBVERSION): $(CLIENT_OBJ) $(PROTO_OBJ) libclient/libruda.map
	$(say) LD $@
	$(Q)$(CC) -shared -Wl,-soname,libruda.so.$(SOVERSION) -Wl,--no-undefined \
		-Wl,--version-script=libclient/libruda.map \
		$(LDFLAGS_ALL) $(LDFLAGS) -o $@ $(filter %.o,$^) $(CLIENT_LIBS)

$(BUILD)/libruda.so: $(BUILD)/libruda.so.$(LIBVERSION)
	$(Q)ln -sf libruda.so.$(LIBVERSION) $(BUILD)/libruda.so.$(SOVERSION)
	$(Q)ln -sf libruda.so.$(LIBVERSION) $@

$(BUILD)/libruda.a: $(CLIENT_OBJ) $(PROTO_OBJ)
	$(Q)rm -f $@
	$(say) AR $@
	$(Q)ar rcs $@ $^

$(BUILD)/shaders/%.spv: shaders/%.comp
	@mkdir -p $(BUILD)/shaders
	$(say) GLSLC $@
	$(Q)$(GLSLC) --target-env=vulkan1.2 -O -o $@ $<

$(BUILD)/shaders/reduce_%.spv: shaders/reduce.comp
	@mkdir -p $(BUILD)/shaders
	$(say) GLSLC $@
	$(Q)$(GLSLC) --target-env=vulkan1.2 -O -DOP=$(REDUCE_OP_$(word 1,$(subst _, ,$*))) \
		-DT_$(shell echo $(word 2,$(subst _, ,$*)) | tr a-z A-Z) -o $@ $<

REDUCE_OP_sum := 0
REDUCE_OP_prod := 1
REDUCE_OP_max := 2
REDUCE_OP_min := 3
REDUCE_OP_mean := 4

# Kernels that only tests use (some are meant to be refused).
$(BUILD)/tests/shaders/%.spv: tests/shaders/%.comp
	@mkdir -p $(dir $@)
	$(say) GLSLC $@
	$(Q)$(GLSLC) --target-env=vulkan1.2 -O -o $@ $<

# pkg-config's description of libruda: prefix, libdir, includedir, extra
# Libs, extra Cflags
ruda_pc = printf '%s\n' 'prefix=$(1)' 'libdir=$(2)' 'includedir=$(3)' '' \
	'Name: ruda' 'Description: Client library of rudad, the ruda GPU compute daemon' \
	'Version: $(VERSION)' \
	'Requires.private: libprotobuf-c' 'Cflags: -I$${includedir}$(5)' \
	'Libs: -L$${libdir} $(4)-lruda' 'Libs.private: -pthread'

# For programs built against this tree before `make install`:
# PKG_CONFIG_PATH=build pkg-config --cflags --libs ruda finds it (pkg-config
# prefers a NAME-uninstalled.pc); the rpath finds build/libruda.so. The
# headers <ruda/ruda.h> includes lie in proto/include and (generated) build/gen.
$(BUILD)/ruda-uninstalled.pc: Makefile | $(BUILD)/gen/ruda/status.h
	@mkdir -p $(BUILD)
	$(say) GEN $@
	$(Q)$(call ruda_pc,$(abspath .),$(abspath $(BUILD)),$(abspath libclient/include),-Wl$(comma)-rpath$(comma)$${libdir} , -I$(abspath proto/include) -I$(abspath $(BUILD)/gen)) > $@

# The README's example, built against the public headers only.
$(BUILD)/example: docs/example.c $(BUILD)/libruda.so $(BUILD)/gen/ruda/status.h
	$(say) LD $@
	$(Q)$(CC) -std=c11 $(WARN) $(CFLAGS) $(SAN) -Ilibclient/include -Iproto/include -I$(BUILD)/gen \
		-o $@ $< \
		-L$(BUILD) -Wl,-rpath,'$$ORIGIN' -lruda

# ---- tests --------------------------------------------------------------

TEST_CFLAGS = $(BASE_CFLAGS) -Ilibclient/include $(DEP_CFLAGS) $(CFLAGS) -Itests -Idaemon -Ilibclient -DRUDA_BUILD_DIR='"$(abspath $(BUILD))"' \
	-DRUDA_SOURCE_DIR='"$(abspath .)"' -DRUDA_SAN_FLAGS='"$(SAN)"'
TEST_COMMON := $(BUILD)/obj/tests/harness.o

$(BUILD)/obj/tests/harness.o: tests/harness.c tests/harness.h $(GEN)
	@mkdir -p $(dir $@)
	$(say) CC $@
	$(Q)$(CC) $(TEST_CFLAGS) -c $< -o $@

# Unit suites may use any daemon module; both kinds link the real libruda.
DAEMON_LIB_OBJ := $(filter-out $(BUILD)/obj/daemon/server/main.o,$(DAEMON_OBJ))

$(BUILD)/tests/test_%: tests/unit/test_%.c $(TEST_COMMON) $(DAEMON_LIB_OBJ) $(BUILD)/libruda.a \
		| $(SPIRV) $(TEST_SPIRV)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(TEST_CFLAGS) $(LDFLAGS_ALL) -o $@ $< $(TEST_COMMON) $(DAEMON_LIB_OBJ) \
		$(BUILD)/libruda.a $(DAEMON_LIBS) $(CHECK_LIBS)

$(BUILD)/tests/test_%: tests/integration/test_%.c $(TEST_COMMON) $(BUILD)/libruda.a \
		| $(BUILD)/rudad $(SPIRV) $(TEST_SPIRV) $(BUILD)/example
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(TEST_CFLAGS) $(LDFLAGS_ALL) -o $@ $< $(TEST_COMMON) $(BUILD)/libruda.a \
		$(CLIENT_LIBS) $(CHECK_LIBS)

# test_export is also a Vulkan program: it imports the buffers rudad exports
$(BUILD)/tests/test_export: CLIENT_LIBS += $(call pc,--libs,vulkan)

$(BUILD)/tests/helper_%: tests/integration/helper_%.c $(BUILD)/libruda.a
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(TEST_CFLAGS) $(LDFLAGS_ALL) -o $@ $< $(BUILD)/libruda.a $(CLIENT_LIBS)

# Counts rudad's live Vulkan objects when preloaded (tests/vkcount/);
# built without sanitizers: it only forwards to the loader.
$(BUILD)/tests/libvkcount.so: tests/vkcount/vkcount.c tests/vkcount/vkcount.h
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) -std=c11 $(WARN) -O2 -g -fPIC -shared -o $@ $< -ldl -lpthread

$(BUILD)/tests/test_vk_objects: | $(BUILD)/tests/libvkcount.so

TEST_PROGRAMS := $(UNIT_TESTS) $(INTEGRATION_TESTS)

# Suites run a second time with every stream of a client and of every client
# on one queue lane (lanes = on, queues = 1: docs/design.md, "Queue lanes"),
# which lavapipe, with its one queue, does not use by default. Each is a
# script beside the suite, named lanes/test_x.
LANES_SUITES := test_streams test_sync_fast test_sync_buffers test_graphs test_dynamic_counts test_priority \
	test_launch_failure test_isolation test_transfer test_clients test_memory
LANES_TESTS := $(patsubst %,$(BUILD)/tests/lanes/%,$(LANES_SUITES))
$(BUILD)/tests/lanes/%: $(BUILD)/tests/%
	@mkdir -p $(@D)
	@printf '#!/bin/sh\nRUDA_TEST_SET="lanes=on queues=1" exec "%s" "$$@"\n' "$(abspath $<)" > $@
	@chmod +x $@

# And with eight queues that are one VkQueue (RUDA_TEST_QUEUES=8: the
# several-queue paths, such as timeline waits between queues, completion per
# queue and lanes of two streams, which lavapipe's one queue does not take).
QUEUES_SUITES := test_streams test_sync_fast test_sync_buffers test_graphs test_dynamic_counts \
	test_transfer test_export test_memory
QUEUES_TESTS := $(patsubst %,$(BUILD)/tests/queues8/%,$(QUEUES_SUITES))
$(BUILD)/tests/queues8/%: $(BUILD)/tests/%
	@mkdir -p $(@D)
	@printf '#!/bin/sh\nRUDA_TEST_QUEUES=8 RUDA_TEST_SET="lanes=on" exec "%s" "$$@"\n' "$(abspath $<)" > $@
	@chmod +x $@

tests: all $(TEST_SPIRV) $(TEST_PROGRAMS) $(TEST_HELPERS) $(LANES_TESTS) $(QUEUES_TESTS)

# The runner is checked on stubs first; each suite then streams its checks
# and the last line is the total: "N passed, N failed, N skipped".
check: deps
	@$(MAKE) --no-print-directory -j$(JOBS) tests
	@sh tests/run_selftest.sh
	@python3 tests/include_graph.py --dir daemon --max-lines 800 --quiet
	@rc=0; BUILD=$(BUILD) sh tests/run.sh $(TEST_PROGRAMS) $(LANES_TESTS) $(QUEUES_TESTS) || rc=$$?; \
	$(MAKE) --no-print-directory check-python || rc=1; exit $$rc

# The Python package (python/ruda) against this build's libruda and rudad.
# Debian's interpreter: python3-numpy and python3-pytest are installed for
# it (another python3 first on PATH may lack them). A sanitizer build's
# libruda cannot be loaded into an uninstrumented python: skipped there.
PYTHON ?= /usr/bin/python3
check-python: all $(BUILD)/tests/shaders/spec_fill.spv
ifeq ($(SAN),)
	@echo "python/tests ($(PYTHON) -m pytest)"
	@RUDA_LIBRARY=$(abspath $(BUILD))/libruda.so.$(SOVERSION) RUDA_BUILD_DIR=$(abspath $(BUILD)) \
		$(PYTHON) -m pytest -q -p no:cacheprovider python/tests
else
	@echo "python/tests: skipped in a sanitizer build (SAN=$(SAN))"
endif

# ---- benchmarks ---------------------------------------------------------
#
#   make bench [BENCH_ARGS=--quick]
#
# rudad against plain in-process Vulkan measured in the same run: prints a
# table per group and writes $(BUILD)/bench/results.json. Never fails on
# speed, only on wrong results. tests/bench/README.md says what is measured.

BENCH_DIR := $(BUILD)/bench
BENCH_HELPERS := $(BENCH_DIR)/first_vk $(BENCH_DIR)/first_client $(BENCH_DIR)/queue_priority $(BENCH_DIR)/copy_placement \
	$(BENCH_DIR)/queue_share $(BENCH_DIR)/host_copy
BENCH_SRC := $(filter-out tests/bench/first_vk.c tests/bench/first_client.c tests/bench/host_copy.c \
	tests/bench/queue_priority.c tests/bench/copy_placement.c tests/bench/queue_share.c \
	tests/bench/plain_vk.c,\
	$(wildcard tests/bench/*.c))
BENCH_OBJ := $(BENCH_SRC:%.c=$(BUILD)/obj/%.o)
BENCH_ARGS ?=

.PHONY: bench bench-programs

$(BUILD)/obj/tests/bench/%.o: tests/bench/%.c $(GEN)
	@mkdir -p $(dir $@)
	$(say) CC $@
	$(Q)$(CC) $(TEST_CFLAGS) -MMD -MP -c $< -o $@

# the in-process baselines link the daemon's device code, as unit tests do
$(BENCH_DIR)/bench: $(BENCH_OBJ) $(DAEMON_LIB_OBJ) $(BUILD)/libruda.a
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS_ALL) $(LDFLAGS) -o $@ $(BENCH_OBJ) $(DAEMON_LIB_OBJ) $(BUILD)/libruda.a \
		$(DAEMON_LIBS)

# plain Vulkan and nothing else: what a program without rudad loads; and
# what a device does with queue priorities
$(BENCH_DIR)/first_vk: tests/bench/first_vk.c
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN) $(call pc,--cflags,vulkan) \
		-o $@ $< $(call pc,--libs,vulkan)

$(BENCH_DIR)/queue_priority $(BENCH_DIR)/copy_placement $(BENCH_DIR)/queue_share: \
		$(BENCH_DIR)/%: tests/bench/%.c \
		tests/bench/plain_vk.c tests/bench/plain_vk.h
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN) -pthread $(call pc,--cflags,vulkan) \
		-o $@ $< tests/bench/plain_vk.c $(call pc,--libs,vulkan)

$(BENCH_DIR)/first_client: tests/bench/first_client.c $(BUILD)/libruda.a
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN) -pthread -Ilibclient/include -Iproto/include -I$(BUILD)/gen \
		-o $@ $< $(BUILD)/libruda.a $(CLIENT_LIBS)

# libruda's parallel copy alone, against the host's memory
$(BENCH_DIR)/host_copy: tests/bench/host_copy.c $(BUILD)/libruda.a
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN) -pthread -Ilibclient \
		-o $@ $< $(BUILD)/libruda.a $(CLIENT_LIBS)

bench-programs: $(BUILD)/rudad $(BUILD)/shaders/fill.spv $(BUILD)/shaders/copy.spv \
		$(BUILD)/shaders/saxpy.spv $(BUILD)/tests/shaders/spec_fill.spv \
		$(BUILD)/tests/shaders/spin.spv \
		$(BENCH_DIR)/bench $(BENCH_HELPERS)

bench: deps
	@$(MAKE) --no-print-directory bench-programs
	$(BENCH_DIR)/bench $(BENCH_ARGS)

# ---- fuzzing and soak ---------------------------------------------------
#
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_BUILD=$(BUILD)-fuzz] [FUZZ_ARGS=...]
#   make soak [SOAK_SECONDS=60] [SOAK_CLIENTS=4]
#
# fuzz: the libFuzzer targets of tests/fuzz/ built with clang under
# ASan+UBSan into $(FUZZ_BUILD), each run for FUZZ_SECONDS from its
# committed corpus (tests/fuzz/corpus/<target>); new inputs go to
# $(FUZZ_BUILD)/fuzz/corpus-<target>, crashes to $(FUZZ_BUILD)/fuzz/crash-*.
# clang is installed for this target only; `make check` replays the corpus
# with gcc (tests/unit/test_fuzz_corpus.c).
# soak: tests/soak/soak.c: a real rudad, SOAK_CLIENTS processes doing
# verified random work (some killed and replaced), rudad's RSS and fds
# sampled; fails on a wrong result, an unexpected error or a leak.

FUZZ_SECONDS ?= 60
FUZZ_BUILD ?= $(BUILD)-fuzz
FUZZ_CC ?= clang
FUZZ_PACKAGES := clang libclang-rt-14-dev
FUZZ_TARGETS := frame dispatch admin
FUZZ_SAN := -fsanitize=address,undefined -fno-omit-frame-pointer
# UBSan stops at the first report, and LSan reports, except those of known
# open bugs (tests/fuzz/*.supp)
FUZZ_ENV := UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions=$(abspath tests/fuzz/ubsan.supp) \
	LSAN_OPTIONS=suppressions=$(abspath tests/fuzz/lsan.supp)
FUZZ_ARGS ?=
SOAK_SECONDS ?= 60
SOAK_CLIENTS ?= 4

.PHONY: fuzz fuzz-deps fuzz-programs soak

# the corpus replay compiles the targets' sources in
$(BUILD)/tests/test_fuzz_corpus: tests/fuzz/fuzz_frame.c tests/fuzz/fuzz_dispatch.c \
	tests/fuzz/fuzz_admin.c tests/fuzz/replay.c

$(BUILD)/fuzz/fuzz_frame: tests/fuzz/fuzz_frame.c $(PROTO_OBJ)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(TEST_CFLAGS) -fsanitize=fuzzer $(LDFLAGS_ALL) -o $@ $< $(PROTO_OBJ) $(CLIENT_LIBS)

$(BUILD)/fuzz/fuzz_dispatch: tests/fuzz/fuzz_dispatch.c $(DAEMON_LIB_OBJ) $(BUILD)/libruda.a \
		| $(BUILD)/shaders/fill.spv
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(TEST_CFLAGS) -fsanitize=fuzzer $(LDFLAGS_ALL) -o $@ $< $(DAEMON_LIB_OBJ) \
		$(BUILD)/libruda.a $(DAEMON_LIBS)

# the dispatch harness with Admin messages as input (it includes fuzz_dispatch.c)
$(BUILD)/fuzz/fuzz_admin: tests/fuzz/fuzz_admin.c tests/fuzz/fuzz_dispatch.c $(DAEMON_LIB_OBJ) \
		$(BUILD)/libruda.a | $(BUILD)/shaders/fill.spv
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(TEST_CFLAGS) -fsanitize=fuzzer $(LDFLAGS_ALL) -o $@ $< $(DAEMON_LIB_OBJ) \
		$(BUILD)/libruda.a $(DAEMON_LIBS)

fuzz-programs: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)

fuzz-deps:
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(FUZZ_PACKAGES)"

fuzz: deps fuzz-deps
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) CFLAGS="-O1 -g" \
		SAN="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" fuzz-programs
	@for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_BUILD)/fuzz/corpus-$$t || exit 1; \
		echo "== fuzz_$$t for $(FUZZ_SECONDS) s"; \
		$(FUZZ_ENV) $(FUZZ_BUILD)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=60 \
			-rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/fuzz/ \
			$(FUZZ_ARGS) $(FUZZ_BUILD)/fuzz/corpus-$$t tests/fuzz/corpus/$$t || exit 1; \
	done

$(BUILD)/soak/soak: tests/soak/soak.c $(BUILD)/libruda.a
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(TEST_CFLAGS) $(LDFLAGS_ALL) -o $@ $< $(BUILD)/libruda.a $(CLIENT_LIBS) -lm

soak: deps
	@$(MAKE) --no-print-directory $(BUILD)/rudad $(BUILD)/shaders/fill.spv \
		$(BUILD)/shaders/add_f32.spv $(BUILD)/soak/soak
	$(BUILD)/soak/soak --seconds $(SOAK_SECONDS) --clients $(SOAK_CLIENTS)

# ---- sanitizer variants of make check -----------------------------------
#
#   make check-asan [ASAN_BUILD=$(BUILD)-asan]
#   make check-valgrind [VALGRIND_TESTS="build/tests/test_kernel ..."]
#
# check-asan: everything built with ASan+UBSan (gcc) into its own build
# directory, then every suite; rudad runs under the sanitizers in the
# integration suites, and any report (UBSan stops at the first one, LSan
# runs at every exit) fails the test through its exit status.
# check-valgrind: the integration suites of the normal build with rudad
# under valgrind (tests/harness.c's RUDA_TEST_WRAPPER); an error or a
# definite leak in rudad makes it exit 99 and the test fail. Neither is
# part of `make check`: docs/reliability.md has their run times.

ASAN_BUILD ?= $(BUILD)-asan
ASAN_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
ASAN_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp)
VALGRIND := valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite \
	--errors-for-leak-kinds=definite --suppressions=$(abspath tests/valgrind.supp)
VALGRIND_TESTS ?= $(INTEGRATION_TESTS)

.PHONY: check-asan check-valgrind

check-asan: deps
	@$(ASAN_ENV) $(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) SAN="$(ASAN_SAN)" \
		CFLAGS="-O1 -g" check

# The daemon's include graph by module (docs/design.md, "Layers"): fails on
# an include up a layer, a cycle or a source over 800 lines. check runs it.
include-graph:
	@python3 tests/include_graph.py --dir daemon --max-lines 800

check-valgrind: deps
	@$(MAKE) --no-print-directory DEB_PACKAGES=valgrind deps
	@$(MAKE) --no-print-directory tests
	@CK_TIMEOUT_MULTIPLIER=10 RUDA_TEST_WRAPPER="$(VALGRIND)" BUILD=$(BUILD) \
		sh tests/run.sh $(VALGRIND_TESTS)

# ---- running ------------------------------------------------------------

# builds what the README's "try it" uses next (the example, rudactl), then
# runs rudad; it says "rudad ... ready on SOCKET" once clients can connect
RUN_SOCKET ?=
run: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@echo "starting $(BUILD)/rudad$(if $(RUN_SOCKET), --socket $(RUN_SOCKET)) (Ctrl-C stops it)"
	@exec $(BUILD)/rudad $(if $(RUN_SOCKET),--socket $(RUN_SOCKET))

# Installs what is missing: as root directly, else through sudo; without
# either it says what to run and stops. apt's output goes to a log.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	[ -n "$$missing" ] || exit 0; \
	SUDO=; if [ "$$(id -u)" != 0 ]; then \
		if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else \
			echo "make: the Debian packages$$missing are missing, and installing them" \
				"needs root: run su -c 'apt-get install -y$$missing' (or have an" \
				"administrator run it), then make again"; \
			exit 1; fi; fi; \
	log=$${TMPDIR:-/tmp}/ruda-apt.$$$$.log; \
	echo "installing:$$missing (apt-get's output: $$log)"; \
	install() { DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q \
		--no-install-recommends $$missing >>$$log 2>&1; }; \
	if [ -z "$$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e lock -e partial)" ]; then \
		$$SUDO apt-get update -q >>$$log 2>&1; fi; \
	install || { $$SUDO apt-get update -q >>$$log 2>&1 && install; } || \
		{ tail -n 20 $$log; echo "make: apt-get failed; its whole output is in $$log"; exit 1; }; \
	rm -f $$log

clean:
	rm -rf $(BUILD)

# ---- Debian packages ----------------------------------------------------
#
#   make deb [DEB_OUT=$(BUILD)/deb]
#
# The packages of debian/ (rudad, ruda-tools, libruda1, libruda-dev,
# python3-ruda) for this machine's Debian: installs the build dependencies
# (as `deps` does), runs dpkg-buildpackage -b -us -uc (which builds in
# build-deb/ and leaves $(BUILD) alone), moves what it wrote to .. (the
# .debs, .buildinfo and .changes) to DEB_OUT, then runs lintian on them.
# docs/deploy.md ("Debian packages") says what each package holds.
DEB_OUT ?= $(BUILD)/deb
DEB_BUILD_PACKAGES := build-essential pkgconf libuv1-dev libprotobuf-c-dev protobuf-c-compiler \
	libvulkan-dev glslc spirv-tools libsystemd-dev debhelper dh-python python3 lintian

.PHONY: deb
deb:
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(DEB_BUILD_PACKAGES)"
	dpkg-buildpackage -b -us -uc -J$(JOBS)
	@changes=$$(dpkg-parsechangelog -S Source)_$$(dpkg-parsechangelog -S Version | \
		sed 's/^[0-9]*://')_$$(dpkg-architecture -qDEB_HOST_ARCH).changes; \
	mkdir -p $(DEB_OUT) && \
	for f in $$changes $$(sed -n '/^Files:/,/^[^ ]/s/^ .* //p' ../$$changes); do \
		mv -f ../$$f $(DEB_OUT)/ || exit 1; done; \
	echo "make deb: in $(DEB_OUT): $$changes and what it lists"; \
	echo "lintian -I --pedantic $(DEB_OUT)/$$changes"; \
	lintian -I --pedantic $(DEB_OUT)/$$changes

# ---- installation -------------------------------------------------------
#
#   make install [PREFIX=/usr/local] [DESTDIR=] [SYSCONFDIR=/etc]
#
# The units name $(SBINDIR)/rudad; systemd also reads units, sysusers.d and
# tmpfiles.d under /usr/local/lib. Debian's multiarch layout:
# LIBDIR=/usr/lib/x86_64-linux-gnu.

SBINDIR ?= $(PREFIX)/sbin
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
DOCDIR ?= $(DATADIR)/doc/ruda
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
INSTALL ?= install

MAN_PAGES := $(wildcard docs/man/*.[0-9])
UNITS := systemd/rudad.service systemd/rudad.socket

install: all
	$(INSTALL) -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) \
		$(DESTDIR)$(INCLUDEDIR)/ruda $(DESTDIR)$(DATADIR)/ruda/shaders \
		$(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR) \
		$(DESTDIR)$(DOCDIR)
	$(INSTALL) -m 0755 $(BUILD)/rudad $(DESTDIR)$(SBINDIR)/rudad
	if [ -x $(BUILD)/rudactl ]; then $(INSTALL) -d $(DESTDIR)$(BINDIR) && \
		$(INSTALL) -m 0755 $(BUILD)/rudactl $(DESTDIR)$(BINDIR)/rudactl; fi
	$(INSTALL) -m 0755 $(BUILD)/libruda.so.$(LIBVERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libruda.so.$(LIBVERSION) $(DESTDIR)$(LIBDIR)/libruda.so.$(SOVERSION)
	ln -sf libruda.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libruda.so
	$(INSTALL) -m 0644 $(BUILD)/libruda.a $(DESTDIR)$(LIBDIR)/
	$(INSTALL) -m 0644 libclient/include/ruda/ruda.h proto/include/ruda/common.h \
		$(BUILD)/gen/ruda/status.h $(DESTDIR)$(INCLUDEDIR)/ruda/
	$(call ruda_pc,$(PREFIX),$(LIBDIR),$(INCLUDEDIR)) > $(DESTDIR)$(PKGCONFIGDIR)/ruda.pc
	$(INSTALL) -m 0644 $(SPIRV) $(DESTDIR)$(DATADIR)/ruda/shaders/
	for u in $(UNITS); do \
		sed 's|/usr/sbin/rudad|$(SBINDIR)/rudad|g' $$u > $(DESTDIR)$(SYSTEMDUNITDIR)/$${u#systemd/} && \
		chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/$${u#systemd/} || exit 1; done
	$(INSTALL) -m 0644 systemd/ruda.sysusers $(DESTDIR)$(SYSUSERSDIR)/ruda.conf
	$(INSTALL) -m 0644 systemd/ruda.tmpfiles $(DESTDIR)$(TMPFILESDIR)/ruda.conf
	for m in $(MAN_PAGES); do \
		s=$${m##*.}; $(INSTALL) -d $(DESTDIR)$(MANDIR)/man$$s && \
		$(INSTALL) -m 0644 $$m $(DESTDIR)$(MANDIR)/man$$s/ || exit 1; done
	$(INSTALL) -m 0644 docs/rudad.conf.example docs/example.c docs/deploy.md \
		$(DESTDIR)$(DOCDIR)/
	@# the dynamic linker's cache must learn libruda.so.$(SOVERSION); a staged
	@# install (DESTDIR) leaves that to the package's postinst
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then echo ldconfig; ldconfig; \
	elif [ -z "$(DESTDIR)" ]; then echo "make install: run 'ldconfig' as root so" \
		"programs find libruda.so.$(SOVERSION) in $(LIBDIR)"; fi

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/rudad $(DESTDIR)$(BINDIR)/rudactl \
		$(DESTDIR)$(LIBDIR)/libruda.so $(DESTDIR)$(LIBDIR)/libruda.so.$(SOVERSION) \
		$(DESTDIR)$(LIBDIR)/libruda.so.$(LIBVERSION) $(DESTDIR)$(LIBDIR)/libruda.a \
		$(DESTDIR)$(INCLUDEDIR)/ruda/ruda.h $(DESTDIR)$(INCLUDEDIR)/ruda/status.h \
		$(DESTDIR)$(INCLUDEDIR)/ruda/common.h \
		$(DESTDIR)$(PKGCONFIGDIR)/ruda.pc \
		$(DESTDIR)$(SYSTEMDUNITDIR)/rudad.service $(DESTDIR)$(SYSTEMDUNITDIR)/rudad.socket \
		$(DESTDIR)$(SYSUSERSDIR)/ruda.conf $(DESTDIR)$(TMPFILESDIR)/ruda.conf
	rm -rf $(DESTDIR)$(DATADIR)/ruda/shaders $(DESTDIR)$(DOCDIR)
	for m in $(notdir $(MAN_PAGES)); do rm -f $(DESTDIR)$(MANDIR)/man$${m##*.}/$$m; done
	-rmdir $(DESTDIR)$(INCLUDEDIR)/ruda $(DESTDIR)$(DATADIR)/ruda 2>/dev/null
