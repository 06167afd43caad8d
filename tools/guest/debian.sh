#!/bin/bash
# In a guest booting Debian's own kernel (scripts/vm-run --flavour debian; tools/debian-check
# installed rnvme_rdma for it with dkms beforehand): the module an admin would get, used as an
# admin would use it, with the C nvme_rdma of the same kernel as the control in the same boot.
# Usage: debian.sh KERNELRELEASE   (TAP in $RNVME_RESULTS/results.tap, group "debian")
. "$RNVME_PROJECT/tools/guest/lib.sh"
: >"$TAP_FILE"
KV=$1
NQN=nqn.2026-11.io.rnvme:debian
FABRIC=rxe   # Debian's kernel has no siw (CONFIG_RDMA_SIW is not set)
MB=16

# t_deb_kernel: the guest runs Debian's kernel, and the module the admin installed is dkms's.
t_deb_kernel() {
	local f m
	[ "$(uname -r)" = "$KV" ] || { fail "running $(uname -r), not $KV"; return 1; }
	grep -q 'Debian' /proc/version || { fail "not a Debian kernel: $(cat /proc/version)"; return 1; }
	grep -qx 'CONFIG_RUST=y' "/lib/modules/$KV/config" || { fail "no CONFIG_RUST=y in /lib/modules/$KV/config"; return 1; }
	f=$(modinfo -n rnvme_rdma) || { fail "modinfo finds no rnvme_rdma for $KV"; return 1; }
	case "$f" in "/lib/modules/$KV/updates/dkms/rnvme_rdma.ko"*) ;; *) fail "rnvme_rdma is $f, not dkms's"; return 1;; esac
	m=$(modinfo -F vermagic rnvme_rdma)
	[ "$m" = "$(modinfo -F vermagic nvme-core)" ] || { fail "vermagic '$m' is not nvme-core's '$(modinfo -F vermagic nvme-core)'"; return 1; }
	info "$(cat /proc/version | cut -c1-100)"
	info "rnvme_rdma: $f, vermagic '$m'"
}

# t_deb_alias: `modprobe nvme-rdma` (what `nvme connect -t rdma` asks the kernel for) loads
# rnvme_rdma through the installed modprobe.d alias, not the C nvme_rdma; unsigned, it taints the
# kernel (E) with the kernel's own message, as an out-of-tree module (O).
t_deb_alias() {
	local t
	[ ! -d /sys/module/rnvme_rdma ] && [ ! -d /sys/module/nvme_rdma ] || { fail "a transport is already loaded"; return 1; }
	dmesg_mark
	modprobe nvme-rdma || { fail "modprobe nvme-rdma failed"; return 1; }
	[ -d /sys/module/rnvme_rdma ] || { fail "modprobe nvme-rdma did not load rnvme_rdma"; return 1; }
	[ ! -d /sys/module/nvme_rdma ] || { fail "modprobe nvme-rdma loaded the C nvme_rdma"; return 1; }
	t=$(cat /sys/module/rnvme_rdma/taint)
	[ "$t" = OE ] || { fail "rnvme_rdma taint is '$t', want OE (out-of-tree, unsigned)"; return 1; }
	dmesg_since_mark | grep -q 'rnvme_rdma: module verification failed: signature and/or required key missing' ||
		{ fail "no signature message in the kernel log"; return 1; }
	info "loaded through the alias: $(lsmod | awk '$1 == "rnvme_rdma" { print $1, $2 " bytes, used by " $3 }'); taint $t (unsigned: see distro-kernels.rst for MOK signing)"
}

# deb_io DRIVER: connect over rxe through DRIVER's controller (rnvme: "transport rnvme_rdma" in
# the kernel's new-ctrl line; c: the C driver's line), write MB MiB of random data and read it back
# identical, fio 4-128 KiB random writes with crc32c verify of every block, disconnect.
deb_io() {
	local drv=$1 c dev line
	dmesg_mark
	c=$(host_connect "$FABRIC" "$NQN") || return 1
	line=$(dmesg_since_mark | grep 'new ctrl: ' | tail -n1)
	case "$drv:$line" in
	rnvme:*"transport rnvme_rdma"*|c:*"new ctrl: NQN"*) ;;
	*) fail "controller not created by $drv: '$line'"; host_disconnect "$NQN"; return 1;;
	esac
	[ "$drv" = rnvme ] || [[ $line != *rnvme_rdma* ]] || { fail "the C control's controller is rnvme_rdma's"; return 1; }
	info "$drv: $line; $(($(cat "$c/queue_count") - 1)) I/O queues"
	wait_for 30 ns_of "$NQN" || { fail "no namespace"; host_disconnect "$NQN"; return 1; }
	dev=$(ns_of "$NQN")
	head -c $((MB << 20)) /dev/urandom >/tmp/pattern
	dd if=/tmp/pattern of="$dev" bs=1M oflag=direct status=none &&
		dd if="$dev" of=/tmp/back bs=1M count=$MB iflag=direct status=none &&
		cmp -s /tmp/pattern /tmp/back || { fail "$drv: $MB MiB did not read back identical"; host_disconnect "$NQN"; return 1; }
	timeout 300 fio --name=deb --filename="$dev" --direct=1 --ioengine=libaio --rw=randwrite --bsrange=4k-128k \
		--iodepth=16 --size=${MB}M --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--output-format=json --output=/tmp/fio.json >/dev/null 2>/tmp/fio.err
	fio_json /tmp/fio.json
	[ "$FIO_ERR" = 0 ] && [ "$FIO_WRITE" = $((MB << 20)) ] && [ "$FIO_READ" = "$FIO_WRITE" ] ||
		{ fail "$drv: fio error ${FIO_ERR:-?}, wrote ${FIO_WRITE:-?} B, verified ${FIO_READ:-?} B ($(head -n1 /tmp/fio.err))"; host_disconnect "$NQN"; return 1; }
	info "$drv: $MB MiB read back identical; fio wrote $FIO_WRITE B and verified $FIO_READ B (crc32c) in $FIO_RUNTIME_MS ms"
	host_disconnect "$NQN"
}

t_deb_rnvme() {
	deb_io rnvme || return 1
	rmmod rnvme_rdma || { fail "rmmod rnvme_rdma failed"; return 1; }
}

# t_deb_c: the C nvme_rdma of Debian's kernel, same target, same I/O; while it is loaded, loading
# rnvme_rdma is refused with one clear line (two "rdma" transports would compete silently).
t_deb_c() {
	[ ! -d /sys/module/rnvme_rdma ] || { fail "rnvme_rdma still loaded"; return 1; }
	load_c_driver || return 1
	dmesg_mark
	if modprobe rnvme_rdma 2>/dev/null; then fail "rnvme_rdma loaded beside the C nvme_rdma"; rmmod rnvme_rdma; return 1; fi
	dmesg_since_mark | grep -q 'rnvme_rdma: the C nvme_rdma transport is loaded; unload it' ||
		{ fail "no refusal line in the kernel log"; return 1; }
	info "beside the C driver: $(dmesg_since_mark | grep -m1 'rnvme_rdma: ' | sed 's/^\[[ 0-9.]*\] //')"
	deb_io c || return 1
	rmmod nvme_rdma || { fail "rmmod nvme_rdma failed"; return 1; }
}

# t_deb_foreign KO: a module built for another kernel (the reference kernel's rnvme_rdma, which
# tools/debian-check passes when make check built it) is refused at load by the kernel, with one
# line: the size of struct module (the debug kernel's differs) or the vermagic; nothing stays.
t_deb_foreign() {
	local ko=$1 lines
	dmesg_mark
	insmod "$ko" 2>/tmp/insmod.err && { fail "$ko loaded on $KV"; rmmod rnvme_rdma; return 1; }
	lines=$(dmesg_since_mark | grep -c 'rnvme_rdma: ' || true)
	dmesg_since_mark | grep -qE "rnvme_rdma: (version magic '[^']*' should be '$KV |\.gnu\.linkonce\.this_module section size must match the kernel's built struct module size)" &&
		[ "$lines" = 1 ] ||
		{ fail "not one refusal line (got $lines): $(dmesg_since_mark | grep 'rnvme_rdma' | head -n 3)"; return 1; }
	[ ! -d /sys/module/rnvme_rdma ] || { fail "rnvme_rdma is loaded"; return 1; }
	info "$(modinfo -F vermagic "$ko" | cut -d' ' -f1)'s module: $(cat /tmp/insmod.err); kernel: $(dmesg_since_mark | grep 'rnvme_rdma: ' | sed 's/^\[[ 0-9.]*\] //')"
}

run_group debian
run_test "debian: Debian's own kernel $KV runs, rnvme_rdma installed by dkms for it" t_deb_kernel
fabric_up "$FABRIC" >/dev/null && target_port_up "$FABRIC" && target_subsys_add "$NQN" mem:64 >/dev/null &&
	target_subsys_link "$NQN" "$FABRIC" || { tap_not_ok "debian: rxe and the nvmet-rdma target come up"; exit 1; }
t="debian: a module built for another kernel is refused at load with one kernel line"
if [ -f /results/foreign.ko ]; then run_test "$t" t_deb_foreign /results/foreign.ko
else tap_skip "$t" "no reference-kernel rnvme_rdma.ko to try (make check builds one first)"; fi
run_test "debian: modprobe nvme-rdma loads rnvme_rdma through the alias (unsigned: taint OE)" t_deb_alias
run_test "debian: rnvme_rdma connects over rxe, $MB MiB identical + fio crc32c verify, disconnect, rmmod" t_deb_rnvme
run_test "debian: C nvme_rdma control in the same boot (same I/O); rnvme_rdma refused beside it" t_deb_c
grep -q '^not ok' "$TAP_FILE" && exit 1
exit 0
