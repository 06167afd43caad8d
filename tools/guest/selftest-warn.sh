#!/bin/bash
# vm-run self-test: a kernel warning must fail the run although this script exits 0.
# lkdtm (debug kernel only) provokes the event named by the argument: WARNING or BUG (an oops
# that kills this subshell without panicking the kernel).
modprobe lkdtm || exit 2
echo "provoking $1"
( echo "$1" >/sys/kernel/debug/provoke-crash/DIRECT ) || true
exit 0
