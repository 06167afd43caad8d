#!/bin/bash
# The in-guest test suite of `make check`: one boot of the debug kernel runs every group below.
# Usage (under scripts/vm-run):
#   suite.sh [GROUP...] [driver=rnvme|c|rnvme,c] [fabrics=rxe,siw] [cycles=N] [only=TEXT|...]
#            [split=yes|no] [wire=split|all] [tier=check|full]
#   groups: harness module (the default), datapath and datapath_quick (tools/guest/datapath.sh,
#   lifecycle.sh), lifecycle (tools/guest/lifecycle.sh), faults (faults.sh), bench (bench.sh: the
#   benchmark's quick mode as a smoke test), wire (wire.sh: only in the host guest of
#   `vm-run --pair`), misbehave (misbehave.sh: the misbehaving target badtarget.py; opt-in, in
#   development). driver= and fabrics= set HOST_DRIVER and
#   DP_FABRICS for the whole run (vm-run passes arguments, not the environment); `suite.sh
#   datapath driver=rnvme,c` runs the datapath group with each driver. cycles=: module
#   load/unload cycles (100). only=TEXT|... (development): run only the tests whose name has one of the TEXTs.
#   c-all=yes: misbehave runs the C control also where it oopses the kernel or hangs (noc);
#   bt-verbose=yes: badtarget logs every command (shown when a test fails).
#   split=: in datapath, lifecycle and faults, the tests the fabric does not decide on one fabric
#   each (yes) or on every fabric (no, the default; lib.sh on_fabric).
#   wire=: the wire group's scenarios on every fabric (all, the default) or each on one (split;
#   make check's default, see wire.sh WIRE_MODE).
#   tier=: the check tier (make check) or every test (full, the default; lib.sh full_tier).
. "$RNVME_PROJECT/tools/guest/lib.sh"
. "$RNVME_PROJECT/tools/guest/datapath.sh"
. "$RNVME_PROJECT/tools/guest/lifecycle.sh"
. "$RNVME_PROJECT/tools/guest/faults.sh"
. "$RNVME_PROJECT/tools/guest/bench.sh"
. "$RNVME_PROJECT/tools/guest/wire.sh"
. "$RNVME_PROJECT/tools/guest/misbehave.sh"
: >"$TAP_FILE"

# ---------------------------------------------------------------- harness
t_debug_config() {
	local o cfg; cfg=$(zcat /proc/config.gz) || return 1
	for o in CONFIG_KASAN=y CONFIG_PROVE_LOCKING=y CONFIG_DEBUG_KMEMLEAK=y CONFIG_DEBUG_ATOMIC_SLEEP=y \
		CONFIG_RUST=y CONFIG_KUNIT=y CONFIG_RUST_DEBUG_ASSERTIONS=y CONFIG_FAULT_INJECTION_DEBUG_FS=y \
		CONFIG_FAIL_MAKE_REQUEST=y CONFIG_FAIL_IO_TIMEOUT=y CONFIG_NVME_RDMA=m CONFIG_NVME_TARGET_RDMA=m \
		CONFIG_RDMA_RXE=m CONFIG_RDMA_SIW=m CONFIG_NVME_MULTIPATH=y; do
		grep -qx "$o" <<<"$cfg" || { fail "$o missing from /proc/config.gz"; return 1; }
	done
	# (a disabled kmemleak still has a writable debugfs file: its log lines tell; vm-run also
	# requires the final scans to be accepted)
	local klog; klog=$(dmesg)
	grep -q 'kmemleak: Kernel memory leak detector initialized' <<<"$klog" &&
		! grep -q 'kmemleak: Kernel memory leak detector disabled' <<<"$klog" || { fail "kmemleak is not active"; return 1; }
	grep -qE '^ *debug_locks: *1' /proc/lockdep_stats || { fail "lockdep is off"; return 1; }
	info "KASAN, lockdep, kmemleak on; kernel $(uname -r)"
}

# t_modprobe_alias: nvme-rdma runs scripts/rnvme-rdma.conf's install rule, which loads
# rnvme_rdma, found in this kernel's tree (extra/, module-build).
t_modprobe_alias() {
	local r
	r=$(modprobe -n -v nvme-rdma 2>&1) || { fail "modprobe -n nvme-rdma: $r"; return 1; }
	grep -q '^install .*/sbin/modprobe --ignore-install rnvme_rdma' <<<"$r" || { fail "nvme-rdma does not run the rnvme_rdma install rule: $r"; return 1; }
	r=$(modprobe -n -v rnvme_rdma 2>&1) || { fail "modprobe -n rnvme_rdma: $r"; return 1; }
	info "modprobe nvme-rdma -> the install rule -> $(tail -n 1 <<<"$r")"
	grep -q 'extra/rnvme_rdma.ko' <<<"$r" || { fail "rnvme_rdma does not resolve to extra/rnvme_rdma.ko: $r"; return 1; }
	[ -f "/lib/modules/$(uname -r)/kernel/drivers/nvme/host/nvme-rdma.ko" ] || { fail "the C nvme-rdma.ko is not installed"; return 1; }
}

t_fabric() {
	local f=$1 dev
	dev=$(fabric_up "$f") || return 1
	dmesg_mark
	target_port_up "$f" || return 1
	# nvmet-rdma logs the port once its rdma_cm id listens.
	wait_for 10 sh -c "dmesg | grep -q 'enabling port ${FABRIC_PORT_ID[$f]} ($(fabric_addr "$f"):$TRSVCID)'" ||
		{ fail "nvmet-rdma did not enable port ${FABRIC_PORT_ID[$f]}"; return 1; }
	info "$dev up, nvmet-rdma listening on $(fabric_addr "$f"):$TRSVCID"
}

t_c_driver_connects() {
	local f=$1 nqn=nqn.2026-11.io.rnvme:harness-$1 c ns
	load_c_driver || return 1
	target_subsys_add "$nqn" mem:64 >/dev/null && target_subsys_link "$nqn" "$f" || return 1
	c=$(host_connect "$f" "$nqn") || return 1
	[ "$(cat "$c/transport")" = rdma ] || { fail "transport is $(cat "$c/transport")"; return 1; }
	wait_for 30 ns_of "$nqn" || { fail "no namespace block device for $nqn"; return 1; }
	ns=$(ns_of "$nqn")
	dd if=/dev/urandom of=/tmp/pattern bs=1M count=4 status=none
	dd if=/tmp/pattern of="$ns" bs=1M oflag=direct status=none || return 1
	cmp <(dd if="$ns" bs=1M count=4 iflag=direct status=none) /tmp/pattern ||
		{ fail "data read back differs"; return 1; }
	info "C nvme_rdma: $(basename "$c") live over $f, 4 MiB written and read back"
	host_disconnect "$nqn" && target_subsys_del "$nqn"
}

t_c_driver_unloads() { rmmod nvme_rdma; }

# ---------------------------------------------------------------- module
t_module_loads() {
	dmesg_mark
	modprobe nvme-rdma || return 1
	[ -d /sys/module/rnvme_rdma ] || { fail "/sys/module/rnvme_rdma missing"; return 1; }
	[ ! -d /sys/module/nvme_rdma ] || { fail "the C nvme_rdma got loaded"; return 1; }
	info "rnvme_rdma $(cat /sys/module/rnvme_rdma/version) loaded ($(modinfo -F description rnvme_rdma))"
	# The load runs the KUnit suites: nothing of it reads as a real failure (no kernel line at
	# error level or worse; one test's leak report did once).
	local errs
	errs=$(dmesg -r | awk -v m="$_RNVME_MARK" 'f; index($0, m) { f = 1 }' | grep -E '^<[0-3]>')
	[ -z "$errs" ] || { fail "the load wrote errors to the kernel log: $errs"; return 1; }
	[ "$(modinfo -F license rnvme_rdma)" = GPL ] || { fail "license is not GPL"; return 1; }
	# The queue-setup workqueue that reset and reconnect wait for has a rescuer thread (only
	# WQ_MEM_RECLAIM workqueues get one: "kworker/R-" and the workqueue's name in /proc/PID/comm).
	setup_rescuer || { fail "no rescuer thread of the rnvme_rdma_setup workqueue"; return 1; }
	info "queue-setup workqueue rescuer: pid $(setup_rescuer)"
}
setup_rescuer() { grep -lx 'kworker/R-rnvme_rdma_setup' /proc/[0-9]*/comm 2>/dev/null | cut -d/ -f3 | grep .; }

# KUnit suites ran when the module loaded; their KTAP results are in debugfs.
t_kunit() {
	local d n=0 bad=0 line suite verdict want_cases
	for d in /sys/kernel/debug/kunit/rnvme_rdma_*; do
		[ -f "$d/results" ] || continue
		suite=$(basename "$d") verdict=""
		# KTAP: one "ok N case" / "not ok N case" line per case, plus one for the suite, which
		# must be there and "ok" (a suite can fail outside its cases, e.g. in its init). A skipped
		# case tested nothing: it fails too.
		while read -r line; do
			case "$line" in
			"ok "[0-9]*" $suite"*) verdict=ok;;
			"not ok "[0-9]*" $suite"*) verdict="not ok"; echo "#   suite $suite: $line";;
			"ok "[0-9]*"# SKIP"*) echo "#   $suite: skipped: $line"; bad=$((bad + 1));;
			"ok "[0-9]*) n=$((n + 1));;
			"not ok "[0-9]*) echo "#   $suite: $line"; bad=$((bad + 1));;
			esac
		done <"$d/results"
		[ "$verdict" = ok ] || { echo "#   suite $suite: ${verdict:-no verdict line}"; bad=$((bad + 1)); }
	done
	# Every case the sources declare (a #[test] fn inside a kunit_tests module) must have passed.
	want_cases=$(grep -rlE 'kunit_tests\(rnvme_rdma_' "$RNVME_PROJECT/rust" | xargs cat | grep -c '^ *#\[test\]')
	info "KUnit: $n cases passed, $bad failed or skipped (the sources declare $want_cases)"
	[ "$n" = "$want_cases" ] || { fail "KUnit: $n cases passed, the sources declare $want_cases"; return 1; }
	# Every suite the sources declare must have run (a suite that silently did not run, e.g.
	# with kunit.autorun off, must not pass).
	local want missing=()
	for want in $(grep -rhoE 'kunit_tests\(rnvme_rdma_[a-z0-9_]+\)' "$RNVME_PROJECT/rust" | sed 's/.*(\(.*\))/\1/' | sort -u); do
		[ -f "/sys/kernel/debug/kunit/$want/results" ] || missing+=("$want")
	done
	[ ${#missing[@]} = 0 ] || { fail "KUnit suites that did not run: ${missing[*]}"; return 1; }
	[ $n -gt 0 ] && [ $bad = 0 ]
}

t_module_unloads() {
	rmmod rnvme_rdma || return 1
	[ ! -d /sys/module/rnvme_rdma ] || { fail "still loaded"; return 1; }
	! setup_rescuer >/dev/null || { fail "the rnvme_rdma_setup workqueue outlived the module"; return 1; }
}

t_refuses_next_to_c() {
	local out
	load_c_driver || return 1
	dmesg_mark
	if out=$(modprobe rnvme_rdma 2>&1); then rmmod rnvme_rdma nvme_rdma; fail "loaded next to the C driver"; return 1; fi
	info "modprobe: $out"
	dmesg_since_mark | grep -q 'the C nvme_rdma transport is loaded' || { fail "no clear message"; rmmod nvme_rdma; return 1; }
	rmmod nvme_rdma
}

# Documented behaviour: with the C driver loaded after rnvme_rdma, rnvme_rdma (registered first)
# keeps serving new rdma connections.
t_c_loaded_after() {
	local f=rxe nqn=nqn.2026-11.io.rnvme:order
	fabric_up $f >/dev/null && target_port_up $f || return 1
	target_subsys_add "$nqn" mem:16 >/dev/null && target_subsys_link "$nqn" $f || return 1
	modprobe rnvme_rdma && load_c_driver || return 1
	dmesg_mark
	timeout 60 nvme connect -t rdma -a "$(fabric_addr $f)" -n "$nqn" >/dev/null 2>&1
	if dmesg_since_mark | grep -q 'new ctrl: .*transport rnvme_rdma'; then
		info "rnvme_rdma served the connect request"
	else
		fail "the connect request did not reach rnvme_rdma"; ctrl_of "$nqn" >/dev/null && nvme disconnect -n "$nqn"
		rmmod nvme_rdma rnvme_rdma; return 1
	fi
	host_disconnect "$nqn" || return 1
	rmmod nvme_rdma && rmmod rnvme_rdma && target_subsys_del "$nqn"
}

t_connect_errors() {
	local f=rxe out nqn=nqn.2026-11.io.rnvme:errors
	fabric_up $f >/dev/null && target_port_up $f || return 1
	modprobe nvme-rdma || return 1
	target_subsys_add "$nqn" mem:16 >/dev/null && target_subsys_link "$nqn" $f || return 1
	check_err() {    # check_err "expected dmesg text" nvme-connect-args...
		local want=$1; shift
		dmesg_mark
		if out=$(timeout 60 nvme connect -t rdma "$@" 2>&1); then fail "connect $* succeeded"; return 1; fi
		info "nvme connect $*: $(echo "$out" | head -n1)"
		dmesg_since_mark | grep -q "$want" || { fail "kernel log lacks '$want'"; dmesg_since_mark >&2; return 1; }
	}
	# nvme-cli checks addresses itself and drops TCP-only options for rdma: these requests go
	# straight to the fabrics device, as nvme-cli would send them.
	check_raw() {    # check_raw "expected kernel message" "fabrics option string"
		dmesg_mark
		if echo "$2" >/dev/nvme-fabrics 2>/dev/null; then fail "accepted: $2"; return 1; fi
		dmesg_since_mark | grep -q "$1" || { fail "kernel log lacks '$1'"; dmesg_since_mark >&2; return 1; }
		info "$2: $1"
	}
	check_raw "malformed address passed: 10.0.2.999:4420" "transport=rdma,traddr=10.0.2.999,nqn=$nqn" || return 1
	check_raw "malformed src address passed: bogus" \
		"transport=rdma,traddr=$(fabric_addr $f),host_traddr=bogus,nqn=$nqn" || return 1
	check_raw "invalid parameter 'hdr_digest'" "transport=rdma,traddr=$(fabric_addr $f),nqn=$nqn,hdr_digest" || return 1
	# The target refuses the Fabrics Connect of an unknown subsystem: the core names it.
	check_err 'Connect Invalid Data Parameter, subsysnqn "nqn.2026-11.io.rnvme:nosuch"' \
		-a "$(fabric_addr $f)" -n nqn.2026-11.io.rnvme:nosuch || { rmmod rnvme_rdma; return 1; }
	ls /sys/class/nvme/ 2>/dev/null | grep -q . && { fail "a controller was left behind"; return 1; }
	target_subsys_del "$nqn" && rmmod rnvme_rdma
}

t_load_unload_cycles() {
	local i ko
	ko=$(modinfo -n rnvme_rdma) || return 1
	modprobe nvme-fabrics && modprobe rdma_cm || return 1
	[ ! -d /sys/module/rnvme_rdma ] || rmmod rnvme_rdma || return 1
	for i in $(seq 1 "${1:-100}"); do
		insmod "$ko" || { fail "load $i failed"; return 1; }
		rmmod rnvme_rdma || { fail "unload $i failed"; return 1; }
	done
	info "$i load/unload cycles (kmemleak is checked at the end of the boot)"
}

group_harness() {
	run_test "guest: debug kernel has KASAN, lockdep and kmemleak on" t_debug_config
	run_test "guest: modprobe nvme-rdma resolves to rnvme_rdma" t_modprobe_alias
	run_test "fixture: rxe up and nvmet-rdma listening" t_fabric rxe
	run_test "fixture: siw up and nvmet-rdma listening" t_fabric siw
	run_test "fixture: C nvme_rdma connects over rxe (harness check)" t_c_driver_connects rxe
	run_test "fixture: C nvme_rdma connects over siw (harness check)" t_c_driver_connects siw
	run_test "fixture: C nvme_rdma unloads" t_c_driver_unloads
}

group_module() {
	run_test "module: loads through modprobe nvme-rdma" t_module_loads
	run_test "module: KUnit suites pass" t_kunit
	run_test "module: unloads" t_module_unloads
	run_test "module: refuses to load next to the C nvme_rdma" t_refuses_next_to_c
	run_test "module: keeps serving rdma when the C nvme_rdma loads after it" t_c_loaded_after
	run_test "module: bad connect requests get clear errors, nothing left behind" t_connect_errors
	run_test "module: $LOAD_CYCLES load/unload cycles" t_load_unload_cycles "$LOAD_CYCLES"
}

groups=()
LOAD_CYCLES=100
for g in "$@"; do
	case "$g" in
	cycles=*) LOAD_CYCLES=${g#cycles=};;
	driver=*) HOST_DRIVER=${g#driver=};;
	fabrics=*) DP_FABRICS=${g#fabrics=};;
	only=*) RNVME_ONLY=${g#only=};;
	repeat=*) RNVME_REPEAT=${g#repeat=};;
	storm=*) WIRE_STORM=${g#storm=};;
	storm_jitter=yes) WIRE_STORM_JITTER=yes;;
	rm_only=*) WIRE_RM_ONLY=${g#rm_only=};;
	split=yes|split=no) FABRIC_SPLIT=${g#split=};;
	wire=*) WIRE_MODE=${g#wire=};;
	tier=check|tier=full) RNVME_TIER=${g#tier=};;
	c-all=yes) BT_C_ALL=yes;;
	bt-verbose=yes) BT_VERBOSE=yes;;
	*=*) echo "unknown setting '$g' (driver=rnvme|c|rnvme,c, fabrics=rxe,siw, cycles=N, only=TEXT, repeat=N, storm=N, storm_jitter=yes, rm_only=TEXT, split=yes|no, wire=split|all, tier=check|full, c-all=yes, bt-verbose=yes)" >&2; exit 2;;
	*) groups+=("$g");;
	esac
done
[ ${#groups[@]} -gt 0 ] || groups=(harness module)
for g in "${groups[@]}"; do
	declare -F "group_$g" >/dev/null || { echo "unknown test group '$g'" >&2; exit 2; }
	run_group "$g"
	# Groups whose every test drives the driver into timeouts or recovery (lib.sh, run_test).
	case "$g" in misbehave|faults|wire) RNVME_GROUP_RECOVERS=yes;; *) RNVME_GROUP_RECOVERS=;; esac
	"group_$g"
done
grep -q '^not ok' "$TAP_FILE" && exit 1
exit 0
