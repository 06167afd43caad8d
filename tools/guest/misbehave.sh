# The misbehaving target: tools/guest/badtarget.py, a user-space NVMe/RDMA target on
# rdma-core that answers wrongly on command, against the host transport. Sourced by suite.sh
# (group "misbehave": 10 tests in make check, all 32 in make check-full). See Documentation/testing.rst.
BT=$RNVME_PROJECT/tools/guest/badtarget.py
BT_PORT=4430
BT_NQN=nqn.2026-12.io.rnvme:badtarget
BT_PID="" BT_LOG=""

# bt_start FABRIC [badtarget options...]: start it on the fabric's address; wait until it listens.
bt_start() {
	local f=$1; shift
	BT_LOG=/tmp/badtarget.$SRANDOM.log
	python3 "$BT" --addr "$(fabric_addr "$f")" --port $BT_PORT --nqn $BT_NQN "$@" >"$BT_LOG" 2>&1 &
	BT_PID=$!
	wait_for 20 grep -q 'listening on' "$BT_LOG" || { fail "badtarget did not start: $(tail -n 5 "$BT_LOG")"; bt_stop; return 1; }
}
bt_stop() {
	[ -z "$BT_PID" ] || { kill "$BT_PID" 2>/dev/null; wait "$BT_PID" 2>/dev/null; }
	BT_PID=""
}
# bt_connect FABRIC [nvme connect options...]: prints the controller's sysfs directory.
bt_connect() {
	local f=$1 c; shift
	nvme connect -t rdma -a "$(fabric_addr "$f")" -s $BT_PORT -n $BT_NQN "$@" >&2 || return 1
	wait_for 30 ctrl_of $BT_NQN || { fail "no controller for $BT_NQN"; return 1; }
	c=$(ctrl_of $BT_NQN)
	wait_for 30 grep -qx live "$c/state" || { fail "$(basename "$c") is $(cat "$c/state"), not live"; return 1; }
	echo "$c"
}
bt_disconnect() {
	nvme disconnect -n $BT_NQN >/dev/null 2>&1
	wait_for 60 sh -c "! grep -lx '$BT_NQN' /sys/class/nvme/nvme*/subsysnqn" || { fail "controllers of $BT_NQN remain"; return 1; }
}
# bt_verify DEV KiB: write random data, read it back identical (direct I/O).
bt_verify() {
	head -c $(($2 << 10)) /dev/urandom >/tmp/bt.pat
	timeout 60 dd if=/tmp/bt.pat of="$1" bs=4k oflag=direct status=none &&
		timeout 60 dd if="$1" of=/tmp/bt.back bs=4k count=$(($2 / 4)) iflag=direct status=none &&
		cmp -s /tmp/bt.pat /tmp/bt.back
}

# t_bt_smoke FABRIC: the well-behaved target serves a controller: connect, 1 MiB written and read
# back identical, disconnect (the tool itself works before it is trusted to misbehave).
t_bt_smoke() {
	local f=$1 c dev
	bt_start "$f" --mode ok --verbose || return 1
	c=$(bt_connect "$f" -i 2) || { echo "badtarget log:"; cat "$BT_LOG"; bt_stop; return 1; }
	wait_for 30 ns_of $BT_NQN || { fail "no namespace"; cat "$BT_LOG"; ls -R /sys/class/nvme/ | head -n 30; bt_disconnect; bt_stop; return 1; }
	dev=$(ns_of $BT_NQN)
	bt_verify "$dev" 1024 || { fail "1 MiB did not read back identical"; tail -n 20 "$BT_LOG"; bt_disconnect; bt_stop; return 1; }
	info "$(basename "$c") live on badtarget: $(($(cat "$c/queue_count") - 1)) I/O queues; 1 MiB read back identical"
	bt_disconnect || { bt_stop; return 1; }
	bt_stop
	grep -c 'fabrics connect' "$BT_LOG" | sed 's/^/# fabrics connects seen by badtarget: /'
}

# t_bt_parallel FABRIC: the I/O queues are set up together, not one after the other (design.rst's
# claim): badtarget answers each I/O queue's Fabrics Connect 10 s late (slow-connect), the host
# asks for 4 I/O queues (-i 2 -W 2; the target grants up to 7). One after the other, the connect
# would take at least 4 x 10 s; any two set up one after the other, 2 x 10 s. So a connect that
# ends in under 20 s with 4 I/O queues set up all of them at least partly together, whatever
# the rest of the connect costs below 10 s (~3 s on the debug guest). (rnvme_rdma asserted; the C
# driver's time is recorded.)
t_bt_parallel() {
	local f=$1 d=10 c t0 tc nq
	bt_start "$f" --mode slow-connect --delay $d ${BT_VERBOSE:+--verbose} || return 1
	t0=$EPOCHREALTIME
	bt_connect "$f" -i 2 -W 2 >/tmp/bt.ctrl & local c_pid=$!
	wait_for 120 sh -c "! kill -0 $c_pid 2>/dev/null" ||
		{ fail "nvme connect did not end within 120 s"; bt_stop; wait "$c_pid"; bt_disconnect; return 1; }
	wait "$c_pid" || { fail "connect with 4 slow I/O queue connects failed"; tail -n 20 "$BT_LOG"; bt_disconnect; bt_stop; return 1; }
	tc=$(printf '%.2f' "$(bc <<<"$EPOCHREALTIME - $t0")")
	c=$(cat /tmp/bt.ctrl)
	nq=$(($(cat "$c/queue_count") - 1))
	echo "bt-result $HOST_DRIVER slow-connect io-queues=$nq connect $tc s (each I/O queue's Fabrics Connect answered $d s late)"
	bt_disconnect; bt_stop
	[ "$HOST_DRIVER" = rnvme ] || return 0
	[ "$nq" = 4 ] || { fail "$nq I/O queues, expected 4"; return 1; }
	(($(bc <<<"$tc < 2 * $d"))) || { fail "the connect took $tc s: not under $((2 * d)) s, so the I/O queues were set up one after the other"; return 1; }
}

# t_bt_pi FABRIC: a namespace with protection information (type 1, 8 bytes of metadata in
# extended LBAs) on a transport without integrity offload (max_integrity_segments 0, as C on a
# device without IBK_INTEGRITY_HANDOVER; Documentation/t10-pi.rst): the nvme core must serve it
# with PRACT on every read and write, the controller inserting and stripping the PI, and the
# transport must carry 512 bytes per block (no PI on the wire). badtarget refuses a read or
# write without PRACT, with another length on the wire or with a reference tag that is not the
# LBA's, and checks the reference tag and its own CRC of each block it wrote on every read: 1
# MiB read back identical with nothing refused or failed, and reads and writes counted, is the
# claim; the namespace's size must be the target's 16 MiB. (A transport that set
# max_integrity_segments without carrying PI, or lacked NVME_F_METADATA_SUPPORTED, fails it: the
# first sends no PRACT, the second leaves the PI type unread and the capacity 0.)
t_bt_pi() {
	local f=$1 c dev blocks stats w r
	bt_start "$f" --mode ok --ms 8 --pi 1 ${BT_VERBOSE:+--verbose} || return 1
	c=$(bt_connect "$f" -i 1) || { tail -n 20 "$BT_LOG"; bt_stop; return 1; }
	wait_for 30 ns_of $BT_NQN || { fail "no namespace"; bt_disconnect; bt_stop; return 1; }
	dev=$(ns_of $BT_NQN)
	blocks=$(cat "/sys/block/$(basename "$dev")/size")
	[ "$blocks" = 32768 ] || { fail "the PI namespace has $blocks sectors, not 32768 (16 MiB)"; bt_disconnect; bt_stop; return 1; }
	bt_verify "$dev" 1024 || { fail "1 MiB did not read back identical"; tail -n 20 "$BT_LOG"; bt_disconnect; bt_stop; return 1; }
	info "$(basename "$c"), $(basename "$dev"): integrity profile '$(cat "/sys/block/$(basename "$dev")/integrity/format" 2>/dev/null || echo '?')', $blocks sectors"
	bt_disconnect || { bt_stop; return 1; }
	bt_stop
	stats=$(grep 'badtarget: .*pi: write=' "$BT_LOG" | tail -n 1)
	echo "# $stats"
	[ -n "$stats" ] || { fail "badtarget printed no PI figures"; tail -n 5 "$BT_LOG"; return 1; }
	[[ $stats == *" refused=0 check-failed=0"* ]] || { fail "reads or writes refused or failed their check: $stats"; grep 'pi:' "$BT_LOG" | head -n 5; return 1; }
	w=$(sed -n 's/.* write=\([0-9]*\).*/\1/p' <<<"$stats")
	r=$(sed -n 's/.* read=\([0-9]*\).*/\1/p' <<<"$stats")
	# (1 MiB in 4 KiB writes: 256 commands at least, unless merged; at least one of each kind)
	[ "${w:-0}" -gt 0 ] && [ "${r:-0}" -gt 0 ] || { fail "no reads or writes reached the PI namespace: $stats"; return 1; }
}

# t_bt_local_inval FABRIC: a target that never invalidates remotely (badtarget --no-inval: a plain
# SEND answers a command whose keyed SGL asked for invalidation, which a target may do) leaves
# every MR to the host's LOCAL_INV, a path nvmet-rdma never takes (it always invalidates
# remotely, see datapath.sh dp_mr_phase). 1 MiB written in 4 KiB direct writes and read back the
# same way must be identical. badtarget takes no in-capsule data (ioccsz 4), so each of the 512
# commands has an MR: with rnvme_rdma, once the counters settle, mr_registrations must have risen
# by at least 512 and local_invalidations by exactly as much, remote_invalidations not at all
# (the C control has no counters: its data is checked).
t_bt_local_inval() {
	local f=$1 c dev
	local s0_no_data s0_inline_writes s0_mr_registrations s0_remote_invalidations s0_local_invalidations s0_polled_completions
	local s1_no_data s1_inline_writes s1_mr_registrations s1_remote_invalidations s1_local_invalidations s1_polled_completions
	bt_start "$f" --mode ok --no-inval ${BT_VERBOSE:+--verbose} || return 1
	c=$(bt_connect "$f" -i 1) || { tail -n 20 "$BT_LOG"; bt_stop; return 1; }
	wait_for 30 ns_of $BT_NQN || { fail "no namespace"; bt_disconnect; bt_stop; return 1; }
	dev=$(ns_of $BT_NQN)
	if [ "$HOST_DRIVER" = rnvme ]; then dp_settle && dp_stats s0 || { bt_disconnect; bt_stop; return 1; }; fi
	bt_verify "$dev" 1024 || { fail "1 MiB did not read back identical"; tail -n 20 "$BT_LOG"; bt_disconnect; bt_stop; return 1; }
	if [ "$HOST_DRIVER" = rnvme ]; then dp_settle && dp_stats s1 || { bt_disconnect; bt_stop; return 1; }; fi
	bt_disconnect || { bt_stop; return 1; }
	bt_stop
	[ "$HOST_DRIVER" = rnvme ] || { info "$(basename "$c"): 1 MiB identical with local invalidation only"; return 0; }
	local dm=$((s1_mr_registrations - s0_mr_registrations)) drem=$((s1_remote_invalidations - s0_remote_invalidations))
	local dloc=$((s1_local_invalidations - s0_local_invalidations))
	info "$(basename "$c"): 1 MiB identical; mr_registrations +$dm, local_invalidations +$dloc, remote_invalidations +$drem"
	[ $dm -ge 512 ] || { fail "512 commands with data raised mr_registrations by $dm, expected >= 512"; return 1; }
	[ $dloc = $dm ] && [ $drem = 0 ] ||
		{ fail "$dm registrations, $dloc local and $drem remote invalidations (the target never invalidates: all local)"; return 1; }
}

# t_bt_inval_teardown FABRIC: resets and a deletion of a controller under reads whose MRs the host
# invalidates itself (badtarget --no-inval: a LOCAL_INV after each response): 64 KiB random reads
# at queue depth 32 on 2 I/O queues, 6 resets, then nvme disconnect, all under the reads. A
# response handled while its queue was being stopped used to post its LOCAL_INV behind the
# drain's marker: no drain waited for it, and on a deletion its flush completion could reach the
# request after the teardown freed the tag set (KASAN would report it). Now such a response posts
# nothing and its request is left to the teardown's cancel (local_invalidations_skipped, reported:
# whether a reset meets that window is chance, 15 responses in 10 resets and 0 in 6 measured, so
# the count is not required). Each reset must end live within 60 s, the disconnect within 60 s,
# LOCAL_INVs must have been posted, and the kernel log stay clean.
t_bt_inval_teardown() {
	local f=$1 c dev r p rc=0 s0 s1 l0 l1
	dp_stat local_invalidations_skipped || return 1; s0=$DP_STAT
	dp_stat local_invalidations || return 1; l0=$DP_STAT
	bt_start "$f" --mode ok --no-inval || return 1
	c=$(bt_connect "$f" -i 2 --reconnect-delay=1) || { bt_stop; return 1; }
	wait_for 30 ns_of $BT_NQN || { fail "no namespace"; bt_disconnect; bt_stop; return 1; }
	dev=$(ns_of $BT_NQN)
	fio --name=inv --filename="$dev" --rw=randread --bs=64k --ioengine=libaio --direct=1 --iodepth=32 \
		--numjobs=2 --time_based --runtime=600 >/dev/null 2>&1 & p=$!
	for r in 1 2 3 4 5 6; do
		dp_sleep 2
		echo 1 >"$c/reset_controller" 2>/dev/null || { fail "reset $r refused ($(cat "$c/state"))"; rc=1; break; }
		wait_for 60 grep -qx live "$c/state" || { fail "reset $r: ${c##*/} not live within 60 s ($(cat "$c/state"))"; rc=1; break; }
	done
	dp_sleep 2
	timeout 60 nvme disconnect -n $BT_NQN >/dev/null 2>&1 || { fail "nvme disconnect under the reads did not end within 60 s"; rc=1; }
	wait_for 30 sh -c "! kill -0 $p 2>/dev/null" || { fail "fio still runs 30 s after the disconnect"; kill "$p"; rc=1; }
	wait "$p" 2>/dev/null
	bt_disconnect || rc=1
	bt_stop
	dp_stat local_invalidations_skipped || return 1; s1=$DP_STAT
	dp_stat local_invalidations || return 1; l1=$DP_STAT
	info "6 resets and a deletion under locally invalidated reads: local_invalidations +$((l1 - l0)), not posted on a queue being stopped +$((s1 - s0))"
	[ $((l1 - l0)) -gt 0 ] || { fail "no LOCAL_INV was posted: the reads did not take the local path"; rc=1; }
	return $rc
}

# bt_fired MODE: badtarget's log says it misbehaved (every mode logs "misbehave: ..." when it does):
# a row whose target behaved tested nothing.
bt_fired() {
	grep -q 'misbehave' "$BT_LOG" || { fail "$1: badtarget never misbehaved (its log: $(tail -n 3 "$BT_LOG" | tr '\n' ' '))"; return 1; }
}
# bt_admin_connects: how many admin queues the host connected to badtarget (its log's Fabrics
# Connects of qid 0): 1 for the first connection, one more per reconnect.
bt_admin_connects() { grep -c 'fabrics connect qid 0 ' "$BT_LOG"; }
# bt_window MODE T LO-HI: T seconds lie in [LO, HI).
bt_window() {
	local lo=${3%-*} hi=${3#*-}
	(($(bc <<<"$2 >= $lo && $2 < $hi"))) || { fail "$1: took $2 s, not within [$lo, $hi) s"; return 1; }
}
# t_bt_behaviour FABRIC MODE ON NTH [EXPECT]: the target misbehaves once (MODE on the NTH command
# of class ON; for io, the NTH read of block 2048). `nvme connect` must end (a controller, or an
# error); 4 KiB of random data are written at block 2048 (for io, the target counts that write as
# the block's first command, so it misbehaves on the read after it), and a 4 KiB direct read of
# block 2048 must end (data or error) within 90 s; the controller must be live again (recovered)
# or gone within 60 s more, and, if live, 64 KiB must read back identical (no other request's
# data was corrupted). EXPECT is rnvme_rdma's row of the table in testing.rst, asserted (words
# joined by "+"): "connfail" (nvme connect fails), "live" (the controller is live at the end),
# "readok" (the read returns the data written there first, not zeros or another block's)
# / "readerr" (it fails), "fast" (the misbehaviour ends the connect or the read within 30 s: the
# shortest timeout a step could wait for is the I/O timeout, 30 s; the admin timeout is 60 s),
# "reconn" (the host reconnected: a second admin Fabrics Connect in badtarget's log) / "once"
# (it did not: one), "window=LO-HI" (the connect, or the read, took from LO up to HI seconds).
# Prints one "bt-result" line.
t_bt_behaviour() {
	local f=$1 mode=$2 on=$3 nth=$4 expect=${5:-} c dev t0 t1 rc state tc auth=()
	# (the DH-HMAC-CHAP modes: the host has a secret, so it starts the exchange the target asks for)
	[[ $mode != auth-* ]] || auth=(--dhchap-secret="$(auth_key)")
	# (the partition scan reads at connect: an io misbehaviour counts only reads of block 2048)
	local bt_nth=$nth win="" data=-
	[ "$on" != io ] || bt_nth=$((nth + 1))
	[[ $expect != *window=* ]] || { win=${expect#*window=}; win=${win%%+*}; }
	bt_start "$f" --mode "$mode" --on "$on" --nth "$bt_nth" --delay 40 --lba 2048 ${BT_VERBOSE:+--verbose} || return 1
	dmesg_mark
	t0=$EPOCHREALTIME
	# (in the background: a connect that never ends is the C driver's answer to a silent target;
	# after 120 s the target exits, which ends it, and the row says so)
	bt_connect "$f" -i 1 -l 30 -c 1 "${auth[@]}" >/tmp/bt.ctrl & local c_pid=$!
	if ! wait_for 120 sh -c "! kill -0 $c_pid 2>/dev/null"; then
		bt_stop; wait "$c_pid"
		tc=$(printf '%.0f' "$(bc <<<"$EPOCHREALTIME - $t0")")
		echo "bt-result $HOST_DRIVER $mode $on#$nth connect-hangs >120 s (stopping the target ended it at $tc s)"
		bt_disconnect
		bt_fired "$mode" || return 1
		[ -z "$expect" ] || { fail "$mode: nvme connect did not end within 120 s"; return 1; }
		return 0
	fi
	if ! wait "$c_pid"; then
		t1=$EPOCHREALTIME
		tc=$(printf '%.2f' "$(bc <<<"$t1 - $t0")")
		echo "bt-result $HOST_DRIVER $mode $on#$nth connect-failed $tc s"
		dmesg_since_mark | grep -E 'nvme|rnvme' | grep -v 'rnvme-mark' | head -n 6 | sed 's/^/#   log: /'
		bt_disconnect; bt_stop
		grep 'misbehave' "$BT_LOG" | head -n 2 | sed 's/^/#   /'
		bt_fired "$mode" || return 1
		[[ -z $expect || $expect == *connfail* ]] || { fail "$mode: expected $expect; the connect failed"; return 1; }
		[[ $expect != *fast* ]] || (($(bc <<<"$tc < 30"))) || { fail "$mode: the connect took $tc s (not under 30 s: it waited for a timeout)"; return 1; }
		[ -z "$win" ] || bt_window "$mode: the connect" "$tc" "$win" || return 1
		return 0
	fi
	c=$(cat /tmp/bt.ctrl)
	wait_for 30 ns_of $BT_NQN || { fail "no namespace"; bt_disconnect; bt_stop; return 1; }
	dev=$(ns_of $BT_NQN)
	head -c 4096 /dev/urandom >/tmp/bt.written
	timeout 60 dd if=/tmp/bt.written of="$dev" bs=4k count=1 seek=256 oflag=direct status=none ||
		{ fail "$mode: the write of block 2048 before the read failed"; bt_disconnect; bt_stop; return 1; }
	rm -f /tmp/bt.read
	t0=$EPOCHREALTIME
	# (not under timeout(1): a read that does not end is in D state, unkillable, until the
	# controller goes; the test ends it by deleting the controller)
	dd if="$dev" of=/tmp/bt.read bs=4k count=1 skip=256 iflag=direct status=none & local dd_pid=$!
	if ! wait_for 90 sh -c "! kill -0 $dd_pid 2>/dev/null"; then
		fail "$mode: the read did not end within 90 s"
		dmesg_since_mark | tail -n 20; echo "badtarget log:"; tail -n 30 "$BT_LOG"
		bt_disconnect; wait "$dd_pid"; bt_stop; return 1
	fi
	wait "$dd_pid"; rc=$?
	t1=$EPOCHREALTIME
	if [ "$rc" = 0 ]; then
		if cmp -s /tmp/bt.written /tmp/bt.read; then data=same; else data=differs; fi
	fi
	wait_for 60 sh -c "[ ! -e $c/state ] || grep -qx live $c/state"
	state=$(cat "$c/state" 2>/dev/null || echo gone)
	if [ "$state" = live ]; then
		bt_verify "$dev" 64 || { fail "$mode: after recovery 64 KiB did not read back identical"; bt_disconnect; bt_stop; return 1; }
	fi
	tc=$(printf '%.2f' "$(bc <<<"$t1 - $t0")")
	local admins; admins=$(bt_admin_connects)
	echo "bt-result $HOST_DRIVER $mode $on#$nth read-rc=$rc data=$data $tc s ctrl=$state admin-connects=$admins"
	dmesg_since_mark | grep -E 'nvme|rnvme' | grep -v 'rnvme-mark' | head -n 6 | sed 's/^/#   log: /'
	bt_disconnect || { bt_stop; return 1; }
	bt_stop
	grep 'misbehave' "$BT_LOG" | head -n 2 | sed 's/^/#   /'
	bt_fired "$mode" || return 1
	[[ $expect != *connfail* ]] || { fail "$mode: expected the connect to fail; it connected"; return 1; }
	[[ $expect != *live* ]] || [ "$state" = live ] || { fail "$mode: expected the controller to recover; it is $state"; return 1; }
	[[ $expect != *readok* ]] || [ "$rc" = 0 ] || { fail "$mode: expected the read to return data; it failed"; return 1; }
	[[ $expect != *readok* ]] || [ "$data" = same ] || { fail "$mode: the read returned data other than what was written at block 2048"; return 1; }
	[[ $expect != *readerr* ]] || [ "$rc" != 0 ] || { fail "$mode: expected the read to fail; it returned data"; return 1; }
	[[ $expect != *fast* ]] || (($(bc <<<"$tc < 30"))) || { fail "$mode: the read took $tc s (not under 30 s: it waited for a timeout)"; return 1; }
	[[ $expect != *reconn* ]] || [ "$admins" -ge 2 ] || { fail "$mode: expected the host to reconnect; badtarget saw $admins admin connect(s)"; return 1; }
	[[ $expect != *once* ]] || [ "$admins" = 1 ] || { fail "$mode: expected no reconnect; badtarget saw $admins admin connects"; return 1; }
	[ -z "$win" ] || bt_window "$mode: the read" "$tc" "$win"
}

# bt_held_round FABRIC N: one controller (one I/O queue) on badtarget holding the answers to the
# first N reads of block 2048 (--mode hold --count N); N such reads at once; with an I/O timeout
# of 5 s they expire in one pass of blk-mq's timeout work. Each read must end with data (error recovery
# reconnects, the requests are requeued and answered on the new connection), the controller be
# live again. HELD_T: seconds from the reads' start to live again; HELD_W: the grace periods
# (teardown_rcu_waits) from the reads' start to live (rnvme_rdma; - with C).
bt_held_round() {
	local f=$1 n=$2 c dev p w0=- w1 t0 rc=0 held
	bt_start "$f" --mode hold --on io --nth 1 --count "$n" --lba 2048 || return 1
	c=$(bt_connect "$f" -i 1 --reconnect-delay=1 --ctrl-loss-tmo=60) || { bt_stop; return 1; }
	wait_for 30 ns_of $BT_NQN || { fail "no namespace"; bt_disconnect; bt_stop; return 1; }
	dev=$(ns_of $BT_NQN)
	[ "$HOST_DRIVER" != rnvme ] || { dp_stat teardown_rcu_waits && w0=$DP_STAT; } || { bt_disconnect; bt_stop; return 1; }
	dmesg_mark
	t0=$EPOCHREALTIME
	# (N threads reading the block once each, started together by fio: one deadline for all)
	fio --name=held --filename="$dev" --rw=read --bs=4k --offset=1M --size=4k --ioengine=psync \
		--direct=1 --numjobs="$n" --thread --group_reporting --output=/tmp/held.out >/tmp/held.err 2>&1 & p=$!
	if ! wait_for 90 sh -c "! kill -0 $p 2>/dev/null"; then
		fail "$n held reads: fio did not end within 90 s"; bt_disconnect; wait "$p"; bt_stop; return 1
	fi
	wait "$p" || { fail "$n held reads: fio failed: $(head -c 500 /tmp/held.err)"; rc=1; }
	wait_for 60 grep -qx live "$c/state" || { fail "$n held reads: ${c##*/} is $(cat "$c/state" 2>/dev/null), not live again"; rc=1; }
	HELD_T=$(printf '%.1f' "$(bc <<<"$EPOCHREALTIME - $t0")")
	HELD_W=-
	if [ "$w0" != - ]; then dp_stat teardown_rcu_waits && w1=$DP_STAT && HELD_W=$((w1 - w0)) || rc=1; fi
	# (rnvme_rdma logs a request that expires on a queue already stopped as "ended, its connection
	# is gone", C every one as "timeout")
	HELD_TIMEOUTS=$(dmesg_since_mark | grep -cE 'I/O tag .* QID 1( timeout|: ended, its connection is gone)')
	held=$(grep -c 'misbehave: hold' "$BT_LOG")
	[ "$held" = "$n" ] || { fail "badtarget held $held reads, not $n"; rc=1; }
	bt_disconnect || rc=1
	bt_stop
	return $rc
}

# t_bt_timeout_pass FABRIC: the requests that expire in one timeout pass while the controller is
# not live stop their queue once, not once each (Queue::kill, once per connection). The first
# expired request starts error recovery (the controller leaves live); each of the others ends
# after stopping the queue's connection. The recovery with 16 held reads may wait for one grace
# period more than with 1 (that one stop), not one per request (on the old code, one each).
# The C driver is the control in the same boot: its time back to live with 16 is reported.
t_bt_timeout_pass() {
	local f=$1 old rc=0 w1 t1 w16 t16 to16 ct=-
	read -r old </sys/module/nvme_core/parameters/io_timeout
	echo 5 >/sys/module/nvme_core/parameters/io_timeout
	if bt_held_round "$f" 1; then w1=$HELD_W t1=$HELD_T
		if bt_held_round "$f" 16; then w16=$HELD_W t16=$HELD_T to16=$HELD_TIMEOUTS
			info "rnvme_rdma: 1 held read: live again after $t1 s, $w1 grace periods; 16 held reads ($to16 timeout lines): live again after $t16 s, $w16 grace periods"
			[ $((w16 - w1)) -le 1 ] ||
				{ fail "16 expired requests cost the recovery $((w16 - w1)) grace periods more than 1 did (at most 1: the queue's connection is stopped once)"; rc=1; }
			# (the claim is tested only if at least 3 expired in the pass: the old code's one
			# stop per request then costs 2 grace periods more)
			[ "$to16" -ge 3 ] || { fail "only $to16 of the 16 held reads reached the timeout handler in its pass"; rc=1; }
		else rc=1; fi
	else rc=1; fi
	if [ "$HOST_DRIVER" = rnvme ] && dp_load c; then
		if HOST_DRIVER=c bt_held_round "$f" 16; then ct="$HELD_T s"; fi
		info "C nvme_rdma (control), 16 held reads: live again after $ct"
		dp_load rnvme || rc=1
	fi
	echo "$old" >/sys/module/nvme_core/parameters/io_timeout
	return $rc
}

# The behaviours (MODE ON NTH [EXPECT]): every mode of badtarget.py.
BT_BEHAVIOURS=(
	# a response that is wrong: recovery, the read retried on the new connection
	"unknown-cid io 1 live+readok+fast+reconn" "stale-cid io 1 live+readok+fast+reconn"
	"never-sent io 1 live+readok+fast+reconn" "bad-inval io 1 live+readok+fast+reconn"
	"inval-no-mr io 1 live+readok+fast+reconn" "short io 1 live+readok+fast+reconn"
	"long io 1 live+readok+fast+reconn"
	# a response twice (the read ends, then recovery), early (the response before the data: what
	# the read returns is the target's fault, not asserted), with an error status (DNR: not
	# retried; a path error: retried; neither is a broken connection), after the I/O timeout (the
	# answer comes at 40 s: the timeout at 30 s ends the read through recovery, before it)
	"dup io 1 live+readok+fast+reconn" "early io 1 live+fast" "dnr io 1 live+readerr+fast+once"
	"path io 1 live+readok+fast+once" "slow io 1 live+readok+reconn+window=30-40"
	# the connection: dropped instead of an answer, in an I/O queue's Fabrics Connect, at the CM
	"drop io 1 live+readok+fast+reconn" "drop connect 2 connfail+fast" "cm-reject-bad any 2 connfail+fast"
	"cm-qsize any 2 live+readok+fast+once"
	# (noc: the C control is not run by default: it oopses the kernel or hangs, see testing.rst)
	# A silent CM ends the connect by the 30 s bound on a queue's connection (from its
	# rdma_resolve_addr): not earlier, and before anything else could end it: rdma_cm's own
	# retries of the connect request (15 x ~4.3 s on RoCE) or the 60 s admin timeout. The rest
	# is the admin queue's setup before and the teardown after (1.7-4.2 s here, debug kernel).
	"cm-silent any 2 connfail+noc+window=30-45"
	# a response for a request that is not in flight (the host cancelled it)
	"late io 1 live+readok+fast+noc+reconn" "late-inval io 1 live+readok+fast+reconn"
	# a broken connection during the setup ends it at once (not at the admin timeout)
	"unknown-cid admin 1 connfail+fast" "dup admin 1 connfail+fast" "bad-inval admin 1 connfail+fast"
	# the connection dropped in DH-HMAC-CHAP (admin queue, I/O queue; at the first or second
	# message): with C, each waits for the command's timeout and its retries (minutes, hung tasks)
	"auth-drop connect 1 connfail+fast+noc" "auth-drop connect 2 connfail+fast+noc"
	"auth-drop-recv connect 1 connfail+fast+noc" "auth-drop-recv connect 2 connfail+fast+noc"
)

# The check tier's behaviours (lib.sh full_tier; MODE ON NTH): a wrong response, a response twice,
# an error status not retried, the late answer and the silent CM (the reproducers of an oops and a
# hang), and the connection dropped in DH-HMAC-CHAP; the full tier runs every row.
BT_CHECK=("unknown-cid io 1" "dup io 1" "dnr io 1" "late io 1" "cm-silent any 2" "auth-drop connect 1")
bt_tier() {
	local r
	full_tier && return 0
	for r in "${BT_CHECK[@]}"; do [[ "$1 " == "$r "* ]] && return 0; done
	return 1
}

# group_misbehave: with each driver of driver= (rnvme,c for the table), on rxe.
group_misbehave() {
	local f b d drivers=${HOST_DRIVER//,/ }
	for f in ${DP_FABRICS//,/ }; do
		[ "$f" = rxe ] || continue   # badtarget's external QP is tried on rxe only so far
		fabric_up "$f" >/dev/null || { tap_not_ok "misbehave: $f comes up"; continue; }
		for d in $drivers; do
			HOST_DRIVER=$d
			dp_load "$d" || { tap_not_ok "misbehave: $d loads"; continue; }
			run_test "misbehave: $f: $d: badtarget serves a controller (connect, 1 MiB identical, disconnect)" t_bt_smoke "$f"
			full_tier && run_test "misbehave: $f: $d: the I/O queues are set up together (4 Fabrics Connects answered 10 s late)" t_bt_parallel "$f"
			full_tier && run_test "misbehave: $f: $d: a namespace with PI (type 1, 8 bytes of metadata) is served with PRACT: 1 MiB identical, nothing refused" t_bt_pi "$f"
			[ "$d" != rnvme ] || run_test "misbehave: $f: $d: 16 requests expiring in one timeout pass while the controller is not live stop their queue once, not once each; every read answered after the reconnect (C as control)" t_bt_timeout_pass "$f"
			[ "$d" != rnvme ] || run_test "misbehave: $f: $d: resets and a deletion under reads the host invalidates itself (LOCAL_INV): each ends, the kernel log clean" t_bt_inval_teardown "$f"
			run_test "misbehave: $f: $d: a target that never invalidates remotely: 1 MiB identical (rnvme: every MR invalidated locally, counted)" t_bt_local_inval "$f"
			for b in "${BT_BEHAVIOURS[@]}"; do
				bt_tier "$b" || continue
				# shellcheck disable=SC2086 # the behaviour's words
				# (the C driver is the control: its outcome is recorded, the fixes' claims are not
				# asserted of it)
				if [ "$d" != rnvme ]; then
					[[ $b != *noc* ]] || [ "${BT_C_ALL:-}" = yes ] || { echo "# misbehave: $d: $(cut -d' ' -f1-3 <<<"$b"): the C control is not run (it oopses the kernel or hangs; c-all=yes runs it)"; continue; }
					b=$(cut -d' ' -f1-3 <<<"$b")
				fi
				run_test "misbehave: $f: $d: ${b// /, } ends in bounded time, recovered or failed cleanly" t_bt_behaviour "$f" $b
			done
		done
		dp_unload
	done
	HOST_DRIVER=${drivers// /,}
}
