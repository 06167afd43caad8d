#!/bin/bash
# make demo, in the guest: rxe + nvmet-rdma (memory-backed null_blk) + rnvme_rdma + nvme-cli + fio.
# Only rnvme_rdma serves the connection: the C nvme_rdma is never loaded here.
. "$RNVME_PROJECT/tools/guest/lib.sh"
FABRIC=${1:-rxe}
NQN=nqn.2026-11.io.rnvme:demo
declare -A sum
step() { echo; echo "==> $*"; }
summary() {
	echo
	echo "==================== rnvme-rdma demo summary ===================="
	printf '  %-12s %s\n' kernel "$(uname -r)" fabric "$FABRIC ($(fabric_addr "$FABRIC"):$TRSVCID)" \
		module "${sum[module]:-not loaded}" controller "${sum[ctrl]:--}" queues "${sum[queues]:--}" \
		fio "${sum[fio]:--}" verify "${sum[verify]:--}" "data path" "${sum[path]:--}" result "${sum[result]}"
	echo "================================================================="
}

step "bringing up $FABRIC and an nvmet-rdma target (memory-backed null_blk, 256 MiB)"
fabric_up "$FABRIC" && target_port_up "$FABRIC" && target_subsys_add "$NQN" mem:256 && target_subsys_link "$NQN" "$FABRIC" ||
	{ sum[result]="FAILED: target setup"; summary; exit 1; }

step "loading rnvme_rdma (modprobe nvme-rdma, via the modprobe.d alias)"
[ -d /sys/module/nvme_rdma ] && { echo "the C nvme_rdma is loaded; refusing to run the demo"; exit 1; }
modprobe nvme-rdma && [ -d /sys/module/rnvme_rdma ] || { sum[result]="FAILED: rnvme_rdma did not load"; summary; exit 1; }
sum[module]="rnvme_rdma $(cat /sys/module/rnvme_rdma/version)"
lsmod | grep -E '^(rnvme_rdma|nvme_fabrics|nvme_core|rdma_cm|ib_core) '

step "nvme connect -t rdma -a $(fabric_addr "$FABRIC") -s $TRSVCID -n $NQN"
dmesg_mark
if ! out=$(timeout 120 nvme connect -t rdma -a "$(fabric_addr "$FABRIC")" -s $TRSVCID -n "$NQN" 2>&1); then
	echo "$out"
	echo "kernel log:"; dmesg_since_mark | sed 's/^/    /'
	sum[ctrl]="connect failed: $(echo "$out" | head -n1)"
	sum[result]="FAILED at connect"
	target_subsys_del "$NQN"; rmmod rnvme_rdma
	summary
	exit 1
fi
dmesg_since_mark | grep -q 'new ctrl: .*transport rnvme_rdma' ||
	{ sum[result]="FAILED: the controller was not created by rnvme_rdma"; summary; exit 1; }
c=$(ctrl_of "$NQN"); wait_for 30 grep -qx live "$c/state"
sum[ctrl]="$(basename "$c") $(cat "$c/state") transport=$(cat "$c/transport") $(cat "$c/address")"
sum[queues]="$(($(cat "$c/queue_count") - 1)) I/O queues, sqsize $(cat "$c/sqsize")"

step "nvme list"
nvme list
wait_for 30 ns_of "$NQN"; dev=$(ns_of "$NQN")

step "fio: 10 s random writes 4k-128k with crc32c verification on $dev"
if fio --name=demo --filename="$dev" --direct=1 --ioengine=libaio --rw=randwrite --bsrange=4k-128k \
	--iodepth=16 --size=32M --verify=crc32c --do_verify=1 --runtime=10 --output-format=json >/tmp/fio.json 2>/tmp/fio.err; then
	sum[verify]="crc32c OK"
else
	sum[verify]="FAILED ($(head -n1 /tmp/fio.err))"
fi
stat() { awk -v k="$1" '$1 == k { print $2 }' /sys/kernel/debug/rnvme_rdma/stats; }
sum[path]="$(stat inline_writes) in-capsule writes, $(stat mr_registrations) fast registrations ($(stat remote_invalidations) invalidated by the target)"
sum[fio]=$(awk -F'[:,]' '/"iops"/ { s += $2 } END { printf "%.0f IOPS (write + verify read)", s }' /tmp/fio.json)

step "nvme disconnect -n $NQN; rmmod rnvme_rdma"
host_disconnect "$NQN" && rmmod rnvme_rdma && target_subsys_del "$NQN"
case "${sum[verify]}" in "crc32c OK") sum[result]="OK";; *) sum[result]="FAILED";; esac
summary
[ "${sum[result]}" = OK ]
