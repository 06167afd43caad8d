#!/bin/bash
# vm-run self-tests (tools/check): each run provokes one condition that vm-run must report.
# Usage (under scripts/vm-run): selftest.sh CONDITION [MODULE]
#   exit3        the script exits 3: vm-run must exit 3
#   WARNING BUG  lkdtm provokes a kernel warning / an oops (inside a run_test: the kernel log
#                problem must be attributed to that test)
#   KASAN        lkdtm READ_AFTER_FREE: a KASAN report
#   lockdep      MODULE (tools/selftest-module) takes two mutexes in both orders: a lockdep report
#   debug_locks  MODULE switches lockdep off without any report (debug_locks 0)
#   leak         MODULE leaks eight objects (kmemleak must report them)
#   hung_task    MODULE keeps the loading task in D state for 8 s, hung_task_timeout_secs 2
#   softlockup   MODULE spins on a CPU with preemption disabled for 8 s, watchdog_thresh 1 (a soft
#                lockup after 2 s), RCU stall reports later than that
#   rcu_stall    the same spin for 20 s (it asks for a grace period), the soft-lockup watchdog off
#                and rcu_cpu_stall_timeout 3 (+5 s on PROVE_RCU kernels)
#   target_WARNING  (vm-run --pair) lkdtm provokes a kernel warning in the target guest
#   kmemleak_off kmemleak is switched off mid-run (its final scans are refused)
#   timeout      the script never ends (vm-run --timeout must stop it: 124)
#   nostatus     the guest powers off before reporting a status (125)
# The script itself exits 0 except for exit3.
. "$RNVME_PROJECT/tools/guest/lib.sh"
: >"$TAP_FILE"
cond=$1 mod=${2:-}
provoke() { modprobe lkdtm || exit 2; echo "$1" >/sys/kernel/debug/provoke-crash/DIRECT; }
case "$cond" in
exit3) exit 3;;
WARNING|BUG) run_test "selftest-$cond" provoke "$cond";;
KASAN) ( provoke READ_AFTER_FREE ) || true;;
lockdep|debug_locks|leak)
	[ -f "$mod" ] || { echo "no module $mod"; exit 2; }
	insmod "$mod" "action=$([ "$cond" = debug_locks ] && echo debug_locks_off || echo "$cond")" || exit 2;;
hung_task|softlockup|rcu_stall)
	[ -f "$mod" ] || { echo "no module $mod"; exit 2; }
	case "$cond" in
	hung_task) echo 2 >/proc/sys/kernel/hung_task_timeout_secs;;
	softlockup) echo 60 >/sys/module/rcupdate/parameters/rcu_cpu_stall_timeout && echo 1 >/proc/sys/kernel/watchdog_thresh;;
	rcu_stall) echo 0 >/proc/sys/kernel/soft_watchdog && echo 3 >/sys/module/rcupdate/parameters/rcu_cpu_stall_timeout;;
	esac || exit 2
	# (an RCU stall is reported rcu_cpu_stall_timeout + 5 s after the grace period began on a
	# PROVE_RCU kernel (RCU_STALL_DELAY_DELTA): 8 s; the spin lasts 20 s there)
	run_test "selftest-$cond" insmod "$mod" "action=$([ "$cond" = hung_task ] && echo hung_task || echo spin)" \
		"seconds=$([ "$cond" = rcu_stall ] && echo 20 || echo 8)"
	sleep 2;;
target_WARNING)
	# (vm-run --pair: the target guest warns; the host guest's run is clean)
	target_wait || { echo "the target guest did not answer"; exit 2; }
	target_run 60 <<<'modprobe lkdtm && echo WARNING >/sys/kernel/debug/provoke-crash/DIRECT' || true;;
kmemleak_off) echo off >/sys/kernel/debug/kmemleak || exit 2;;
timeout) sleep 100000;;
nostatus) sync; echo o >/proc/sysrq-trigger; sleep 60;;
*) echo "unknown condition $cond"; exit 2;;
esac
exit 0
