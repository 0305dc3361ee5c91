# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# make          build ./memtrail (BPF skeleton embedded)
# make deps     install the Debian packages the build and the tests need
# make test     unit tests (sanitizers), the fuzzer for FUZZ_SECONDS, integration
#               tests (root, real BPF), the arm64 build under qemu-user, and the
#               core of them on Linux 5.10 and 6.1 (x86) and 6.1 (arm64) under QEMU
# make test-kernels  that core on every supported kernel, x86 and arm64: the kernel matrix
# make bench    overhead against the untraced workloads, as ratios
# make soak     watch for an hour beside OOM kills and a storm (SOAK_SECONDS)
# make fuzz     fuzz 'memtrail report' (trail reader and renderers) for
#               FUZZ_SECONDS (300) with libFuzzer; fails on any finding
# make demo     build, then run 'memtrail demo'
# make image    the DaemonSet's container image (IMAGE, default memtrail:VERSION)
#               from Debian's packages with mmdebstrap and podman
# make arm64    cross-build build-arm64/memtrail for arm64 (make deps-arm64
#               installs Debian's gcc-aarch64-linux-gnu and :arm64 libraries)
# V=1           show the commands

.DELETE_ON_ERROR:
.SUFFIXES:

ARCH ?= $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
CC ?= gcc
CLANG ?= clang
BPFTOOL ?= bpftool
PYTHON ?= python3
NM ?= nm
STRIP ?= strip
VMLINUX_BTF ?= /sys/kernel/btf/vmlinux

OUT := build
# the binary (a cross build's goes in its own OUT)
BIN := memtrail
CFLAGS ?= -g -O2
WARNINGS := -Wall -Wextra -Werror
# user/: cmd (the commands) -> engine (BPF, targets, sessions) -> trail (the
# record and its vocabulary) -> util; render (report's outputs) -> trail, util;
# kube (Events on Pods, for watch) -> util. Each folder's sources see their
# own folder's headers and those of the folders below, no other: a header
# from above is not found (tests/layers.py says which and why)
USER_DIRS := cmd engine trail render kube util
USER_INC := $(addprefix -Iuser/,$(USER_DIRS))
SEES_cmd := cmd engine trail render kube util
SEES_engine := engine trail util
SEES_trail := trail util
SEES_render := render trail util
SEES_kube := kube util
SEES_util := util
VERSION := 0.1.0
USER_CFLAGS := $(CFLAGS) $(WARNINGS) -D_GNU_SOURCE -DMEMTRAIL_VERSION='"$(VERSION)"' -Iinclude \
	-I$(OUT) -MMD -MP
BPF_CFLAGS := -g -O2 -Wall -Werror -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) \
	-Iinclude -I$(OUT) -MMD -MP
LIBS := -lbpf -ldw -lelf -lz -ljansson -lyajl -lprotobuf-c -lmicrohttpd -lcurl -lyaml -liberty -lpthread -lm

ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

# the BPF sources (programs that share a tracepoint attach in the order
# tracer.c gives them, not in this one)
BPF_SRCS := bpf/lifecycle.bpf.c $(filter-out bpf/lifecycle.bpf.c,$(wildcard bpf/*.bpf.c))
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(OUT)/bpf/%.bpf.o,$(BPF_SRCS))
USER_SRCS := $(foreach d,$(USER_DIRS),$(wildcard user/$(d)/*.c))
USER_OBJS := $(patsubst user/%.c,$(OUT)/user/%.o,$(USER_SRCS))
SKEL := $(OUT)/memtrail.skel.h
# the same sources for kernels without BPF atomic fetch operations (5.10):
# same programs, maps and globals, so one skeleton opens either object
COMPAT_OBJS := $(patsubst bpf/%.bpf.c,$(OUT)/bpf-compat/%.bpf.o,$(BPF_SRCS))
COMPAT_SKEL := $(OUT)/memtrail_compat.skel.h

# unit tests: pure user-space modules, built again with sanitizers
UNIT_TESTS := $(patsubst tests/unit/%.c,$(OUT)/tests/unit/%,$(wildcard tests/unit/test_*.c))
UNIT_MODULES := user/engine/devspecs.c user/engine/pyline.c user/engine/gate.c user/engine/kfeatures.c user/cmd/opts.c user/trail/trail.c user/trail/trail_json.c user/trail/trail_write.c user/trail/trail_read.c user/trail/trail_check.c user/trail/trail_sites.c user/util/pidmap.c user/trail/trailstream.c user/util/outfile.c user/trail/phase.c user/trail/verdict.c user/trail/attribution.c user/util/container.c user/trail/kinds.c user/util/format.c user/util/cgroup.c user/util/proc.c \
	user/util/sanitize.c user/trail/schema.c user/util/demangle.c \
	user/render/table.c user/util/log.c user/render/topview.c user/render/html.c user/render/perfetto.c user/render/pprof.c \
	$(OUT)/profile.pb-c.c
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
WORKLOADS := $(patsubst tests/workloads/%.c,$(OUT)/workloads/%,$(wildcard tests/workloads/*.c))

# the fuzzer: report's reader and renderers, built with clang's libFuzzer
FUZZER := $(OUT)/fuzz/fuzz_report
FUZZ_MODULES := user/trail/trail.c user/trail/trail_json.c user/trail/trail_write.c user/trail/trail_read.c user/trail/trail_check.c user/trail/trail_sites.c user/util/pidmap.c user/trail/trailstream.c user/util/outfile.c user/trail/phase.c user/trail/verdict.c user/trail/attribution.c \
	user/trail/kinds.c user/util/format.c user/util/log.c user/render/table.c user/render/html.c user/render/perfetto.c user/render/pprof.c \
	user/util/sanitize.c user/trail/schema.c user/util/container.c user/util/cgroup.c user/util/proc.c \
	$(OUT)/profile.pb-c.c
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
FUZZ_SECONDS ?= 300

# stand-ins for accelerator runtimes this machine lacks, probed by name:
# -fno-ipa-icf keeps identical functions (the _ptsz twins) at addresses of their own
STANDINS := $(OUT)/standins/libcuda.so.1 $(OUT)/standins/libnrt.so.1
STANDIN_CFLAGS := -O2 -g -fPIC -shared -fno-ipa-icf $(WARNINGS)
# workloads linked against a stand-in find it beside them at run time
STANDIN_LINK = -L$(OUT)/standins -l:$(1) -Wl,-rpath,'$$ORIGIN/../standins'
CUDA_WORKLOADS := $(addprefix $(OUT)/workloads/,cuda_phases vmm static_cudart device_bench cuda_exec)
NRT_WORKLOADS := $(OUT)/workloads/nrt_phases

all: $(BIN)

$(BIN): $(USER_OBJS) $(OUT)/user/profile.pb-c.o
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(LIBS)

# the pprof format's messages, generated by protoc-c (one run makes both files)
$(OUT)/profile.pb-c.c $(OUT)/profile.pb-c.h &: user/render/profile.proto
	$(call msg,PROTOC,$@)
	$(Q)mkdir -p $(OUT)
	$(Q)protoc-c --proto_path=user/render --c_out=$(OUT) $<

$(OUT)/user/profile.pb-c.o: $(OUT)/profile.pb-c.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -I$(OUT) -c -o $@ $<

$(OUT)/user/render/pprof.o: $(OUT)/profile.pb-c.h

$(OUT)/vmlinux.h:
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)test -r $(VMLINUX_BTF) || { echo "memtrail: no kernel BTF at $(VMLINUX_BTF): the build needs a kernel with CONFIG_DEBUG_INFO_BTF=y" >&2; exit 1; }
	$(Q)$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c > $@

# whether the build kernel's headers have the task_vma iterator (6.7), read once they exist
ITER_CFLAGS = $(shell grep -qs '^struct bpf_iter_task_vma {' $(OUT)/vmlinux.h && echo -DMT_HAVE_ITER_TASK_VMA)

$(OUT)/bpf/%.bpf.o: bpf/%.bpf.c $(OUT)/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) $(ITER_CFLAGS) -c $< -o $@

# several BPF objects, statically linked into one, then one skeleton
$(OUT)/memtrail.bpf.o: $(BPF_OBJS)
	$(call msg,BPFLINK,$@)
	$(Q)$(BPFTOOL) gen object $@ $^

$(SKEL): $(OUT)/memtrail.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name memtrail_bpf > $@

$(OUT)/bpf-compat/%.bpf.o: bpf/%.bpf.c $(OUT)/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) $(ITER_CFLAGS) -DMEMTRAIL_COMPAT -c $< -o $@

$(OUT)/memtrail_compat.bpf.o: $(COMPAT_OBJS)
	$(call msg,BPFLINK,$@)
	$(Q)$(BPFTOOL) gen object $@ $^

# the compat object must lay out every map, program and global as the other
# does: the skeleton of one opens both (checked here, not found at run time)
$(COMPAT_SKEL): $(OUT)/memtrail_compat.bpf.o $(SKEL)
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name memtrail_compat_bpf > $@.tmp
	$(Q)sed -e 's/memtrail_compat_bpf/memtrail_bpf/g' -e 's/MEMTRAIL_COMPAT_BPF/MEMTRAIL_BPF/g' -e '/elf_bytes/,$$d' $@.tmp > $@.cmp
	$(Q)sed -e '/elf_bytes/,$$d' $(SKEL) | cmp -s - $@.cmp || \
		{ echo "$@: the compat object's layout differs from $(SKEL)" >&2; rm -f $@.tmp $@.cmp; exit 1; }
	$(Q)rm -f $@.cmp
	$(Q)mv $@.tmp $@

# the tracer's parts include the skeletons (tracer_int.h, tracer_load.c)
$(patsubst %,$(OUT)/user/engine/%.o,tracer tracer_load tracer_attach tracer_maps): $(SKEL) $(COMPAT_SKEL)
# the DaemonSet manifest is built into the binary (.incbin)
$(OUT)/user/cmd/daemonset.o: user/cmd/daemonset.yaml

$(OUT)/user/%.o: user/%.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(USER_CFLAGS) $(addprefix -Iuser/,$(SEES_$(firstword $(subst /, ,$*)))) -c $< -o $@

$(OUT)/tests/unit/%: tests/unit/%.c $(UNIT_MODULES) $(OUT)/profile.pb-c.h
	$(call msg,TEST,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(WARNINGS) $(SAN_FLAGS) -D_GNU_SOURCE -Iinclude $(USER_INC) -I$(OUT) -MMD -MP \
		-o $@ $< $(UNIT_MODULES) $(UNIT_EXTRA) -lcmocka -ljansson -lyajl -lbpf -lprotobuf-c -liberty -lz -lm

# the kube folder's tests take its modules and their libraries
KUBE_MODULES := user/kube/kubeconfig.c user/kube/kube_events.c
$(OUT)/tests/unit/test_kube: $(KUBE_MODULES)
$(OUT)/tests/unit/test_kube: private UNIT_EXTRA := $(KUBE_MODULES) -lcurl -lyaml -lpthread

# one compiler run of many sources: every header is a prerequisite
$(FUZZER): tests/fuzz/fuzz_report.c $(FUZZ_MODULES) $(OUT)/profile.pb-c.h $(wildcard user/*/*.h include/*.h)
	$(call msg,FUZZER,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(FUZZ_FLAGS) $(WARNINGS) -D_GNU_SOURCE -Iinclude $(USER_INC) -I$(OUT) \
		-o $@ $< $(FUZZ_MODULES) -ljansson -lyajl -lprotobuf-c -lbpf -lz -lm

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
$(OUT)/workloads/heap_grow: private CFLAGS_EXTRA := -fno-omit-frame-pointer
$(OUT)/workloads/sites: private POSTLINK = $(STRIP) -o $@_stripped $@

# a library the unload workload maps memory from, then unloads
PLUGIN := $(OUT)/workloads/lib/libplugin.so
$(PLUGIN): tests/workloads/lib/plugin.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O1 -g -fPIC -shared -fno-omit-frame-pointer $(WARNINGS) -o $@ $<
$(OUT)/workloads/unload: private CFLAGS_EXTRA := -fno-omit-frame-pointer
$(OUT)/workloads/stacks: private CFLAGS_EXTRA := -fno-omit-frame-pointer -fno-optimize-sibling-calls
$(OUT)/workloads/unload: | $(PLUGIN)

# chains without frame pointers (--unwind dwarf), one through a dlopen()ed library
DEEPLIB := $(OUT)/workloads/lib/libdeeplib.so
$(DEEPLIB): tests/workloads/lib/deeplib.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -fPIC -shared -fomit-frame-pointer $(WARNINGS) -o $@ $<
$(OUT)/workloads/deep: private CFLAGS_EXTRA := -O2 -fomit-frame-pointer
$(OUT)/workloads/deep: | $(DEEPLIB)
$(OUT)/workloads/deepxx: tests/workloads/deepxx.cc
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) -O2 -g -fomit-frame-pointer -Wall -Wextra -Werror -o $@ $< -lpthread

# nvcc's static cudart leaves cudaMalloc and friends as local symbols of the
# executable: check that they are, under their exact names (no clones)
$(OUT)/workloads/static_cudart: private POSTLINK = for s in cudaMalloc cudaFree cudaMallocHost cudaFreeHost; do \
		$(NM) $@ | grep -q " t $$s$$" && ! $(NM) $@ | grep -q " $$s\." && \
		! $(NM) -D $@ 2>/dev/null | grep -q " $$s$$" || \
		{ echo "$@: $$s is not a local symbol of its own name" >&2; exit 1; }; done

deps:
	$(Q)sh tests/deps.sh

deps-arm64:
	$(Q)sh tests/deps.sh arm64

# arm64 in its own OUT: Debian's cross gcc and :arm64 libraries; vmlinux.h from
# the BTF of Debian 12's 6.1 arm64 kernel (this machine's own BTF is its arch's)
ARM64_OUT := build-arm64
ARM64_CROSS ?= aarch64-linux-gnu-

$(ARM64_OUT)/vmlinux.btf:
	$(call msg,BTF,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(PYTHON) tests/kernels/headers.py --btf arm64 $@

# memtrail and the test workloads (and stand-ins) the arm64 guests run
arm64: $(ARM64_OUT)/vmlinux.btf
	$(Q)$(MAKE) --no-print-directory OUT=$(ARM64_OUT) BIN=$(ARM64_OUT)/memtrail ARCH=arm64 \
		CC=$(ARM64_CROSS)gcc CXX=$(ARM64_CROSS)g++ NM=$(ARM64_CROSS)nm STRIP=$(ARM64_CROSS)strip \
		VMLINUX_BTF=$(ARM64_OUT)/vmlinux.btf $(ARM64_OUT)/memtrail workloads

# the DaemonSet's image from this checkout and Debian's packages only (no base
# image from a registry): mmdebstrap unpacks the libraries memtrail links
# against, of this machine's Debian suite and from its apt sources, with dash
# and ldconfig (device runtimes are found with ldconfig -p); podman imports it
# as IMAGE, the name 'memtrail daemonset' gives by default
IMAGE ?= memtrail:$(VERSION)
IMAGE_SUITE ?= $(shell . /etc/os-release 2>/dev/null && echo $$VERSION_CODENAME)
IMAGE_PKGS := libc6,libbpf1,libdw1,libelf1,zlib1g,libjansson4,libyajl2,libprotobuf-c1,libmicrohttpd12,libcurl4,libyaml-0-2,libc-bin,dash
APT_SOURCES = $(firstword $(wildcard /etc/apt/sources.list.d/*.sources /etc/apt/sources.list))
image: $(BIN)
	$(Q)sh tests/deps.sh image
	$(call msg,IMAGE,$(IMAGE))
	$(Q)mkdir -p $(OUT)/image
	$(Q)$(STRIP) -o $(OUT)/image/memtrail $(BIN)
	$(Q)rm -f $(OUT)/image/rootfs.tar
	$(Q)mmdebstrap --quiet --variant=extract --format=tar --include=$(IMAGE_PKGS) \
		--dpkgopt='path-exclude=/usr/share/*' \
		--dpkgopt='path-exclude=/usr/lib/*/gconv/*' \
		--extract-hook='install -D -m 0755 $(CURDIR)/$(OUT)/image/memtrail "$$1/usr/bin/memtrail"' \
		--extract-hook='mkdir -p -m 1777 "$$1/tmp"; rm -f "$$1"/etc/apt/sources.list.d/*' \
		$(IMAGE_SUITE) $(OUT)/image/rootfs.tar $(APT_SOURCES)
	$(Q)podman import --quiet --change 'CMD ["/usr/bin/memtrail","--help"]' \
		$(OUT)/image/rootfs.tar $(IMAGE) >/dev/null
	$(Q)rm -f $(OUT)/image/rootfs.tar
	@podman image inspect --format '{{.Size}}' $(IMAGE) | \
		awk '{ printf "memtrail: image $(IMAGE): %.1f MB\n", $$1 / 1e6 }'

# NVIDIA's real libcuda.so.1 and libcudart from Debian non-free, and trixie's Python 3.13 root, for the tests
vendor:
	$(Q)$(PYTHON) tests/vendor.py

# the same for arm64 (build-arm64/vendor), for the kernel matrix's arm64 rows
vendor-arm64:
	$(Q)$(PYTHON) tests/vendor.py --arch arm64

unit: $(UNIT_TESTS)
	$(Q)for t in $(UNIT_TESTS); do $$t || exit 1; done

integration: memtrail $(WORKLOADS)
	$(Q)$(PYTHON) tests/integration/run.py

test: deps deps-arm64
	$(Q)$(MAKE) --no-print-directory all unit-build workloads fuzz-build vendor arm64 vendor-arm64
	$(Q)FUZZ_SECONDS=$(FUZZ_SECONDS) $(PYTHON) tests/run_all.py $(UNIT_TESTS)

# KERNELS="6.1 arm64-16k": only those (x86: 5.10 6.1 6.12 6.17 7.x; arm64: arm64-6.1
# arm64-6.12 arm64-7.x arm64-16k); the matrix also goes to build/kernel-matrix.md
test-kernels: deps deps-arm64
	$(Q)$(MAKE) --no-print-directory all workloads vendor arm64 vendor-arm64
	$(Q)$(PYTHON) tests/kernels/run.py --markdown $(OUT)/kernel-matrix.md $(KERNELS)

unit-build: $(UNIT_TESTS)
fuzz-build: $(FUZZER)
workloads: $(WORKLOADS) $(STANDINS) $(PLUGIN) $(OUT)/workloads/deepxx

# on a copy of tests/fuzz/corpus in $(OUT)/fuzz: the tree gets no new inputs
fuzz: $(FUZZER)
	$(Q)$(PYTHON) tests/fuzz/run.py --seconds $(FUZZ_SECONDS) $(FUZZER)

# the benchmark's floor: counting uprobes on malloc and free, nothing else
$(OUT)/bench/floor.bpf.o: tests/bench/floor.bpf.c $(OUT)/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUT)/bench/floor.skel.h: $(OUT)/bench/floor.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name floor_bpf > $@

$(OUT)/bench/floor: tests/bench/floor.c $(OUT)/bench/floor.skel.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(WARNINGS) -I$(OUT)/bench -o $@ $< -lbpf

bench: memtrail $(WORKLOADS) $(OUT)/bench/floor
	$(Q)$(PYTHON) tests/bench/bench.py

# watch for SOAK_SECONDS (3600) beside an OOM kill every 30 s and a process
# storm: every kill gets its files, memory and descriptors stay flat
soak: memtrail $(WORKLOADS)
	$(Q)$(PYTHON) tests/bench/soak.py

# BPF cost per event with 2 and 64 CPUs, in a guest kernel (KERNEL=6.17)
bench-cpus: deps
	$(Q)$(MAKE) --no-print-directory all workloads
	$(Q)$(PYTHON) tests/bench/cpus.py

demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)./memtrail demo

clean:
	$(call msg,CLEAN,$(OUT) $(BIN) $(ARM64_OUT))
	$(Q)rm -rf $(OUT) $(BIN) $(ARM64_OUT)

.PHONY: all arm64 image deps deps-arm64 vendor vendor-arm64 unit integration test test-kernels unit-build fuzz-build fuzz workloads bench \
	bench-cpus demo clean

-include $(USER_OBJS:.o=.d) $(BPF_OBJS:.o=.d) $(COMPAT_OBJS:.o=.d) $(UNIT_TESTS:=.d) $(WORKLOADS:=.d)
