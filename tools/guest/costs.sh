#!/bin/bash
# What the debug guest's time goes to: exec cost, and the C nvme_rdma's I/O over rxe
# against a null_blk namespace (4k QD1 IOPS and latency, 128k sequential bandwidth), with the
# kernel log's boot timestamps. Compare runs with different vm-run settings, e.g.
#   scripts/vm-run --no-kmemleak tools/guest/costs.sh
#   RNVME_APPEND=lockdep.prove_locking=0 scripts/vm-run tools/guest/costs.sh
#   RNVME_QEMU_CPU=qemu64 scripts/vm-run tools/guest/costs.sh
. "$RNVME_PROJECT/tools/guest/lib.sh"
echo "# kernel $(uname -r); cmdline: $(cat /proc/cmdline)"
echo "# init reached at $(cut -d' ' -f1 /proc/uptime) s guest time"
t0=$(date +%s%N); for i in $(seq 1 50); do /bin/true; done; t1=$(date +%s%N)
echo "exec_ms $(( (t1 - t0) / 50000000 ))"
fabric_up rxe >/dev/null && target_port_up rxe || exit 1
nqn=nqn.2026-11.io.rnvme:costs
target_subsys_add "$nqn" null:256 >/dev/null && target_subsys_link "$nqn" rxe || exit 1
load_c_driver || exit 1
t0=$(date +%s%N); c=$(host_connect rxe "$nqn") || exit 1; t1=$(date +%s%N)
echo "connect_ms $(( (t1 - t0) / 1000000 ))"
wait_for 30 ns_of "$nqn"; ns=$(ns_of "$nqn")
fio --name=qd1 --filename="$ns" --ioengine=libaio --direct=1 --rw=randread --bs=4k --iodepth=1 \
	--time_based --runtime=10 --output-format=terse --terse-version=3 2>/dev/null |
	awk -F';' '{ printf "4k_qd1_iops %s\n4k_qd1_clat_mean_us %s\n", $8, $16 }'
fio --name=seq --filename="$ns" --ioengine=libaio --direct=1 --rw=read --bs=128k --iodepth=4 \
	--time_based --runtime=10 --output-format=terse --terse-version=3 2>/dev/null |
	awk -F';' '{ printf "128k_read_KiBps %s\n", $7 }'
t0=$(date +%s%N); host_disconnect "$nqn"; t1=$(date +%s%N)
echo "disconnect_ms $(( (t1 - t0) / 1000000 ))"
rmmod nvme_rdma
dmesg | awk '/initcall .* returned .* after/ { for (i = 1; i <= NF; i++) { if ($i == "initcall") fn = $(i+1); if ($i == "after") print $(i+1), fn } }' |
	sort -rn | head -n 15 | sed 's/^/slowest_initcall_us /'
