# shellcheck shell=bash
# Data path tests (issue 4): group `datapath` of tools/guest/suite.sh, which sources this file
# after lib.sh. See Documentation/testing.rst ("The datapath group").
#
# Parameters (suite.sh also takes them as arguments: `suite.sh datapath driver=c fabrics=rxe`):
#   HOST_DRIVER=rnvme|c   rnvme: `modprobe nvme-rdma` (the modprobe.d alias loads rnvme_rdma);
#                         c: the C nvme_rdma (load_c_driver). Never both at once. A list
#                         ("rnvme,c") runs the whole group once per driver.
#   DP_FABRICS="rxe siw"  every test runs once per fabric (commas or spaces).

HOST_DRIVER=${HOST_DRIVER:-rnvme}
DP_FABRICS=${DP_FABRICS:-rxe siw}
# rnvme_rdma's data path counters: one `name value` pair per line.
RNVME_STATS=${RNVME_STATS:-/sys/kernel/debug/rnvme_rdma/stats}

# What the kernel must print (extended regexps, each line of a value must match some line of the
# log since the attempt) for each bad-input case. The C patterns are what nvme_rdma / the fabrics
# core print on 7.3.4; case:fabric overrides case. Adapt the rnvme patterns to rnvme_rdma's text.
declare -A DP_MSG_C=(
	[wrong_nqn]='Connect Invalid Data Parameter, subsysnqn "nqn\.2026-11\.io\.rnvme:dp-nosuch"
failed to connect queue: 0 ret='
	[wrong_port:rxe]='Connect rejected: status 8 \(invalid service ID\)
rdma connection establishment failed \(-104\)'
	[wrong_port:siw]='rdma_connect_locked failed \(-111\)
rdma connection establishment failed \(-111\)'
	[no_listener]='rdma connection establishment failed \(-104\)'
	[queue_size]='nvme_fabrics: Invalid queue_size 2048'
	[queue_clamp]='queue_size 1024 > ctrl sqsize 128, clamping down'
)
declare -A DP_MSG_RNVME=(
	[wrong_nqn]='Connect Invalid Data Parameter, subsysnqn "nqn\.2026-11\.io\.rnvme:dp-nosuch"'
	[wrong_port]='Connect rejected: status 8|rdma_connect_locked failed|rdma connection establishment failed'
	[no_listener]='address resolution failed|route resolution failed|peer unreachable|no RDMA connection after|rdma connection establishment failed'
	[queue_size]='nvme_fabrics: Invalid queue_size 2048'
	[queue_clamp]='queue_size 1024 > ctrl sqsize 128, clamping down'
)
# Upper bound (seconds) for each failed connect attempt to return.
declare -A DP_BOUND=([wrong_nqn]=60 [wrong_port]=60 [no_listener]=90 [queue_size]=30)

# A second host identity (two controllers of one subsystem from "another host").
DP_HOSTID2=7d3bb1a4-55e2-4c0e-9a51-2b8f0a6c9e11
DP_HOSTNQN2=nqn.2014-08.org.nvmexpress:uuid:$DP_HOSTID2

# ------------------------------------------------------------------------------------- helpers

dp_nqn() { echo "nqn.2026-11.io.rnvme:dp-$1-$2"; }    # dp_nqn FABRIC NAME
dp_mod() { [ "$1" = c ] && echo nvme_rdma || echo rnvme_rdma; }

# dp_load [DRIVER]: DRIVER's module loaded, the other one not.
dp_load() {
	local d=${1:-$HOST_DRIVER} other
	case "$d" in
	rnvme) other=nvme_rdma;;
	c) other=rnvme_rdma;;
	*) fail "HOST_DRIVER must be rnvme or c, not '$d'"; return 1;;
	esac
	if [ -d "/sys/module/$other" ]; then
		rmmod "$other" || { fail "cannot unload $other to switch to $(dp_mod "$d")"; return 1; }
	fi
	if [ "$d" = rnvme ]; then modprobe nvme-rdma; else load_c_driver; fi ||
		{ fail "cannot load $(dp_mod "$d")"; return 1; }
	[ -d "/sys/module/$(dp_mod "$d")" ] || { fail "$(dp_mod "$d") is not loaded"; return 1; }
	[ ! -d "/sys/module/$other" ] || { fail "$other got loaded too"; return 1; }
}

# dp_unload: whichever host driver is loaded must unload.
dp_unload() {
	local m
	for m in rnvme_rdma nvme_rdma; do
		[ -d "/sys/module/$m" ] || continue
		rmmod "$m" || { fail "$m does not unload"; return 1; }
		[ ! -d "/sys/module/$m" ] || { fail "$m still loaded after rmmod"; return 1; }
	done
}

dp_ctrls() { ls /sys/class/nvme 2>/dev/null; }
# dp_no_ctrl: no host controller is left (the guest has no other NVMe device).
dp_no_ctrl() {
	wait_for 15 sh -c '[ -z "$(ls /sys/class/nvme 2>/dev/null)" ]' ||
		{ fail "controllers left behind: $(dp_ctrls | tr '\n' ' ')"; return 1; }
}

# dp_connect FABRIC NQN [nvme connect options]: connect (bounded) and wait for `live`. Prints the
# controller's sysfs directory (the one nvme-cli reports, not just any controller of NQN).
dp_connect() {
	local f=$1 nqn=$2 out n c; shift 2
	out=$(timeout 90 nvme connect -t rdma -a "$(fabric_addr "$f")" -s $TRSVCID -n "$nqn" "$@" 2>&1) ||
		{ fail "nvme connect -n $nqn $* over $f failed: $out"; dmesg | tail -n 8 >&2; return 1; }
	n=$(sed -n 's/^connecting to device: \(nvme[0-9]*\)$/\1/p' <<<"$out")
	[ -n "$n" ] || { fail "nvme connect did not name a controller: $out"; return 1; }
	c=/sys/class/nvme/$n
	wait_for 30 grep -qx live "$c/state" || { fail "$n is $(cat "$c/state" 2>/dev/null), not live"; return 1; }
	[ "$(cat "$c/subsysnqn")" = "$nqn" ] || { fail "$n is connected to $(cat "$c/subsysnqn"), not $nqn"; return 1; }
	echo "$c"
}

# dp_disconnect CTRL_DIR: disconnect that one controller and wait until it is gone.
dp_disconnect() {
	local n; n=$(basename "$1")
	timeout 60 nvme disconnect -d "$n" >/dev/null || { fail "nvme disconnect -d $n failed"; return 1; }
	wait_for 30 sh -c "[ ! -e /sys/class/nvme/$n ]" || { fail "$n still present after disconnect"; return 1; }
}

# dp_ns NQN: the namespace block device, once it exists.
dp_ns() {
	wait_for 30 ns_of "$1" || { fail "no namespace block device for $1"; return 1; }
	ns_of "$1"
}

# dp_put DEV OFFSET FILE BS / dp_check DEV OFFSET FILE: direct write / direct read and compare.
dp_put() {
	timeout 120 dd if="$3" of="$1" bs="$4" seek="$2" oflag=direct,seek_bytes conv=notrunc status=none ||
		{ fail "writing $3 to $1 at $2 failed"; return 1; }
}
dp_check() {
	local len; len=$(stat -c %s "$3")
	timeout 120 dd if="$1" bs=64k skip="$2" count="$len" iflag=direct,skip_bytes,count_bytes status=none >/tmp/dp-readback ||
		{ fail "reading $len bytes from $1 at $2 failed"; return 1; }
	cmp /tmp/dp-readback "$3" || { fail "data read from $1 at $2 differs from $3"; return 1; }
}

# dp_expect_log CASE FABRIC: the log since the mark has every line of the case's pattern.
dp_expect_log() {
	local -n msgs=DP_MSG_$([ "$HOST_DRIVER" = rnvme ] && echo RNVME || echo C)
	local pat=${msgs[$1:$2]:-${msgs[$1]}} p log
	log=$(dmesg_since_mark)
	while IFS= read -r p; do
		[ -n "$p" ] || continue
		grep -qE "$p" <<<"$log" || { fail "kernel log lacks /$p/ ($1)"; return 1; }
	done <<<"$pat"
}
# The kernel log since the mark, for the record (the rnvme_rdma load attempt that every connect
# triggers while the C driver is loaded is left out).
dp_show_log() {
	dmesg_since_mark | grep -v 'the C nvme_rdma transport is loaded' | sed 's/^\[ *[0-9.]*\] /#     dmesg: /'
}

# dp_stat NAME: a counter of $RNVME_STATS.
dp_stat() {
	local v
	v=$(awk -v n="$1" '$1 == n { print $2; f = 1 } END { exit !f }' "$RNVME_STATS") ||
		{ fail "$RNVME_STATS has no '$1' counter"; return 1; }
	echo "$v"
}

# dp_fio NAME EXPECT_WRITE EXPECT_READ FIO_ARGS...: fio with crc32c verification on $DP_DEV; all
# jobs together must have written and read back exactly the expected bytes, with no error.
dp_fio() {
	local name=$1 ew=$2 er=$3 j=/tmp/dp-fio-$1.json sum w r e rt; shift 3
	if ! timeout 300 fio --name="$name" --filename="$DP_DEV" --ioengine=libaio --direct=1 \
		--verify=crc32c --verify_fatal=1 --verify_dump=0 --output-format=json --output="$j" "$@" \
		>/tmp/dp-fio.err 2>&1; then
		fail "fio $name failed: $(head -c 2000 /tmp/dp-fio.err)"; return 1
	fi
	# fio may put notes around the JSON object.
	sum=$(python3 -c '
import json, sys
t = open(sys.argv[1]).read()
d = json.JSONDecoder().raw_decode(t[t.index("{"):])[0]
j = d["jobs"]
print(sum(x["write"]["io_bytes"] for x in j), sum(x["read"]["io_bytes"] for x in j),
      sum(x["error"] for x in j), max(x["job_runtime"] for x in j))' "$j") ||
		{ fail "fio $name: unreadable JSON: $(head -c 1000 "$j")"; return 1; }
	read -r w r e rt <<<"$sum"
	info "fio $name: wrote $w B, read+verified $r B in $((rt / 1000)).$((rt % 1000 / 100)) s"
	[ "$e" = 0 ] || { fail "fio $name: jobs report error $e"; return 1; }
	# (EXPECT_WRITE "-": a --verify_only pass, for which fio counts the skipped writes)
	[ "$ew" = - ] || [ "$w" = "$ew" ] || { fail "fio $name: wrote $w bytes, expected $ew"; return 1; }
	[ "$r" = "$er" ] || { fail "fio $name: read back $r bytes, expected $er"; return 1; }
}

# Run after every test: nothing mounted, no controller left. A test that passed but left a
# controller fails; after a failure, clean up so the next test starts from a known state.
dp_wrap() {
	local rc=0 m
	"$@" || rc=1
	for m in /mnt/dp-*; do
		mountpoint -q "$m" 2>/dev/null || continue
		[ $rc = 0 ] && fail "$m left mounted"
		rc=1; umount "$m"
	done
	if [ -n "$(dp_ctrls)" ]; then
		[ $rc = 0 ] && fail "controllers left behind: $(dp_ctrls | tr '\n' ' ')"
		rc=1
		timeout 60 nvme disconnect-all >/dev/null 2>&1
		wait_for 30 sh -c '[ -z "$(ls /sys/class/nvme 2>/dev/null)" ]'
	fi
	return $rc
}

# ------------------------------------------------------------------------------------- tests

t_dp_setup() {
	local f=$1 s
	fabric_up "$f" >/dev/null && target_port_up "$f" || return 1
	target_subsys_add "$(dp_nqn "$f" a)" mem:64 >/dev/null &&
		target_subsys_add "$(dp_nqn "$f" b)" mem:16 >/dev/null &&
		target_subsys_add "$(dp_nqn "$f" fs)" mem:64 >/dev/null || return 1
	for s in a b fs; do target_subsys_link "$(dp_nqn "$f" "$s")" "$f" || return 1; done
	dp_load || return 1
	dp_no_ctrl || return 1
	info "$f: nvmet-rdma on $(fabric_addr "$f"):$TRSVCID with $(ls "$NVMET/ports/${FABRIC_PORT_ID[$f]}/subsystems" | tr '\n' ' '); $(dp_mod "$HOST_DRIVER") loaded"
}

t_dp_teardown() {
	local f=$1 s
	dp_no_ctrl || return 1
	dp_unload || return 1
	for s in a b fs; do target_subsys_del "$(dp_nqn "$f" "$s")" || { fail "cannot remove subsystem $s"; return 1; }; done
}

# t_dp_connect FABRIC [nvme connect options]: the controller comes up with the options applied.
t_dp_connect() {
	local f=$1 nqn c n ns q=128 nio="" maxq qc sq out cntlid; shift
	nqn=$(dp_nqn "$f" a)
	local -a o=("$@")
	while [ $# -gt 0 ]; do
		case "$1" in -i) nio=$2; shift;; -Q) q=$2; shift;; esac
		shift
	done
	dp_load || return 1
	dmesg_mark
	c=$(dp_connect "$f" "$nqn" "${o[@]}") || return 1
	n=$(basename "$c")
	[ "$(cat "$c/transport")" = rdma ] || { fail "$n: transport is $(cat "$c/transport"), not rdma"; return 1; }
	[ "$(cat "$c/state")" = live ] || { fail "$n: state is $(cat "$c/state")"; return 1; }
	grep -q "^traddr=$(fabric_addr "$f"),trsvcid=$TRSVCID" "$c/address" ||
		{ fail "$n: address is '$(cat "$c/address")'"; return 1; }
	# I/O queues: min(-i, online CPUs) (default: one per online CPU), plus the admin queue.
	qc=$(( ${nio:-$(nproc)} < $(nproc) ? ${nio:-$(nproc)} : $(nproc) ))
	qc=$((qc + 1))
	[ "$(cat "$c/queue_count")" = "$qc" ] || { fail "$n: queue_count $(cat "$c/queue_count"), expected $qc"; return 1; }
	# sqsize is 0's based: min(-Q (default 128), what the target allows (MQES + 1)) - 1.
	maxq=$(cat "$NVMET/ports/${FABRIC_PORT_ID[$f]}/param_max_queue_size")
	sq=$(( (q < maxq ? q : maxq) - 1 ))
	[ "$(cat "$c/sqsize")" = "$sq" ] || { fail "$n: sqsize $(cat "$c/sqsize"), expected $sq (queue size $q, target max $maxq)"; return 1; }
	ns=$(dp_ns "$nqn") || return 1
	out=$(timeout 30 nvme list) || { fail "nvme list failed"; return 1; }
	grep -q "^$ns " <<<"$out" || { fail "nvme list does not show $ns"; echo "$out" >&2; return 1; }
	[ "$(blockdev --getsize64 "$ns")" = $((64 << 20)) ] || { fail "$ns has $(blockdev --getsize64 "$ns") bytes, not 64 MiB"; return 1; }
	out=$(timeout 30 nvme id-ctrl "/dev/$n") || { fail "nvme id-ctrl /dev/$n failed"; return 1; }
	grep -qE "^subnqn +: $nqn\$" <<<"$out" || { fail "id-ctrl: subnqn is not $nqn"; return 1; }
	cntlid=$(awk '$1 == "cntlid" { print $3 }' <<<"$out")
	[ "$((cntlid))" = "$(cat "$c/cntlid")" ] || { fail "id-ctrl cntlid $cntlid, sysfs $(cat "$c/cntlid")"; return 1; }
	head -c $((128 << 10)) /dev/urandom >/tmp/dp-pat
	dp_put "$ns" $((60 << 20)) /tmp/dp-pat 64k && dp_check "$ns" $((60 << 20)) /tmp/dp-pat || return 1
	info "$n live over $f ${o[*]:-(defaults)}: queue_count $qc, sqsize $sq, $ns in nvme list, id-ctrl ok, 128 KiB read back"
	dp_disconnect "$c" && dp_no_ctrl
}

t_dp_discover() {
	local f=$1 out want got a
	a=$(fabric_addr "$f")
	dp_load || return 1
	out=$(timeout 60 nvme discover -t rdma -a "$a" -s $TRSVCID 2>&1) || { fail "nvme discover failed: $out"; return 1; }
	want=$( (echo nqn.2014-08.org.nvmexpress.discovery; ls "$NVMET/ports/${FABRIC_PORT_ID[$f]}/subsystems") | sort)
	got=$(awk '$1 == "subnqn:" { print $2 }' <<<"$out" | sort)
	[ "$got" = "$want" ] || { fail "discovery log lists [$(echo $got)], port has [$(echo $want)]"; return 1; }
	[ -z "$(awk '$1 == "trtype:" && $2 != "rdma"' <<<"$out")" ] || { fail "non-rdma entries: $out"; return 1; }
	[ -z "$(awk -v a="$a" '$1 == "traddr:" && $2 != a' <<<"$out")" ] || { fail "entries with another traddr: $out"; return 1; }
	[ -z "$(awk -v s="$TRSVCID" '$1 == "trsvcid:" && $2 != s' <<<"$out")" ] || { fail "entries with another trsvcid: $out"; return 1; }
	info "discovery log of $a:$TRSVCID: $(echo $got)"
	dp_no_ctrl
}

t_dp_fio() {
	local f=$1 nqn c lbs M=$((1 << 20)) K=1024
	nqn=$(dp_nqn "$f" a)
	dp_load || return 1
	c=$(dp_connect "$f" "$nqn") || return 1
	DP_DEV=$(dp_ns "$nqn") || return 1
	lbs=$(cat "/sys/block/$(basename "$DP_DEV")/queue/logical_block_size")
	[ "$lbs" = 512 ] || info "logical block size is $lbs: the smallest block size used is $lbs, not 512"
	# Disjoint regions of the 64 MiB namespace; each job writes, then reads back and verifies.
	# Small on purpose: a KASAN guest under TCG moves about 1 MiB/s over soft RDMA.
	local mixed="$lbs/10:1k/10:4k/20:8k/10:12k/10:32k/10:64k/10:256k/10:1m/10"
	dp_fio seq-1m-qd1 $((2 * M)) $((2 * M)) --rw=write --bs=1M --iodepth=1 --offset=0 --size=2M || return 1
	dp_fio rand-${lbs}b-qd1-2jobs $((2 * 16 * K)) $((2 * 16 * K)) --rw=randwrite --bs="$lbs" --iodepth=1 \
		--numjobs=2 --offset=8M --offset_increment=1M --size=16K || return 1
	dp_fio rand-4k-qd32-2jobs $((2 * 256 * K)) $((2 * 256 * K)) --rw=randwrite --bs=4k --iodepth=32 \
		--numjobs=2 --offset=12M --offset_increment=1M --size=256K || return 1
	dp_fio rand-mixed-qd32-2jobs $((2 * 1536 * K)) $((2 * 1536 * K)) --rw=randwrite --bssplit="$mixed" \
		--iodepth=32 --numjobs=2 --offset=16M --offset_increment=4M --size=1536K || return 1
	dp_fio seq-128k-qd32-2jobs $((2 * 512 * K)) $((2 * 512 * K)) --rw=write --bs=128k --iodepth=32 \
		--numjobs=2 --offset=32M --offset_increment=1M --size=512K || return 1
	# Verified reads of earlier jobs' data, after everything else was written.
	dp_fio seq-1m-qd1 - $((2 * M)) --rw=write --bs=1M --iodepth=1 --offset=0 --size=2M --verify_only || return 1
	dp_fio rand-mixed-qd32-2jobs - $((2 * 1536 * K)) --rw=randwrite --bssplit="$mixed" \
		--iodepth=32 --numjobs=2 --offset=16M --offset_increment=4M --size=1536K --verify_only || return 1
	dp_disconnect "$c"
}

# dp_files DIR: a 1 MiB file, an odd-sized one, 20 small ones in a subdirectory.
dp_files() {
	local i
	head -c $((1 << 20)) /dev/urandom >"$1/big" && head -c 333333 /dev/urandom >"$1/odd" && mkdir "$1/d" || return 1
	for i in $(seq 1 20); do head -c $((i * 517)) /dev/urandom >"$1/d/f$i" || return 1; done
}

# t_dp_fs FABRIC ext4|xfs: a file system survives sync, drop_caches, remount and a reconnect.
t_dp_fs() {
	local f=$1 fs=$2 nqn c ns m=/mnt/dp-$1 i mo
	nqn=$(dp_nqn "$f" fs)
	dp_load || return 1
	c=$(dp_connect "$f" "$nqn") || return 1
	ns=$(dp_ns "$nqn") || return 1
	case "$fs" in
	ext4) timeout 180 mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=1,lazy_journal_init=1 "$ns";;
	# xfsprogs refuses file systems under 300 MiB (64 MiB log to zero) unless run "for testing".
	xfs) TEST_DIR=/tmp TEST_DEV=$ns QA_CHECK_FS=1 timeout 180 mkfs.xfs -q -f -K "$ns";;
	esac || { fail "mkfs.$fs $ns failed"; return 1; }
	mkdir -p "$m"
	# ext4: no background inode table zeroing competing with the test's I/O.
	[ "$fs" = ext4 ] && mo=noinit_itable || mo=defaults
	timeout 60 mount -o "$mo" "$ns" "$m" || { fail "cannot mount $ns ($fs)"; return 1; }
	dp_files "$m" || { fail "writing files on $fs failed"; umount "$m"; return 1; }
	(cd "$m" && find . -type f | sort | xargs sha256sum) >/tmp/dp-sums || { umount "$m"; return 1; }
	sync && echo 3 >/proc/sys/vm/drop_caches
	(cd "$m" && sha256sum --quiet -c /tmp/dp-sums) || { fail "checksums differ after sync + drop_caches"; umount "$m"; return 1; }
	timeout 60 umount "$m" || { fail "umount failed"; return 1; }
	# Reconnect: the data must come from the target, not from anything cached on the host.
	dp_disconnect "$c" || return 1
	c=$(dp_connect "$f" "$nqn") || return 1
	ns=$(dp_ns "$nqn") || return 1
	case "$fs" in
	ext4) timeout 120 e2fsck -f -n "$ns" >/tmp/dp-fsck 2>&1;;
	xfs) timeout 120 xfs_repair -n "$ns" >/tmp/dp-fsck 2>&1;;
	esac || { fail "$fs check of $ns reports problems: $(tail -n 5 /tmp/dp-fsck)"; return 1; }
	timeout 60 mount -o "$mo" "$ns" "$m" || { fail "cannot remount $ns"; return 1; }
	(cd "$m" && sha256sum --quiet -c /tmp/dp-sums) || { fail "checksums differ after remount + reconnect"; umount "$m"; return 1; }
	info "$fs on $ns: $(wc -l </tmp/dp-sums) files, sha256 identical after drop_caches and after umount/reconnect/fsck/mount"
	timeout 60 umount "$m" || { fail "umount failed"; return 1; }
	dp_disconnect "$c"
}

# t_dp_interop FABRIC A B: data written through driver A reads back identical through B after
# reconnecting, and the reverse. Large (MR path) and 4 KiB (inline path) writes.
t_dp_interop() {
	local f=$1 a=$2 b=$3 nqn c ns o1=$((48 << 20)) o2=$((52 << 20))
	nqn=$(dp_nqn "$f" a)
	head -c $((1 << 20)) /dev/urandom >/tmp/dp-p1; head -c $((128 << 10)) /dev/urandom >/tmp/dp-p1s
	head -c $((1 << 20)) /dev/urandom >/tmp/dp-p2; head -c $((128 << 10)) /dev/urandom >/tmp/dp-p2s
	# writer DRIVER: load, connect, write the first pattern set, read it back, disconnect.
	dp_load "$a" || return 1
	c=$(dp_connect "$f" "$nqn") && ns=$(dp_ns "$nqn") || return 1
	dp_put "$ns" $o1 /tmp/dp-p1 1M && dp_put "$ns" $((o1 + (3 << 20))) /tmp/dp-p1s 4k || return 1
	dp_check "$ns" $o1 /tmp/dp-p1 && dp_check "$ns" $((o1 + (3 << 20))) /tmp/dp-p1s || return 1
	dp_disconnect "$c" && dp_no_ctrl && dp_unload || return 1
	dp_load "$b" || return 1
	c=$(dp_connect "$f" "$nqn") && ns=$(dp_ns "$nqn") || return 1
	dp_check "$ns" $o1 /tmp/dp-p1 && dp_check "$ns" $((o1 + (3 << 20))) /tmp/dp-p1s ||
		{ fail "data written through $(dp_mod "$a") differs when read through $(dp_mod "$b")"; return 1; }
	dp_put "$ns" $o2 /tmp/dp-p2 1M && dp_put "$ns" $((o2 + (3 << 20))) /tmp/dp-p2s 4k || return 1
	dp_disconnect "$c" && dp_no_ctrl && dp_unload || return 1
	dp_load "$a" || return 1
	c=$(dp_connect "$f" "$nqn") && ns=$(dp_ns "$nqn") || return 1
	dp_check "$ns" $o2 /tmp/dp-p2 && dp_check "$ns" $((o2 + (3 << 20))) /tmp/dp-p2s ||
		{ fail "data written through $(dp_mod "$b") differs when read through $(dp_mod "$a")"; return 1; }
	info "$(dp_mod "$a") -> $(dp_mod "$b") -> $(dp_mod "$a"): 2 x 1.125 MiB (1 MiB and 4 KiB writes) identical across drivers"
	dp_disconnect "$c" && dp_no_ctrl && dp_load
}

# t_dp_bad FABRIC CASE: a connect that must fail, clearly and in bounded time, leaving nothing.
t_dp_bad() {
	local f=$1 case=$2 a nqn t0 el rc out bound
	a=$(fabric_addr "$f"); nqn=$(dp_nqn "$f" a); bound=${DP_BOUND[$case]}
	local -a args
	case "$case" in
	wrong_nqn) args=(-a "$a" -s $TRSVCID -n nqn.2026-11.io.rnvme:dp-nosuch);;
	wrong_port) args=(-a "$a" -s 4421 -n "$nqn");;
	no_listener) args=(-a "${a%.*}.99" -s $TRSVCID -n "$nqn");;
	queue_size) args=(-a "$a" -s $TRSVCID -n "$nqn" -Q 2048);;
	esac
	dp_load || return 1
	dmesg_mark; t0=$SECONDS
	out=$(timeout $((bound + 10)) nvme connect -t rdma "${args[@]}" 2>&1); rc=$?
	el=$((SECONDS - t0))
	info "nvme connect ${args[*]}: exit $rc after $el s: $(head -n1 <<<"$out")"
	dp_show_log
	[ $rc != 0 ] || { fail "the connect succeeded"; return 1; }
	[ $rc != 124 ] && [ $el -le "$bound" ] || { fail "no answer within $bound s"; return 1; }
	dp_expect_log "$case" "$f" || return 1
	dp_no_ctrl || return 1
	if [ "$case" = queue_size ]; then
		# The largest queue size the fabrics core accepts is clamped to what the target allows
		# (nvmet-rdma: MQES + 1 = the port's max_queue_size, 128), as the C driver does.
		local c maxq
		maxq=$(cat "$NVMET/ports/${FABRIC_PORT_ID[$f]}/param_max_queue_size")
		dmesg_mark
		c=$(dp_connect "$f" "$nqn" -Q 1024) || return 1
		dp_show_log
		[ "$(cat "$c/sqsize")" = $((maxq - 1)) ] || { fail "-Q 1024: sqsize $(cat "$c/sqsize"), expected $((maxq - 1))"; return 1; }
		dp_expect_log queue_clamp "$f" || return 1
		dp_disconnect "$c" && dp_no_ctrl || return 1
	fi
	dp_unload || return 1
	info "$(dp_mod "$HOST_DRIVER") unloads; reloading"
	dp_load
}

# t_dp_stats FABRIC: rnvme_rdma's counters prove small writes go in-capsule and large I/O through
# fast registration.
t_dp_stats() {
	local f=$1 nqn c ns k v prev i i0 m0 n0 r0 l0 i1 m1 n1 r1 l1 i2 m2 r2 l2
	nqn=$(dp_nqn "$f" a)
	dp_load || return 1
	[ -r "$RNVME_STATS" ] || { fail "$RNVME_STATS does not exist"; return 1; }
	while read -r k v; do
		[[ $k =~ ^[a-z_]+$ && $v =~ ^[0-9]+$ ]] || { fail "malformed line in $RNVME_STATS: '$k $v'"; return 1; }
	done < <(awk 1 "$RNVME_STATS")
	c=$(dp_connect "$f" "$nqn") && ns=$(dp_ns "$nqn") || return 1
	# Let connect-time I/O (partition scan) settle: registrations unchanged for 2 s.
	prev=-1
	for i in $(seq 1 15); do
		v=$(dp_stat mr_registrations) || return 1
		[ "$v" = "$prev" ] && break
		prev=$v; sleep 2
	done
	i0=$(dp_stat inline_writes) && m0=$(dp_stat mr_registrations) && n0=$(dp_stat no_data) &&
		r0=$(dp_stat remote_invalidations) && l0=$(dp_stat local_invalidations) || return 1
	# 256 single 4 KiB direct writes (page-aligned buffer: one SGE each), then 4 flushes.
	head -c $((1 << 20)) /dev/urandom >/tmp/dp-p4k
	dp_put "$ns" $((40 << 20)) /tmp/dp-p4k 4k || return 1
	for i in 1 2 3 4; do timeout 30 nvme flush "$ns" -n 1 >/dev/null || { fail "nvme flush failed"; return 1; }; done
	i1=$(dp_stat inline_writes) && m1=$(dp_stat mr_registrations) && n1=$(dp_stat no_data) &&
		r1=$(dp_stat remote_invalidations) && l1=$(dp_stat local_invalidations) || return 1
	info "256 x 4 KiB writes + 4 flushes: inline_writes +$((i1 - i0)), mr_registrations +$((m1 - m0)), no_data +$((n1 - n0)), remote_invalidations +$((r1 - r0)), local_invalidations +$((l1 - l0))"
	[ $((i1 - i0)) -ge 256 ] || { fail "inline_writes rose by $((i1 - i0)), expected >= 256"; return 1; }
	[ $((m1 - m0)) -le 8 ] || { fail "mr_registrations rose by $((m1 - m0)) during 4 KiB writes (at most 8 expected)"; return 1; }
	[ $((n1 - n0)) -ge 4 ] || { fail "no_data rose by $((n1 - n0)), expected >= 4 (flushes)"; return 1; }
	# 16 x 1 MiB direct writes and reads: fast registration, every MR invalidated (remotely or locally).
	head -c $((16 << 20)) /dev/urandom >/tmp/dp-p1m
	dp_put "$ns" $((40 << 20)) /tmp/dp-p1m 1M && dp_check "$ns" $((40 << 20)) /tmp/dp-p1m || return 1
	i2=$(dp_stat inline_writes) && m2=$(dp_stat mr_registrations) &&
		r2=$(dp_stat remote_invalidations) && l2=$(dp_stat local_invalidations) || return 1
	info "16 x 1 MiB writes + 1 MiB reads: mr_registrations +$((m2 - m1)), inline_writes +$((i2 - i1)), remote_invalidations +$((r2 - r1)), local_invalidations +$((l2 - l1))"
	[ $((m2 - m1)) -ge 32 ] || { fail "mr_registrations rose by $((m2 - m1)), expected >= 32"; return 1; }
	[ $((r2 - r1 + l2 - l1)) -ge $((m2 - m1)) ] ||
		{ fail "$((m2 - m1)) registrations but only $((r2 - r1 + l2 - l1)) invalidations"; return 1; }
	dp_disconnect "$c"
}

# t_dp_multi FABRIC: two subsystems, three controllers to one of them (default host, a duplicate
# connect -D, another host identity) and one to the other; I/O through each; disconnect all.
t_dp_multi() {
	local f=$1 A B c c1 c2 c3 c4 ca nsa nsb s i j n src dst slba pids rc=0
	A=$(dp_nqn "$f" a); B=$(dp_nqn "$f" b)
	dp_load || return 1
	c1=$(dp_connect "$f" "$A") && c2=$(dp_connect "$f" "$A" -D) &&
		c3=$(dp_connect "$f" "$A" -q "$DP_HOSTNQN2" -I "$DP_HOSTID2") && c4=$(dp_connect "$f" "$B") || return 1
	[ "$(dp_ctrls | wc -l)" = 4 ] || { fail "expected 4 controllers, have: $(dp_ctrls | tr '\n' ' ')"; return 1; }
	[ "$(cat "$c3/hostnqn")" = "$DP_HOSTNQN2" ] || { fail "$(basename "$c3") has hostnqn $(cat "$c3/hostnqn")"; return 1; }
	[ "$(cat "$c1/cntlid" "$c2/cntlid" "$c3/cntlid" | sort -u | wc -l)" = 3 ] ||
		{ fail "controllers of $A share a cntlid: $(cat "$c1/cntlid" "$c2/cntlid" "$c3/cntlid" | tr '\n' ' ')"; return 1; }
	# One multipath subsystem with the three controllers as paths; round-robin across them.
	s=$(dirname "$(ls -d /sys/class/nvme-subsystem/*/"$(basename "$c1")")")
	for c in "$c2" "$c3"; do
		[ -e "$s/$(basename "$c")" ] || { fail "$(basename "$c") is not in $(basename "$s") with $(basename "$c1")"; return 1; }
	done
	echo round-robin >"$s/iopolicy" || { fail "cannot set iopolicy round-robin"; return 1; }
	nsa=$(dp_ns "$A") && nsb=$(dp_ns "$B") || return 1
	# Each controller writes 8 KiB (16 LBAs) through its own queues; the next one reads it back.
	ca=("$c1" "$c2" "$c3")
	for i in 0 1 2; do
		j=$(((i + 1) % 3)); src=/dev/$(basename "${ca[$i]}"); dst=/dev/$(basename "${ca[$j]}")
		slba=$((100000 + 16 * i))
		head -c 8192 /dev/urandom >/tmp/dp-m$i
		timeout 30 nvme io-passthru "$src" --opcode=0x01 --namespace-id=1 --data-len=8192 --write \
			--input-file=/tmp/dp-m$i --cdw10=$slba --cdw12=15 >/dev/null 2>&1 ||
			{ fail "write through $src failed"; return 1; }
		rm -f /tmp/dp-r$i
		timeout 30 nvme io-passthru "$dst" --opcode=0x02 --namespace-id=1 --data-len=8192 --read \
			--cdw10=$slba --cdw12=15 --raw-binary >/tmp/dp-r$i 2>/dev/null ||
			{ fail "read through $dst failed"; return 1; }
		cmp /tmp/dp-r$i /tmp/dp-m$i || { fail "written through $src, read through $dst: differs"; return 1; }
		dp_check "$nsa" $((slba * 512)) /tmp/dp-m$i || return 1
	done
	# Concurrent verified I/O on both subsystems' namespaces (A round-robin over three paths).
	pids=()
	for n in "$nsa" "$nsb"; do
		timeout 300 fio --name=multi --filename="$n" --ioengine=libaio --direct=1 --rw=randwrite --bsrange=4k-256k \
			--iodepth=16 --numjobs=2 --size=512K --offset_increment=1M --verify=crc32c --verify_fatal=1 \
			--output=/tmp/dp-multi-$(basename "$n").out >/dev/null 2>&1 &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || rc=1; done
	[ $rc = 0 ] || { fail "concurrent fio verify failed: $(grep -h -i -m3 'err\|verify' /tmp/dp-multi-*.out)"; return 1; }
	info "4 controllers ($(for c in "$c1" "$c2" "$c3" "$c4"; do echo -n "$(basename "$c")/cntlid $(cat "$c/cntlid") "; done)), cross-controller passthru reads identical, concurrent fio verify on $nsa and $nsb"
	for c in "$c1" "$c2" "$c3" "$c4"; do dp_disconnect "$c" || return 1; done
	dp_no_ctrl
}

# ------------------------------------------------------------------------------------- group

group_datapath() {
	local drivers=${HOST_DRIVER//,/ } d
	for d in $drivers; do
		case "$d" in
		rnvme|c) HOST_DRIVER=$d dp_group_one;;
		*) tap_not_ok "datapath: HOST_DRIVER must be rnvme or c, not '$d'";;
		esac
	done
	HOST_DRIVER=${drivers// /,}
}

dp_group_one() {
	local f p d=$HOST_DRIVER
	for f in ${DP_FABRICS//,/ }; do
		p="datapath[$d/$f]"
		run_test "$p: setup: $f, nvmet-rdma, $(dp_mod "$d") loaded" dp_wrap t_dp_setup "$f"
		run_test "$p: connect with defaults" dp_wrap t_dp_connect "$f"
		run_test "$p: connect -i 1" dp_wrap t_dp_connect "$f" -i 1
		run_test "$p: connect -Q 16" dp_wrap t_dp_connect "$f" -Q 16
		run_test "$p: connect -Q 256" dp_wrap t_dp_connect "$f" -Q 256
		run_test "$p: nvme discover lists the port's subsystems" dp_wrap t_dp_discover "$f"
		run_test "$p: fio crc32c verify, 512 B-1 MiB, iodepth 1/32, 2 jobs" dp_wrap t_dp_fio "$f"
		run_test "$p: ext4 checksums survive drop_caches, remount, reconnect" dp_wrap t_dp_fs "$f" ext4
		run_test "$p: xfs checksums survive drop_caches, remount, reconnect" dp_wrap t_dp_fs "$f" xfs
		if [ "$d" = rnvme ]; then
			run_test "$p: interop rnvme_rdma -> nvme_rdma -> rnvme_rdma" dp_wrap t_dp_interop "$f" rnvme c
		else
			# rnvme <-> C needs HOST_DRIVER=rnvme; with c the same steps check the harness.
			run_test "$p: interop steps, nvme_rdma -> nvme_rdma (harness check)" dp_wrap t_dp_interop "$f" c c
		fi
		run_test "$p: bad input: wrong NQN" dp_wrap t_dp_bad "$f" wrong_nqn
		run_test "$p: bad input: wrong port (4421)" dp_wrap t_dp_bad "$f" wrong_port
		run_test "$p: bad input: nothing listening at the address" dp_wrap t_dp_bad "$f" no_listener
		run_test "$p: bad input: queue size 2048 refused, 1024 clamped" dp_wrap t_dp_bad "$f" queue_size
		if [ "$d" = rnvme ]; then
			run_test "$p: small writes inline, large I/O fast-registered (stats)" dp_wrap t_dp_stats "$f"
		else
			tap_skip "$p: small writes inline, large I/O fast-registered (stats)" "rnvme_rdma counters (driver=rnvme)"
		fi
		run_test "$p: multiple controllers, two subsystems, I/O on each" dp_wrap t_dp_multi "$f"
		run_test "$p: teardown: subsystems removed, driver unloads" dp_wrap t_dp_teardown "$f"
	done
}
