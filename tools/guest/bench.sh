# shellcheck shell=bash
# The benchmark: the C nvme_rdma and rnvme_rdma side by side in one boot, against the
# same nvmet-rdma target (null_blk namespace), the same soft-RDMA link and the same connect
# options; rounds alternate the order (C then Rust, then Rust then C, ...), each driver loaded,
# connected, measured, disconnected and unloaded; plus the nvme-loop ceiling (same target, no RDMA). One JSON record
# per measurement in $BENCH_OUT/results.jsonl; tools/bench-report turns them into the report.
#
# As a vm-run script: bench.sh [quick|full] [rounds=N] [fabrics=rxe,siw] [runtime=S]
#   [profile_runtime=S] [workloads="qd1 poll ..."] [profile="qd32 ..."] [ceilings=0]
# (tools/bench runs it). workloads= measures only those (default all), profile= profiles only
# those (default: the profiled workloads among them), ceilings=0 skips the nvme-loop and
# raw-verbs ceilings (a focused run, e.g. one workload over many rounds). Sourced by suite.sh, group `bench`: one quick round on rxe, a smoke test
# that the benchmark works (no verdict on speed).

# Workloads (see bench_fio): 4k randread QD1 (latency), 4k randread QD32 x one job per vCPU
# (IOPS), 4k randwrite QD32 (in-capsule writes), 128k sequential read and write QD16 (MR path,
# bandwidth), 4k randread QD1 on a poll queue (io_uring --hipri); submitted 8 at a time through
# io_uring (a plug of 8 requests: rnvme_rdma's queue_rqs posts them with one call, C one each):
# 4k randread QD32 x one job per vCPU (qd32b) and the same polled on the poll queue (pollb).
BENCH_WORKLOADS="qd1 qd32 wr32 seqr seqw poll qd32b pollb"
# Workloads measured on the connection with a poll queue.
BENCH_POLLED="poll pollb"
BENCH_OUT=${BENCH_OUT:-${RNVME_RESULTS:-/tmp}/bench}

# bench_fio WORKLOAD DEV RUNTIME OUT.json: one fio run (no ramp: a warm-up run precedes it).
bench_fio() {
	local w=$1 dev=$2 rt=$3 out=$4 a
	case "$w" in
	qd1) a=(--rw=randread --bs=4k --iodepth=1 --numjobs=1 --ioengine=libaio);;
	qd32) a=(--rw=randread --bs=4k --iodepth=32 "--numjobs=$(nproc)" --ioengine=libaio);;
	wr32) a=(--rw=randwrite --bs=4k --iodepth=32 --numjobs=1 --ioengine=libaio);;
	seqr) a=(--rw=read --bs=128k --iodepth=16 --numjobs=1 --ioengine=libaio);;
	seqw) a=(--rw=write --bs=128k --iodepth=16 --numjobs=1 --ioengine=libaio);;
	poll) a=(--rw=randread --bs=4k --iodepth=1 --numjobs=1 --ioengine=io_uring --hipri);;
	qd32b) a=(--rw=randread --bs=4k --iodepth=32 "--numjobs=$(nproc)" --ioengine=io_uring
		--iodepth_batch_submit=8 --iodepth_batch_complete_min=8);;
	pollb) a=(--rw=randread --bs=4k --iodepth=32 --numjobs=1 --ioengine=io_uring --hipri
		--iodepth_batch_submit=8 --iodepth_batch_complete_min=8);;
	*) fail "unknown workload $w"; return 1;;
	esac
	fio --name="$w" --filename="$dev" --direct=1 --time_based --runtime="$rt" --norandommap \
		--randrepeat=0 --group_reporting --output-format=json --output="$out" "${a[@]}" >/dev/null 2>"$out.err"
}

# bench_point DRIVER FABRIC ROUND WORKLOAD DEV RUNTIME: warm up 1 s, measure RUNTIME s, append a
# record: IOPS, bandwidth, completion latency percentiles, CPU per I/O of the whole guest (host,
# target and soft-RDMA provider: fio's own figure misses softirq and kworkers).
bench_point() {
	local d=$1 f=$2 r=$3 w=$4 dev=$5 rt=$6 j c0 c1
	j=$BENCH_OUT/$f-$d-$r-$w.json
	bench_fio "$w" "$dev" 1 "$j.warm" || { fail "$d/$f/$w: fio warm-up failed: $(head -c 300 "$j.warm.err")"; return 1; }
	bench_posts p0 "$d" || return 1
	c0=$(cpu_busy)
	bench_fio "$w" "$dev" "$rt" "$j" || { fail "$d/$f/$w: fio failed: $(head -c 300 "$j.err")"; return 1; }
	c1=$(cpu_busy)
	bench_posts p1 "$d" || return 1
	rm -f "$j.warm" "$j.warm.err"
	python3 - "$j" "$d" "$f" "$r" "$w" "$((c1 - c0))" "$(getconf CLK_TCK)" \
		"$((p1_batch_posts - p0_batch_posts))" "$((p1_batch_requests - p0_batch_requests))" >>"$BENCH_OUT/results.jsonl" <<'EOF' ||
import json, sys
path, drv, fab, rnd, wl, busy, hz, bposts, breqs = sys.argv[1:]
job = json.load(open(path))["jobs"][0]
rd, wr = job["read"], job["write"]
d = rd if rd["total_ios"] >= wr["total_ios"] else wr
ios = rd["total_ios"] + wr["total_ios"]
if ios <= 0 or job["error"]:
    sys.exit("no I/O completed")
pct = d["clat_ns"].get("percentile", {})
us = lambda k: pct.get(k, 0) / 1000.0
print(json.dumps({
    "fabric": fab, "driver": drv, "round": int(rnd), "workload": wl,
    "iops": rd["iops"] + wr["iops"], "bw_kib": rd["bw"] + wr["bw"],
    "p50_us": us("50.000000"), "p99_us": us("99.000000"), "p999_us": us("99.900000"),
    "ios": ios, "cpu_us_per_io": int(busy) * 1e6 / int(hz) / ios,
    # rnvme_rdma: ib_post_send calls for SENDs per I/O: each I/O not posted in a batch is one
    # call of queue_rq's, plus the batches' calls (C: one per I/O, it has no queue_rqs).
    **({"batch_requests": int(breqs), "batch_posts": int(bposts),
        "posts_per_io": (ios - int(breqs) + int(bposts)) / ios} if drv == "rnvme" else {}),
}))
EOF
		{ fail "$d/$f/$w: no result in $j"; return 1; }
}

# bench_posts PREFIX DRIVER: rnvme_rdma's batch counters into PREFIX_batch_posts and
# PREFIX_batch_requests (0 for the C driver, which has none).
bench_posts() {
	local n
	for n in batch_posts batch_requests; do
		if [ "$2" = rnvme ]; then dp_stat $n || return 1; else DP_STAT=0; fi
		printf -v "$1_$n" %s "$DP_STAT"
	done
}

# Profiled in the first round, on their own runs (the measured points above are not sampled):
# where the guest's work goes per I/O, by kernel module and symbol (perf, summed by tools/guest/profile.py).
BENCH_PROFILE="qd32 wr32 seqr qd32b"
BENCH_PROFILE_PERIOD_NS=250000

# bench_profile DRIVER FABRIC WORKLOAD DEV RUNTIME: one fio run under the sampler; appends a record
# (the I/Os done, the samples per module and the driver's top symbols) to profiles.jsonl.
bench_profile() {
	local d=$1 f=$2 w=$3 dev=$4 rt=$5 j pid
	j=$BENCH_OUT/prof-$f-$d-$w
	python3 "$RNVME_PROJECT/tools/guest/profile.py" "$j.json" "$BENCH_PROFILE_PERIOD_NS" nvme_rdma,rnvme_rdma 2>"$j.err" &
	pid=$!
	wait_for 20 test -e "$j.json.ready" || { kill "$pid"; fail "$d/$f/$w: the sampler did not start: $(head -c 300 "$j.err")"; return 1; }
	bench_fio "$w" "$dev" "$rt" "$j.fio" || { kill "$pid"; fail "$d/$f/$w: fio failed under the sampler"; return 1; }
	kill -TERM "$pid" && wait "$pid" || { fail "$d/$f/$w: the sampler failed: $(head -c 300 "$j.err")"; return 1; }
	python3 - "$j.json" "$j.fio" "$d" "$f" "$w" >>"$BENCH_OUT/profiles.jsonl" <<'EOF' ||
import json, sys
prof, fio, drv, fab, wl = sys.argv[1:]
p = json.load(open(prof))
job = json.load(open(fio))["jobs"][0]
ios = job["read"]["total_ios"] + job["write"]["total_ios"]
if ios <= 0:
    sys.exit("no I/O completed")
mod = {"c": "nvme_rdma", "rnvme": "rnvme_rdma"}[drv]
top = {k: v for k, v in p["symbols"].items() if k.endswith(f"[{mod}]")}
# The samples per instruction of the transport's symbols (tools/bench-annotate).
offsets = {k: v for k, v in p["offsets"].items() if k.endswith(f"[{mod}]")}
print(json.dumps({"fabric": fab, "driver": drv, "workload": wl, "ios": ios, "period_ns": p["period_ns"],
                  "kernel": p["kernel"], "user": p["user"], "lost": p["lost"], "modules": p["modules"],
                  "transport": mod, "transport_symbols": dict(list(top.items())[:15]),
                  "top_symbols": dict(list(p["symbols"].items())[:15]), "transport_offsets": offsets,
                  "transport_chains": {k: v for k, v in list(p.get("chains", {}).items()) if k.split(" <- ")[0].endswith(f"[{mod}]")}}))
EOF
		{ fail "$d/$f/$w: no profile in $j.json"; return 1; }
	rm -f "$j.json" "$j.fio" "$j.err"
}

# bench_limits DRIVER FABRIC ROUND CTRL NS: what the block layer and the controller were given,
# one line in $BENCH_OUT/limits.txt: the report shows them per driver (the same connect options
# must give the same request sizes and queues, or the comparison is not like for like).
bench_limits() {
	local q=/sys/block/${5#/dev/}/queue k v line="$2 $1 round=$3"
	for k in max_sectors_kb max_hw_sectors_kb max_segments nr_requests; do
		v=$(cat "$q/$k" 2>/dev/null) || v=?
		line+=" $k=$v"
	done
	line+=" queue_count=$(cat "$4/queue_count" 2>/dev/null) sqsize=$(cat "$4/sqsize" 2>/dev/null)"
	echo "$line" >>"$BENCH_OUT/limits.txt"
}

# bench_driver DRIVER FABRIC NQN ROUND RUNTIME: load DRIVER, connect (the same options for both
# drivers: one I/O queue per vCPU), measure every workload, then the poll workload on a second
# connection with one poll queue (-P 1), unload.
bench_driver() {
	local d=$1 f=$2 nqn=$3 r=$4 rt=$5 w
	dp_load "$d" || return 1
	dp_connect "$f" "$nqn" -i "$(nproc)" && dp_ns "$nqn" || return 1
	bench_limits "$d" "$f" "$r" "$DP_CTRL" "$DP_NS"
	for w in $BENCH_WORKLOADS; do
		[[ " $BENCH_POLLED " = *" $w "* ]] || bench_point "$d" "$f" "$r" "$w" "$DP_NS" "$rt" || return 1
	done
	if [ "$r" = 1 ]; then
		for w in $BENCH_PROFILE; do bench_profile "$d" "$f" "$w" "$DP_NS" "${BENCH_PROFILE_RT:-$rt}" || return 1; done
	fi
	dp_disconnect "$DP_CTRL" || return 1
	# shellcheck disable=SC2086
	bench_polled "$f" "$nqn" "bench_point $d $f $r" "$rt" $BENCH_WORKLOADS || return 1
	dp_unload
}

# bench_polled FABRIC NQN "POINT ARGS" RUNTIME WORKLOADS...: the polled ones of WORKLOADS, on a
# connection with a poll queue (-P 1) made for them: `POINT ARGS WORKLOAD DEV RUNTIME` each
# (bench_point, insns_point).
bench_polled() {
	local f=$1 nqn=$2 rt=$4 w polled=() point
	read -r -a point <<<"$3"
	shift 4
	for w in "$@"; do [[ " $BENCH_POLLED " = *" $w "* ]] && polled+=("$w"); done
	[ ${#polled[@]} -gt 0 ] || return 0
	dp_connect "$f" "$nqn" -i "$(nproc)" -P 1 && dp_ns "$nqn" || return 1
	for w in "${polled[@]}"; do "${point[@]}" "$w" "$DP_NS" "$rt" || return 1; done
	dp_disconnect "$DP_CTRL"
}

# bench_loop NQN ROUND RUNTIME: the ceiling: nvme-loop to the same target subsystem (the nvme
# host and target cores without RDMA), every workload but poll (nvme-loop has no poll queues).
bench_loop() {
	local nqn=$1 r=$2 rt=$3 p=$NVMET/ports/90 w c
	modprobe nvme-loop || { fail "cannot load nvme-loop"; return 1; }
	if [ ! -d "$p" ]; then
		mkdir "$p" && echo loop >"$p/addr_trtype" || { fail "cannot create the loop port"; return 1; }
	fi
	[ -e "$p/subsystems/$nqn" ] || ln -s "$NVMET/subsystems/$nqn" "$p/subsystems/" || return 1
	nvme connect -t loop -n "$nqn" -i "$(nproc)" >/dev/null || { fail "nvme connect -t loop failed"; return 1; }
	wait_for 30 ctrl_of "$nqn" && c=$(ctrl_of "$nqn") && dp_ns "$nqn" || { fail "no loop controller for $nqn"; return 1; }
	for w in $BENCH_WORKLOADS; do
		[[ " $BENCH_POLLED " = *" $w "* ]] || bench_point loop loop "$r" "$w" "$DP_NS" "$rt" || return 1
	done
	host_disconnect "$nqn" && rm "$p/subsystems/$nqn"
}

# bench_verbs FABRIC ROUND: the fabric's own ceiling, raw verbs without NVMe (rdma-core's
# perftest over the fabric's device, to its own address as the NVMe target is: same guest, same
# provider): 4 KiB SEND latency (ib_send_lat: half the round trip) and SEND bandwidth with 4 KiB
# and 128 KiB messages (ib_send_bw). Connected through rdma_cm (-R: iWARP needs it); -e: both
# sides sleep on completion events, as the NVMe host and target do (perftest's default busy-polls
# from user space, which on 2 vCPUs takes a CPU from the provider: its WRITE and READ tests (WRITE
# has no event mode, READ was no faster with it) came out below the NVMe figures); -F: the guest's CPU
# frequency is whatever TCG makes it. One record per test in results.jsonl (driver "verbs").
BENCH_VERBS="lat4k send4k send128k"
bench_verbs() {
	local f=$1 r=$2 dev addr w t sz a port=18515 out srv
	dev=$(fabric_up "$f") || return 1
	addr=$(fabric_addr "$f")
	for w in $BENCH_VERBS; do
		case $w in
		lat4k) t=ib_send_lat sz=4096 a=(-n 2000);;
		send4k) t=ib_send_bw sz=4096 a=(-n 5000);;
		send128k) t=ib_send_bw sz=131072 a=(-n 500);;
		esac
		port=$((port + 1))
		timeout 60 "$t" -R -F -e -d "$dev" -s "$sz" -p "$port" "${a[@]}" >/dev/null 2>&1 & srv=$!
		sleep 1
		out=$(timeout 60 "$t" -R -F -e -d "$dev" -s "$sz" -p "$port" "${a[@]}" "$addr" 2>&1) ||
			{ kill $srv 2>/dev/null; fail "$f: $t -s $sz failed: $(tail -n 3 <<<"$out")"; return 1; }
		wait $srv
		python3 -c '
import json, re, sys
fab, rnd, wl = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lines = sys.stdin.read().splitlines()
i = next(i for i, l in enumerate(lines) if l.strip().startswith("#bytes"))
# Column names with a space in them made one word each, then the header and the row split alike.
head = re.sub(r"(BW|%) (peak|average|percentile)", r"\1_\2", lines[i]).split()
vals = dict(zip(head, lines[i + 1].split()))
rec = {"fabric": fab, "driver": "verbs", "round": rnd, "workload": wl}
if wl.startswith("lat"):
    rec.update(p50_us=float(vals["t_typical[usec]"]), p99_us=float(vals["99%_percentile[usec]"]),
               iops=1e6 / float(vals["t_avg[usec]"]))
else:
    rec.update(bw_kib=float(vals["BW_average[MiB/sec]"]) * 1024,
               iops=float(vals["MsgRate[Mpps]"]) * 1e6)
print(json.dumps(rec))' "$f" "$r" "$w" <<<"$out" >>"$BENCH_OUT/results.jsonl" ||
			{ fail "$f: cannot read $t's output: $(head -c 600 <<<"$out")"; return 1; }
	done
}

# bench_main [quick|full] [rounds=N] [fabrics=rxe,siw] [runtime=S] [profile_runtime=S]: the whole
# benchmark. full: 4 rounds of 5 s points on rxe and siw (an even number: each driver goes first as
# often; with the guest's clock counting instructions, 5 s points repeat within ~1%); quick: 1
# round of 2 s points on rxe. The profiled runs last runtime seconds unless profile_runtime says
# otherwise (a longer one gives the transport's small share of the samples a finer resolution).
# bench_meta FILE KEY VALUE...: the run's metadata as one JSON object: the kernel, its flavour,
# the vCPUs, fio's version, the drivers' order (of the rounds KEY VALUE... names, by
# bench_order), the date, then KEY VALUE....
bench_meta() {
	local out=$1 a rounds=1
	shift
	for ((a = 1; a < $#; a += 2)); do [ "${!a}" != rounds ] || { a=$((a + 1)); rounds=${!a}; break; }; done
	python3 -c 'import json, sys; print(json.dumps(dict(zip(sys.argv[1::2], sys.argv[2::2]))))' \
		kernel "$(uname -r)" flavour "${RNVME_FLAVOUR:-?}" vcpus "$(nproc)" fio "$(fio --version)" \
		order "$(order_text bench_order "$rounds")" \
		date "$(date -u +%FT%TZ)" "$@" >"$out"
}

# order_text FN ROUNDS: the order the drivers run in over ROUNDS rounds, FN ROUND giving a round's
# ("c rnvme"): what the metadata says is what ran (one round is one order, not alternation).
order_text() {
	local fn=$1 n=$2 r o prev="" alt=1 o1 o2 n1=0 n2=0
	nm() { sed 's/\brnvme\b/rnvme_rdma/g; s/\bc\b/C/g; s/ / then /' <<<"$1"; }
	o1=$("$fn" 1) o2=$("$fn" 2)
	for ((r = 1; r <= n; r++)); do
		o=$("$fn" "$r")
		[ "$o" != "$prev" ] || alt=0
		prev=$o
		if [ "$o" = "$o1" ]; then n1=$((n1 + 1)); elif [ "$o" = "$o2" ]; then n2=$((n2 + 1)); fi
	done
	if [ "$n" -le 1 ]; then echo "1 round: $(nm "$o1") (one order, not alternated)"
	elif [ "$alt" = 1 ] && [ "$o1" != "$o2" ]; then
		echo "alternating over $n rounds: $(nm "$o1") in the odd rounds ($n1), $(nm "$o2") in the even ones ($n2)"
	elif [ "$o1" = "$o2" ] && [ "$n1" = "$n" ]; then echo "$n rounds: $(nm "$o1") in each (not alternated)"
	else echo "$n rounds: $(nm "$o1") in $n1, $(nm "$o2") in $n2 (not alternating)"; fi
}

# bench_target FABRIC NQN: the fabric up, the target's port on it and a null_blk subsystem NQN.
bench_target() {
	fabric_up "$1" >/dev/null && target_port_up "$1" && target_subsys_add "$2" null:1024 >/dev/null &&
		target_subsys_link "$2" "$1"
}

# bench_order ROUND: the drivers in the round's order. A B, B A, A B, ...: whichever driver goes
# second in a round (a machine that slows down over a round, a module load's after-effects) is
# each driver as often, so an order effect shows as a spread, not as a ratio.
bench_order() {
	if [ $(($1 % 2)) = 0 ]; then echo "rnvme c"; else echo "c rnvme"; fi
}

bench_main() {
	local mode=${1:-full} rounds=4 fabrics="rxe siw" rt=5 a f r d nqn t0=$SECONDS n want ceilings=1 prof=default
	[ $# -eq 0 ] || shift
	[ "$mode" = quick ] && { rounds=1 fabrics=rxe rt=2; }
	BENCH_PROFILE_RT=
	for a in "$@"; do
		case "$a" in
		rounds=*) rounds=${a#*=};; runtime=*) rt=${a#*=};; fabrics=*) fabrics=${a#*=}; fabrics=${fabrics//,/ };;
		profile_runtime=*) BENCH_PROFILE_RT=${a#*=};;
		workloads=*) BENCH_WORKLOADS=${a#*=};; profile=*) prof=${a#*=};; ceilings=*) ceilings=${a#*=};;
		*) fail "unknown bench argument '$a'"; return 1;;
		esac
	done
	if [ "$prof" = default ]; then
		prof=
		for a in $BENCH_PROFILE; do [[ " $BENCH_WORKLOADS " != *" $a "* ]] || prof+=" $a"; done
	fi
	BENCH_PROFILE=$prof
	rm -rf "$BENCH_OUT"; mkdir -p "$BENCH_OUT" && : >"$BENCH_OUT/results.jsonl" && : >"$BENCH_OUT/profiles.jsonl" || return 1
	bench_meta "$BENCH_OUT/meta.json" mode "$mode" rounds "$rounds" runtime_s "$rt" \
		profile_runtime_s "${BENCH_PROFILE_RT:-$rt}" fabrics "$fabrics" workloads "$BENCH_WORKLOADS" || return 1
	for f in $fabrics; do
		nqn=nqn.2026-11.io.rnvme:bench-$f
		bench_target "$f" "$nqn" || return 1
		for ((r = 1; r <= rounds; r++)); do
			for d in $(bench_order "$r"); do
				info "$f round $r/$rounds: $d"
				bench_driver "$d" "$f" "$nqn" "$r" "$rt" || return 1
			done
			[ "$ceilings" = 0 ] && continue
			info "$f round $r/$rounds: raw verbs (perftest)"
			bench_verbs "$f" "$r" || return 1
		done
	done
	nqn=nqn.2026-11.io.rnvme:bench-${fabrics%% *}
	for ((r = 1; r <= rounds * ceilings; r++)); do
		info "nvme-loop round $r/$rounds"
		bench_loop "$nqn" "$r" "$rt" || return 1
	done
	for f in $fabrics; do target_subsys_del "nqn.2026-11.io.rnvme:bench-$f" || return 1; done
	# Every point measured: fabrics x rounds x (2 drivers x workloads + the raw verbs tests), and
	# the loop ceiling (every workload but the polled ones).
	n=$(wc -l <"$BENCH_OUT/results.jsonl")
	local np=0
	for a in $BENCH_WORKLOADS; do [[ " $BENCH_POLLED " = *" $a "* ]] || np=$((np + 1)); done
	set -- $BENCH_WORKLOADS
	want=$(($(wc -w <<<"$fabrics") * rounds * (2 * $# + ceilings * $(wc -w <<<"$BENCH_VERBS")) + ceilings * rounds * np))
	[ "$n" = "$want" ] || { fail "$n results, expected $want"; return 1; }
	n=$(wc -l <"$BENCH_OUT/profiles.jsonl")
	want=$(($(wc -w <<<"$fabrics") * 2 * $(wc -w <<<"$BENCH_PROFILE")))
	[ "$n" = "$want" ] || { fail "$n profiles, expected $want"; return 1; }
	info "$n points measured in $((SECONDS - t0)) s; results in $BENCH_OUT"
}

group_bench() {
	run_test "bench: quick mode measures every workload with C and rnvme_rdma over rxe, and the nvme-loop ceiling (smoke: no verdict on speed)" \
		bench_main quick
}

# As a vm-run script (tools/bench): run the benchmark, nothing else.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	. "$RNVME_PROJECT/tools/guest/lib.sh"
	. "$RNVME_PROJECT/tools/guest/datapath.sh"
	bench_main "$@"
fi
