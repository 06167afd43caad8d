# shellcheck shell=bash
# Failure paths (issue 10): group `faults` of tools/guest/suite.sh (sourced after lib.sh).

# fault_range MODULE [FUNCTION]: "START END" (decimal addresses) of MODULE's text (from its first
# text symbol to a page past its last), or of the function in MODULE whose symbol ends with
# FUNCTION (a regular expression; Rust symbols are mangled) up to the next text symbol at a higher
# address. MODULE "vmlinux": the kernel itself.
fault_range() {
	gawk -v mod="$1" -v fn="${2:-}" '
		$2 !~ /^[tT]$/ { next }
		{ a = strtonum("0x" $1); m = NF == 3 ? "vmlinux" : substr($NF, 2, length($NF) - 2) }
		found && fn != "" && a > first { print first, a; done = 1; exit }
		m == mod && (fn == "" || $3 ~ (fn "$")) { if (!found) first = a; found = 1; last = a }
		END { if (done) exit 0; if (!found || fn != "") exit 1; print first, last + 4096 }
	' <(sort /proc/kallsyms)
}

# t_fault_connect_alloc FABRIC: nvme connect with the N-th slab allocation of its kernel path
# failing (fail-nth, tools/guest/fail_nth.py), at the first, the last and spread points: every
# attempt either fails cleanly (an error, no controller left) or connects; KASAN, lockdep and
# kmemleak judge the rest. FAULTS_POINTS=all tries every point (a soak).
t_fault_connect_alloc() {
	local f=$1 scope=$2 nqn=nqn.2026-11.io.rnvme:faults-$1 d=/sys/kernel/debug out rc points
	fabric_up "$f" >/dev/null && target_port_up "$f" || return 1
	target_subsys_add "$nqn" mem:16 >/dev/null && target_subsys_link "$nqn" "$f" || return 1
	modprobe nvme-rdma && [ -d /sys/module/rnvme_rdma ] || { fail "rnvme_rdma did not load"; return 1; }
	# Inject into sleeping slab allocations too, silently (a stack dump per failure would read as
	# a kernel problem); page allocations are left alone (their failure warns by design). Only
	# allocations with rnvme_rdma on the stack count (ours, and the core's on our behalf), except
	# under nvme-core's nvme_init_ctrl_finish: in 7.3.4's nvme_init_subsystem (inlined there), a
	# failed sysfs_create_link for a new subsystem drops the last reference under
	# nvme_subsystems_lock, and nvme_destroy_subsystem takes that lock again: a self-deadlock of
	# the core, C transports alike (see testing.rst). (sysfs_create_link itself is tail-called
	# away and never on the stack.)
	# scope "outside-setup": only under create_ctrl but not under setup_ctrl (the controller's
	# creation and listing around the queue setup): a deterministic sequence, every point tried.
	local req rej
	if [ "$scope" = outside-setup ]; then
		req=$(fault_range rnvme_rdma 'TransportOps11create_ctrl') && rej=$(fault_range rnvme_rdma '9transport10setup_ctrl')
		points=all
	else
		req=$(fault_range rnvme_rdma) && rej=$(fault_range nvme_core '^nvme_init_ctrl_finish')
		points=${FAULTS_POINTS:-12}
	fi || { fail "cannot find the symbol ranges in /proc/kallsyms (require '$req', reject '$rej')"; return 1; }
	info "injecting under [$req), not under [$rej)"
	echo N >$d/failslab/ignore-gfp-wait && echo 0 >$d/failslab/verbose &&
		echo 0 >$d/fail_page_alloc/verbose && echo 11 >$d/fail_page_alloc/min-order &&
		echo "${req% *}" >$d/failslab/require-start && echo "${req#* }" >$d/failslab/require-end &&
		echo "${rej% *}" >$d/failslab/reject-start && echo "${rej#* }" >$d/failslab/reject-end || return 1
	# Bounded: a connect that hangs in the kernel cannot be killed, so it is left behind and the
	# test fails after 600 s (the hung-task report then names it too).
	python3 "$RNVME_PROJECT/tools/guest/fail_nth.py" \
		"transport=rdma,traddr=$(fabric_addr "$f"),trsvcid=$TRSVCID,nqn=$nqn,hostnqn=$HOSTNQN,hostid=$HOSTID" \
		"$points" >/tmp/fail-nth.out 2>&1 &
	local pid=$! t0=$SECONDS
	while kill -0 $pid 2>/dev/null && [ $((SECONDS - t0)) -lt 600 ]; do sleep 1; done
	if kill -0 $pid 2>/dev/null; then
		sed 's/^/# /' /tmp/fail-nth.out; fail "fail-nth connect still running after 600 s (hung)"; return 1
	fi
	wait $pid; rc=$?
	out=$(cat /tmp/fail-nth.out)
	echo "$out" | sed 's/^/# /'
	echo Y >$d/failslab/ignore-gfp-wait; echo 2 >$d/failslab/verbose; echo 2 >$d/fail_page_alloc/verbose
	echo 0 >$d/failslab/require-start; echo 18446744073709551615 >$d/failslab/require-end
	echo 0 >$d/failslab/reject-start; echo 0 >$d/failslab/reject-end
	[ $rc = 0 ] || { fail "fail-nth connect: $(echo "$out" | tail -n 1)"; return 1; }
	grep -q ' hit$' <<<"$out" || { fail "no injected failure was hit"; return 1; }
	info "$(grep -c ' hit$' <<<"$out") injected allocation failures during connect: each failed cleanly or connected"
	rmmod rnvme_rdma && target_subsys_del "$nqn"
}

group_faults() {
	run_test "faults: rxe: connect with an allocation failing at each chosen point (fail-nth)" t_fault_connect_alloc rxe all
}

# Opt-in (`suite.sh faults_listing`; not yet in make check: its run time on the debug guest is
# still unmeasured): every allocation of create_ctrl outside the queue setup, the controller's
# listing included, fails in turn.
group_faults_listing() {
	run_test "faults: rxe: connect with each allocation around queue setup failing, listing included" \
		t_fault_connect_alloc rxe outside-setup
}
