# shellcheck shell=bash
# Instructions per I/O: the instructions the C nvme_rdma and rnvme_rdma execute in
# their own module per I/O, counted exactly by QEMU (tools/insncount, a TCG plugin loaded by
# tools/bench-insns), in one boot against the same nvmet-rdma target, the drivers alternating in
# each round as in tools/guest/bench.sh.
#
# The plugin counts every block of the kernel's module area it runs and writes the counts out
# each time the guest calls sethostname(2) (a mark; nothing else here calls it): a window is what
# ran between two marks. For each workload the guest marks, runs fio, marks again, and records
# the window (its mark number, the driver, the workload, the I/Os fio completed); after each
# module load it records where the module lies (/proc/modules) and its symbols (/proc/kallsyms),
# so the host (tools/insns-report) can sum each window's instructions by module and symbol.
#
# As a vm-run script (tools/bench-insns): insns.sh [rounds=N] [fabrics="rxe siw"] [runtime=S]
#                                                   [workloads="qd32 wr32 seqr qd32b poll"]
INSNS_OUT=${INSNS_OUT:-${RNVME_RESULTS:-/tmp}/insns}
INSNS_MARKS=0

# insns_mark: end the plugin's current window; its number here is the marks made before this one
# (the plugin's is larger by the marks made before this script ran, see insns_main).
insns_mark() {
	hostname "rnvme-mark-$INSNS_MARKS" || { fail "sethostname failed"; return 1; }
	INSNS_MARKS=$((INSNS_MARKS + 1))
}

# insns_module DRIVER FABRIC ROUND: the text symbols of every module (a block belongs to the module of
# the nearest symbol at or below it) and where the driver's module lies (/proc/modules).
insns_module() {
	local m=nvme_rdma
	[ "$1" = c ] || m=rnvme_rdma
	# (Each load may put the module elsewhere.)
	awk -v m="$m" '$1 == m { print $1, $2, $6 }' /proc/modules >"$INSNS_OUT/module-$2-$1-$3.txt"
	awk '$2 ~ /^[tT]$/ && $4 ~ /^\[/' /proc/kallsyms >"$INSNS_OUT/kallsyms-$2-$1-$3.txt"
	[ -s "$INSNS_OUT/module-$2-$1-$3.txt" ] && grep -q "\[$m\]\$" "$INSNS_OUT/kallsyms-$2-$1-$3.txt" ||
		{ fail "no address or symbols for $m"; return 1; }
}

# insns_point DRIVER FABRIC ROUND WORKLOAD DEV RUNTIME: one window around one fio run.
insns_point() {
	local d=$1 f=$2 r=$3 w=$4 dev=$5 rt=$6 j=$INSNS_OUT/$2-$1-$3-$4.json ios
	insns_mark || return 1
	bench_fio "$w" "$dev" "$rt" "$j" || { fail "$d/$f/$w: fio failed: $(head -c 300 "$j.err")"; return 1; }
	insns_mark || return 1
	ios=$(python3 -c 'import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])["jobs"][0]
n = j["read"]["total_ios"] + j["write"]["total_ios"]
sys.exit("no I/O completed") if n <= 0 or j["error"] else print(n)' "$j") || { fail "$d/$f/$w: no I/O count"; return 1; }
	printf '{"mark": %d, "driver": "%s", "fabric": "%s", "round": %d, "workload": "%s", "ios": %d}\n' \
		$((INSNS_MARKS - 1)) "$d" "$f" "$r" "$w" "$ios" >>"$INSNS_OUT/windows.jsonl"
}

# insns_driver DRIVER FABRIC NQN ROUND RUNTIME WORKLOADS...
insns_driver() {
	local d=$1 f=$2 nqn=$3 r=$4 rt=$5 w
	shift 5
	dp_load "$d" && insns_module "$d" "$f" "$r" || return 1
	dp_connect "$f" "$nqn" -i "$(nproc)" && dp_ns "$nqn" || return 1
	for w in "$@"; do
		[[ " $BENCH_POLLED " = *" $w "* ]] || insns_point "$d" "$f" "$r" "$w" "$DP_NS" "$rt" || return 1
	done
	dp_disconnect "$DP_CTRL" || return 1
	bench_polled "$f" "$nqn" "insns_point $d $f $r" "$rt" "$@" || return 1
	dp_unload
}

insns_main() {
	local rounds=2 fabrics="rxe siw" rt=3 workloads="qd32 wr32 seqr qd32b poll" a f r d nqn n want
	for a in "$@"; do
		case "$a" in
		rounds=*) rounds=${a#*=};; runtime=*) rt=${a#*=};;
		fabrics=*) fabrics=${a#*=}; fabrics=${fabrics//,/ };; workloads=*) workloads=${a#*=};;
		*) fail "unknown insns argument '$a'"; return 1;;
		esac
	done
	rm -rf "$INSNS_OUT"; mkdir -p "$INSNS_OUT" && : >"$INSNS_OUT/windows.jsonl" || return 1
	# The kernel's own text symbols (where it lies does not change: no KASLR), for the helpers
	# the kernel crate calls (rust_helper_*) and the rest of the kernel.
	awk 'NF == 3 && $2 ~ /^[tT]$/' /proc/kallsyms >"$INSNS_OUT/kallsyms-vmlinux.txt" &&
		grep -q " rust_helper_" "$INSNS_OUT/kallsyms-vmlinux.txt" || { fail "no kernel symbols"; return 1; }
	bench_meta "$INSNS_OUT/meta.json" rounds "$rounds" runtime_s "$rt" fabrics "$fabrics" \
		workloads "$workloads" || return 1
	for f in $fabrics; do
		nqn=nqn.2026-12.io.rnvme:insns-$f
		bench_target "$f" "$nqn" || return 1
		for ((r = 1; r <= rounds; r++)); do
			for d in $(bench_order "$r"); do
				info "$f round $r/$rounds: $d"
				# shellcheck disable=SC2086
				insns_driver "$d" "$f" "$nqn" "$r" "$rt" $workloads || return 1
			done
		done
	done
	insns_mark || return 1
	# The plugin numbers every sethostname(2) since boot (the guest's init makes one): the report
	# aligns the windows by the count made here.
	echo "$INSNS_MARKS" >"$INSNS_OUT/marks"
	n=$(wc -l <"$INSNS_OUT/windows.jsonl")
	want=$(($(wc -w <<<"$fabrics") * rounds * 2 * $(wc -w <<<"$workloads")))
	[ "$n" = "$want" ] || { fail "$n windows, expected $want"; return 1; }
	info "$n windows; results in $INSNS_OUT"
}

# As a vm-run script (tools/bench-insns): the counts, nothing else.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	. "$RNVME_PROJECT/tools/guest/lib.sh"
	. "$RNVME_PROJECT/tools/guest/datapath.sh"
	. "$RNVME_PROJECT/tools/guest/bench.sh"
	insns_main "$@"
fi
