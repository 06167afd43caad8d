# shellcheck shell=bash
# Data path tests: group `datapath` of tools/guest/suite.sh, which sources this file
# after lib.sh. See Documentation/testing.rst ("The datapath group").
#
# Parameters (suite.sh also takes them as arguments: `suite.sh datapath driver=c fabrics=rxe`):
#   HOST_DRIVER=rnvme|c   rnvme: `modprobe nvme-rdma` (the modprobe.d rule loads rnvme_rdma);
#                         c: the C nvme_rdma (load_c_driver). Never both at once. A list
#                         ("rnvme,c") runs the whole group once per driver.
#   DP_FABRICS="rxe siw"  every test runs once per fabric (commas or spaces).
#   FABRIC_SPLIT=yes|no   yes: the tests the fabric does not decide on one fabric only (lib.sh
#                         on_fabric; make check's default); no (the default): all on each.
#
# Speed: on a KASAN + kmemleak guest under TCG every exec costs a large fraction of a second, so
# the helpers below poll and parse with bash builtins (read, globs, [[ =~ ]]) and run external
# commands only for the real work.

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
DP_NQN=nqn.2026-11.io.rnvme:dp     # subsystems: $DP_NQN-FABRIC-{a,b,fs}
DP_NCPU=$(nproc)

# ------------------------------------------------------------------------------------- helpers

# A sleep without exec: a read with a timeout on a pipe that never gets data.
exec {DP_SLEEP_FD}<> <(:)
dp_sleep() { read -rt "$1" -u "$DP_SLEEP_FD" _ || :; }
# dp_until SECONDS CMD...: poll CMD (a shell function: no fork) every 0.1 s until it succeeds.
dp_until() {
	local end=$((SECONDS + $1)); shift
	until "$@"; do
		[ $SECONDS -lt $end ] || return 1
		dp_sleep 0.1
	done
}
# dp_rd VAR FILE: the first line of FILE ("" if unreadable).
dp_rd() { local -n _dp_rd=$1; _dp_rd=; read -r _dp_rd <"$2" 2>/dev/null; return 0; }

dp_mod() { case "$1" in c) echo nvme_rdma;; *) echo rnvme_rdma;; esac; }

# dp_load [DRIVER]: DRIVER's module loaded, the other one not.
dp_load() {
	local d=${1:-$HOST_DRIVER} m other
	case "$d" in
	rnvme) m=rnvme_rdma other=nvme_rdma;;
	c) m=nvme_rdma other=rnvme_rdma;;
	*) fail "HOST_DRIVER must be rnvme or c, not '$d'"; return 1;;
	esac
	if [ -d "/sys/module/$other" ]; then
		rmmod "$other" || { fail "cannot unload $other to switch to $m"; return 1; }
	fi
	[ -d "/sys/module/$m" ] && return 0
	if [ "$d" = rnvme ]; then modprobe nvme-rdma; else load_c_driver; fi || { fail "cannot load $m"; return 1; }
	[ -d "/sys/module/$m" ] || { fail "$m is not loaded"; return 1; }
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

dp_have_ctrl() { compgen -G '/sys/class/nvme/nvme*' >/dev/null; }
dp_ctrls() { local c; for c in /sys/class/nvme/nvme*; do [ -e "$c" ] && echo -n "${c##*/} "; done; }
# dp_no_ctrl: no host controller is left (the guest has no other NVMe device).
dp_no_ctrl() {
	dp_until 15 eval '! dp_have_ctrl' || { fail "controllers left behind: $(dp_ctrls)"; return 1; }
}

dp_is() { local v; dp_rd v "$1"; [ "$v" = "$2" ]; }     # dp_is FILE VALUE

# dp_connect FABRIC NQN [nvme connect options]: connect (bounded), wait for `live`; the
# controller's sysfs directory (the one nvme-cli reports) in DP_CTRL.
dp_connect() {
	local f=$1 nqn=$2 out c v; shift 2
	DP_CTRL=
	out=$(timeout 90 nvme connect -t rdma -a "${FABRIC_ADDR[$f]}" -s $TRSVCID -n "$nqn" "$@" 2>&1) ||
		{ fail "nvme connect -n $nqn $* over $f failed: $out"; dmesg | tail -n 8 >&2; return 1; }
	[[ $out =~ connecting\ to\ device:\ (nvme[0-9]+) ]] || { fail "nvme connect did not name a controller: $out"; return 1; }
	c=/sys/class/nvme/${BASH_REMATCH[1]}
	dp_until 30 dp_is "$c/state" live || { dp_rd v "$c/state"; fail "${c##*/} is '$v', not live"; return 1; }
	dp_rd v "$c/subsysnqn"
	[ "$v" = "$nqn" ] || { fail "${c##*/} is connected to $v, not $nqn"; return 1; }
	DP_CTRL=$c
}

# dp_disconnect CTRL_DIR: disconnect that one controller and wait until it is gone.
dp_disconnect() {
	local n=${1##*/}
	timeout 60 nvme disconnect -d "$n" >/dev/null || { fail "nvme disconnect -d $n failed"; return 1; }
	dp_until 30 eval "[ ! -e /sys/class/nvme/$n ]" || { fail "$n still present after disconnect"; return 1; }
}

# dp_ns NQN: the namespace block device (the multipath head of namespace 1) in DP_NS, once it
# exists.
dp_ns_now() {
	local s v n
	for s in /sys/class/nvme-subsystem/nvme-subsys*; do
		dp_rd v "$s/subsysnqn"
		[ "$v" = "$1" ] || continue
		for n in "$s"/nvme*n1; do
			[ -b "/dev/${n##*/}" ] && { DP_NS=/dev/${n##*/}; return 0; }
		done
	done
	return 1
}
dp_ns() {
	DP_NS=
	dp_until 30 dp_ns_now "$1" || { fail "no namespace block device for $1"; return 1; }
}

# dp_put DEV OFFSET FILE BS / dp_check DEV OFFSET FILE [BS]: direct write / direct read (BS at a
# time, default 64k) and compare.
dp_put() {
	timeout 120 dd if="$3" of="$1" bs="$4" seek="$2" oflag=direct,seek_bytes conv=notrunc status=none ||
		{ fail "writing $3 to $1 at $2 failed"; return 1; }
}
dp_check() {
	local len; len=$(stat -c %s "$3")
	timeout 120 dd if="$1" bs="${4:-64k}" skip="$2" count="$len" iflag=direct,skip_bytes,count_bytes status=none >/tmp/dp-readback ||
		{ fail "reading $len bytes from $1 at $2 failed"; return 1; }
	cmp /tmp/dp-readback "$3" || { fail "data read from $1 at $2 differs from $3"; return 1; }
}

# dp_expect_log CASE FABRIC: the log since the mark has every line of the case's pattern.
dp_expect_log() {
	local an=DP_MSG_C
	[ "$HOST_DRIVER" = rnvme ] && an=DP_MSG_RNVME
	local -n msgs=$an
	local pat=${msgs[$1:$2]:-${msgs[$1]}} p log
	log=$(dmesg_since_mark)
	while IFS= read -r p; do
		[ -n "$p" ] || continue
		[[ $log =~ $p ]] || { fail "kernel log lacks /$p/ ($1)"; return 1; }
	done <<<"$pat"
}
# The kernel log since the mark, for the record (the rnvme_rdma load attempt that every connect
# triggers while the C driver is loaded is left out).
dp_show_log() {
	local l
	while IFS= read -r l; do
		[[ $l == *'the C nvme_rdma transport is loaded'* ]] && continue
		echo "#     dmesg: ${l#\[*\] }"
	done < <(dmesg_since_mark)
}

# dp_stat NAME: a counter of $RNVME_STATS in DP_STAT.
dp_stat() {
	local k v
	DP_STAT=
	while read -r k v; do [ "$k" = "$1" ] && DP_STAT=$v; done <"$RNVME_STATS"
	[ -n "$k" ] && [ "$k" = "$1" ] && DP_STAT=$v      # a last line without a newline
	[ -n "$DP_STAT" ] || { fail "$RNVME_STATS has no '$1' counter"; return 1; }
}
# dp_settle: wait (at most ~30 s) until no fast-registered I/O is moving: mr_registrations and the
# invalidations (remote + local) unchanged for 2 s. Background I/O (the partition scan after a
# connect, udev probing a device that was closed after writing) would otherwise land in the next
# measurement, or be registered before a snapshot and invalidated after it.
dp_settle() {
	local i prev=- now
	for ((i = 0; i < 15; i++)); do
		dp_stats _dp_settle || return 1
		now="$_dp_settle_mr_registrations/$((_dp_settle_remote_invalidations + _dp_settle_local_invalidations))"
		[ "$now" = "$prev" ] && return 0
		prev=$now; dp_sleep 2
	done
	info "counters still moving after 30 s ($now)"
}
# dp_stats PREFIX: every counter the tests use, into PREFIX_<name> variables.
dp_stats() {
	local n
	for n in no_data inline_writes mr_registrations remote_invalidations local_invalidations polled_completions; do
		dp_stat "$n" || return 1
		printf -v "$1_$n" %s "$DP_STAT"
	done
}

# dp_fio NAME EXPECT_WRITE EXPECT_READ FIO_ARGS...: fio with crc32c verification on $DP_DEV; all
# jobs together must have written and read back exactly the expected bytes, with no error.
# (EXPECT_WRITE "-": a --verify_only pass, for which fio counts the skipped writes.)
dp_fio() {
	local name=$1 ew=$2 er=$3 j=/tmp/dp-fio-$1.json w r e rt; shift 3
	if ! timeout 300 fio --name="$name" --filename="$DP_DEV" --ioengine=libaio --direct=1 \
		--verify=crc32c --verify_fatal=1 --group_reporting --output-format=json --output="$j" "$@" \
		>/tmp/dp-fio.err 2>&1; then
		fail "fio $name failed: $(head -c 2000 /tmp/dp-fio.err)"; return 1
	fi
	fio_json "$j"
	w=$FIO_WRITE r=$FIO_READ e=$FIO_ERR rt=$FIO_RUNTIME_MS
	[ -n "$w" ] && [ -n "$r" ] && [ -n "$e" ] || { fail "fio $name: unreadable JSON: $(head -c 1000 "$j")"; return 1; }
	info "fio $name: wrote $w B, read+verified $r B in $((rt / 1000)).$((rt % 1000 / 100)) s"
	[ "$e" = 0 ] || { fail "fio $name: error $e"; return 1; }
	[ "$ew" = - ] || [ "$w" = "$ew" ] || { fail "fio $name: wrote $w bytes, expected $ew"; return 1; }
	[ "$r" = "$er" ] || { fail "fio $name: read back $r bytes, expected $er"; return 1; }
}

# Run after every test: nothing mounted, no controller left. A test that passed but left a
# controller fails; after a failure, clean up so the next test starts from a known state.
dp_wrap() {
	local rc=0 dev mnt _
	"$@" || rc=1
	while read -r dev mnt _; do
		[[ $mnt == /mnt/dp-* ]] || continue
		[ $rc = 0 ] && fail "$mnt left mounted"
		rc=1; umount "$mnt"
	done </proc/mounts
	if dp_have_ctrl; then
		[ $rc = 0 ] && fail "controllers left behind: $(dp_ctrls)"
		rc=1
		timeout 60 nvme disconnect-all >/dev/null 2>&1
		dp_until 30 eval '! dp_have_ctrl'
	fi
	return $rc
}

# ------------------------------------------------------------------------------------- tests

t_dp_setup() {
	local f=$1 s
	fabric_up "$f" >/dev/null && target_port_up "$f" || return 1
	target_subsys_add "$DP_NQN-$f-a" dmem:64 >/dev/null &&
		target_subsys_add "$DP_NQN-$f-b" mem:16 >/dev/null &&
		target_subsys_add "$DP_NQN-$f-fs" mem:64 >/dev/null || return 1
	for s in a b fs; do target_subsys_link "$DP_NQN-$f-$s" "$f" || return 1; done
	dp_load || return 1
	dp_no_ctrl || return 1
	s=("$NVMET/ports/${FABRIC_PORT_ID[$f]}"/subsystems/*)
	info "$f: nvmet-rdma on ${FABRIC_ADDR[$f]}:$TRSVCID with ${s[*]##*/}; $(dp_mod "$HOST_DRIVER") loaded"
}

t_dp_teardown() {
	local f=$1 s
	dp_no_ctrl || return 1
	dp_unload || return 1
	for s in a b fs; do target_subsys_del "$DP_NQN-$f-$s" || { fail "cannot remove subsystem $s"; return 1; }; done
}

# t_dp_connect FABRIC [nvme connect options]: the controller comes up with the options applied.
t_dp_connect() {
	local f=$1 nqn=$DP_NQN-$1-a c n ns q=128 nio=$DP_NCPU maxq qc sq out v k _ cntlid="" subnqn=""; shift
	local -a o=("$@")
	while [ $# -gt 0 ]; do
		case "$1" in -i) nio=$2; shift;; -Q) q=$2; shift;; esac
		shift
	done
	dp_load || return 1
	dp_connect "$f" "$nqn" "${o[@]}" || return 1
	c=$DP_CTRL; n=${c##*/}
	dp_is "$c/transport" rdma || { dp_rd v "$c/transport"; fail "$n: transport is '$v', not rdma"; return 1; }
	dp_is "$c/state" live || { dp_rd v "$c/state"; fail "$n: state is '$v'"; return 1; }
	dp_rd v "$c/address"
	[[ $v == "traddr=${FABRIC_ADDR[$f]},trsvcid=$TRSVCID"* ]] || { fail "$n: address is '$v'"; return 1; }
	# I/O queues: min(-i, online CPUs) (default: one per online CPU), plus the admin queue.
	qc=$(( (nio < DP_NCPU ? nio : DP_NCPU) + 1 ))
	dp_is "$c/queue_count" $qc || { dp_rd v "$c/queue_count"; fail "$n: queue_count $v, expected $qc"; return 1; }
	# sqsize is 0's based: min(-Q (default 128), what the target allows (MQES + 1)) - 1.
	dp_rd maxq "$NVMET/ports/${FABRIC_PORT_ID[$f]}/param_max_queue_size"
	sq=$(( (q < maxq ? q : maxq) - 1 ))
	dp_is "$c/sqsize" $sq || { dp_rd v "$c/sqsize"; fail "$n: sqsize $v, expected $sq (queue size $q, target max $maxq)"; return 1; }
	dp_ns "$nqn" || return 1
	ns=$DP_NS
	out=$(timeout 30 nvme list) || { fail "nvme list failed"; return 1; }
	[[ $out == *$'\n'"$ns "* ]] || { fail "nvme list does not show $ns"; echo "$out" >&2; return 1; }
	dp_rd v "/sys/block/${ns#/dev/}/size"
	[ "$((v * 512))" = $((64 << 20)) ] || { fail "$ns has $((v * 512)) bytes, not 64 MiB"; return 1; }
	out=$(timeout 30 nvme id-ctrl "/dev/$n") || { fail "nvme id-ctrl /dev/$n failed"; return 1; }
	while read -r k _ v; do
		case "$k" in subnqn) subnqn=$v;; cntlid) cntlid=$v;; esac
	done <<<"$out"
	[ "$subnqn" = "$nqn" ] || { fail "id-ctrl: subnqn is '$subnqn', not $nqn"; return 1; }
	dp_rd v "$c/cntlid"
	[ -n "$cntlid" ] && [ "$((cntlid))" = "$v" ] || { fail "id-ctrl cntlid '$cntlid', sysfs $v"; return 1; }
	head -c $((128 << 10)) /dev/urandom >/tmp/dp-pat
	dp_put "$ns" $((60 << 20)) /tmp/dp-pat 64k && dp_check "$ns" $((60 << 20)) /tmp/dp-pat || return 1
	info "$n live over $f ${o[*]:-(defaults)}: queue_count $qc, sqsize $sq, $ns in nvme list, id-ctrl ok, 128 KiB read back"
	dp_disconnect "$c" && dp_no_ctrl
}

t_dp_discover() {
	local f=$1 a=${FABRIC_ADDR[$1]} out k v want got list=() bad=() s
	dp_load || return 1
	out=$(timeout 60 nvme discover -t rdma -a "$a" -s $TRSVCID 2>&1) || { fail "nvme discover failed: $out"; return 1; }
	while read -r k v; do
		case "$k" in
		subnqn:) list+=("$v");;
		trtype:) [ "$v" = rdma ] || bad+=("trtype $v");;
		traddr:) [ "$v" = "$a" ] || bad+=("traddr $v");;
		trsvcid:) [ "$v" = $TRSVCID ] || bad+=("trsvcid $v");;
		esac
	done <<<"$out"
	[ ${#bad[@]} = 0 ] || { fail "entries for another transport/address: ${bad[*]}"; return 1; }
	s=("$NVMET/ports/${FABRIC_PORT_ID[$f]}"/subsystems/*)
	want=$(printf '%s\n' nqn.2014-08.org.nvmexpress.discovery "${s[@]##*/}" | sort)
	got=$(printf '%s\n' "${list[@]}" | sort)
	[ "$got" = "$want" ] || { fail "discovery log lists [${got//$'\n'/ }], port has [${want//$'\n'/ }]"; return 1; }
	info "discovery log of $a:$TRSVCID: ${got//$'\n'/ }"
	dp_no_ctrl
}

t_dp_fio() {
	local f=$1 nqn=$DP_NQN-$1-a c lbs M=$((1 << 20)) K=1024
	dp_load || return 1
	dp_connect "$f" "$nqn" || return 1
	c=$DP_CTRL
	dp_ns "$nqn" || return 1
	DP_DEV=$DP_NS
	dp_rd lbs "/sys/block/${DP_DEV#/dev/}/queue/logical_block_size"
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

# dp_files DIR: a 1 MiB file, an odd-sized one, 20 small ones in a subdirectory (written with
# builtins: no exec per file).
dp_files() {
	local i s=""
	head -c $((1 << 20)) /dev/urandom >"$1/big" && head -c 333333 /dev/urandom >"$1/odd" && mkdir "$1/d" || return 1
	for ((i = 0; i < 800; i++)); do s+=$SRANDOM$SRANDOM; done
	for ((i = 1; i <= 20; i++)); do printf '%s' "${s:i*37:i*517}" >"$1/d/f$i" || return 1; done
}

# t_dp_fs FABRIC ext4|xfs: a file system survives sync, drop_caches, remount and a reconnect.
t_dp_fs() {
	local f=$1 fs=$2 nqn=$DP_NQN-$1-fs c ns m=/mnt/dp-$1 mo
	dp_load || return 1
	dp_connect "$f" "$nqn" || return 1
	c=$DP_CTRL
	dp_ns "$nqn" || return 1
	ns=$DP_NS
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
	sha256sum "$m/big" "$m/odd" "$m"/d/f* >/tmp/dp-sums || { umount "$m"; return 1; }
	sync && echo 3 >/proc/sys/vm/drop_caches
	sha256sum --quiet -c /tmp/dp-sums || { fail "checksums differ after sync + drop_caches"; umount "$m"; return 1; }
	timeout 60 umount "$m" || { fail "umount failed"; return 1; }
	# Reconnect: the data must come from the target, not from anything cached on the host.
	dp_disconnect "$c" || return 1
	dp_connect "$f" "$nqn" || return 1
	c=$DP_CTRL
	dp_ns "$nqn" || return 1
	ns=$DP_NS
	case "$fs" in
	ext4) timeout 120 e2fsck -f -n "$ns" >/tmp/dp-fsck 2>&1;;
	xfs) timeout 120 xfs_repair -n "$ns" >/tmp/dp-fsck 2>&1;;
	esac || { fail "$fs check of $ns reports problems: $(tail -n 5 /tmp/dp-fsck)"; return 1; }
	timeout 60 mount -o "$mo" "$ns" "$m" || { fail "cannot remount $ns"; return 1; }
	sha256sum --quiet -c /tmp/dp-sums || { fail "checksums differ after remount + reconnect"; umount "$m"; return 1; }
	info "$fs on $ns: 22 files, sha256 identical after drop_caches and after umount/reconnect/fsck/mount"
	timeout 60 umount "$m" || { fail "umount failed"; return 1; }
	dp_disconnect "$c"
}

# t_dp_interop FABRIC A B: data written through driver A reads back identical through B after
# reconnecting, and the reverse. Large (MR path) and 4 KiB (inline path) writes.
t_dp_interop() {
	local f=$1 a=$2 b=$3 nqn=$DP_NQN-$1-a o1=$((48 << 20)) o2=$((52 << 20)) s=$((3 << 20))
	head -c $((1 << 20)) /dev/urandom >/tmp/dp-p1; head -c $((128 << 10)) /dev/urandom >/tmp/dp-p1s
	head -c $((1 << 20)) /dev/urandom >/tmp/dp-p2; head -c $((128 << 10)) /dev/urandom >/tmp/dp-p2s
	dp_load "$a" || return 1
	dp_connect "$f" "$nqn" && dp_ns "$nqn" || return 1
	dp_put "$DP_NS" $o1 /tmp/dp-p1 1M && dp_put "$DP_NS" $((o1 + s)) /tmp/dp-p1s 4k || return 1
	dp_check "$DP_NS" $o1 /tmp/dp-p1 && dp_check "$DP_NS" $((o1 + s)) /tmp/dp-p1s || return 1
	dp_disconnect "$DP_CTRL" && dp_no_ctrl && dp_unload || return 1
	dp_load "$b" || return 1
	dp_connect "$f" "$nqn" && dp_ns "$nqn" || return 1
	dp_check "$DP_NS" $o1 /tmp/dp-p1 && dp_check "$DP_NS" $((o1 + s)) /tmp/dp-p1s ||
		{ fail "data written through $(dp_mod "$a") differs when read through $(dp_mod "$b")"; return 1; }
	dp_put "$DP_NS" $o2 /tmp/dp-p2 1M && dp_put "$DP_NS" $((o2 + s)) /tmp/dp-p2s 4k || return 1
	dp_disconnect "$DP_CTRL" && dp_no_ctrl && dp_unload || return 1
	dp_load "$a" || return 1
	dp_connect "$f" "$nqn" && dp_ns "$nqn" || return 1
	dp_check "$DP_NS" $o2 /tmp/dp-p2 && dp_check "$DP_NS" $((o2 + s)) /tmp/dp-p2s ||
		{ fail "data written through $(dp_mod "$b") differs when read through $(dp_mod "$a")"; return 1; }
	info "$(dp_mod "$a") -> $(dp_mod "$b") -> $(dp_mod "$a"): 2 x 1.125 MiB (1 MiB and 4 KiB writes) identical across drivers"
	dp_disconnect "$DP_CTRL" && dp_no_ctrl && dp_load
}

# t_dp_bad FABRIC CASE: a connect that must fail, clearly and in bounded time, leaving nothing.
t_dp_bad() {
	local f=$1 case=$2 a=${FABRIC_ADDR[$1]} nqn=$DP_NQN-$1-a t0 el rc out bound
	bound=${DP_BOUND[$case]}
	local -a args
	case "$case" in
	wrong_nqn) args=(-a "$a" -s $TRSVCID -n nqn.2026-11.io.rnvme:dp-nosuch);;
	wrong_port) args=(-a "$a" -s 4421 -n "$nqn");;
	no_listener) args=(-a "${a%.*}.99" -s $TRSVCID -n "$nqn");;
	queue_size) args=(-a "$a" -s $TRSVCID -n "$nqn" -Q 2048);;
	*) fail "unknown case $case"; return 1;;
	esac
	dp_load || return 1
	dmesg_mark; t0=$SECONDS
	out=$(timeout $((bound + 10)) nvme connect -t rdma "${args[@]}" 2>&1); rc=$?
	el=$((SECONDS - t0))
	info "nvme connect ${args[*]}: exit $rc after $el s: ${out%%$'\n'*}"
	dp_show_log
	[ $rc != 0 ] || { fail "the connect succeeded"; return 1; }
	[ $rc != 124 ] && [ $el -le "$bound" ] || { fail "no answer within $bound s"; return 1; }
	dp_expect_log "$case" "$f" || return 1
	dp_no_ctrl || return 1
	if [ "$case" = queue_size ]; then
		# The largest queue size the fabrics core accepts is clamped to what the target allows
		# (nvmet-rdma: MQES + 1 = the port's max_queue_size, 128), as the C driver does.
		local maxq v
		dp_rd maxq "$NVMET/ports/${FABRIC_PORT_ID[$f]}/param_max_queue_size"
		dmesg_mark
		dp_connect "$f" "$nqn" -Q 1024 || return 1
		dp_show_log
		dp_is "$DP_CTRL/sqsize" $((maxq - 1)) || { dp_rd v "$DP_CTRL/sqsize"; fail "-Q 1024: sqsize $v, expected $((maxq - 1))"; return 1; }
		dp_expect_log queue_clamp "$f" || return 1
		dp_disconnect "$DP_CTRL" && dp_no_ctrl || return 1
	fi
	dp_unload || return 1
	info "$(dp_mod "$HOST_DRIVER") unloads; reloading"
	dp_load
}

# dp_mr_phase PREV CUR WHAT NEED: once the counters settle, snapshot them as CUR; since PREV,
# mr_registrations must have risen by at least NEED, and remote_invalidations by at least as much:
# nvmet-rdma answers every command whose keyed SGL asks for invalidation with SEND_WITH_INVALIDATE
# (nvmet_rdma_queue_response), so no MR is left to a local invalidation (a driver that
# invalidated locally, or never asked the target to, fails here).
dp_mr_phase() {
	local -n p_reg=$1_mr_registrations p_rem=$1_remote_invalidations p_loc=$1_local_invalidations p_inl=$1_inline_writes
	local -n c_reg=$2_mr_registrations c_rem=$2_remote_invalidations c_loc=$2_local_invalidations c_inl=$2_inline_writes
	dp_settle && dp_stats "$2" || return 1
	local dm=$((c_reg - p_reg)) drem=$((c_rem - p_rem)) dloc=$((c_loc - p_loc))
	info "$3: mr_registrations +$dm, inline_writes +$((c_inl - p_inl)), remote_invalidations +$drem," \
		"local_invalidations +$dloc"
	[ $dm -ge "$4" ] || { fail "$3 raised mr_registrations by $dm, expected >= $4"; return 1; }
	[ $drem -ge $dm ] && [ $dloc = 0 ] ||
		{ fail "$3: $dm registrations, $drem remote and $dloc local invalidations (nvmet-rdma invalidates every one remotely)"; return 1; }
}

# t_dp_stats FABRIC: rnvme_rdma's counters prove small writes (and a discard's range list) go
# in-capsule and large I/O through fast registration, writes and reads each measured on their own.
t_dp_stats() {
	local f=$1 nqn=$DP_NQN-$1-a c ns k v i out
	local s0_no_data s0_inline_writes s0_mr_registrations s0_remote_invalidations s0_local_invalidations s0_polled_completions
	local s1_no_data s1_inline_writes s1_mr_registrations s1_remote_invalidations s1_local_invalidations s1_polled_completions
	local s2_no_data s2_inline_writes s2_mr_registrations s2_remote_invalidations s2_local_invalidations s2_polled_completions
	local s3_no_data s3_inline_writes s3_mr_registrations s3_remote_invalidations s3_local_invalidations s3_polled_completions
	dp_load || return 1
	[ -r "$RNVME_STATS" ] || { fail "$RNVME_STATS does not exist"; return 1; }
	while read -r k v || [ -n "$k" ]; do
		[[ $k =~ ^[a-z_]+$ && $v =~ ^[0-9]+$ ]] || { fail "malformed line in $RNVME_STATS: '$k $v'"; return 1; }
	done <"$RNVME_STATS"
	dp_connect "$f" "$nqn" || return 1
	c=$DP_CTRL
	dp_ns "$nqn" || return 1
	ns=$DP_NS
	# Let connect-time I/O (partition scan) settle.
	dp_settle || return 1
	dp_stats s0 || return 1
	# 256 single 4 KiB direct writes (page-aligned buffer: one SGE each), then 4 flushes.
	head -c $((1 << 20)) /dev/urandom >/tmp/dp-p4k
	dp_put "$ns" $((40 << 20)) /tmp/dp-p4k 4k || return 1
	for i in 1 2 3 4; do timeout 30 nvme flush "$ns" -n 1 >/dev/null || { fail "nvme flush failed"; return 1; }; done
	dp_stats s1 || return 1
	local di=$((s1_inline_writes - s0_inline_writes)) dm=$((s1_mr_registrations - s0_mr_registrations))
	local dn=$((s1_no_data - s0_no_data))
	info "256 x 4 KiB writes + 4 flushes: inline_writes +$di, mr_registrations +$dm, no_data +$dn," \
		"remote_invalidations +$((s1_remote_invalidations - s0_remote_invalidations))," \
		"local_invalidations +$((s1_local_invalidations - s0_local_invalidations))"
	[ $di -ge 256 ] || { fail "inline_writes rose by $di, expected >= 256"; return 1; }
	[ $dm -le 8 ] || { fail "mr_registrations rose by $dm during 4 KiB writes (at most 8 expected)"; return 1; }
	[ $dn -ge 4 ] || { fail "no_data rose by $dn, expected >= 4 (flushes)"; return 1; }
	# A discard is a Dataset Management command whose data is the core's list of ranges (16 B
	# each), a special payload (RQF_SPECIAL_PAYLOAD) rather than the request's bios: one segment
	# of 16 B, a write, so it goes in-capsule. Discard the first half of 1 MiB of data: it reads
	# back as zeros (the namespace's null_blk frees discarded blocks), the second half intact,
	# and the one DSM counted in inline_writes (nothing else writes meanwhile: a wrong segment
	# count would send no data, a payload of the request's 512 KiB an MR).
	head -c $((1 << 20)) /dev/urandom >/tmp/dp-pdsm
	dp_put "$ns" $((60 << 20)) /tmp/dp-pdsm 64k && dp_settle && dp_stats s1 || return 1
	timeout 60 blkdiscard -o $((60 << 20)) -l $((512 << 10)) "$ns" ||
		{ fail "blkdiscard of 512 KiB at 60 MiB failed"; return 1; }
	dp_stats s2 || return 1
	di=$((s2_inline_writes - s1_inline_writes))
	info "blkdiscard 512 KiB: inline_writes +$di, mr_registrations +$((s2_mr_registrations - s1_mr_registrations))"
	[ $di -ge 1 ] || { fail "the discard did not go in-capsule (inline_writes +$di)"; return 1; }
	head -c $((512 << 10)) /dev/zero >/tmp/dp-pzero && tail -c $((512 << 10)) /tmp/dp-pdsm >/tmp/dp-phalf &&
		dp_check "$ns" $((60 << 20)) /tmp/dp-pzero 64k && dp_check "$ns" $((60 << 20 | 512 << 10)) /tmp/dp-phalf 64k ||
		{ fail "after the discard: the first half is not zeros, or the second half changed"; return 1; }
	dp_stats s1 || return 1
	# N x 1 MiB direct writes, then N x 1 MiB direct reads, each phase measured on its own (the
	# counters are snapshot after each, once nothing moves any more).
	#
	# How many MRs each phase needs (rust/transport/mod.rs, map_data): every request with data
	# that does not go in-capsule takes exactly one fast-registered MR (one REG_MR, counted in
	# mr_registrations). Only writes on I/O queues go in-capsule, and only when their payload is
	# at most the in-capsule size (ioccsz * 16 - 64 bytes: 4 KiB with nvmet-rdma's default
	# inline_data_size) in at most 4 segments; reads never do.
	# The block layer splits each 1 MiB bio into requests of at most max_sectors_kb (msk). msk is
	# at most max_hw_sectors_kb, which the driver sets to max_fr_pages 4 KiB pages (set_limits;
	# max_fr_pages = min(256, the device's fast-registration page list length - 1): 256 = 1024 KiB
	# on rxe (list length 512), 255 = 1020 KiB on siw (list length 256)) and the core caps at the
	# target's MDTS (nvmet-rdma: 1 MiB). So 1 MiB becomes floor(1024 / msk) requests of msk KiB,
	# plus one request of the remaining 1024 mod msk KiB if that is not 0, and per 1 MiB:
	#   reads:  floor(1024 / msk) + (remainder > 0) MRs;
	#   writes: the same, except that a request not larger than the in-capsule size goes inline.
	# rxe (msk 1024): 1 MR per write, 1 per read; siw (msk 1020): 1 MR per write (the 4 KiB
	# remainder goes in-capsule), 2 per read. More splitting (segment limits) only adds requests.
	# Every MR is invalidated when its request completes, remotely (the response came with
	# SEND_WITH_INVALIDATE: remote_invalidations) or by a posted LOCAL_INV (local_invalidations):
	# per phase, invalidations >= registrations.
	local n=16 msk ioccsz="" inl full rem need_w need_r
	dp_rd msk "/sys/block/${ns#/dev/}/queue/max_sectors_kb"
	[[ $msk =~ ^[0-9]+$ ]] && [ "$msk" -gt 0 ] || { fail "cannot read max_sectors_kb of $ns ('$msk')"; return 1; }
	out=$(timeout 30 nvme id-ctrl "/dev/${c##*/}") || { fail "nvme id-ctrl /dev/${c##*/} failed"; return 1; }
	while read -r k _ v; do [ "$k" = ioccsz ] && ioccsz=$v; done <<<"$out"
	[[ $ioccsz =~ ^[0-9]+$ ]] || { fail "id-ctrl has no ioccsz ('$ioccsz')"; return 1; }
	inl=$((ioccsz * 16 - 64))
	full=$((1024 / msk)) rem=$((1024 % msk))
	need_r=$((n * (full + (rem > 0))))
	need_w=$((n * ((msk * 1024 > inl ? full : 0) + (rem > 0 && rem * 1024 > inl))))
	[ $need_w -gt 0 ] || { fail "max_sectors_kb $msk: 1 MiB writes would all go in-capsule ($inl B)"; return 1; }
	v=; [ $rem -gt 0 ] && v=" + $rem KiB"
	info "max_sectors_kb $msk, in-capsule size $inl B: 1 MiB = $full x $msk KiB$v;" \
		"$n writes need >= $need_w MRs, $n reads >= $need_r"
	head -c $((n << 20)) /dev/urandom >/tmp/dp-p1m
	dp_put "$ns" $((40 << 20)) /tmp/dp-p1m 1M && dp_mr_phase s1 s2 "$n x 1 MiB writes" "$need_w" || return 1
	dp_check "$ns" $((40 << 20)) /tmp/dp-p1m 1M && dp_mr_phase s2 s3 "$n x 1 MiB reads" "$need_r" || return 1
	dp_disconnect "$c"
}

# t_dp_batch FABRIC: a plug's requests go out together (blk-mq queue_rqs). fio writes 4 MiB of
# random 4 KiB blocks at iodepth 32 through io_uring, submitting 8 at a time
# (--iodepth_batch_submit=8, --iodepth_batch_complete_min=8: one io_uring_enter per 8 SQEs, under
# one plug), then reads each back and verifies it. With no I/O scheduler on the namespace's
# request queues (set to none here: a plug holding requests of a scheduler is not handed to
# queue_rqs), each plug flush hands the driver its requests in one queue_rqs call, which posts up
# to 8 (CHAIN_MAX) with one ib_post_send: batch_requests counts the requests so posted,
# batch_posts the calls. Expected: at least half of fio's 2048 I/Os went out in batches, at
# least 2 per call on average (8 when every plug holds 8; 1 per call is what queue_rq does).
# (Both are shares: 256 plugs of 8 show them as well as more would.)
t_dp_batch() {
	local f=$1 nqn=$DP_NQN-$1-a c s K=1024 n dr dp
	local b0_batch_posts b0_batch_requests b1_batch_posts b1_batch_requests
	dp_load || return 1
	dp_connect "$f" "$nqn" || return 1
	c=$DP_CTRL
	dp_ns "$nqn" || return 1
	DP_DEV=$DP_NS
	for s in /sys/block/"${DP_NS#/dev/}"/queue/scheduler /sys/class/nvme/"${c##*/}"/nvme*/queue/scheduler; do
		[ -e "$s" ] || continue
		echo none >"$s" || { fail "cannot set $s to none"; return 1; }
	done
	if [ "$HOST_DRIVER" = rnvme ]; then
		dp_settle || return 1
		for n in batch_posts batch_requests; do dp_stat $n || return 1; printf -v "b0_$n" %s "$DP_STAT"; done
	fi
	dp_fio batch-4k-io_uring $((4 * K * K)) $((4 * K * K)) --ioengine=io_uring --rw=randwrite --bs=4k \
		--iodepth=32 --iodepth_batch_submit=8 --iodepth_batch_complete_min=8 --offset=8M --size=4M || return 1
	if [ "$HOST_DRIVER" = rnvme ]; then
		for n in batch_posts batch_requests; do dp_stat $n || return 1; printf -v "b1_$n" %s "$DP_STAT"; done
		n=$((4 * K * K / (4 * K) * 2))
		dr=$((b1_batch_requests - b0_batch_requests)) dp=$((b1_batch_posts - b0_batch_posts))
		info "$n I/Os (1024 writes, 1024 verify reads): batch_requests +$dr in batch_posts +$dp calls" \
			"($([ $dp -gt 0 ] && echo "$((dr * 10 / dp / 10)).$((dr * 10 / dp % 10))" || echo -) per call)"
		[ $((2 * dr)) -ge $n ] || { fail "only $dr of $n I/Os were posted in batches, expected >= $((n / 2))"; return 1; }
		[ $dr -ge $((2 * dp)) ] || { fail "$dr requests in $dp calls: fewer than 2 per call"; return 1; }
	fi
	dp_disconnect "$c"
}

# t_dp_poll FABRIC: -W 1 -P 1 gives separate write and poll queues; polled I/O
# (io_uring --hipri) is verified and completes through blk-mq polling (rnvme_rdma: a directly
# polled CQ, counted).
t_dp_poll() {
	local f=$1 nqn=$DP_NQN-$1-a c qc v K=1024 np need dpc dloc
	local p0_no_data p0_inline_writes p0_mr_registrations p0_remote_invalidations p0_local_invalidations p0_polled_completions
	local p1_no_data p1_inline_writes p1_mr_registrations p1_remote_invalidations p1_local_invalidations p1_polled_completions
	dp_load || return 1
	dp_connect "$f" "$nqn" -W 1 -P 1 || return 1
	c=$DP_CTRL
	# One queue per CPU for reads, one write queue, one poll queue, plus the admin queue.
	qc=$((DP_NCPU + 3))
	dp_is "$c/queue_count" $qc || { dp_rd v "$c/queue_count"; fail "queue_count $v, expected $qc"; return 1; }
	dp_ns "$nqn" || return 1
	DP_DEV=$DP_NS
	if [ "$HOST_DRIVER" = rnvme ]; then dp_settle && dp_stats p0 || return 1; fi
	# Polled I/O is io_uring with IORING_SETUP_IOPOLL (the block layer polls only asynchronous
	# direct I/O: RWF_HIPRI on synchronous I/O is ignored).
	dp_fio poll-4k-hipri $((512 * K)) $((512 * K)) --ioengine=io_uring --hipri=1 --rw=randwrite --bs=4k \
		--iodepth=8 --offset=20M --size=512K || return 1
	if [ "$HOST_DRIVER" = rnvme ]; then
		dp_stats p1 || return 1
		# The polled requests, exactly: fio writes each 4 KiB block of the 512 KiB once (random
		# map), then reads each back once to verify, all through the io_uring ring with IOPOLL, so
		# every one is a REQ_POLLED request on the poll queue; dp_fio checked that 512 KiB were
		# written and 512 KiB read: 128 + 128 = 256 requests of 4 KiB.
		np=$(((512 * K) / (4 * K) * 2))
		# Per polled request, on the poll queue's directly polled CQ that only blk-mq polling reaps
		# (ib_process_cq_direct; each completion it returns is counted): the signalled SEND and
		# the response RECV; the request ends only when both ran. Its REG_MR (reads: 4 KiB writes
		# go in-capsule) is unsignalled; a read whose MR the target did not invalidate remotely
		# also waits for a signalled LOCAL_INV completion, each counted in local_invalidations.
		dloc=$((p1_local_invalidations - p0_local_invalidations))
		need=$((2 * np + dloc))
		dpc=$((p1_polled_completions - p0_polled_completions))
		info "queue_count $qc; $np polled requests (128 x 4 KiB writes + 128 verify reads), $dloc local" \
			"invalidations: polled_completions +$dpc (>= $need: 2 per request + 1 per local invalidation)"
		[ $dpc -ge $need ] || { fail "$dpc completions were polled for $np polled requests and $dloc local invalidations, expected >= $need"; return 1; }
	fi
	dp_fio mixed-qd16-libaio $((1024 * K)) $((1024 * K)) --rw=randwrite --bsrange=4k-256k --iodepth=16 \
		--offset=24M --size=1M || return 1
	if [ "$HOST_DRIVER" = rnvme ]; then
		# Not polled (libaio: no IOPOLL), so nothing is expected here: for the record.
		dp_stat polled_completions || return 1
		info "libaio job (not polled): polled_completions +$((DP_STAT - p1_polled_completions))"
	fi
	dp_disconnect "$c"
}

# t_dp_multi FABRIC: two subsystems, three controllers to one of them (default host, a duplicate
# connect -D, another host identity) and one to the other; I/O through each; disconnect all.
t_dp_multi() {
	local f=$1 A=$DP_NQN-$1-a B=$DP_NQN-$1-b c c1 c2 c3 c4 ca nsa nsb s i j n src dst slba pids rc=0 v
	local -a ids=()
	dp_load || return 1
	dp_connect "$f" "$A" && c1=$DP_CTRL && dp_connect "$f" "$A" -D && c2=$DP_CTRL &&
		dp_connect "$f" "$A" -q "$DP_HOSTNQN2" -I "$DP_HOSTID2" && c3=$DP_CTRL &&
		dp_connect "$f" "$B" && c4=$DP_CTRL || return 1
	v=(/sys/class/nvme/nvme*)
	[ ${#v[@]} = 4 ] || { fail "expected 4 controllers, have: $(dp_ctrls)"; return 1; }
	dp_is "$c3/hostnqn" "$DP_HOSTNQN2" || { dp_rd v "$c3/hostnqn"; fail "${c3##*/} has hostnqn $v"; return 1; }
	for c in "$c1" "$c2" "$c3"; do dp_rd v "$c/cntlid"; ids+=("$v"); done
	[ "${ids[0]}" != "${ids[1]}" ] && [ "${ids[1]}" != "${ids[2]}" ] && [ "${ids[0]}" != "${ids[2]}" ] ||
		{ fail "controllers of $A share a cntlid: ${ids[*]}"; return 1; }
	# One multipath subsystem with the three controllers as paths; round-robin across them.
	s=(/sys/class/nvme-subsystem/*/"${c1##*/}")
	s=${s[0]%/*}
	for c in "$c2" "$c3"; do
		[ -e "$s/${c##*/}" ] || { fail "${c##*/} is not in ${s##*/} with ${c1##*/}"; return 1; }
	done
	echo round-robin >"$s/iopolicy" || { fail "cannot set iopolicy round-robin"; return 1; }
	dp_ns "$A" && nsa=$DP_NS && dp_ns "$B" && nsb=$DP_NS || return 1
	# Each controller writes 8 KiB (16 LBAs) through its own queues; the next one reads it back.
	ca=("$c1" "$c2" "$c3")
	for i in 0 1 2; do
		j=$(((i + 1) % 3)); src=/dev/${ca[$i]##*/}; dst=/dev/${ca[$j]##*/}
		slba=$((100000 + 16 * i))
		head -c 8192 /dev/urandom >/tmp/dp-m$i
		timeout 30 nvme io-passthru "$src" --opcode=0x01 --namespace-id=1 --data-len=8192 --write \
			--input-file=/tmp/dp-m$i --cdw10=$slba --cdw12=15 >/dev/null 2>&1 ||
			{ fail "write through $src failed"; return 1; }
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
			--output="/tmp/dp-multi-${n#/dev/}.out" >/dev/null 2>&1 &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || rc=1; done
	[ $rc = 0 ] || { fail "concurrent fio verify failed: $(cat /tmp/dp-multi-*.out | head -n 20)"; return 1; }
	info "4 controllers (${c1##*/} ${c2##*/} ${c3##*/} to $A with cntlid ${ids[*]}, ${c4##*/} to $B)," \
		"cross-controller passthru reads identical, concurrent fio verify on $nsa and $nsb"
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
	# In a split run (on_fabric) a test runs on both fabrics where the fabric decides its path
	# (queue setup and limits, the CM's errors, inline and registration choices, polling) and on
	# the one named otherwise. The check tier (lib.sh full_tier) leaves the file systems, interop,
	# several controllers, and siw's polling and batching (rxe's run) to the full tier.
	for f in ${DP_FABRICS//,/ }; do
		p="datapath[$d/$f]"
		run_test "$p: setup: $f, nvmet-rdma, $(dp_mod "$d") loaded" dp_wrap t_dp_setup "$f"
		run_test "$p: connect with defaults" dp_wrap t_dp_connect "$f"
		on_fabric "$f" rxe && run_test "$p: connect -i 1" dp_wrap t_dp_connect "$f" -i 1
		on_fabric "$f" siw && run_test "$p: connect -Q 16" dp_wrap t_dp_connect "$f" -Q 16
		run_test "$p: connect -Q 256" dp_wrap t_dp_connect "$f" -Q 256
		on_fabric "$f" rxe && run_test "$p: nvme discover lists the port's subsystems" dp_wrap t_dp_discover "$f"
		run_test "$p: fio crc32c verify, 512 B-1 MiB, iodepth 1/32, 2 jobs" dp_wrap t_dp_fio "$f"
		on_fabric "$f" rxe && full_tier && run_test "$p: ext4 checksums survive drop_caches, remount, reconnect" dp_wrap t_dp_fs "$f" ext4
		on_fabric "$f" siw && full_tier && run_test "$p: xfs checksums survive drop_caches, remount, reconnect" dp_wrap t_dp_fs "$f" xfs
		if ! on_fabric "$f" rxe || ! full_tier; then :
		elif [ "$d" = rnvme ]; then
			run_test "$p: interop rnvme_rdma -> nvme_rdma -> rnvme_rdma" dp_wrap t_dp_interop "$f" rnvme c
		else
			# rnvme <-> C needs HOST_DRIVER=rnvme; with c the same steps check the harness.
			run_test "$p: interop steps, nvme_rdma -> nvme_rdma (harness check)" dp_wrap t_dp_interop "$f" c c
		fi
		on_fabric "$f" rxe && run_test "$p: bad input: wrong NQN" dp_wrap t_dp_bad "$f" wrong_nqn
		run_test "$p: bad input: wrong port (4421)" dp_wrap t_dp_bad "$f" wrong_port
		run_test "$p: bad input: nothing listening at the address" dp_wrap t_dp_bad "$f" no_listener
		on_fabric "$f" siw && run_test "$p: bad input: queue size 2048 refused, 1024 clamped" dp_wrap t_dp_bad "$f" queue_size
		if [ "$d" = rnvme ]; then
			run_test "$p: small writes and a discard's ranges inline, large I/O fast-registered (stats)" dp_wrap t_dp_stats "$f"
		else
			tap_skip "$p: small writes and a discard's ranges inline, large I/O fast-registered (stats)" "rnvme_rdma counters (driver=rnvme)"
		fi
		tier_on "$f" rxe && run_test "$p: connect -W 1 -P 1: write and poll queues, polled I/O verified" dp_wrap t_dp_poll "$f"
		tier_on "$f" rxe && run_test "$p: io_uring submitting 8 at a time: a plug's requests posted together (queue_rqs), verified" dp_wrap t_dp_batch "$f"
		on_fabric "$f" rxe && full_tier && run_test "$p: multiple controllers, two subsystems, I/O on each" dp_wrap t_dp_multi "$f"
		run_test "$p: teardown: subsystems removed, driver unloads" dp_wrap t_dp_teardown "$f"
	done
}
