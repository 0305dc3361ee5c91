# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# make          build ./memtrail (BPF skeleton embedded)
# make deps     install the Debian packages the build and the tests need
# make test     unit tests (sanitizers) and integration tests (root, real BPF)
# make bench    overhead against the untraced workloads, as ratios
# make demo     build, then run 'memtrail demo'
# V=1           show the commands

.DELETE_ON_ERROR:
.SUFFIXES:

ARCH ?= $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
CC ?= gcc
CLANG ?= clang
BPFTOOL ?= bpftool
PYTHON ?= python3
NM ?= nm
VMLINUX_BTF ?= /sys/kernel/btf/vmlinux

OUT := build
CFLAGS ?= -g -O2
WARNINGS := -Wall -Wextra -Werror
USER_CFLAGS := $(CFLAGS) $(WARNINGS) -D_GNU_SOURCE -Iinclude -I$(OUT) -MMD -MP
BPF_CFLAGS := -g -O2 -Wall -Werror -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) \
	-Iinclude -I$(OUT) -MMD -MP
LIBS := -lbpf -ldw -lelf -lz -ljansson

ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(OUT)/bpf/%.bpf.o,$(BPF_SRCS))
USER_SRCS := $(wildcard user/*.c)
USER_OBJS := $(patsubst user/%.c,$(OUT)/user/%.o,$(USER_SRCS))
SKEL := $(OUT)/memtrail.skel.h

# unit tests: pure user-space modules, built again with sanitizers
UNIT_TESTS := $(patsubst tests/unit/%.c,$(OUT)/tests/unit/%,$(wildcard tests/unit/test_*.c))
UNIT_MODULES := user/trail.c user/phase.c user/verdict.c user/container.c user/kinds.c user/format.c user/cgroup.c user/proc.c \
	user/table.c user/log.c
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
WORKLOADS := $(patsubst tests/workloads/%.c,$(OUT)/workloads/%,$(wildcard tests/workloads/*.c))

# stand-ins for accelerator runtimes this machine lacks, probed by name:
# -fno-ipa-icf keeps identical functions (the _ptsz twins) at addresses of their own
STANDINS := $(OUT)/standins/libcuda.so.1 $(OUT)/standins/libnrt.so.1
STANDIN_CFLAGS := -O2 -g -fPIC -shared -fno-ipa-icf $(WARNINGS)
# workloads linked against a stand-in find it beside them at run time
STANDIN_LINK = -L$(OUT)/standins -l:$(1) -Wl,-rpath,'$$ORIGIN/../standins'
CUDA_WORKLOADS := $(addprefix $(OUT)/workloads/,cuda_phases vmm static_cudart device_bench)
NRT_WORKLOADS := $(OUT)/workloads/nrt_phases

all: memtrail

memtrail: $(USER_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(LIBS)

$(OUT)/vmlinux.h:
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)test -r $(VMLINUX_BTF) || { echo "memtrail: no kernel BTF at $(VMLINUX_BTF): the build needs a kernel with CONFIG_DEBUG_INFO_BTF=y" >&2; exit 1; }
	$(Q)$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c > $@

$(OUT)/bpf/%.bpf.o: bpf/%.bpf.c $(OUT)/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

# several BPF objects, statically linked into one, then one skeleton
$(OUT)/memtrail.bpf.o: $(BPF_OBJS)
	$(call msg,BPFLINK,$@)
	$(Q)$(BPFTOOL) gen object $@ $^

$(SKEL): $(OUT)/memtrail.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name memtrail_bpf > $@

$(OUT)/user/tracer.o: $(SKEL)

$(OUT)/user/%.o: user/%.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(USER_CFLAGS) -c $< -o $@

$(OUT)/tests/unit/%: tests/unit/%.c $(UNIT_MODULES)
	$(call msg,TEST,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(WARNINGS) $(SAN_FLAGS) -D_GNU_SOURCE -Iinclude -Iuser -MMD -MP \
		-o $@ $< $(UNIT_MODULES) -lcmocka -ljansson -lbpf

$(OUT)/workloads/%: tests/workloads/%.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O1 -g -Wall -Wextra -Werror -D_GNU_SOURCE -Iinclude -MMD -MP $(CFLAGS_EXTRA) \
		-o $@ $< -lpthread -ldl $(LDLIBS_EXTRA)
	$(if $(POSTLINK),$(Q)$(POSTLINK))

$(OUT)/standins/lib%.so.1: tests/standins/%.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(STANDIN_CFLAGS) -Wl,-soname,$(@F) -o $@ $<

$(CUDA_WORKLOADS): private LDLIBS_EXTRA := $(call STANDIN_LINK,libcuda.so.1)
$(CUDA_WORKLOADS): $(OUT)/standins/libcuda.so.1
$(NRT_WORKLOADS): private LDLIBS_EXTRA := $(call STANDIN_LINK,libnrt.so.1)
$(NRT_WORKLOADS): $(OUT)/standins/libnrt.so.1
# dlopen_late opens the stand-in by a path given at run time
$(OUT)/workloads/dlopen_late: | $(OUT)/standins/libcuda.so.1

# allocation sites: frame pointers, as profiled services are built; and a
# stripped copy (no .symtab, no DWARF) for the tests of honest [unknown] frames
$(OUT)/workloads/sites: private CFLAGS_EXTRA := -fno-omit-frame-pointer
$(OUT)/workloads/sites: private POSTLINK = strip -o $@_stripped $@

# nvcc's static cudart leaves cudaMalloc and friends as local symbols of the
# executable: check that they are, under their exact names (no clones)
$(OUT)/workloads/static_cudart: private POSTLINK = for s in cudaMalloc cudaFree cudaMallocHost cudaFreeHost; do \
		$(NM) $@ | grep -q " t $$s$$" && ! $(NM) $@ | grep -q " $$s\." && \
		! $(NM) -D $@ 2>/dev/null | grep -q " $$s$$" || \
		{ echo "$@: $$s is not a local symbol of its own name" >&2; exit 1; }; done

deps:
	$(Q)sh tests/deps.sh

unit: $(UNIT_TESTS)
	$(Q)for t in $(UNIT_TESTS); do $$t || exit 1; done

integration: memtrail $(WORKLOADS)
	$(Q)$(PYTHON) tests/integration/run.py

test: deps
	$(Q)$(MAKE) --no-print-directory all unit-build workloads
	$(Q)$(PYTHON) tests/run_all.py $(UNIT_TESTS)

unit-build: $(UNIT_TESTS)
workloads: $(WORKLOADS) $(STANDINS)

bench: memtrail $(WORKLOADS)
	$(Q)$(PYTHON) tests/bench/bench.py

demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)./memtrail demo

clean:
	$(call msg,CLEAN,$(OUT) memtrail)
	$(Q)rm -rf $(OUT) memtrail

.PHONY: all deps unit integration test unit-build workloads bench demo clean

-include $(USER_OBJS:.o=.d) $(BPF_OBJS:.o=.d) $(UNIT_TESTS:=.d) $(WORKLOADS:=.d)
