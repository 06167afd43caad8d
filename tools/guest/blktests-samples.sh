#!/bin/bash
# blktests-samples.sh [blktests.sh arguments]: a diagnostic run (not a test) for the stall of
# nvme/012's bd=file condition with rnvme_rdma (Documentation/reports/2026-12-05-4b057dd-blktests-rxe.md).
# Runs tools/guest/blktests.sh for nvme/010, then for nvme/012 in the same boot (whatever
# lockdep's state: this is not a result for the table), and samples the RDMA counters, the QPs,
# rnvme_rdma's stats and blk-mq's in-flight requests 8, 18 and 24 s after the target refused
# Write Zeroes in nvme/012's bd=file condition (where the stall starts), into
# /results/diag/samples.txt; blocked tasks go to the kernel log (sysrq w). Usage:
#   scripts/vm-run --memory 3072 --results DIR tools/guest/blktests-samples.sh fabric=rxe \
#       drivers=rnvme img=512m timed=30
D=/results/diag; mkdir -p $D
sample() {
	local n=$1
	{
		echo "=== sample $n at $(cat /proc/uptime)"
		echo "--- rdma statistic"; rdma statistic show 2>&1
		echo "--- rdma res qp"; rdma res show qp 2>&1
		echo "--- rdma res cq"; rdma res show cq 2>&1
		echo "--- rnvme stats"; cat /sys/kernel/debug/rnvme_rdma/stats 2>&1
		for b in /sys/kernel/debug/block/nvme*; do
			for h in "$b"/hctx*; do
				[ -d "$h" ] || continue
				echo "--- $h busy:"; cat "$h/busy" 2>/dev/null | head -n 80
				echo "--- $h dispatch:"; cat "$h/dispatch" 2>/dev/null | head -n 20
				echo "--- $h state: $(cat "$h/state" 2>/dev/null) tags:"; grep -E "nr_tags|busy|active" "$h/tags" 2>/dev/null
			done
		done
	} >>$D/samples.txt 2>&1
}
(
	# the bd=file condition of nvme/012: its second "run blktests nvme/012" line
	while [ "$(dmesg | grep -c 'run blktests nvme/012')" -lt 2 ]; do sleep 2; done
	mark=$(dmesg | grep -n 'run blktests nvme/012' | tail -n1 | cut -d: -f1)
	while ! dmesg | tail -n +"$mark" | grep -q 'Write Zeroes'; do sleep 1; done
	sleep 8; sample 1
	sleep 10; sample 2
	echo w >/proc/sysrq-trigger
	sleep 6; sample 3
) &
mon=$!
"$RNVME_PROJECT/tools/guest/blktests.sh" "$@" tests=nvme/010 || true
"$RNVME_PROJECT/tools/guest/blktests.sh" "$@" tests=nvme/012
rc=$?
# (the samples are taken while nvme/012 runs; a monitor still waiting has nothing left to see)
kill "$mon" 2>/dev/null
exit $rc
