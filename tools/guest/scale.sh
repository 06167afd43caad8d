# shellcheck shell=bash
# Scale figures: the C nvme_rdma and rnvme_rdma in one boot, against the same
# nvmet-rdma target (null_blk namespaces) on one soft-RDMA fabric, the drivers alternating in
# each round (C then Rust in odd rounds, Rust then C in even ones). One JSON record per
# measurement in $SCALE_OUT/results.jsonl; tools/scale-report turns them into the report.
#
# As a vm-run script (tools/bench-scale runs it; give the guest the vCPUs the queue counts need):
#   scale.sh [quick|full] [rounds=N] [fabric=rxe|siw] [queues="1 2 4 8 16"] [cycles=N]
#            [resets=N] [reset_gap=S] [ctrls="1 2 4 8"] [depths="1 4 16 64"] [ioqueues="1 2 4 8"]
#            [runtime=S] [soak=MINUTES] [soak_reset=S]
# A family given an empty list (queues="", ctrls="", ...) or 0 (cycles=0, resets=0) is skipped.
# Families:
#   connect  connect and disconnect time and memory (MemAvailable, unreclaimable slab) for one
#            controller with each number of I/O queues: up to one default queue per vCPU, the
#            rest as write queues (-W), which the fabrics core also caps at one per vCPU.
#   cycles   N connect/disconnect cycles: time per cycle, and memory before against after.
#   resets   N controller resets under fio randread, reset_gap seconds apart (default 0.5): time
#            from the reset to live, and fio must end without an I/O error.
#   ctrls    N controllers at once (N subsystems, one each) for each N of ctrls, 4k randread QD8
#            on every namespace: IOPS, the whole guest's CPU per I/O, completion latency (p50,
#            p99); memory per controller at connect.
#   qdepth   how the cost grows with the queue depth: one controller (one I/O queue per vCPU), one
#            fio job, 4k randread at each depth of depths: IOPS, CPU per I/O, latency.
#   qcount   how it grows with the I/O queue count: a controller with Q I/O queues for each Q of
#            ioqueues (at most one per vCPU), one fio job per queue on a vCPU of its own that
#            blk-mq maps to that queue, 4k randread QD8 each: IOPS, CPU per I/O, latency.
#   soak     (opt-in, soak=MINUTES) one controller on a memory-backed namespace, fio random
#            writes of 4k-128k at QD16 each read back and checked (crc32c, verify_backlog) for
#            MINUTES, a controller reset every soak_reset seconds (default 60, 0 for none): I/O
#            completed, errors (any fails the run), memory before against after.
# Memory figures include the target's side of the connection (it is in the same guest; it is
# the same target for both drivers): compare the drivers, not the absolute numbers.
SCALE_OUT=${SCALE_OUT:-${RNVME_RESULTS:-/tmp}/scale}

# scale_mem: "AVAIL_KIB SUNRECLAIM_KIB" after dropping caches (what a connection keeps, not
# what the page cache holds).
scale_mem() {
	sync; echo 3 >/proc/sys/vm/drop_caches
	awk '$1 == "MemAvailable:" { a = $2 } $1 == "SUnreclaim:" { s = $2 } END { print a, s }' /proc/meminfo
}

# scale_now: seconds since boot, to the nanosecond (the guest's clock: instructions under icount).
scale_now() { date +%s.%N; }
scale_secs() { echo "$2 - $1" | bc; }

# scale_rec KEY VALUE...: one JSON record (numbers stay numbers) appended to results.jsonl.
scale_rec() {
	python3 -c 'import json, sys
a = sys.argv[1:]
def v(x):
    try:
        return int(x)
    except ValueError:
        try:
            return float(x)
        except ValueError:
            return x
print(json.dumps({k: v(x) for k, x in zip(a[0::2], a[1::2])}))' "$@" >>"$SCALE_OUT/results.jsonl"
}

# scale_qargs Q: the connect options for Q I/O queues with $(nproc) vCPUs.
scale_qargs() {
	local q=$1 n
	n=$(nproc)
	if [ "$q" -le "$n" ]; then echo "-i $q"; else echo "-i $n -W $((q - n))"; fi
}

# scale_connect DRIVER FABRIC NQN ROUND Q
scale_connect() {
	local d=$1 f=$2 nqn=$3 r=$4 q=$5 m0 m1 t0 t1 t2 qc
	read -r -a m0 <<<"$(scale_mem)"
	t0=$(scale_now)
	# shellcheck disable=SC2046
	dp_connect "$f" "$nqn" $(scale_qargs "$q") || return 1
	t1=$(scale_now)
	qc=$(cat "$DP_CTRL/queue_count")
	read -r -a m1 <<<"$(scale_mem)"
	dp_disconnect "$DP_CTRL" || return 1
	t2=$(scale_now)
	# queue_count counts the admin queue.
	[ "$qc" = $((q + 1)) ] || { fail "$d: asked for $q I/O queues, got $((qc - 1))"; return 1; }
	scale_rec family connect driver "$d" fabric "$f" round "$r" queues "$q" \
		connect_s "$(scale_secs "$t0" "$t1")" disconnect_s "$(scale_secs "$t1" "$t2")" \
		mem_kib $((m0[0] - m1[0])) slab_kib $((m1[1] - m0[1]))
}

# scale_cycles DRIVER FABRIC NQN ROUND N
scale_cycles() {
	local d=$1 f=$2 nqn=$3 r=$4 n=$5 i m0 m1 t0 t1
	# One cycle first: what the driver and the target allocate once (caches, pools) is not a leak.
	dp_connect "$f" "$nqn" -i "$(nproc)" && dp_disconnect "$DP_CTRL" || return 1
	read -r -a m0 <<<"$(scale_mem)"
	t0=$(scale_now)
	for ((i = 0; i < n; i++)); do
		dp_connect "$f" "$nqn" -i "$(nproc)" && dp_disconnect "$DP_CTRL" || { fail "$d: cycle $i"; return 1; }
		[ $(((i + 1) % 100)) != 0 ] || info "$d: $((i + 1))/$n cycles"
	done
	t1=$(scale_now)
	read -r -a m1 <<<"$(scale_mem)"
	scale_rec family cycles driver "$d" fabric "$f" round "$r" cycles "$n" \
		cycle_s "$(echo "($t1 - $t0) / $n" | bc -l)" mem_growth_kib $((m0[0] - m1[0])) \
		slab_growth_kib $((m1[1] - m0[1]))
}

# scale_resets DRIVER FABRIC NQN ROUND N GAP
scale_resets() {
	local d=$1 f=$2 nqn=$3 r=$4 n=$5 gap=$6 i c fio_pid t0 t1 total=0 out=$SCALE_OUT/resets-$d-$r.json
	dp_connect "$f" "$nqn" -i "$(nproc)" && dp_ns "$nqn" || return 1
	c=$DP_CTRL
	fio --name=resets --filename="$DP_NS" --direct=1 --rw=randread --bs=4k --iodepth=16 \
		--ioengine=libaio --time_based --runtime=3600 --output-format=json --output="$out" \
		>/dev/null 2>"$out.err" &
	fio_pid=$!
	dp_sleep 2
	for ((i = 0; i < n; i++)); do
		t0=$(scale_now)
		echo 1 >"$c/reset_controller" || { kill "$fio_pid"; fail "$d: reset $i refused"; return 1; }
		# The state leaves live at once (resetting, then connecting) and comes back.
		dp_until 120 dp_is "$c/state" live || { kill "$fio_pid"; fail "$d: not live after reset $i"; return 1; }
		t1=$(scale_now)
		total=$(echo "$total + $t1 - $t0" | bc)
		[ $(((i + 1) % 100)) != 0 ] || info "$d: $((i + 1))/$n resets"
		dp_sleep "$gap"
	done
	kill -INT "$fio_pid"; wait "$fio_pid"
	# (fio notes the signal that ended it above its JSON)
	python3 -c 'import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])["jobs"][0]
sys.exit(1 if j["error"] or j["read"]["total_ios"] == 0 else 0)' "$out" ||
		{ fail "$d: fio saw an I/O error (or did no I/O) across the resets: $(head -c 300 "$out.err")"; return 1; }
	dp_disconnect "$c" || return 1
	scale_rec family resets driver "$d" fabric "$f" round "$r" resets "$n" \
		reset_s "$(echo "$total / $n" | bc -l)"
}

# scale_fio_rec FIO_JSON BUSY0 BUSY1 KEY VALUE...: one record from a fio run (group reporting)
# and the guest's busy ticks around it: IOPS, CPU per I/O, completion latency p50 and p99 (us).
scale_fio_rec() {
	local out=$1 b0=$2 b1=$3 figs
	shift 3
	figs=$(python3 -c 'import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])["jobs"][0]
r = j["read"]
pct = r["clat_ns"].get("percentile", {})
if j["error"] or r["total_ios"] <= 0:
    sys.exit("no I/O completed")
print("iops", r["iops"], "cpu_us_per_io", int(sys.argv[2]) * 1e6 / int(sys.argv[3]) / r["total_ios"],
      "p50_us", pct.get("50.000000", 0) / 1000, "p99_us", pct.get("99.000000", 0) / 1000)' \
		"$out" "$((b1 - b0))" "$(getconf CLK_TCK)") || { fail "no I/O figures in $out: $(head -c 300 "$out.err")"; return 1; }
	# shellcheck disable=SC2086
	scale_rec "$@" $figs
}

# scale_ctrls DRIVER FABRIC ROUND N RUNTIME
scale_ctrls() {
	local d=$1 f=$2 r=$3 n=$4 rt=$5 i m0 m1 ctrls=() devs=() b0 b1 out=$SCALE_OUT/ctrls-$d-$r-$4.json args=()
	read -r -a m0 <<<"$(scale_mem)"
	for ((i = 1; i <= n; i++)); do
		dp_connect "$f" "nqn.2026-12.io.rnvme:scale-$f-$i" -i "$(nproc)" && dp_ns "nqn.2026-12.io.rnvme:scale-$f-$i" || return 1
		ctrls+=("$DP_CTRL"); devs+=("$DP_NS")
	done
	read -r -a m1 <<<"$(scale_mem)"
	for i in "${devs[@]}"; do args+=(--name="${i##*/}" --filename="$i"); done
	b0=$(cpu_busy)
	fio --direct=1 --rw=randread --bs=4k --iodepth=8 --ioengine=libaio --time_based \
		--runtime="$rt" --norandommap --randrepeat=0 --group_reporting --output-format=json \
		--output="$out" "${args[@]}" >/dev/null 2>"$out.err" || { fail "$d: fio on $n controllers: $(head -c 300 "$out.err")"; return 1; }
	b1=$(cpu_busy)
	for i in "${ctrls[@]}"; do dp_disconnect "$i" || return 1; done
	scale_fio_rec "$out" "$b0" "$b1" family ctrls driver "$d" fabric "$f" round "$r" ctrls "$n" \
		mem_kib_per_ctrl $(((m0[0] - m1[0]) / n)) slab_kib_per_ctrl $(((m1[1] - m0[1]) / n))
}

# scale_soak DRIVER FABRIC NQN ROUND MINUTES RESET_EVERY
scale_soak() {
	local d=$1 f=$2 nqn=$3 r=$4 min=$5 every=$6 c m0 m1 fio_pid resets=0 end out=$SCALE_OUT/soak-$d-$r.json
	read -r -a m0 <<<"$(scale_mem)"
	dp_connect "$f" "$nqn" -i "$(nproc)" && dp_ns "$nqn" || return 1
	c=$DP_CTRL
	fio --name=soak --filename="$DP_NS" --direct=1 --rw=randwrite --bsrange=4k-128k --iodepth=16 \
		--ioengine=libaio --verify=crc32c --verify_backlog=256 --verify_fatal=1 --time_based \
		--runtime=$((min * 60)) --output-format=json --output="$out" >/dev/null 2>"$out.err" &
	fio_pid=$!
	end=$((SECONDS + min * 60))
	while kill -0 "$fio_pid" 2>/dev/null && [ $SECONDS -lt "$end" ]; do
		if [ "$every" -gt 0 ]; then
			dp_sleep "$every"
			kill -0 "$fio_pid" 2>/dev/null && [ $SECONDS -lt $((end - 10)) ] || break
			echo 1 >"$c/reset_controller" || { kill "$fio_pid"; fail "$d: soak reset refused"; return 1; }
			dp_until 120 dp_is "$c/state" live || { kill "$fio_pid"; fail "$d: not live after soak reset $resets"; return 1; }
			resets=$((resets + 1))
		else
			dp_sleep 60
		fi
		info "$d: soak $(((SECONDS - end + min * 60) / 60))/$min min, $resets resets"
	done
	wait "$fio_pid" || { fail "$d: fio failed in the soak (verify or I/O error): $(head -c 400 "$out.err")"; return 1; }
	dp_disconnect "$c" || return 1
	read -r -a m1 <<<"$(scale_mem)"
	local figs
	figs=$(python3 -c 'import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])["jobs"][0]
w, rd = j["write"], j["read"]
if j["error"] or w["total_ios"] <= 0:
    sys.exit("no I/O completed")
print("write_ios", w["total_ios"], "verified_ios", rd["total_ios"], "write_mib", w["io_kbytes"] // 1024)' "$out") ||
		{ fail "$d: no soak figures in $out"; return 1; }
	# shellcheck disable=SC2086
	scale_rec family soak driver "$d" fabric "$f" round "$r" minutes "$min" resets "$resets" \
		$figs mem_growth_kib $((m0[0] - m1[0])) slab_growth_kib $((m1[1] - m0[1]))
}

# scale_qdepth DRIVER FABRIC NQN ROUND RUNTIME DEPTHS...: one connection, one fio job per depth.
scale_qdepth() {
	local d=$1 f=$2 nqn=$3 r=$4 rt=$5 qd b0 b1 out
	shift 5
	dp_connect "$f" "$nqn" -i "$(nproc)" && dp_ns "$nqn" || return 1
	for qd in "$@"; do
		out=$SCALE_OUT/qdepth-$d-$r-$qd.json
		b0=$(cpu_busy)
		fio --name=qd"$qd" --filename="$DP_NS" --direct=1 --rw=randread --bs=4k --iodepth="$qd" \
			--ioengine=libaio --time_based --runtime="$rt" --norandommap --randrepeat=0 \
			--output-format=json --output="$out" >/dev/null 2>"$out.err" || { fail "$d: fio at QD$qd: $(head -c 300 "$out.err")"; return 1; }
		b1=$(cpu_busy)
		scale_fio_rec "$out" "$b0" "$b1" family qdepth driver "$d" fabric "$f" round "$r" qd "$qd" || return 1
	done
	dp_disconnect "$DP_CTRL"
}

# scale_qcount DRIVER FABRIC NQN ROUND RUNTIME Q: a controller with Q I/O queues, Q fio jobs, job
# i on vCPU i * nproc / Q: blk-mq's default map gives each queue an equal run of consecutive
# vCPUs, so each job submits on a queue of its own.
scale_qcount() {
	local d=$1 f=$2 nqn=$3 r=$4 rt=$5 q=$6 n i cpus=() b0 b1 out=$SCALE_OUT/qcount-$d-$r-$6.json qc
	n=$(nproc)
	dp_connect "$f" "$nqn" -i "$q" && dp_ns "$nqn" || return 1
	qc=$(cat "$DP_CTRL/queue_count")
	[ "$qc" = $((q + 1)) ] || { fail "$d: asked for $q I/O queues, got $((qc - 1))"; return 1; }
	for ((i = 0; i < q; i++)); do cpus+=($((i * n / q))); done
	b0=$(cpu_busy)
	fio --name=qc"$q" --filename="$DP_NS" --direct=1 --rw=randread --bs=4k --iodepth=8 \
		--numjobs="$q" --cpus_allowed="$(IFS=,; echo "${cpus[*]}")" --cpus_allowed_policy=split \
		--ioengine=libaio --time_based --runtime="$rt" --norandommap --randrepeat=0 \
		--group_reporting --output-format=json --output="$out" >/dev/null 2>"$out.err" ||
		{ fail "$d: fio on $q queues: $(head -c 300 "$out.err")"; return 1; }
	b1=$(cpu_busy)
	dp_disconnect "$DP_CTRL" || return 1
	scale_fio_rec "$out" "$b0" "$b1" family qcount driver "$d" fabric "$f" round "$r" queues "$q"
}

# scale_order ROUND: the drivers in the round's order, C first in odd rounds (tools/guest/bench.sh's
# order_text says it in the metadata).
scale_order() {
	if [ $(($1 % 2)) = 0 ]; then echo "rnvme c"; else echo "c rnvme"; fi
}

# scale_main [quick|full] [key=value...]
scale_main() {
	local mode=${1:-full} rounds=2 f=rxe queues="1 2 4 8 16" cycles=100 resets=20 gap=0.5 ctrls="1 2 4 8" rt=5 a r d q i
	local soak=0 soak_reset=60
	local depths="1 4 16 64" ioqueues="1 2 4 8" t0=$SECONDS nqn nctrl
	[ $# -eq 0 ] || shift
	[ "$mode" = quick ] && { rounds=1 queues="1 2" cycles=5 resets=2 ctrls="1 2" depths="1 16" ioqueues="1 2" rt=2; }
	for a in "$@"; do
		case "$a" in
		rounds=*) rounds=${a#*=};; fabric=*) f=${a#*=};; queues=*) queues=${a#*=};;
		cycles=*) cycles=${a#*=};; resets=*) resets=${a#*=};; reset_gap=*) gap=${a#*=};;
		ctrls=*) ctrls=${a#*=};; soak=*) soak=${a#*=};; soak_reset=*) soak_reset=${a#*=};;
		depths=*) depths=${a#*=};; ioqueues=*) ioqueues=${a#*=};; runtime=*) rt=${a#*=};;
		*) fail "unknown scale argument '$a'"; return 1;;
		esac
	done
	for q in $queues; do
		[ "$q" -le $((2 * $(nproc))) ] || { fail "$q I/O queues need $(((q + 1) / 2)) vCPUs, the guest has $(nproc)"; return 1; }
	done
	for q in $ioqueues; do
		[ "$q" -le "$(nproc)" ] || { fail "$q I/O queues with a vCPU each need $q vCPUs, the guest has $(nproc)"; return 1; }
	done
	nctrl=1  # (the first subsystem serves every family)
	for i in $ctrls; do [ "$i" -le "$nctrl" ] || nctrl=$i; done
	rm -rf "$SCALE_OUT"; mkdir -p "$SCALE_OUT" && : >"$SCALE_OUT/results.jsonl" || return 1
	python3 -c 'import json, sys; print(json.dumps(dict(zip(sys.argv[1::2], sys.argv[2::2]))))' \
		kernel "$(uname -r)" flavour "${RNVME_FLAVOUR:-?}" mode "$mode" rounds "$rounds" fabric "$f" \
		queues "$queues" cycles "$cycles" resets "$resets" reset_gap_s "$gap" ctrls "$ctrls" depths "$depths" \
		ioqueues "$ioqueues" runtime_s "$rt" soak_min "$soak" soak_reset_s "$soak_reset" \
		vcpus "$(nproc)" fio "$(fio --version)" \
		order "$(order_text scale_order "$rounds")" \
		date "$(date -u +%FT%TZ)" >"$SCALE_OUT/meta.json"
	nqn=nqn.2026-12.io.rnvme:scale-$f-1
	fabric_up "$f" >/dev/null && target_port_up "$f" || return 1
	for ((i = 1; i <= nctrl; i++)); do
		target_subsys_add "nqn.2026-12.io.rnvme:scale-$f-$i" null:1024 >/dev/null &&
			target_subsys_link "nqn.2026-12.io.rnvme:scale-$f-$i" "$f" || return 1
	done
	if [ "$soak" != 0 ]; then
		local dev
		dev=$(target_subsys_add "nqn.2026-12.io.rnvme:scale-$f-soak" mem:256) &&
			target_subsys_link "nqn.2026-12.io.rnvme:scale-$f-soak" "$f" || return 1
		# Written once in full here, so that its backing pages are not charged to the first
		# driver's soak.
		dd if=/dev/zero of="$dev" bs=1M count=256 oflag=direct status=none || { fail "cannot fill $dev"; return 1; }
	fi
	for ((r = 1; r <= rounds; r++)); do
		for d in $(scale_order "$r"); do
			info "round $r/$rounds: $d"
			dp_load "$d" || return 1
			for q in $queues; do scale_connect "$d" "$f" "$nqn" "$r" "$q" || return 1; done
			[ "$cycles" = 0 ] || scale_cycles "$d" "$f" "$nqn" "$r" "$cycles" || return 1
			[ "$resets" = 0 ] || scale_resets "$d" "$f" "$nqn" "$r" "$resets" "$gap" || return 1
			for i in $ctrls; do scale_ctrls "$d" "$f" "$r" "$i" "$rt" || return 1; done
			# shellcheck disable=SC2086
			[ -z "$depths" ] || scale_qdepth "$d" "$f" "$nqn" "$r" "$rt" $depths || return 1
			for q in $ioqueues; do scale_qcount "$d" "$f" "$nqn" "$r" "$rt" "$q" || return 1; done
			[ "$soak" = 0 ] || scale_soak "$d" "$f" "nqn.2026-12.io.rnvme:scale-$f-soak" "$r" "$soak" "$soak_reset" || return 1
			dp_unload || return 1
		done
	done
	local n want
	n=$(wc -l <"$SCALE_OUT/results.jsonl")
	want=$((rounds * 2 * ($(wc -w <<<"$queues $ctrls $depths $ioqueues") + (cycles > 0) + (resets > 0) + (soak > 0))))
	[ "$n" = "$want" ] || { fail "$n results, expected $want"; return 1; }
	info "$n measurements in $((SECONDS - t0)) s; results in $SCALE_OUT"
}

# As a vm-run script (tools/bench-scale): run the scale figures, nothing else.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	. "$RNVME_PROJECT/tools/guest/lib.sh"
	. "$RNVME_PROJECT/tools/guest/datapath.sh"
	. "$RNVME_PROJECT/tools/guest/bench.sh"   # (order_text)
	scale_main "$@"
fi
