# Controller lifecycle tests of rnvme_rdma (sourced by suite.sh: group `lifecycle`).
# Reset under I/O, and module unload with live controllers.

LC_NQN=nqn.2026-11.io.rnvme:lifecycle

lc_setup() {    # lc_setup FABRIC: target with a memory-backed namespace, rnvme_rdma loaded
	local f=$1
	fabric_up "$f" >/dev/null && target_port_up "$f" || return 1
	[ -d "$NVMET/subsystems/$LC_NQN" ] || { target_subsys_add "$LC_NQN" mem:64 >/dev/null || return 1; }
	target_subsys_link "$LC_NQN" "$f" || return 1
	[ -d /sys/module/nvme_rdma ] && { rmmod nvme_rdma || return 1; }
	modprobe nvme-rdma && [ -d /sys/module/rnvme_rdma ] || { fail "rnvme_rdma did not load"; return 1; }
}

# nvme reset, LC_RESETS times, while fio writes and verifies, each with requests in flight: the
# namespace (slowmem) completes every I/O 100 ms after it came, so fio's 8 outstanding requests
# are in flight at almost any moment, and the in-flight count read just before each reset must
# be at least 1 (those requests are still in flight when the reset tears the queues down, within
# the 100 ms). The controller comes back live each time with its I/O queues set up again, and fio
# verifies every block. Writes are random 4-64 KiB (--bsrange; --bs=4k-64k would be 4 KiB only):
# all but the 4 KiB ones are larger than nvmet-rdma's default in-capsule size (4 KiB), so they go
# through fast-registered MRs, which the reset tears down with their queues while their requests
# are in flight. The target's delay bounds fio from below whatever the guest's speed: 8 requests
# per 100 ms, 16 MiB of writes of 34 KiB on average (~480) then as many verify reads, at least
# 12 s; the debug guest is slower still.
LC_RESETS=2
LC_SLOW_NQN=$LC_NQN-slow

# lc_ios NS: I/Os completed on NS so far (reads + writes: fields 1 and 5 of its /sys/block stat;
# the multipath head accounts every request of its paths).
lc_ios() { local r w; read -r r _ _ _ w _ <"/sys/block/${1#/dev/}/stat" && echo $((r + w)); }
lc_ios_above() { local n; n=$(lc_ios "$1") && [ "$n" -gt "$2" ]; }
# lc_io_moves NS FIO_PID WHEN: fio is still running and I/O completes on NS within 60 s.
lc_io_moves() {
	local n0
	kill -0 "$2" 2>/dev/null || { fail "fio had already finished $3"; return 1; }
	n0=$(lc_ios "$1") || { fail "cannot read /sys/block/${1#/dev/}/stat"; return 1; }
	wait_for 60 lc_ios_above "$1" "$n0" || { fail "no I/O completed on $1 within 60 s $3"; return 1; }
}

t_lc_reset_under_io() {
	local f=$1 c ns dev fpid rc i n st w0 ws0 w1 ws1 infl
	lc_setup "$f" || return 1
	[ -d "$NVMET/subsystems/$LC_SLOW_NQN" ] || { target_subsys_add "$LC_SLOW_NQN" slowmem:64 >/dev/null || return 1; }
	target_subsys_link "$LC_SLOW_NQN" "$f" || return 1
	c=$(host_connect "$f" "$LC_SLOW_NQN") || return 1
	dev=/dev/$(basename "$c")
	wait_for 30 ns_of "$LC_SLOW_NQN" || { fail "no namespace"; return 1; }
	ns=$(ns_of "$LC_SLOW_NQN")
	st=/sys/block/${ns#/dev/}/stat
	read -r _ _ _ _ w0 _ ws0 _ <"$st" || { fail "cannot read $st"; return 1; }
	dmesg_mark
	timeout 600 fio --name=reset --filename="$ns" --ioengine=libaio --direct=1 --rw=randwrite --bsrange=4k-64k \
		--size=16M --iodepth=8 --verify=crc32c --do_verify=1 --verify_fatal=1 \
		>/tmp/lc-fio.log 2>&1 &
	fpid=$!
	for ((i = 1; i <= LC_RESETS; i++)); do
		lc_io_moves "$ns" $fpid "before reset $i" || { kill $fpid; return 1; }
		read -r _ _ _ _ _ _ _ _ infl _ <"$st"
		kill -0 $fpid 2>/dev/null || { fail "fio had already finished at reset $i"; return 1; }
		[ "$infl" -ge 1 ] || { fail "no request in flight just before reset $i"; kill $fpid; return 1; }
		timeout 120 nvme reset "$dev" || { fail "nvme reset $dev failed"; kill $fpid; return 1; }
		wait_for 60 grep -qx live "$c/state" || { fail "$(basename "$c") is $(cat "$c/state") after reset $i"; kill $fpid; return 1; }
		lc_io_moves "$ns" $fpid "after reset $i" || { kill $fpid; return 1; }
		info "reset $i: fio running, I/O completing before it ($infl requests in flight just before it) and after it"
	done
	rc=0; wait $fpid || rc=$?
	[ $rc = 0 ] || { fail "fio failed across the resets (rc $rc)"; tail -n 20 /tmp/lc-fio.log >&2; return 1; }
	grep -q 'err= 0' /tmp/lc-fio.log || { fail "fio reported errors"; tail -n 20 /tmp/lc-fio.log >&2; return 1; }
	# The writes really were larger than the in-capsule size on average (with --bs=4k-64k they
	# were all 8 sectors).
	read -r _ _ _ _ w1 _ ws1 _ <"$st"
	[ $((w1 - w0)) -gt 0 ] && [ $(((ws1 - ws0) / (w1 - w0))) -gt 8 ] ||
		{ fail "fio wrote $((ws1 - ws0)) sectors in $((w1 - w0)) writes: not larger than 4 KiB on average"; return 1; }
	n=$(dmesg_since_mark | grep -c 'creating [0-9]* I/O queues')
	[ "$n" -ge $LC_RESETS ] || { fail "the I/O queues were set up again $n times for $LC_RESETS resets"; return 1; }
	info "$(basename "$c") reset $LC_RESETS times under I/O ($((w1 - w0)) writes of $(((ws1 - ws0) / (w1 - w0) / 2)) KiB on average)," \
		"live again each time, fio verify clean"
	host_disconnect "$LC_SLOW_NQN"
}

# The target changes the queue count it grants (nvmet's attr_qid_max, which also drops the
# controllers): the host reconnects with fewer I/O queues, resizes the tag set (as
# blk_mq_update_nr_hw_queues in the C driver), then grows back; data written on one queue layout
# reads back on the other, and I/O runs on every hardware queue.
t_lc_queue_count() {
	local f=$1 c n ns qm0 v cpu sub=$NVMET/subsystems/$LC_NQN
	# The target ends the association to offer another queue count: error recovery reconnects.
	expects_recovery
	lc_setup "$f" || return 1
	[ "$(nproc)" -ge 2 ] || { fail "needs 2 CPUs for 2 I/O queues"; return 1; }
	read -r qm0 <"$sub/attr_qid_max" || { fail "nvmet has no attr_qid_max"; return 1; }
	c=$(host_connect "$f" "$LC_NQN" -i 2 --reconnect-delay=1 --ctrl-loss-tmo=60) || return 1
	n=$(basename "$c")
	wait_for 30 ns_of "$LC_NQN" || { fail "no namespace"; return 1; }
	ns=$(ns_of "$LC_NQN")
	read -r v <"$c/queue_count"; [ "$v" = 3 ] || { fail "$n: queue_count $v, expected 3"; return 1; }
	head -c $((1 << 20)) /dev/urandom >/tmp/lc-q0; head -c $((1 << 20)) /dev/urandom >/tmp/lc-q1
	for cpu in 0 1; do
		taskset -c $cpu dd if=/tmp/lc-q$cpu of="$ns" bs=64k seek=$((cpu * 16)) oflag=direct conv=notrunc status=none ||
			{ fail "write on CPU $cpu failed"; return 1; }
	done
	dmesg_mark
	echo 1 >"$sub/attr_qid_max" || { fail "cannot set attr_qid_max"; return 1; }
	lc_requeued "$c" 2 || { echo "$qm0" >"$sub/attr_qid_max"; return 1; }
	dmesg_since_mark | grep -q 'I/O hardware queues: 2 -> 1' ||
		{ fail "the tag set was not resized to 1 hardware queue"; echo "$qm0" >"$sub/attr_qid_max"; return 1; }
	lc_readback "$ns" && lc_hw_queues "$n" 1 || { echo "$qm0" >"$sub/attr_qid_max"; return 1; }
	dmesg_mark
	echo "$qm0" >"$sub/attr_qid_max" || { fail "cannot restore attr_qid_max"; return 1; }
	lc_requeued "$c" 3 || return 1
	dmesg_since_mark | grep -q 'I/O hardware queues: 1 -> 2' ||
		{ fail "the tag set did not grow back to 2 hardware queues"; return 1; }
	lc_readback "$ns" || return 1
	lc_hw_queues "$n" 2 || return 1
	info "$n: 2 I/O queues -> 1 -> 2 (tag set resized both ways), 1 MiB written on each CPU read back identical through every queue"
	host_disconnect "$LC_NQN"
}

# A controller's teardown waits for RCU grace periods (stats: teardown_rcu_waits) per step, not per
# queue: one to stop all its I/O queues (every queue marked lost, then one wait before their
# drains) and one to free them (every QP withdrawn, then one wait before they are destroyed), then
# one each to stop and free the admin queue: 4 for a reset and 4 for a disconnect, with 1 I/O
# queue as with 6 (2 read, 2 write, 2 poll), where a wait per queue and step makes 2 x 7 = 14 for
# the 6. No other controller exists during the test, so nothing else adds to the counter.
t_lc_teardown_rcu() {
	local f=$1 c n args w0 w1 w2 v want
	lc_setup "$f" || return 1
	for args in "-i 1:2" "-i 2 -W 2 -P 2:7"; do
		want=${args#*:}
		c=$(host_connect "$f" "$LC_NQN" ${args%:*}) || return 1
		n=$(basename "$c")
		read -r v <"$c/queue_count"; [ "$v" = "$want" ] || { fail "$n: queue_count $v, expected $want"; return 1; }
		dp_stat teardown_rcu_waits || return 1; w0=$DP_STAT
		echo 1 >"$c/reset_controller" || { fail "$n: reset refused"; return 1; }
		lc_requeued "$c" "$want" || return 1
		dp_stat teardown_rcu_waits || return 1; w1=$DP_STAT
		host_disconnect "$LC_NQN" || return 1
		dp_stat teardown_rcu_waits || return 1; w2=$DP_STAT
		info "$n ($((want - 1)) I/O queues): reset waited for $((w1 - w0)) grace periods, disconnect for $((w2 - w1))"
		[ $((w1 - w0)) = 4 ] && [ $((w2 - w1)) = 4 ] ||
			{ fail "$n ($((want - 1)) I/O queues): teardown waited for $((w1 - w0)) (reset) and $((w2 - w1)) (disconnect) grace periods, expected 4 each"; return 1; }
	done
}

# lc_hw_queues CTRL N: the namespace's request queue (of this controller) has N hardware queues.
lc_hw_queues() {
	local q=(/sys/class/nvme/"$1"/nvme*n1/mq/[0-9]*)
	[ ${#q[@]} = "$2" ] && [ -e "${q[0]}" ] || { fail "$1's namespace has hardware queues [${q[*]##*/}], expected $2"; return 1; }
}

lc_state_is() { [ "$(cat "$1/queue_count")" = "$2" ] && grep -qx live "$1/state"; }
# lc_requeued CTRL QUEUE_COUNT: the controller reconnects and comes back live with that count.
lc_requeued() {
	local v
	wait_for 90 lc_state_is "$1" "$2" ||
		{ fail "$(basename "$1"): state $(cat "$1/state"), queue_count $(cat "$1/queue_count"), expected live with $2"; return 1; }
	read -r v <"$1/queue_count"
	info "$(basename "$1") live again with queue_count $v"
}

# lc_readback NS: what lc_queue_count wrote reads back identical, through every CPU's queue.
lc_readback() {
	local cpu src
	for cpu in 0 1; do
		for src in 0 1; do
			taskset -c $cpu dd if="$1" bs=64k skip=$((src * 16)) count=16 iflag=direct status=none >/tmp/lc-r ||
				{ fail "read on CPU $cpu failed"; return 1; }
			cmp -s /tmp/lc-r /tmp/lc-q$src || { fail "data written on CPU $src differs read on CPU $cpu"; return 1; }
		done
	done
}

# rmmod with live controllers while fio runs on their namespace (one subsystem over rxe and siw:
# two paths of one multipath namespace): the controllers are deleted first, fio's I/O fails (it
# never hangs: it ends within 60 s of the unload), the unload completes, nothing is left behind.
t_lc_rmmod_live() {
	local f c1 c2 ns fpid t0 rc=0
	lc_setup rxe && lc_setup siw || return 1
	c1=$(host_connect rxe "$LC_NQN") || return 1
	c2=$(host_connect siw "$LC_NQN") || return 1
	wait_for 30 ns_of "$LC_NQN" || { fail "no namespace"; return 1; }
	ns=$(ns_of "$LC_NQN")
	dmesg_mark
	timeout 600 fio --name=rmmod --filename="$ns" --ioengine=libaio --direct=1 --rw=randrw --bsrange=4k-128k \
		--iodepth=16 --time_based --runtime=500 >/tmp/lc-rmmod-fio.log 2>&1 &
	fpid=$!
	lc_io_moves "$ns" $fpid "before rmmod" || { kill $fpid; return 1; }
	t0=$SECONDS
	timeout 120 rmmod rnvme_rdma || { fail "rmmod with live controllers and fio running failed"; kill $fpid; return 1; }
	[ ! -d /sys/module/rnvme_rdma ] || { fail "module still loaded"; kill $fpid; return 1; }
	for c in "$c1" "$c2"; do
		[ ! -e "$c" ] || { fail "$(basename "$c") still exists after rmmod"; rc=1; }
	done
	wait_for 60 eval "! kill -0 $fpid 2>/dev/null" || { fail "fio still running 60 s after rmmod"; kill -9 $fpid; rc=1; }
	if wait $fpid; then
		fail "fio succeeded though its controllers were deleted under it"; rc=1
	fi
	dmesg_since_mark | grep -q 'Removing ctrl' || { fail "controllers were not removed through the core"; rc=1; }
	[ $rc = 0 ] && info "two live controllers (rxe, siw) deleted by rmmod in $((SECONDS - t0)) s with fio running on their namespace; fio ended with an error: $(grep -m1 -o 'err=[^,]*' /tmp/lc-rmmod-fio.log)"
	return $rc
}

group_lifecycle() {
	run_test "lifecycle: rxe: nvme reset under fio verify" t_lc_reset_under_io rxe
	full_tier && run_test "lifecycle: siw: nvme reset under fio verify" t_lc_reset_under_io siw
	# (a split run, lib.sh on_fabric: the reset drains each provider's queues its own way; the
	# queue count is the core's and ours, on siw only)
	on_fabric rxe siw && run_test "lifecycle: rxe: queue count shrinks and grows across reconnects" t_lc_queue_count rxe
	on_fabric siw siw && run_test "lifecycle: siw: queue count shrinks and grows across reconnects" t_lc_queue_count siw
	on_fabric rxe rxe && run_test "lifecycle: rxe: a teardown waits for 4 RCU grace periods with 1 or 6 I/O queues" t_lc_teardown_rcu rxe
	on_fabric siw rxe && run_test "lifecycle: siw: a teardown waits for 4 RCU grace periods with 1 or 6 I/O queues" t_lc_teardown_rcu siw
	run_test "lifecycle: rmmod with live controllers on rxe and siw while fio runs on them" t_lc_rmmod_live
}

# The part of the datapath group (tools/guest/datapath.sh) that `make check` runs on every
# fabric: setup, connect with defaults, fio crc32c verification over all block sizes, the
# inline/MR path counters, a rejected connect, teardown. `suite.sh datapath` runs the whole group
# (every connect option, discovery, filesystems, interop with the C driver, every bad input,
# multiple controllers), which takes too long on a KASAN guest under TCG for every check.
group_datapath_quick() {
	local f p d=rnvme
	HOST_DRIVER=rnvme
	for f in ${DP_FABRICS//,/ }; do
		p="datapath[$d/$f]"
		run_test "$p: setup: $f, nvmet-rdma, rnvme_rdma loaded" dp_wrap t_dp_setup "$f"
		run_test "$p: connect with defaults" dp_wrap t_dp_connect "$f"
		run_test "$p: fio crc32c verify, 512 B-1 MiB, iodepth 1/32, 2 jobs" dp_wrap t_dp_fio "$f"
		run_test "$p: small writes and a discard's ranges inline, large I/O fast-registered (stats)" dp_wrap t_dp_stats "$f"
		run_test "$p: bad input: wrong NQN" dp_wrap t_dp_bad "$f" wrong_nqn
		run_test "$p: teardown: subsystems removed, driver unloads" dp_wrap t_dp_teardown "$f"
	done
}
