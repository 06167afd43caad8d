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
kmemleak_off) echo off >/sys/kernel/debug/kmemleak || exit 2;;
timeout) sleep 100000;;
nostatus) sync; echo o >/proc/sysrq-trigger; sleep 60;;
*) echo "unknown condition $cond"; exit 2;;
esac
exit 0
