#!/bin/bash
# large-writes.sh: a diagnostic run (not a test, in no check) for nvme/012's bd=file stall
# (Documentation/reports/2026-12-05-d96e702-large-writes.md): 1 MiB writes to an nvmet file
# namespace on tmpfs over rxe, the C nvme_rdma and rnvme_rdma alternately in one boot.
#   1. The data rate (rounds 1 and 2, C and Rust in alternating order): BLKZEROOUT of 24 MiB
#      (the target refuses Write Zeroes, the block layer writes zero pages itself, as mkfs.xfs
#      does in nvme/012) and fio 1 MiB sequential writes at QD16 (48 MiB): seconds, rxe packets
#      per second, guest CPU, and where the guest's CPU went, per kernel module (profile.py).
#   2. The wait (round 3): fio 1 MiB writes at QD64 (128 MiB) with nvme_core's I/O timeout
#      raised to 300 s: the completion latencies show how long an answer waits behind the
#      target's RDMA READs of the writes queued before it.
# Usage: scripts/vm-run --timeout 1700 --memory 3072 --results DIR tools/guest/large-writes.sh
# Output: RESULT lines on stdout; profiles and fio's JSON under DIR/large-writes/.
. "$RNVME_PROJECT/tools/guest/lib.sh"
O=/results/large-writes; mkdir -p $O
N=nqn.2026-12.io.rnvme:large-writes
fabric_up rxe >/dev/null || exit 1
modprobe nvmet; modprobe nvmet-rdma
S=$NVMET/subsystems/$N; mkdir $S && echo 1 >$S/attr_allow_any_host && mkdir $S/namespaces/1 || exit 1
truncate -s 512M /tmp/large-writes.img && echo -n /tmp/large-writes.img >$S/namespaces/1/device_path && echo 1 >$S/namespaces/1/enable || exit 1
target_port_up rxe $N || exit 1
pk() { rdma statistic show 2>/dev/null | awk '$1 == "sent_pkts" { s += $2 } END { print s + 0 }'; }
round() {
	local drv=$1 r=$2 w=$3 c dev t0 t1 p0 p1 b0 b1 pid rc
	if [ $drv = c ]; then load_c_driver || return 1; else modprobe nvme-rdma || return 1; fi
	c=$(host_connect rxe $N -l 60) || return 1
	dev=$(ns_of $N)
	python3 "$RNVME_PROJECT/tools/guest/profile.py" $O/prof-$drv-$r-$w.json 250000 nvme_rdma,rnvme_rdma 2>$O/prof.err &
	pid=$!; wait_for 20 test -e $O/prof-$drv-$r-$w.json.ready
	p0=$(pk); b0=$(cpu_busy); t0=$(date +%s.%N)
	case $w in
	zero) blkdiscard -z -l 24M $dev;;
	fio) fio --name=w --filename=$dev --direct=1 --rw=write --bs=1M --iodepth=16 --size=48M --ioengine=libaio --output-format=json --output=$O/fio-$drv-$r.json >/dev/null;;
	big) fio --name=w --filename=$dev --direct=1 --rw=write --bs=1M --iodepth=64 --size=128M --ioengine=libaio --output-format=json --output=$O/big-$drv-$r.json >/dev/null;;
	esac
	rc=$?
	t1=$(date +%s.%N); p1=$(pk); b1=$(cpu_busy)
	kill -TERM $pid; wait $pid
	echo "RESULT $drv round $r $w rc=$rc secs=$(echo "$t1 - $t0" | bc) pkts=$((p1 - p0)) busy_jiffies=$((b1 - b0)) pkts_per_s=$(echo "($p1 - $p0) / ($t1 - $t0)" | bc) timeouts=$(dmesg | grep -c 'timeout')"
	python3 - $O/prof-$drv-$r-$w.json <<'PY'
import json,sys
p=json.load(open(sys.argv[1]))
print("  modules:", dict(list(sorted(p["modules"].items(), key=lambda kv:-kv[1]))[:8]))
print("  top:", dict(list(p["symbols"].items())[:14]))
PY
	cat /sys/kernel/debug/rnvme_rdma/stats 2>/dev/null | tr '\n' ' '; echo
	host_disconnect $N
	if [ $drv = c ]; then rmmod nvme_rdma; else rmmod rnvme_rdma; fi
}
for r in 1 2; do
	for d in c rnvme; do
		[ $r = 2 ] && d=$([ $d = c ] && echo rnvme || echo c)
		round $d $r zero
		round $d $r fio
	done
done
echo 300 >/sys/module/nvme_core/parameters/io_timeout
for d in rnvme c; do
	round $d 3 big
	python3 -c "import json,sys; j=json.load(open(sys.argv[1]))['jobs'][0]['write']; print('  big: bw_kib', j['bw'], 'clat_ms min/mean/max', j['clat_ns']['min']/1e6, j['clat_ns']['mean']/1e6, j['clat_ns']['max']/1e6)" $O/big-$d-3.json
done
dmesg | grep -iE "timeout|reset|error" | tail -n 20
