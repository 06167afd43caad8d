# shellcheck shell=bash
# Failure paths: group `faults` of tools/guest/suite.sh (sourced after lib.sh).

# fault_range MODULE [FUNCTION]: "0xSTART 0xEND" of MODULE's text (from its first text symbol to
# a page past its last), or of the function in MODULE whose symbol ends with FUNCTION (a regular
# expression; Rust symbols are mangled) up to the next text symbol at a higher address. MODULE
# "vmlinux": the kernel itself. Addresses stay strings in awk (fixed-width hex compares as text;
# awk's doubles would round 64-bit addresses to 4 KiB) and bash does the one addition.
fault_range() {
	local r
	r=$(gawk -v mod="$1" -v fn="${2:-}" '
		$2 !~ /^[tT]$/ { next }
		{ m = NF == 3 ? "vmlinux" : substr($NF, 2, length($NF) - 2) }
		found && fn != "" && $1 > first { print first, $1; done = 1; exit }
		m == mod && (fn == "" || $3 ~ (fn "$")) { if (!found) first = $1; found = 1; last = $1 }
		END { if (done) exit 0; if (!found || fn != "") exit 1; print first, last, "+" }
	' <(sort /proc/kallsyms)) || return 1
	set -- $r
	if [ "${3:-}" = + ]; then
		printf '%#x %#x\n' "$((0x$1))" "$((0x$2 + 4096))"
	else
		printf '%#x %#x\n' "$((0x$1))" "$((0x$2))"
	fi
}

# fault_target FABRIC NQN SIZE_MB: the fabric and its nvmet-rdma port up, and subsystem NQN with a
# memory-backed namespace of SIZE_MB exposed on it.
fault_target() {
	fabric_up "$1" >/dev/null && target_port_up "$1" &&
		target_subsys_add "$2" "mem:$3" >/dev/null && target_subsys_link "$2" "$1"
}

# t_fault_connect_alloc FABRIC: nvme connect with the N-th slab allocation of its kernel path
# failing (fail-nth, tools/guest/fail_nth.py), at the first, the last and spread points: every
# attempt either fails cleanly (an error, no controller left) or connects; KASAN, lockdep and
# kmemleak judge the rest. FAULTS_POINTS=all tries every point (a soak).
t_fault_connect_alloc() {
	local f=$1 scope=$2 nqn=nqn.2026-11.io.rnvme:faults-$1 d=/sys/kernel/debug out rc points
	fault_target "$f" "$nqn" 16 || return 1
	modprobe nvme-rdma && [ -d /sys/module/rnvme_rdma ] || { fail "rnvme_rdma did not load"; return 1; }
	# Inject into sleeping slab allocations too, silently (a stack dump per failure would read as
	# a kernel problem); page allocations are left alone (their failure warns by design). Only
	# allocations with rnvme_rdma on the stack count (ours, and the core's on our behalf), except
	# under nvme-core's nvme_init_ctrl_finish: in 7.3.4's nvme_init_subsystem (inlined there), a
	# failed sysfs_create_link for a new subsystem drops the last reference under
	# nvme_subsystems_lock, and nvme_destroy_subsystem takes that lock again: a self-deadlock of
	# the core, C transports alike (see testing.rst). (sysfs_create_link itself is tail-called
	# away and never on the stack.)
	# scope "outside-setup": only under create_ctrl but not under setup_ctrl (the controller's
	# creation and listing around the queue setup): a deterministic sequence, every point tried.
	local req rej
	if [ "$scope" = outside-setup ]; then
		req=$(fault_range rnvme_rdma 'TransportOps11create_ctrl') && rej=$(fault_range rnvme_rdma '9transport10setup_ctrl')
		points=all
	else
		req=$(fault_range rnvme_rdma) && rej=$(fault_range nvme_core '^nvme_init_ctrl_finish')
		points=${FAULTS_POINTS:-12}
	fi || { fail "cannot find the symbol ranges in /proc/kallsyms (require '$req', reject '$rej')"; return 1; }
	info "injecting under [$req), not under [$rej)"
	echo N >$d/failslab/ignore-gfp-wait && echo 0 >$d/failslab/verbose &&
		echo 0 >$d/fail_page_alloc/verbose && echo 11 >$d/fail_page_alloc/min-order &&
		echo "${req% *}" >$d/failslab/require-start && echo "${req#* }" >$d/failslab/require-end &&
		echo "${rej% *}" >$d/failslab/reject-start && echo "${rej#* }" >$d/failslab/reject-end || return 1
	# Bounded: a connect that hangs in the kernel cannot be killed, so it is left behind and the
	# test fails after 600 s (the hung-task report then names it too).
	python3 "$RNVME_PROJECT/tools/guest/fail_nth.py" \
		"transport=rdma,traddr=$(fabric_addr "$f"),trsvcid=$TRSVCID,nqn=$nqn,hostnqn=$HOSTNQN,hostid=$HOSTID" \
		"$points" >/tmp/fail-nth.out 2>&1 &
	local pid=$! t0=$SECONDS
	while kill -0 $pid 2>/dev/null && [ $((SECONDS - t0)) -lt 600 ]; do sleep 1; done
	if kill -0 $pid 2>/dev/null; then
		sed 's/^/# /' /tmp/fail-nth.out; fail "fail-nth connect still running after 600 s (hung)"; return 1
	fi
	wait $pid; rc=$?
	out=$(cat /tmp/fail-nth.out)
	echo "$out" | sed 's/^/# /'
	echo Y >$d/failslab/ignore-gfp-wait; echo 2 >$d/failslab/verbose; echo 2 >$d/fail_page_alloc/verbose
	echo 0 >$d/failslab/require-start; echo 18446744073709551615 >$d/failslab/require-end
	echo 0 >$d/failslab/reject-start; echo 0 >$d/failslab/reject-end
	[ $rc = 0 ] || { fail "fail-nth connect: $(echo "$out" | tail -n 1)"; return 1; }
	grep -q ' hit$' <<<"$out" || { fail "no injected failure was hit"; return 1; }
	info "$(grep -c ' hit$' <<<"$out") injected allocation failures during connect: each failed cleanly or connected"
	rmmod rnvme_rdma && target_subsys_del "$nqn"
}

# ff_set FUNC RETVAL PROBABILITY [SYMBOL]: fail_function injects RETVAL into FUNC (an
# ALLOW_ERROR_INJECTION hook of rnvme_rdma's helpers.c) silently, with PROBABILITY percent (shared
# by all functions injected at once), only when rnvme_rdma's SYMBOL (a pattern ending a symbol's
# name, default its queue_rq; one for all functions) is on the stack (the stack filter; the task
# filter cannot be used: fail_function decides inside a kprobe's int3 handler, which x86 runs as an
# NMI, and fail_task() accepts task context only).
ff_set() {
	local d=/sys/kernel/debug/fail_function r
	r=$(fault_range rnvme_rdma "${4:-MqOps8queue_rq}") || { fail "no ${4:-MqOps8queue_rq} of rnvme_rdma in /proc/kallsyms"; return 1; }
	echo "$1" >$d/inject && printf "%#x" "$2" >$d/"$1"/retval && echo "$3" >$d/probability &&
		echo -1 >$d/times && echo 0 >$d/verbose && echo 1 >$d/interval && echo N >$d/task-filter &&
		echo "${r% *}" >$d/require-start && echo "${r#* }" >$d/require-end ||
		{ fail "cannot set up fail_function for $1"; return 1; }
}
ff_clear() {
	local d=/sys/kernel/debug/fail_function
	echo >$d/inject; echo 0 >$d/require-start; echo 18446744073709551615 >$d/require-end
}

# t_fault_submit FABRIC [batch]: a request's submission fails half way, often, under
# crc32c-verified I/O: the MR pool looks empty (rnvme_ib_mr_pool_get returns NULL) and posting the
# SEND fails (rnvme_ib_post_send returns -ENOMEM), each in 20 % of submissions (under queue_rq)
# and nowhere else; blk-mq resubmits those requests later (each attempt succeeds with 64 %). Every
# request that failed must have released what it had mapped (its MR back to the pool, its data
# and command unmapped), or the pool drains and the queue returns BLK_STS_RESOURCE forever: fio
# then cannot finish. Each failure is one `resource_retries`; both kinds must have happened
# (their messages), every byte verifies, and after disconnect and unload the kernel log, KASAN and
# kmemleak are clean (an MR left out of its pool makes ib_dealloc_pd warn).
# With `batch`, the same for requests submitted together (queue_rqs): fio submits through
# io_uring 8 at a time with no I/O scheduler (see t_dp_batch), and the failures are injected only
# under queue_rqs: an empty MR pool for one request of a batch, and the post of a whole chain
# (rnvme_ib_post_send_chain, -ENOMEM: every request of it not posted). Each request of a failed
# chain must be released and handed back to blk-mq, which resubmits it through queue_rq (not
# injected there), and batches must have been posted (batch_requests rose).
t_fault_submit() {
	local f=$1 mode=${2:-} nqn=nqn.2026-11.io.rnvme:faults-submit-$1 c log r0 r1 b0 b1 s rc=0
	local sym=MqOps8queue_rq post=rnvme_ib_post_send eng=(--ioengine=libaio)
	if [ "$mode" = batch ]; then
		sym=MqOps9queue_rqs post=rnvme_ib_post_send_chain
		eng=(--ioengine=io_uring --iodepth_batch_submit=8 --iodepth_batch_complete_min=8)
	fi
	fault_target "$f" "$nqn" 32 || return 1
	dp_load rnvme || return 1
	c=$(host_connect "$f" "$nqn") && dp_ns "$nqn" || return 1
	if [ "$mode" = batch ]; then
		for s in /sys/block/"${DP_NS#/dev/}"/queue/scheduler "$c"/nvme*/queue/scheduler; do
			[ -e "$s" ] || continue
			echo none >"$s" || { fail "cannot set $s to none"; return 1; }
		done
	fi
	dp_stat resource_retries || return 1
	r0=$DP_STAT
	dp_stat batch_requests || return 1
	b0=$DP_STAT
	dmesg_mark
	ff_set rnvme_ib_mr_pool_get 0 20 "$sym" && ff_set "$post" -12 20 "$sym" || { ff_clear; return 1; }
	DP_DEV=$DP_NS
	# 128 KiB requests: every one (read or write) needs an MR; 16 MiB at queue depth 16.
	fio --name=submit --filename="$DP_DEV" "${eng[@]}" \
		--direct=1 --rw=randwrite --bs=128k --iodepth=16 --size=16M --verify=crc32c --verify_fatal=1 \
		--output-format=json --output=/tmp/fault-submit.json >/tmp/fault-submit.err 2>&1 &
	local pid=$! t0=$SECONDS
	while kill -0 $pid 2>/dev/null && [ $((SECONDS - t0)) -lt 300 ]; do sleep 1; done
	ff_clear
	if kill -0 $pid 2>/dev/null; then
		fail "fio still running after 300 s with failing submissions (a drained MR pool retries forever)"
		kill $pid; wait $pid; rc=1
	elif ! wait $pid; then
		fail "fio failed: $(head -c 2000 /tmp/fault-submit.err)"; rc=1
	else
		fio_json /tmp/fault-submit.json
		info "fio: wrote $FIO_WRITE B, read+verified $FIO_READ B in $((FIO_RUNTIME_MS / 1000)) s, error $FIO_ERR"
		[ "$FIO_ERR" = 0 ] && [ "$FIO_WRITE" = 16777216 ] && [ "$FIO_READ" = 16777216 ] ||
			{ fail "fio: expected 16 MiB written and verified without error"; rc=1; }
	fi
	dp_stat resource_retries || return 1
	r1=$DP_STAT
	log=$(dmesg_since_mark)
	info "resource_retries +$((r1 - r0)); MR pool empty reported $(grep -c 'MR pool empty' <<<"$log")x, post failures logged $(grep -c 'post_send failed' <<<"$log")x"
	[ $((r1 - r0)) -gt 0 ] || { fail "no submission failed: nothing was injected"; rc=1; }
	grep -q 'MR pool empty' <<<"$log" || { fail "no injected empty MR pool was reported"; rc=1; }
	grep -q 'nvme_rdma_post_send failed' <<<"$log" || { fail "no injected post failure was reported"; rc=1; }
	dp_stat batch_requests || return 1
	b1=$DP_STAT
	if [ "$mode" = batch ]; then
		info "batch_requests +$((b1 - b0)); chain post failures logged $(grep -c 'requests posted)' <<<"$log")x"
		[ $((b1 - b0)) -gt 0 ] || { fail "no request was posted in a batch"; rc=1; }
		grep -q 'requests posted)' <<<"$log" || { fail "no failed chain post was reported"; rc=1; }
	fi
	# The MRs all came back: the controller disconnects (ib_mr_pool_destroy, ib_dealloc_pd) and
	# the module unloads.
	host_disconnect "$nqn" && rmmod rnvme_rdma && target_subsys_del "$nqn" || rc=1
	return $rc
}

# auth_key: a new DH-HMAC-CHAP secret in the NVMe representation (DHHC-1, untransformed 32-byte
# key followed by its CRC-32, base64).
auth_key() {
	python3 -c 'import os, zlib, base64, struct
k = os.urandom(32)
print("DHHC-1:00:" + base64.b64encode(k + struct.pack("<I", zlib.crc32(k))).decode() + ":")'
}

# t_fault_timeout_auth FABRIC: request timeouts while live, with DH-HMAC-CHAP re-authentication
# requested all along (request timeouts while live). The target admits
# only this host, with a host and a controller secret (bidirectional). Per round: fio writes and
# verifies 2 MiB (4 KiB, queue depth 8) while the host secret is written to sysfs every 0.2 s
# (each write queues the core's re-authentication work) and fail_io_timeout swallows one
# completion on the namespace's path (io_timeout 3 s). The timeout handler starts error
# recovery, which must stop re-authentication (nvme_auth_stop) before the reconnect
# authenticates on the same DH-HMAC-CHAP context, and must not wait forever for it: the
# re-authentication's messages, requeued while resetting, would never go out (the C driver
# hangs there; see fail_nonready in rust/transport). The controller reconnects
# (reconnect_delay 1 s), authenticates again, the aborted I/O is retried and every byte
# verifies. ROUNDS rounds (default 3); fio, the controller and every sysfs write must finish.
t_fault_timeout_auth() {
	local f=$1 rounds=${2:-3} nqn=nqn.2026-11.io.rnvme:faults-auth-$1 hk ck h=$NVMET/hosts/$HOSTNQN c p n log rc=0 r pid t0
	local d=/sys/kernel/debug/fail_io_timeout
	fault_target "$f" "$nqn" 16 || return 1
	hk=$(auth_key) && ck=$(auth_key) || { fail "cannot make DH-HMAC-CHAP keys"; return 1; }
	{ [ -d "$h" ] || mkdir "$h"; } && echo "$hk" >"$h/dhchap_key" && echo "$ck" >"$h/dhchap_ctrl_key" &&
		echo "hmac(sha256)" >"$h/dhchap_hash" && echo 0 >"$NVMET/subsystems/$nqn/attr_allow_any_host" &&
		ln -s "$h" "$NVMET/subsystems/$nqn/allowed_hosts/" || { fail "cannot set up the target's host secrets"; return 1; }
	dp_load rnvme || return 1
	dmesg_mark
	dp_connect "$f" "$nqn" --dhchap-secret="$hk" --dhchap-ctrl-secret="$ck" --reconnect-delay=1 --ctrl-loss-tmo=60 || return 1
	c=$DP_CTRL
	log=$(dmesg_since_mark)
	grep -q "${c##*/}: qid 0: controller authenticated" <<<"$log" ||
		{ fail "${c##*/} connected without authenticating the controller"; return 1; }
	dp_ns "$nqn" || return 1
	p=$(cd "$c" && echo nvme*c*n1) && [ -e "/sys/block/$p/io-timeout-fail" ] ||
		{ fail "no path device with io-timeout-fail under $c"; return 1; }
	echo 3000 >"/sys/block/$p/queue/io_timeout" && echo 1 >"/sys/block/$p/io-timeout-fail" &&
		echo 100 >$d/probability && echo 1 >$d/interval && echo 0 >$d/verbose || return 1
	for ((r = 1; r <= rounds; r++)); do
		dmesg_mark
		echo 1 >$d/times
		fio --name=auth$r --filename="$DP_NS" --ioengine=libaio --direct=1 --rw=randwrite --bs=4k --iodepth=8 \
			--size=2M --offset=$(((r - 1) * 2))M --verify=crc32c --verify_fatal=1 --output-format=json \
			--output=/tmp/fault-auth.json >/tmp/fault-auth.err 2>&1 &
		pid=$! t0=$SECONDS n=0 wpid=
		# Each request in a child (a write blocked in the kernel must not block the test); a new
		# one only when the last has returned.
		while kill -0 $pid 2>/dev/null && [ $((SECONDS - t0)) -lt 240 ]; do
			if [ -z "$wpid" ] || ! kill -0 "$wpid" 2>/dev/null; then
				(echo "$hk" >"$c/dhchap_secret") 2>/dev/null &
				wpid=$! n=$((n + 1))
			fi
			sleep 0.2
		done
		if kill -0 $pid 2>/dev/null; then
			fail "round $r: fio still running after 240 s"; kill $pid; rc=1; break
		fi
		for ((t0 = SECONDS; SECONDS - t0 < 60; )); do kill -0 "$wpid" 2>/dev/null || break; sleep 0.2; done
		kill -0 "$wpid" 2>/dev/null && { fail "round $r: a re-authentication request (sysfs write) is blocked"; rc=1; break; }
		wait $pid || { fail "round $r: fio failed: $(head -c 2000 /tmp/fault-auth.err)"; rc=1; break; }
		fio_json /tmp/fault-auth.json
		[ "$FIO_ERR" = 0 ] && [ "$FIO_WRITE" = 2097152 ] && [ "$FIO_READ" = 2097152 ] ||
			{ fail "round $r: fio wrote $FIO_WRITE and verified $FIO_READ bytes (error $FIO_ERR), expected 2 MiB"; rc=1; break; }
		dp_until 60 dp_is "$c/state" live || { fail "round $r: ${c##*/} not live again"; rc=1; break; }
		log=$(dmesg_since_mark)
		local want
		for want in 'timeout$' 'starting error recovery' 'Successfully reconnected' 'qid 0: controller authenticated' \
			're-authenticating controller'; do
			grep -q "${c##*/}: .*$want" <<<"$log" || { fail "round $r: no '$want' from ${c##*/} in the kernel log"; rc=1; }
		done
		[ $rc = 0 ] || break
		info "round $r: 2 MiB written and verified in $((FIO_RUNTIME_MS / 1000)) s across a timeout, error recovery and an authenticated reconnect; $n re-authentications requested"
	done
	echo 0 >$d/times; echo 0 >"/sys/block/$p/io-timeout-fail" 2>/dev/null
	[ $rc = 0 ] || dmesg_since_mark | tail -n 30 | sed 's/^/#   dmesg: /'
	dp_disconnect "$c" || rc=1
	rm -f "$NVMET/subsystems/$nqn/allowed_hosts/$HOSTNQN"; rmdir "$h"
	rmmod rnvme_rdma && target_subsys_del "$nqn" || rc=1
	return $rc
}

# t_fault_addr_resolved FABRIC: slab allocations fail in the rdma_cm handler that builds a queue's
# connection (ConnCm::addr_resolved: CQ, QP, receive ring, MR pool), in the rdma_cm worker, where
# the fail-nth test cannot reach. failslab with the stack filter on the handler,
# 12 connects at 50, 10 and 3 % (most of its allocations, the receive ring's buffers, come after
# the QP exists). Each connect must fail cleanly (no controller left) or connect (then it is
# deleted); a CQ or PD freed under its QP makes ib_free_cq / ib_dealloc_pd warn, a use after
# free makes KASAN report: the kernel log decides.
t_fault_addr_resolved() {
	local f=$1 nqn=nqn.2026-11.io.rnvme:faults-cm-$1 d=/sys/kernel/debug/failslab r p i ok=0 bad=0 out c
	fault_target "$f" "$nqn" 16 || return 1
	dp_load rnvme || return 1
	# addr_resolved is inlined into the handler (`<ConnCm as CmHandler>::event`, the only one);
	# of its other events none allocates.
	r=$(fault_range rnvme_rdma 'CmHandler5event') || { fail "no CmHandler::event in /proc/kallsyms"; return 1; }
	# Not inside vmalloc (the providers' queues are vmalloc'ed): a failure there warns with a
	# stack dump by design, and kmemleak complains about its scan area.
	local v
	v=$(fault_range vmlinux '^__vmalloc_node_range_noprof') || { fail "no __vmalloc_node_range_noprof in /proc/kallsyms"; return 1; }
	echo N >$d/ignore-gfp-wait && echo 0 >$d/verbose && echo N >$d/task-filter && echo -1 >$d/times &&
		echo 1 >$d/interval && echo "${r% *}" >$d/require-start && echo "${r#* }" >$d/require-end &&
		echo "${v% *}" >$d/reject-start && echo "${v#* }" >$d/reject-end || return 1
	for p in 50 50 50 50 10 10 10 10 3 3 3 3; do
		echo "$p" >$d/probability
		if out=$(timeout 120 nvme connect -t rdma -a "$(fabric_addr "$f")" -s $TRSVCID -n "$nqn" 2>&1); then
			ok=$((ok + 1))
		else
			bad=$((bad + 1))
		fi
		echo 0 >$d/probability
		c=$(ctrl_of "$nqn") && { timeout 60 nvme disconnect -n "$nqn" >/dev/null || { fail "cannot disconnect after attempt at $p %"; break; }; }
		wait_for 30 sh -c "! grep -qlx '$nqn' /sys/class/nvme/nvme*/subsysnqn 2>/dev/null" ||
			{ fail "a controller of $nqn remains after the attempt at $p % ($out)"; break; }
	done
	echo 0 >$d/probability; echo Y >$d/ignore-gfp-wait; echo 2 >$d/verbose
	echo 0 >$d/require-start; echo 18446744073709551615 >$d/require-end
	echo 0 >$d/reject-start; echo 0 >$d/reject-end
	info "12 connects with failing allocations in addr_resolved: $ok connected, $bad failed cleanly"
	[ $bad -gt 0 ] || { fail "no connect failed: nothing was injected"; return 1; }
	rmmod rnvme_rdma && target_subsys_del "$nqn"
}

# t_fault_poll_reset FABRIC: a controller with a poll queue is reset three times while two fio jobs
# (io_uring, --hipri) write and verify through it: blk-mq keeps calling ->poll while
# the queue is torn down (bio_poll holds only the queue's usage counter) and the two jobs poll the
# one poll queue at once. The poll path must never touch a freed CQ (KASAN);
# polled_completions must rise (the I/O really was polled), the controller comes back live after
# each reset, and fio verifies every block. (A stress test: the race did not show on the old code
# here, not even with 4 pollers and 8 resets.)
t_fault_poll_reset() {
	local f=$1 nqn=nqn.2026-11.io.rnvme:faults-poll-$1 c ns pid i rc=0 p0 p1 t0
	fault_target "$f" "$nqn" 16 || return 1
	dp_load rnvme || return 1
	dp_connect "$f" "$nqn" -P 1 || return 1
	c=$DP_CTRL
	dp_ns "$nqn" || return 1
	ns=$DP_NS
	dp_stat polled_completions || return 1
	p0=$DP_STAT
	# 2 x 1 MiB of 4 KiB writes, each job capped at 64 KiB/s: a write phase of 16 s or more.
	fio --name=pollreset --filename="$ns" --ioengine=io_uring --hipri --direct=1 --rw=randwrite --bs=4k \
		--iodepth=4 --numjobs=2 --size=1M --offset_increment=1M --rate=,64k --verify=crc32c \
		--verify_fatal=1 --group_reporting --output-format=json --output=/tmp/fault-poll.json \
		>/tmp/fault-poll.err 2>&1 &
	pid=$!
	for i in 1 2 3; do
		lc_io_moves "$ns" $pid "before reset $i" || { rc=1; break; }
		timeout 120 nvme reset "/dev/${c##*/}" >/dev/null || { fail "nvme reset ${c##*/} failed"; rc=1; break; }
		dp_until 60 dp_is "$c/state" live || { fail "${c##*/} not live after reset $i"; rc=1; break; }
	done
	t0=$SECONDS
	while kill -0 $pid 2>/dev/null && [ $((SECONDS - t0)) -lt 300 ]; do sleep 1; done
	if kill -0 $pid 2>/dev/null; then
		fail "fio still running 300 s after the resets"; kill $pid; rc=1
	elif ! wait $pid; then
		fail "fio failed across the resets: $(head -c 2000 /tmp/fault-poll.err)"; rc=1
	fi
	if [ $rc = 0 ]; then
		fio_json /tmp/fault-poll.json
		[ "$FIO_ERR" = 0 ] && [ "$FIO_WRITE" = 2097152 ] && [ "$FIO_READ" = 2097152 ] ||
			{ fail "fio wrote $FIO_WRITE and verified $FIO_READ bytes (error $FIO_ERR), expected 2 MiB"; rc=1; }
		dp_stat polled_completions || rc=1
		p1=$DP_STAT
		# Each polled request completes its SEND and its response on the polled CQ: fio's 512
		# writes of 4 KiB and its 512 verify reads make 1,024 polled requests, 2,048 completions
		# (4 KiB writes go in-capsule; nvmet-rdma invalidates every read's MR remotely). Only a
		# request in flight at a reset can finish elsewhere (ib_drain_qp reaps the CQ itself):
		# at most iodepth 4 x 2 jobs per reset, 3 resets: 24 requests, 48 completions fewer.
		local need=$((2 * (1024 - 3 * 4 * 2)))
		[ $((p1 - p0)) -ge $need ] || { fail "polled_completions +$((p1 - p0)), expected >= $need (2 per polled request)"; rc=1; }
		info "3 resets under 2 polling fio jobs: 2 MiB written and verified, polled_completions +$((p1 - p0)) (>= $need)"
	fi
	dp_disconnect "$c" || rc=1
	rmmod rnvme_rdma && target_subsys_del "$nqn" || rc=1
	return $rc
}

# dnr_round DRIVER FABRIC NQN: connect with DRIVER (rnvme or c), stop allowing this host on the
# target, reset the controller: the reconnect's Fabrics Connect is refused with Do Not Retry
# (nvmet: NVME_SC_CONNECT_INVALID_HOST | DNR). nvmf_should_reconnect gives up on DNR, so the
# controller must be deleted at that first attempt, not reconnect every second until
# ctrl_loss_tmo (120 s here). Prints the seconds to removal in DNR_SECS.
dnr_round() {
	local d=$1 f=$2 nqn=$3 h=$NVMET/hosts/$HOSTNQN c log n t0
	ln -s "$h" "$NVMET/subsystems/$nqn/allowed_hosts/" || { fail "cannot allow the host on the target"; return 1; }
	dp_load "$d" || return 1
	dp_connect "$f" "$nqn" --reconnect-delay=1 --ctrl-loss-tmo=120 || return 1
	c=$DP_CTRL
	rm "$NVMET/subsystems/$nqn/allowed_hosts/$HOSTNQN" || return 1
	dmesg_mark
	t0=$SECONDS
	echo 1 >"$c/reset_controller" 2>/dev/null
	if ! dp_until 30 eval "[ ! -e $c ]"; then
		fail "$d: ${c##*/} still exists 30 s after the target refused it with DNR (state $(cat "$c/state" 2>/dev/null))"
		dmesg_since_mark | tail -n 20 | sed 's/^/#   dmesg: /'
		nvme disconnect -d "${c##*/}" >/dev/null 2>&1
		return 1
	fi
	DNR_SECS=$((SECONDS - t0))
	log=$(dmesg_since_mark)
	grep -q "Connect for subsystem $nqn is not allowed" <<<"$log" ||
		{ fail "$d: no refused Fabrics Connect in the kernel log"; return 1; }
	n=$(grep -c "${c##*/}: Reconnecting in" <<<"$log")
	[ "$n" = 0 ] || { fail "$d: $n reconnects scheduled after a Do Not Retry refusal"; return 1; }
	grep -q "Removing ctrl: NQN \"$nqn\"" <<<"$log" || { fail "$d: the core did not remove ${c##*/}"; return 1; }
	dp_unload
}

# t_fault_reconnect_dnr FABRIC: a target that refuses this host with Do Not Retry ends the
# controller at once, with the C driver (control, same boot) and with rnvme_rdma.
t_fault_reconnect_dnr() {
	local f=$1 nqn=nqn.2026-11.io.rnvme:faults-dnr-$1 h=$NVMET/hosts/$HOSTNQN rc=0 cs
	fault_target "$f" "$nqn" 16 || return 1
	{ [ -d "$h" ] || mkdir "$h"; } && echo 0 >"$NVMET/subsystems/$nqn/attr_allow_any_host" ||
		{ fail "cannot restrict the target's hosts"; return 1; }
	if dnr_round c "$f" "$nqn"; then
		cs=$DNR_SECS
		dnr_round rnvme "$f" "$nqn" || rc=1
	else
		rc=1
	fi
	[ $rc = 0 ] && info "refused with DNR on reconnect: controller removed after ${cs} s with the C driver, ${DNR_SECS} s with rnvme_rdma, no reconnect scheduled"
	rm -f "$NVMET/subsystems/$nqn/allowed_hosts/$HOSTNQN"; rmdir "$h" 2>/dev/null
	dp_unload && target_subsys_del "$nqn" || rc=1
	return $rc
}

group_faults() {
	# The check tier (lib.sh full_tier) runs the QP-creating handler's failures, rxe's failed
	# submissions, the pollers' resets and the refused reconnect; the full tier everything.
	full_tier && run_test "faults: rxe: connect with an allocation failing at each chosen point (fail-nth)" t_fault_connect_alloc rxe all
	run_test "faults: rxe: allocations failing in the rdma_cm handler that creates the QP: clean failures, no CQ or PD freed under a QP" t_fault_addr_resolved rxe
	# Not on siw: its siw_alloc_mr leaks the page list when siw_mr_add_mem fails (7.3.4; mr->mem
	# is NULL on that path, so only mr is freed), which kmemleak reports whenever an injected
	# failure lands there (seen once in four runs). Not ours; see testing.rst.
	run_test "faults: rxe: submissions failing (empty MR pool, failed post) are retried, release their mappings, data verified" t_fault_submit rxe
	full_tier && run_test "faults: siw: submissions failing (empty MR pool, failed post) are retried, release their mappings, data verified" t_fault_submit siw
	for f in rxe siw; do
		on_fabric "$f" rxe && full_tier && run_test "faults: $f: batched submissions failing (empty MR pool, failed chain post) are retried, release their mappings, data verified" t_fault_submit "$f" batch
	done
	# A split run (lib.sh on_fabric) polls on siw, times out and refuses on one fabric each, and
	# runs one round of timeouts with re-authentication instead of three.
	local r=3 f
	[ "$FABRIC_SPLIT" = no ] || r=1
	for f in rxe siw; do
		on_fabric "$f" siw && run_test "faults: $f: resets while two io_uring pollers poll the poll queue: no CQ used after free, data verified" t_fault_poll_reset "$f"
	done
	for f in rxe siw; do
		on_fabric "$f" rxe && full_tier && run_test "faults: $f: request timeouts while live with DH-HMAC-CHAP re-authentication running ($r round$([ $r = 1 ] || echo s), one timeout each): error recovery, authenticated reconnect, data verified" t_fault_timeout_auth "$f" "$r"
	done
	for f in rxe siw; do
		on_fabric "$f" siw && run_test "faults: $f: a reconnect refused with Do Not Retry deletes the controller at once (C driver as control)" t_fault_reconnect_dnr "$f"
	done
}

# Opt-in (`suite.sh faults_listing`; not yet in make check: its run time on the debug guest is
# still unmeasured): every allocation of create_ctrl outside the queue setup, the controller's
# listing included, fails in turn.
group_faults_listing() {
	run_test "faults: rxe: connect with each allocation around queue setup failing, listing included" \
		t_fault_connect_alloc rxe outside-setup
}
