#!/bin/bash
# make demo, in the guest: rxe + nvmet-rdma (memory-backed null_blk) + rnvme_rdma + nvme-cli + fio,
# then, for scale, the same fio through the C nvme_rdma on the same boot (rnvme_rdma is unloaded
# first: the two are never loaded together). The demo fails unless rnvme_rdma created the
# controller of its part, and unless fio read back and verified every byte it wrote, through each
# driver.
. "$RNVME_PROJECT/tools/guest/lib.sh"
FABRIC=${1:-rxe}
NQN=nqn.2026-11.io.rnvme:demo
# fio writes DEMO_MB MiB in random 4-128 KiB blocks (iodepth 16), then reads every block back and
# checks it (crc32c). Bounded by size, not by time: a --runtime would stop fio before its verify
# phase. Small on purpose: the debug guest moves ~0.3 MiB/s at 128 KiB through the C driver, so
# each run takes about half a minute there.
DEMO_MB=4
declare -A sum
step() { echo; echo "==> $*"; }
summary() {
	echo
	echo "==================== rnvme-rdma demo summary ===================="
	printf '  %-18s %s\n' kernel "$(uname -r)" fabric "$FABRIC ($(fabric_addr "$FABRIC"):$TRSVCID)" \
		module "${sum[module]:-not loaded}" controller "${sum[ctrl]:--}" queues "${sum[queues]:--}" \
		"fio, rnvme_rdma" "${sum[rnvme]:--}" "fio, C nvme_rdma" "${sum[c]:--}" \
		"data path" "${sum[path]:--}" result "${sum[result]}"
	echo "================================================================="
}

# demo_fio rnvme|c DEV: the fio run on DEV; its summary line in sum[rnvme|c]. Fails unless fio
# wrote DEMO_MB MiB and read back and verified as many bytes, with no error.
demo_fio() {
	local d=$1 j=/tmp/fio-$1.json t0 t1 ms w r e rc=0
	: >"$j"
	t0=${EPOCHREALTIME//[.,]/}
	timeout 300 fio --name=demo --filename="$2" --direct=1 --ioengine=libaio --rw=randwrite --bsrange=4k-128k \
		--iodepth=16 --size=${DEMO_MB}M --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--output-format=json --output="$j" 2>"/tmp/fio-$d.err" || rc=$?
	t1=${EPOCHREALTIME//[.,]/}
	ms=$(((t1 - t0) / 1000))
	fio_json "$j"
	w=$FIO_WRITE r=$FIO_READ e=$FIO_ERR
	if [ $rc != 0 ] || [ "$e" != 0 ] || [ "$w" != $((DEMO_MB << 20)) ] || [ "$r" != "$w" ]; then
		sum[$d]="FAILED (fio exit $rc, error ${e:-?}, wrote ${w:-?} B, read back and verified ${r:-?} B; $(head -n1 "/tmp/fio-$d.err"))"
		echo "fio: ${sum[$d]}"
		return 1
	fi
	sum[$d]="$r bytes ($DEMO_MB MiB) written, read back and verified (crc32c) in $((ms / 1000)).$((ms % 1000 / 100)) s"
	echo "fio: ${sum[$d]}"
}
rstat() { awk -v k="$1" '$1 == k { print $2 }' /sys/kernel/debug/rnvme_rdma/stats; }

step "bringing up $FABRIC and an nvmet-rdma target (memory-backed null_blk, 256 MiB)"
fabric_up "$FABRIC" && target_port_up "$FABRIC" && target_subsys_add "$NQN" mem:256 && target_subsys_link "$NQN" "$FABRIC" ||
	{ sum[result]="FAILED: target setup"; summary; exit 1; }

step "loading rnvme_rdma (modprobe nvme-rdma, via the modprobe.d rule)"
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

step "fio through rnvme_rdma: $DEMO_MB MiB of random 4k-128k writes on $dev, then every block read back and checked (crc32c)"
demo_fio rnvme "$dev"; ok_rnvme=$?
sum[path]="since load: $(rstat inline_writes) in-capsule writes, $(rstat mr_registrations) fast registrations ($(rstat remote_invalidations) invalidated by the target)"

step "nvme disconnect -n $NQN; rmmod rnvme_rdma"
if ! host_disconnect "$NQN" || ! rmmod rnvme_rdma; then
	sum[result]="FAILED: rnvme_rdma did not disconnect and unload"; summary; exit 1
fi
if [ $ok_rnvme != 0 ]; then
	sum[c]="not run"; sum[result]="FAILED: fio through rnvme_rdma"
	target_subsys_del "$NQN"; summary; exit 1
fi

step "for scale, the same fio through the C nvme_rdma on this boot (loaded by path)"
ok_c=1
if ! load_c_driver || [ ! -d /sys/module/nvme_rdma ] || [ -d /sys/module/rnvme_rdma ]; then
	sum[c]="FAILED: the C nvme_rdma did not load on its own"
elif ! out=$(timeout 120 nvme connect -t rdma -a "$(fabric_addr "$FABRIC")" -s $TRSVCID -n "$NQN" 2>&1) ||
	! wait_for 30 ctrl_of "$NQN"; then
	sum[c]="FAILED: connect: $(echo "$out" | head -n1)"
	rmmod nvme_rdma
else
	c=$(ctrl_of "$NQN")
	if [ -d /sys/module/rnvme_rdma ]; then
		sum[c]="FAILED: rnvme_rdma got loaded next to the C nvme_rdma"
	elif wait_for 30 grep -qx live "$c/state" && wait_for 30 ns_of "$NQN"; then
		dev=$(ns_of "$NQN")
		echo "$(basename "$c") $(cat "$c/state") transport=$(cat "$c/transport") through the C nvme_rdma; namespace $dev"
		demo_fio c "$dev" && ok_c=0
	else
		sum[c]="FAILED: $(basename "$c") is $(cat "$c/state"), namespace $(ns_of "$NQN" || echo missing)"
	fi
	step "nvme disconnect -n $NQN; rmmod nvme_rdma"
	host_disconnect "$NQN" && rmmod nvme_rdma || { ok_c=1; sum[c]+="; the C nvme_rdma did not disconnect and unload"; }
fi
target_subsys_del "$NQN"
if [ $ok_c = 0 ]; then sum[result]="OK"; else sum[result]="FAILED: the C nvme_rdma comparison"; fi
summary
[ "${sum[result]}" = OK ]
