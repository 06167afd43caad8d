#!/bin/bash
# In a guest booting Debian's own kernel (scripts/vm-run --flavour debian) with the install an
# admin gets (dkms and /etc/modprobe.d/rnvme-rdma.conf, tools/debian-check):
# - module: dkms built rnvme_rdma for this kernel: it serves `nvme connect -t rdma`, used as an
#   admin would use it, with the C nvme_rdma of the same kernel as the control in the same boot;
# - fallback: this kernel has no rnvme_rdma (dkms skipped it, its build failed, or it was
#   removed), the install left in place: the same admin commands load the C nvme_rdma, with one
#   line saying why.
# Usage: debian.sh KERNELRELEASE module|fallback VERSION   (VERSION: dkms.conf's PACKAGE_VERSION)
# (TAP in $RNVME_RESULTS/results.tap, group "debian", or "debian_fallback" in fallback mode)
. "$RNVME_PROJECT/tools/guest/lib.sh"
: >"$TAP_FILE"
KV=$1 MODE=$2 VERSION=$3
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
	local v
	v=$(modinfo -F version rnvme_rdma)
	[ "$v" = "$VERSION" ] || { fail "modinfo version is '$v', not dkms.conf's '$VERSION'"; return 1; }
	[ -n "$(modinfo -F description rnvme_rdma)" ] && [ "$(modinfo -F license rnvme_rdma)" = GPL ] ||
		{ fail "modinfo lacks the description or the GPL license"; return 1; }
	info "$(cat /proc/version | cut -c1-100)"
	info "rnvme_rdma $v: $f, vermagic '$m'"
}

# t_deb_nomodule: the fallback's premise: this kernel has no rnvme_rdma, and the install (the
# modprobe.d file, dkms) is in place.
t_deb_nomodule() {
	[ "$(uname -r)" = "$KV" ] || { fail "running $(uname -r), not $KV"; return 1; }
	! modinfo -n rnvme_rdma >/dev/null 2>&1 || { fail "rnvme_rdma is installed for $KV: $(modinfo -n rnvme_rdma)"; return 1; }
	grep -q '^install nvme_rdma' /etc/modprobe.d/rnvme-rdma.conf || { fail "no rnvme-rdma.conf install rule in /etc/modprobe.d"; return 1; }
	[ -d /usr/src/rnvme-rdma-"$VERSION" ] || { fail "rnvme-rdma $VERSION is not in dkms' sources"; return 1; }
	info "$(cat /proc/version | cut -c1-100); no rnvme_rdma for it, rnvme-rdma $VERSION installed for other kernels"
}

# t_deb_alias: `modprobe nvme-rdma` loads rnvme_rdma through the installed modprobe.d rule, not
# the C nvme_rdma, silently; unsigned, it taints the kernel (E) with the kernel's own message, as
# an out-of-tree module (O).
t_deb_alias() {
	local t
	[ ! -d /sys/module/rnvme_rdma ] && [ ! -d /sys/module/nvme_rdma ] || { fail "a transport is already loaded"; return 1; }
	dmesg_mark
	modprobe nvme-rdma 2>/tmp/modprobe.err || { fail "modprobe nvme-rdma failed: $(cat /tmp/modprobe.err)"; return 1; }
	[ ! -s /tmp/modprobe.err ] || { fail "modprobe nvme-rdma printed: $(cat /tmp/modprobe.err)"; return 1; }
	t=$(dmesg_since_mark | grep 'rnvme-rdma: ')
	[ -z "$t" ] || { fail "a fallback line: $t"; return 1; }
	[ -d /sys/module/rnvme_rdma ] || { fail "modprobe nvme-rdma did not load rnvme_rdma"; return 1; }
	[ ! -d /sys/module/nvme_rdma ] || { fail "modprobe nvme-rdma loaded the C nvme_rdma"; return 1; }
	t=$(cat /sys/module/rnvme_rdma/taint)
	[ "$t" = OE ] || { fail "rnvme_rdma taint is '$t', want OE (out-of-tree, unsigned)"; return 1; }
	dmesg_since_mark | grep -q 'rnvme_rdma: module verification failed: signature and/or required key missing' ||
		{ fail "no signature message in the kernel log"; return 1; }
	info "loaded through the modprobe.d rule: $(lsmod | awk '$1 == "rnvme_rdma" { print $1, $2 " bytes, used by " $3 }'); taint $t (unsigned: see distro-kernels.rst for MOK signing)"
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

# t_deb_rnvme: `modprobe -r nvme-rdma` unloads rnvme_rdma (the rule's remove half); then, with no
# transport loaded, `nvme connect -t rdma` makes the kernel ask for nvme-rdma (request_module):
# rnvme_rdma serves the connection.
t_deb_rnvme() {
	[ -d /sys/module/rnvme_rdma ] || { fail "rnvme_rdma is not loaded"; return 1; }
	modprobe -r nvme-rdma || { fail "modprobe -r nvme-rdma failed"; return 1; }
	[ ! -d /sys/module/rnvme_rdma ] && [ ! -d /sys/module/nvme_rdma ] || { fail "modprobe -r nvme-rdma left a transport loaded"; return 1; }
	modprobe nvme-fabrics || { fail "cannot load nvme-fabrics"; return 1; }
	deb_io rnvme || return 1
	rmmod rnvme_rdma || { fail "rmmod rnvme_rdma failed"; return 1; }
}

# t_deb_fallback_connect: no transport loaded, `nvme connect -t rdma`: the kernel's request for
# nvme-rdma loads the C nvme_rdma (rnvme_rdma is not there), with one kernel-log line saying why;
# the C driver serves the same I/O as in the module guest.
t_deb_fallback_connect() {
	local why
	[ ! -d /sys/module/rnvme_rdma ] && [ ! -d /sys/module/nvme_rdma ] || { fail "a transport is already loaded"; return 1; }
	modprobe nvme-fabrics || { fail "cannot load nvme-fabrics"; return 1; }
	dmesg_mark
	deb_io c || return 1
	why=$(dmesg_since_mark | grep 'rnvme-rdma: ')
	[ "$(grep -c . <<<"$why")" = 1 ] && grep -q "rnvme-rdma: rnvme_rdma not loaded on $KV (not installed for this kernel); loading the C nvme_rdma$" <<<"$why" ||
		{ fail "not one fallback line naming the reason: '$why'"; return 1; }
	[ -d /sys/module/nvme_rdma ] && [ ! -d /sys/module/rnvme_rdma ] || { fail "the C nvme_rdma is not what loaded"; return 1; }
	info "kernel log: ${why#*] }"
	rmmod nvme_rdma || { fail "rmmod nvme_rdma failed"; return 1; }
}

# t_deb_fallback_modprobe: `modprobe nvme-rdma` by hand: exit 0, the C nvme_rdma loaded, the same
# one line on modprobe's stderr and in the kernel log.
t_deb_fallback_modprobe() {
	local why
	dmesg_mark
	modprobe nvme-rdma 2>/tmp/modprobe.err || { fail "modprobe nvme-rdma failed: $(cat /tmp/modprobe.err)"; return 1; }
	[ -d /sys/module/nvme_rdma ] && [ ! -d /sys/module/rnvme_rdma ] || { fail "the C nvme_rdma is not what loaded"; return 1; }
	[ "$(wc -l </tmp/modprobe.err)" = 1 ] && grep -qx "rnvme-rdma: rnvme_rdma not loaded on $KV (not installed for this kernel); loading the C nvme_rdma" /tmp/modprobe.err ||
		{ fail "modprobe's stderr is not the one fallback line: $(head -c 300 /tmp/modprobe.err)"; return 1; }
	why=$(dmesg_since_mark | grep -c 'rnvme-rdma: ')
	[ "$why" = 1 ] || { fail "$why fallback lines in the kernel log, want 1"; return 1; }
	info "modprobe: $(cat /tmp/modprobe.err)"
	rmmod nvme_rdma || { fail "rmmod nvme_rdma failed"; return 1; }
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

if [ "$MODE" = fallback ]; then run_group debian_fallback; else run_group debian; fi
if [ "$MODE" = fallback ]; then
	run_test "debian: Debian's own kernel $KV runs without rnvme_rdma, the install in place" t_deb_nomodule
else
	run_test "debian: Debian's own kernel $KV runs, rnvme_rdma $VERSION installed by dkms for it" t_deb_kernel
fi
fabric_up "$FABRIC" >/dev/null && target_port_up "$FABRIC" && target_subsys_add "$NQN" mem:64 >/dev/null &&
	target_subsys_link "$NQN" "$FABRIC" || { tap_not_ok "debian: rxe and the nvmet-rdma target come up"; exit 1; }
if [ "$MODE" = fallback ]; then
	run_test "debian: without rnvme_rdma, nvme connect -t rdma loads the C nvme_rdma (one kernel line why), $MB MiB identical + fio crc32c verify" t_deb_fallback_connect
	run_test "debian: without rnvme_rdma, modprobe nvme-rdma loads the C nvme_rdma, exit 0, one line why" t_deb_fallback_modprobe
else
	t="debian: a module built for another kernel is refused at load with one kernel line"
	if [ -f /results/foreign.ko ]; then run_test "$t" t_deb_foreign /results/foreign.ko
	else tap_skip "$t" "no reference-kernel rnvme_rdma.ko to try (make check builds one first)"; fi
	run_test "debian: modprobe nvme-rdma loads rnvme_rdma through the modprobe.d rule, silently (unsigned: taint OE)" t_deb_alias
	run_test "debian: modprobe -r nvme-rdma unloads it; nvme connect -t rdma loads rnvme_rdma (the kernel's request), $MB MiB identical + fio crc32c verify, disconnect, rmmod" t_deb_rnvme
	run_test "debian: C nvme_rdma control in the same boot (same I/O); rnvme_rdma refused beside it" t_deb_c
fi
grep -q '^not ok' "$TAP_FILE" && exit 1
exit 0
