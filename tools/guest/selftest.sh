#!/bin/bash
# vm-run self-tests (tools/check): each run provokes conditions that vm-run must report.
# Usage (under scripts/vm-run): selftest.sh [module=PATH] CONDITION [CONDITION...]
#   Each CONDITION but exit3, kmemleak_off, timeout and nostatus runs as its own test
#   (run_test "selftest-CONDITION"), in the order given: vm-run must attribute each kernel report
#   to the test that provoked it, not to the one before or after. One boot can therefore provoke
#   several; lockdep goes first (any report after it, an oops or a KASAN report among them,
#   switches lockdep off).
#   exit3        the script exits 3: vm-run must exit 3
#   WARNING BUG  lkdtm provokes a kernel warning / an oops
#   KASAN        lkdtm READ_AFTER_FREE: a KASAN report
#   lockdep      the module (tools/selftest-module) takes two mutexes in both orders: a lockdep
#                report
#   debug_locks  the module switches lockdep off without any report (debug_locks 0)
#   leak         the module leaks eight objects (kmemleak must report them)
#   hung_task    the module keeps the loading task in D state for 8 s, hung_task_timeout_secs 2
#   softlockup   the module spins on a CPU with preemption disabled for 8 s, watchdog_thresh 1 (a
#                soft lockup after 2 s), RCU stall reports later than that
#   rcu_stall    the same spin for 20 s (it asks for a grace period), the soft-lockup watchdog off
#                and rcu_cpu_stall_timeout 3 (+5 s on PROVE_RCU kernels)
#   target_WARNING  (vm-run --pair) lkdtm provokes a kernel warning in the target guest
#   kmemleak_off kmemleak is switched off mid-run (its final scans are refused)
#   timeout      the script never ends (vm-run --timeout must stop it: 124)
#   nostatus     the guest powers off before reporting a status (125)
# The script itself exits 0 except for exit3 and a condition it could not set up (2).
. "$RNVME_PROJECT/tools/guest/lib.sh"
: >"$TAP_FILE"
mod=""
case "${1:-}" in module=*) mod=${1#module=}; shift;; esac
provoke() { modprobe lkdtm || return 2; echo "$1" >/sys/kernel/debug/provoke-crash/DIRECT; }
# selftest_mod ACTION [ARG...]: one action of the module, then the module unloaded again (its
# exit waits for the spin's RCU callback), so the next condition can load it.
selftest_mod() {
	local rc=0
	insmod "$mod" "action=$1" "${@:2}" || rc=$?
	[ ! -d /sys/module/rnvme_selftest ] || rmmod rnvme_selftest || echo "cannot unload rnvme_selftest"
	return $rc
}
need_mod() { [ -f "$mod" ] || { echo "no module '$mod' (module=PATH)"; exit 2; }; }
for cond in "$@"; do
	case "$cond" in
	exit3) exit 3;;
	WARNING|BUG) run_test "selftest-$cond" provoke "$cond";;
	KASAN) run_test "selftest-$cond" provoke READ_AFTER_FREE;;
	lockdep) need_mod; run_test "selftest-$cond" selftest_mod "$cond";;
	# (the module stays loaded: kmemleak names the leaking function from its symbols)
	leak) need_mod; run_test "selftest-$cond" insmod "$mod" action=leak;;
	debug_locks) need_mod; run_test "selftest-$cond" selftest_mod debug_locks_off;;
	hung_task|softlockup|rcu_stall)
		need_mod
		case "$cond" in
		hung_task) echo 2 >/proc/sys/kernel/hung_task_timeout_secs;;
		softlockup) echo 60 >/sys/module/rcupdate/parameters/rcu_cpu_stall_timeout && echo 1 >/proc/sys/kernel/watchdog_thresh;;
		rcu_stall) echo 0 >/proc/sys/kernel/soft_watchdog && echo 3 >/sys/module/rcupdate/parameters/rcu_cpu_stall_timeout;;
		esac || exit 2
		# (an RCU stall is reported rcu_cpu_stall_timeout + 5 s after the grace period began on a
		# PROVE_RCU kernel (RCU_STALL_DELAY_DELTA): 8 s; the spin lasts 20 s there)
		run_test "selftest-$cond" selftest_mod "$([ "$cond" = hung_task ] && echo hung_task || echo spin)" \
			"seconds=$([ "$cond" = rcu_stall ] && echo 20 || echo 8)"
		# The detector's report is printed within 2 s of the threshold; then the thresholds go
		# back, so the next condition's report is its own.
		sleep 2
		case "$cond" in
		hung_task) echo 120 >/proc/sys/kernel/hung_task_timeout_secs;;
		softlockup) echo 10 >/proc/sys/kernel/watchdog_thresh;;
		esac;;
	target_WARNING)
		# (vm-run --pair: the target guest warns; the host guest's run is clean)
		target_wait || { echo "the target guest did not answer"; exit 2; }
		target_run 60 <<<'modprobe lkdtm && echo WARNING >/sys/kernel/debug/provoke-crash/DIRECT' || true;;
	kmemleak_off) echo off >/sys/kernel/debug/kmemleak || exit 2;;
	timeout) sleep 100000;;
	nostatus) sync; echo o >/proc/sysrq-trigger; sleep 60;;
	*) echo "unknown condition $cond"; exit 2;;
	esac
done
exit 0
