# SPDX-License-Identifier: GPL-2.0
# rnvme-rdma: top-level targets. `make help` lists them.

# `make` builds rnvme_rdma.ko for the running kernel (KVER=<release> for another installed kernel):
# from its headers, its linux-source package and its toolchain (scripts/distro-build,
# Documentation/distro-kernels.rst), the equivalent of `make -C /lib/modules/$(uname -r)/build
# M=$PWD` for kernels whose headers lack the Rust metadata. KDIR=<build tree>: directly against that
# Rust-enabled kernel build tree (built with LLVM=1). `make reference`: against the project's
# reference kernel in its build root (what the tests load).
SHELL := /bin/bash
KDIR ?=
FLAVOUR ?= debug
LLVM ?= 1

.PHONY: bench-scale bench-soak bench-insns misbehave blktests all modules reference bench check check-full check-cold demo help host-test lint fmt vm kernel buildroot clean \
	install uninstall dkms dkms-uninstall debian-check

all: modules

# KVER: the installed kernel to build and install for (default: the running one).
KVER ?= $(shell uname -r)
# Where install puts things (DESTDIR: a staging directory; depmod runs only without one).
MODDIR = $(DESTDIR)/lib/modules/$(KVER)/updates
ALIAS = $(DESTDIR)/etc/modprobe.d/rnvme-rdma.conf
DKMS_VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' dkms.conf)
DKMS_SRC = $(DESTDIR)/usr/src/rnvme-rdma-$(DKMS_VERSION)

ifneq ($(KDIR),)
# Objects and bindings built against another configuration of a kernel tree are not reused (kbuild
# does not see an external module's kernel-option dependencies; scripts/module-build says why).
modules:
	@s=$$(cat $(KDIR)/include/config/auto.conf | sha256sum | cut -c1-16); \
	if [ "$$(cat .rnvme-kernel 2>/dev/null)" != "$$s" ]; then \
		$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) clean >/dev/null; rm -f rust/bindings/generated.rs; \
		echo "$$s" >.rnvme-kernel; fi
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) modules
install:
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) modules_install
	install -D -m 0644 scripts/rnvme-rdma.conf $(ALIAS)
clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) clean
	rm -f rust/bindings/generated.rs .rnvme-kernel
else
# A refusal (a kernel the policy does not serve) is one line; RNVME_HINT adds the way out.
modules:
	@RNVME_HINT="make reference builds it against the project's reference kernel instead" \
		scripts/distro-build -k $(KVER) -o .
install:
	@[ -f rnvme_rdma.ko ] || { echo "rnvme-rdma: no rnvme_rdma.ko: run make KVER=$(KVER) first"; exit 1; }
	@m=$$(/sbin/modinfo -F vermagic ./rnvme_rdma.ko 2>/dev/null); case "$$m" in "$(KVER) "*) ;; \
		*) echo "rnvme-rdma: rnvme_rdma.ko is built for '$${m%% *}', not $(KVER): run make KVER=$(KVER) first"; exit 1;; esac
	install -D -m 0644 rnvme_rdma.ko $(MODDIR)/rnvme_rdma.ko
	install -D -m 0644 scripts/rnvme-rdma.conf $(ALIAS)
	@if [ -z "$(DESTDIR)" ]; then depmod -a $(KVER); fi
	@echo "rnvme-rdma: installed $(MODDIR)/rnvme_rdma.ko and $(ALIAS) (nvme-rdma loads rnvme_rdma on $(KVER), the C nvme_rdma on a kernel without it)"
uninstall:
	rm -f $(MODDIR)/rnvme_rdma.ko $(ALIAS)
	@if [ -z "$(DESTDIR)" ]; then depmod -a $(KVER); fi
	@echo "rnvme-rdma: removed; nvme-rdma loads the C nvme_rdma again (rmmod rnvme_rdma if it is loaded)"
clean:
	rm -f rnvme_rdma.ko
endif

# The project's reference kernel (FLAVOUR=debug|release), in its build root: the tests' build.
reference:
	@ko=$$(scripts/module-build $(FLAVOUR)) && cp "$$ko" rnvme_rdma.ko && echo "built rnvme_rdma.ko (against the $(FLAVOUR) reference kernel)"

# DKMS: this tree's sources as /usr/src/rnvme-rdma-<version>, built and installed for KVER (default:
# the running kernel) and rebuilt by dkms on every kernel update; plus the modprobe.d rule (scripts/rnvme-rdma.conf).
dkms:
	rm -rf $(DKMS_SRC)
	install -d $(DKMS_SRC)/scripts
	cp -r Kbuild Makefile dkms.conf rust $(DKMS_SRC)/
	install -m 0755 scripts/distro-build $(DKMS_SRC)/scripts/
	install -m 0644 scripts/rnvme-rdma.conf $(DKMS_SRC)/scripts/
	@if dkms status rnvme-rdma/$(DKMS_VERSION) 2>/dev/null | grep -q .; then dkms remove rnvme-rdma/$(DKMS_VERSION) --all; fi
	dkms add rnvme-rdma/$(DKMS_VERSION)
	dkms build rnvme-rdma/$(DKMS_VERSION) -k $(KVER)
	dkms install rnvme-rdma/$(DKMS_VERSION) -k $(KVER)
	install -D -m 0644 scripts/rnvme-rdma.conf $(ALIAS)
	@echo "rnvme-rdma: installed with dkms (rebuilt on kernel updates) and $(ALIAS) (nvme-rdma loads rnvme_rdma where a kernel has it, the C nvme_rdma elsewhere)"
dkms-uninstall:
	@if dkms status rnvme-rdma/$(DKMS_VERSION) 2>/dev/null | grep -q .; then dkms remove rnvme-rdma/$(DKMS_VERSION) --all; fi
	rm -rf $(DKMS_SRC) $(ALIAS)
	@echo "rnvme-rdma: removed from dkms; nvme-rdma loads the C nvme_rdma again (rmmod rnvme_rdma if it is loaded)"

check:
	@tools/check

check-full:
	@RNVME_CHECK_TIER=full tools/check

check-cold:
	@tools/check-cold

debian-check:
	@tools/debian-check

# make bench [BENCH="--quick rounds=5 fabrics=rxe ..."]: C vs rnvme_rdma, report under bench-results/.
bench:
	@tools/bench $(BENCH)

# make bench-scale [SCALE="--quick rounds=4 queues='1 2 4' ..."]: scale figures, C vs rnvme_rdma.
bench-scale:
	@tools/bench-scale $(SCALE)

# make bench-insns [INSNS="rounds=2 fabrics=rxe ..."]: exact instructions per I/O, C vs rnvme_rdma.
bench-insns:
	@tools/bench-insns $(INSNS)

# make bench-soak [SOAK_MIN=120] [SOAK="--cpus 4 ..."]: the long scale run (opt-in, hours).
SOAK_MIN ?= 120
bench-soak:
	@tools/bench-scale rounds=1 queues= depths= ioqueues= cycles=1000 resets=1000 reset_gap=0.2 \
		ctrls="1 8 16 32" soak=$(SOAK_MIN) $(SOAK)

demo:
	@tools/demo $(FLAVOUR)

# make misbehave [MISBEHAVE="c-all=yes only=..."]: the misbehaving target against both drivers.
misbehave:
	@scripts/vm-run --timeout 2700 --results "$${RNVME_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/rnvme-rdma}/misbehave" \
		tools/guest/suite.sh misbehave driver=rnvme,c fabrics=rxe $(MISBEHAVE)

# make blktests [BLKTESTS="--fabrics rxe --tests 'nvme/004 nvme/029'"]: the upstream peer suite.
blktests:
	@tools/blktests $(BLKTESTS)

host-test:
	@. scripts/lib.sh && in_root --bind "$$RNVME_TOP" /mnt/project -- sh -c \
		'rustc --edition=2021 --test -o /tmp/rnvme-host-tests /mnt/project/tools/host-tests/main.rs && /tmp/rnvme-host-tests'

lint:
	@scripts/module-build $(FLAVOUR) CLIPPY=1 >/dev/null && tools/lint-unsafe && tools/lint-layers && tools/lint-history && echo "clippy, unsafe policy, layers and history lint: clean"

fmt:
	@. scripts/lib.sh && k=$$(scripts/kernel $(FLAVOUR)) && \
		in_root --bind "$$RNVME_TOP" /mnt/project -- sh -c "cd /mnt/project && \
		rustfmt --edition 2021 --config-path $${k#"$$ROOT"}/source/.rustfmt.toml rust/rnvme.rs tools/host-tests/main.rs"

# make vm SCRIPT=path [ARGS="..."]: run a script in a guest (see scripts/vm-run --help).
vm:
	@scripts/vm-run --flavour $(FLAVOUR) $(SCRIPT) $(ARGS)

kernel:
	@scripts/kernel $(FLAVOUR)

buildroot:
	@scripts/buildroot

help:
	@echo "rnvme-rdma: NVMe over Fabrics RDMA host transport in Rust"
	@echo
	@echo "Installing (Documentation/distro-kernels.rst):"
	@echo "  make               build rnvme_rdma.ko for the running kernel (KVER=R: for installed kernel R)"
	@echo "                     from its headers, linux-source-<series> and rustc; Debian 7.2.y and 7.3.y;"
	@echo "                     refuses a kernel it cannot serve in one line (KDIR=/path: a build tree)"
	@echo "  make install       the module under /lib/modules/<KVER>/updates, depmod, and the modprobe.d"
	@echo "                     rule: nvme-rdma loads rnvme_rdma where a kernel has it, the C nvme_rdma"
	@echo "                     elsewhere; make uninstall reverses it"
	@echo "  make dkms          dkms add/build/install for KVER (default: the running kernel) + the rule;"
	@echo "                     rebuilt by dkms on kernel updates; make dkms-uninstall goes back to C"
	@echo
	@echo "Developing and testing (the project's build root and reference kernel):"
	@echo "  make reference     build rnvme_rdma.ko against the reference kernel (FLAVOUR=debug|release)"
	@echo "  make demo          build what is missing, boot the reference kernel in QEMU and run the"
	@echo "                     connect / I/O / disconnect flow through rnvme_rdma (FLAVOUR=debug|release)"
	@echo "  make check         build everything and run the check tier of the test suite, CI's gate (TAP;"
	@echo "                     ends 'N passed, N failed'): every group on at least one fabric, both where the"
	@echo "                     fabric decides, every crash and hang reproducer, 2 blktests tests over siw, the"
	@echo "                     two-guest wire group, Debian's kernels; results, timings and summary.md in"
	@echo "                     \$$RNVME_CACHE/check (Documentation/testing.rst, \"Tiers\")"
	@echo "  make check-full    the same with every test (RNVME_CHECK_TIER=full): 9 blktests tests, every"
	@echo "                     misbehaviour, every wire scenario; with either, RNVME_CHECK_FABRICS=all runs"
	@echo "                     every test on both fabrics, RNVME_CHECK_WIRE=all every wire scenario on both,"
	@echo "                     RNVME_CHECK_BLKTESTS=0 and RNVME_CHECK_PAIR_GROUPS='' skip those phases,"
	@echo "                     RNVME_CHECK_TARGET=release boots the wire target on the release kernel,"
	@echo "                     RNVME_CHECK_GROUPS='module datapath_quick' picks groups, RNVME_CHECK_CYCLES=N"
	@echo "                     sets the module load/unload cycles (25), RNVME_CHECK_SELFTESTS=always reruns"
	@echo "                     cached vm-run self-tests"
	@echo "  make check-cold    a fresh machine's path from an empty cache: build root, debug kernel, first"
	@echo "                     guest (make demo), with times and disk use (RNVME_COLD_FULL=1: then the whole check)"
	@echo "  make bench         C nvme_rdma vs rnvme_rdma in one boot of the release kernel, alternating"
	@echo "                     rounds, the guest's clock counting instructions (~30 min; 2 rounds on rxe"
	@echo "                     with 30 s profiles took 14 min on 2026-12-06 at b77d11c): report.md with a"
	@echo "                     per-module profile and call chains (perf), the raw-verbs ceiling"
	@echo "                     (perftest), ratios.png under bench-results/ (BENCH='--quick' for a"
	@echo "                     smoke run; BENCH='rounds=6 fabrics=rxe runtime=10', --wallclock, --flavour debug)"
	@echo "  make bench-scale   scale figures, C nvme_rdma vs rnvme_rdma in one boot of the release kernel"
	@echo "                     (8 vCPUs, icount): connect/disconnect time and memory for 1-16 I/O queues,"
	@echo "                     100 connect/disconnect cycles, 20 resets under I/O, 1-8 controllers under"
	@echo "                     I/O, CPU per I/O and latency by queue depth (1-64) and loaded queue count"
	@echo "                     (1-8); report.md and a plot per family under bench-results/"
	@echo "                     (SCALE='--quick' for a smoke run)"
	@echo "  make bench-insns   the instructions each driver executes in its own module per I/O, counted"
	@echo "                     exactly by QEMU (TCG plugin tools/insncount) in one boot of the release"
	@echo "                     kernel, by module and symbol, rxe and siw (~4 min; INSNS='fabrics=rxe');"
	@echo "                     per instruction: tools/insns-annotate bench-results/<run>"
	@echo "  make bench-soak    the long run, opt-in: one round of 1,000 connect/disconnect cycles, 1,000"
	@echo "                     resets under I/O, 1-32 controllers under I/O, then SOAK_MIN (default 120)"
	@echo "                     minutes per driver of checked writes (fio verify) with a reset each minute;"
	@echo "                     C vs rnvme_rdma in one boot; with SOAK='--cpus 4' on 2 cores ~2.3 x SOAK_MIN"
	@echo "                     + ~55 min of wall time (Documentation/benchmarks/index.rst)"
	@echo "  make misbehave     the misbehaving target (tools/guest/badtarget.py, rxe) against rnvme_rdma and"
	@echo "                     the C nvme_rdma in one boot of the debug kernel: one bt-result line per"
	@echo "                     behaviour and driver (~15 min; make check-full runs rnvme_rdma's half);"
	@echo "                     MISBEHAVE='c-all=yes' also runs C where it oopses or hangs"
	@echo "  make blktests      blktests' nvme group (../shared/peer/blktests, or RNVME_BLKTESTS) over rdma"
	@echo "                     with rnvme_rdma and the C nvme_rdma, one driver per boot, each test starting"
	@echo "                     with lockdep on (rxe, siw; opt-in, hours on 2 cores; make check runs 2 of its"
	@echo "                     tests with rnvme_rdma on siw, make check-full 9): summary.md in"
	@echo "                     \$$RNVME_CACHE/blktests, one row per test; exits 1 when rnvme_rdma fails a row"
	@echo "                     C passes, or one both fail that tools/blktests-known does not list;"
	@echo "                     BLKTESTS='--fabrics rxe --tests \"nvme/004 nvme/029\"' for a part of it,"
	@echo "                     '--drivers c' one driver, '--timed 60' blktests' TIMEOUT for its fio tests,"
	@echo "                     '--continue' runs only the tests the cache has no result for (goes on after"
	@echo "                     an interrupted run), '--io-timeout S' nvme_core's I/O timeout for both"
	@echo "                     drivers (default 120; 0: the kernel's 30)"

	@echo "  make debian-check  Debian's own 7.3 and 7.2 kernels end to end: a Debian host root (README's"
	@echo "                     packages), the version policy, install, DKMS, 7.2 installed as an update,"
	@echo "                     a guest per kernel, one of a kernel without the module (the C driver"
	@echo "                     serves); part of make check; ~3 min warm, ~7 min cold after the root"
	@echo "  make lint          kernel Rust lints with CLIPPY=1, the unsafe policy check, the history lint"
	@echo "  make host-test     host unit tests of the pure code"
	@echo "  make fmt           rustfmt the sources with the kernel's .rustfmt.toml"
	@echo "  make vm SCRIPT=f   run a script as root in a guest (ARGS=..., FLAVOUR=...)"
	@echo "  make kernel        build the reference kernel (FLAVOUR=debug|release)"
	@echo "  make buildroot     create the Debian trixie build root"
	@echo
	@echo "Caches live in \$${RNVME_CACHE:-\$${XDG_CACHE_HOME:-~/.cache}/rnvme-rdma}."
