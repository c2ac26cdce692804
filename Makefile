# ruda: rudad (the daemon), libruda (the client library), rudactl, tests.
#
#   make            build everything into build/
#   make run        install missing packages, build, run rudad in the foreground
#   make check      install missing packages, build, run every test
#   make deps       install the Debian packages the build and tests need

VERSION := 0.1.0
SOVERSION := 0
BUILD ?= build
PREFIX ?= /usr/local

CC ?= cc
PKG_CONFIG ?= pkg-config
PROTOC_C ?= protoc-c
GLSLC ?= glslc

DEB_PACKAGES := build-essential pkgconf libuv1-dev libprotobuf-c-dev protobuf-c-compiler \
	libvulkan-dev mesa-vulkan-drivers glslc spirv-tools check valgrind

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-missing-field-initializers
CFLAGS ?= -O2 -g
SAN ?=
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) -fPIC -pthread -DRUDA_VERSION='"$(VERSION)"' \
	-Ilibclient/include -I$(BUILD)/gen $(SAN)
LDFLAGS_ALL := -pthread $(SAN)

pc = $(shell $(PKG_CONFIG) $(1) $(2) 2>/dev/null)
DAEMON_LIBS = $(call pc,--libs,libuv libprotobuf-c vulkan SPIRV-Tools) -lstdc++ -lm
CLIENT_LIBS = $(call pc,--libs,libprotobuf-c)
CHECK_LIBS = $(call pc,--libs,check)
DEP_CFLAGS = $(call pc,--cflags,libuv libprotobuf-c vulkan check)

PROTOS := $(wildcard proto/*.proto)
GEN := $(PROTOS:proto/%.proto=$(BUILD)/gen/%.pb-c.c) $(PROTOS:proto/%.proto=$(BUILD)/gen/%.pb-c.h) \
	$(BUILD)/gen/status_check.c

DAEMON_SRC := $(wildcard daemon/*.c)
PROTO_SRC := proto/frame.c proto/sha256.c
CLIENT_SRC := $(wildcard libclient/*.c)
CLIENT_SRC := $(filter-out libclient/rudactl%.c,$(CLIENT_SRC))
RUDACTL_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard libclient/rudactl*.c))

DAEMON_OBJ := $(DAEMON_SRC:%.c=$(BUILD)/obj/%.o)
PROTO_OBJ := $(PROTO_SRC:%.c=$(BUILD)/obj/%.o) $(PROTOS:proto/%.proto=$(BUILD)/obj/gen/%.pb-c.o)
CLIENT_OBJ := $(CLIENT_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/status_check.o

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

.PHONY: all run check deps clean install uninstall test-unit test-integration
.DELETE_ON_ERROR:

RUDACTL := $(if $(wildcard libclient/rudactl*.c),$(BUILD)/rudactl)

all: $(BUILD)/rudad $(RUDACTL) $(BUILD)/libruda.so $(BUILD)/libruda.a $(SPIRV) $(BUILD)/example

# ---- generated protocol code -------------------------------------------

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: proto/%.proto
	@mkdir -p $(BUILD)/gen
	$(PROTOC_C) --proto_path=proto --c_out=$(BUILD)/gen $<

# ruda_status in <ruda/ruda.h> must match ruda.Status in the proto: one
# static assertion per wire value.
$(BUILD)/gen/status_check.c: proto/ruda.proto
	@mkdir -p $(BUILD)/gen
	{ echo '#include <ruda/ruda.h>'; echo '#include "ruda.pb-c.h"'; \
	  sed -n '/^enum Status {/,/^}/p' $< | \
	  sed -n 's/^ *\([A-Z_]*\) = [0-9]*;.*/_Static_assert((int)RUDA_\1 == (int)RUDA__STATUS__\1, "ruda_status \1 differs from the wire");/p'; \
	} > $@

# ---- objects ------------------------------------------------------------

$(BUILD)/obj/%.o: %.c $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(DEP_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(DEP_CFLAGS) $(CFLAGS) -Wno-unused-parameter -c $< -o $@

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# ---- programs and libraries --------------------------------------------

$(BUILD)/rudad: $(DAEMON_OBJ) $(PROTO_OBJ) $(BUILD)/obj/libclient/status.o
	$(CC) $(LDFLAGS_ALL) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS)

# rudactl speaks the protocol itself: it needs the framing and the
# generated code, not libruda.
$(BUILD)/rudactl: $(RUDACTL_OBJ) $(PROTO_OBJ) $(BUILD)/obj/libclient/status.o
	$(CC) $(LDFLAGS_ALL) $(LDFLAGS) -o $@ $^ $(CLIENT_LIBS) -lm

$(BUILD)/libruda.so.$(VERSION): $(CLIENT_OBJ) $(PROTO_OBJ) libclient/libruda.map
	$(CC) -shared -Wl,-soname,libruda.so.$(SOVERSION) -Wl,--no-undefined \
		-Wl,--version-script=libclient/libruda.map \
		$(LDFLAGS_ALL) $(LDFLAGS) -o $@ $(filter %.o,$^) $(CLIENT_LIBS)

$(BUILD)/libruda.so: $(BUILD)/libruda.so.$(VERSION)
	ln -sf libruda.so.$(VERSION) $(BUILD)/libruda.so.$(SOVERSION)
	ln -sf libruda.so.$(VERSION) $@

$(BUILD)/libruda.a: $(CLIENT_OBJ) $(PROTO_OBJ)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/shaders/%.spv: shaders/%.comp
	@mkdir -p $(BUILD)/shaders
	$(GLSLC) --target-env=vulkan1.2 -O -o $@ $<

$(BUILD)/shaders/reduce_%.spv: shaders/reduce.comp
	@mkdir -p $(BUILD)/shaders
	$(GLSLC) --target-env=vulkan1.2 -O -DOP=$(REDUCE_OP_$(word 1,$(subst _, ,$*))) \
		-DT_$(shell echo $(word 2,$(subst _, ,$*)) | tr a-z A-Z) -o $@ $<

REDUCE_OP_sum := 0
REDUCE_OP_prod := 1
REDUCE_OP_max := 2
REDUCE_OP_min := 3
REDUCE_OP_mean := 4

# Kernels that only tests use (some are meant to be refused).
$(BUILD)/tests/shaders/%.spv: tests/shaders/%.comp
	@mkdir -p $(dir $@)
	$(GLSLC) --target-env=vulkan1.2 -O -o $@ $<

# The README's example, built against the public header only.
$(BUILD)/example: docs/example.c $(BUILD)/libruda.so
	$(CC) -std=c11 $(WARN) $(CFLAGS) $(SAN) -Ilibclient/include -o $@ $< \
		-L$(BUILD) -Wl,-rpath,'$$ORIGIN' -lruda

# ---- tests --------------------------------------------------------------

TEST_CFLAGS = $(BASE_CFLAGS) $(DEP_CFLAGS) $(CFLAGS) -Itests -Idaemon -Ilibclient -DRUDA_BUILD_DIR='"$(abspath $(BUILD))"'
TEST_COMMON := $(BUILD)/obj/tests/harness.o

$(BUILD)/obj/tests/harness.o: tests/harness.c tests/harness.h $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -c $< -o $@

# Unit suites may use any daemon module; both kinds link the real libruda.
DAEMON_LIB_OBJ := $(filter-out $(BUILD)/obj/daemon/main.o,$(DAEMON_OBJ))

$(BUILD)/tests/test_%: tests/unit/test_%.c $(TEST_COMMON) $(DAEMON_LIB_OBJ) $(BUILD)/libruda.a \
		| $(SPIRV) $(TEST_SPIRV)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) $(LDFLAGS_ALL) -o $@ $< $(TEST_COMMON) $(DAEMON_LIB_OBJ) \
		$(BUILD)/libruda.a $(DAEMON_LIBS) $(CHECK_LIBS)

$(BUILD)/tests/test_%: tests/integration/test_%.c $(TEST_COMMON) $(BUILD)/libruda.a \
		| $(BUILD)/rudad $(SPIRV) $(TEST_SPIRV) $(BUILD)/example
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) $(LDFLAGS_ALL) -o $@ $< $(TEST_COMMON) $(BUILD)/libruda.a \
		$(CLIENT_LIBS) $(CHECK_LIBS)

$(BUILD)/tests/helper_%: tests/integration/helper_%.c $(BUILD)/libruda.a
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) $(LDFLAGS_ALL) -o $@ $< $(BUILD)/libruda.a $(CLIENT_LIBS)

TEST_PROGRAMS := $(UNIT_TESTS) $(INTEGRATION_TESTS)

tests: all $(TEST_SPIRV) $(TEST_PROGRAMS) $(TEST_HELPERS)

# Each suite prints Check's summary; the last line is the total.
check: deps
	@$(MAKE) --no-print-directory tests
	@BUILD=$(BUILD) sh tests/run.sh $(TEST_PROGRAMS)

# ---- running ------------------------------------------------------------

RUN_SOCKET ?=
run: deps
	@$(MAKE) --no-print-directory $(BUILD)/rudad
	$(BUILD)/rudad $(if $(RUN_SOCKET),--socket $(RUN_SOCKET))

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		if [ -z "$$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e lock -e partial)" ]; then \
			$$SUDO apt-get update -q || exit 1; fi; \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$missing || \
		{ $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$missing; }; \
	fi

clean:
	rm -rf $(BUILD)
