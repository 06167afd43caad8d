# Guest-side fixtures for rnvme-rdma tests (sourced by scripts run under scripts/vm-run).
# See Documentation/testing.rst. All functions fail loudly (non-zero + message on stderr).

NVMET=/sys/kernel/config/nvmet
# One NIC per soft-RDMA provider (vm-run gives the guest two isolated NICs). FABRIC_ADDR is the
# target's address: the guest's own in a single guest; in a pair (RNVME_ROLE host or target, see
# scripts/vm-run --pair) the target guest's, at the other end of the wire.
declare -A FABRIC_NETDEV=([rxe]=eth0 [siw]=eth1)
RNVME_ROLE=${RNVME_ROLE:-single}
if [ "$RNVME_ROLE" = single ]; then
	declare -A FABRIC_ADDR=([rxe]=10.0.2.15 [siw]=10.0.3.15)
else
	declare -A FABRIC_ADDR=([rxe]=10.0.2.2 [siw]=10.0.3.2)
fi
declare -A FABRIC_PORT_ID=([rxe]=1 [siw]=2)
TRSVCID=4420
HOSTNQN=$(cat /etc/nvme/hostnqn 2>/dev/null)
HOSTID=$(cat /etc/nvme/hostid 2>/dev/null)

fail() { echo "FAIL: $*" >&2; return 1; }
info() { echo "# $*"; }

# cpu_busy: busy jiffies (USER_HZ) of all CPUs (user nice system irq softirq steal) from /proc/stat.
cpu_busy() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }

# wait_for SECONDS CMD...: poll CMD every 0.2 s until it succeeds or SECONDS pass.
wait_for() {
	local t=$1; shift
	local end=$((SECONDS + t))
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.2
	done
}

# fabric_up rxe|siw: load the soft-RDMA provider and bind it to its NIC. Prints the device name.
fabric_up() {
	local f=$1 nd=${FABRIC_NETDEV[$1]} dev="${FABRIC_NETDEV[$1]}_$1"
	[ -n "$nd" ] || { fail "unknown fabric '$f' (rxe|siw)"; return 1; }
	if ! rdma link show "$dev/1" >/dev/null 2>&1; then
		modprobe "$([ "$f" = rxe ] && echo rdma_rxe || echo siw)" || { fail "cannot load the $f provider"; return 1; }
		rdma link add "$dev" type "$f" netdev "$nd" || { fail "rdma link add $dev failed"; return 1; }
	fi
	wait_for 10 sh -c "rdma link show $dev/1 | grep -q 'state ACTIVE'" ||
		{ fail "$dev did not become ACTIVE"; rdma link show >&2; return 1; }
	echo "$dev"
}

# fabric_down rxe|siw: remove the soft-RDMA device (every user must be gone first).
fabric_down() {
	local dev="${FABRIC_NETDEV[$1]}_$1"
	if rdma link show "$dev/1" >/dev/null 2>&1; then rdma link del "$dev" || return 1; fi
}

fabric_addr() { echo "${FABRIC_ADDR[$1]}"; }

# FABRIC_SPLIT (suite.sh split=yes|no, default no): with yes (make check's default, to fit its
# time budget) a test whose code path does not depend on the fabric runs on one fabric only, the
# rest on every fabric. on_fabric F WHERE: whether the test's instance on fabric F runs, WHERE
# being the fabric it is assigned to in a split run (rxe or siw) or both. A test assigned to a
# fabric that DP_FABRICS leaves out runs on the others, so fabrics=siw still runs everything.
FABRIC_SPLIT=${FABRIC_SPLIT:-no}
on_fabric() {
	[ "$FABRIC_SPLIT" = no ] || [ "$2" = both ] || [ "$1" = "$2" ] ||
		[[ " ${DP_FABRICS//,/ } " != *" $2 "* ]]
}

# RNVME_TIER (suite.sh tier=check|full, default full): make check, CI's gate, runs the check tier,
# which keeps every group on at least one fabric, both fabrics where the fabric decides, every
# reproducer of a crash or hang fixed so far, within CI's time budget; `make check-full` runs the
# full tier, every test (Documentation/testing.rst, "Tiers"). full_tier: whether a test that only
# the full tier runs runs.
RNVME_TIER=${RNVME_TIER:-full}
full_tier() { [ "$RNVME_TIER" = full ]; }
# tier_on F WHERE: a test the full tier runs on every fabric and the check tier on WHERE only (or,
# when DP_FABRICS leaves WHERE out, on the others): whether its instance on fabric F runs.
tier_on() { full_tier || [ "$1" = "$2" ] || [[ " ${DP_FABRICS//,/ } " != *" $2 "* ]]; }

# target_port_up FABRIC [NQN...]: an nvmet-rdma port listening on the fabric's address, port 4420,
# exposing the subsystems NQN...
# Ports stay up for the whole boot and always keep the "anchor" subsystem linked: removing an
# nvmet-rdma port after I/O queues connected triggers a lockdep report inside the target
# (nvmet_config_sem vs the rdma_cm handler mutex, see Documentation/testing.rst), which would
# switch lockdep off for the rest of the boot.
target_port_up() {
	local f=$1 id=${FABRIC_PORT_ID[$1]} p n
	shift
	modprobe nvmet && modprobe nvmet-rdma || { fail "cannot load nvmet-rdma"; return 1; }
	p=$NVMET/ports/$id
	if [ ! -d "$p" ]; then
		mkdir "$p" &&
		echo rdma >"$p/addr_trtype" && echo ipv4 >"$p/addr_adrfam" &&
		echo "${FABRIC_ADDR[$f]}" >"$p/addr_traddr" && echo $TRSVCID >"$p/addr_trsvcid" ||
			{ fail "cannot configure nvmet port $id"; return 1; }
	fi
	# nvmet starts listening on the port's first subsystem link: the given subsystems are linked
	# before the anchor, so that no host connects while the port lacks them (a Connect to a
	# subsystem the port does not expose is refused with DNR, and the host then deletes its
	# controller).
	for n in "$@"; do target_subsys_link "$n" "$f" || return 1; done
	target_subsys_add nqn.2026-11.io.rnvme:anchor null >/dev/null || return 1
	target_subsys_link nqn.2026-11.io.rnvme:anchor "$f" || return 1
}

# target_subsys_add NQN [null|file|mem|dmem|slowmem[:SIZE_MB]]: a subsystem open to any host with
# namespace 1. null = null_blk (discards writes: speed only); file = a file on tmpfs (4 KiB
# blocks); mem = memory-backed null_blk (512 B blocks, keeps data); dmem = mem that also takes
# discards (discarded blocks read back as zeros); slowmem = mem that completes each I/O 100 ms
# after it came (null_blk's timer mode): a host keeping it busy always has requests in flight.
# Default mem:256.
target_subsys_add() {
	local nqn=$1 kind=${2:-mem:256} s=$NVMET/subsystems/$1 size dev
	size=${kind#*:}; [ "$size" = "$kind" ] && size=256
	[ -d "$s" ] && return 0
	mkdir "$s" && echo 1 >"$s/attr_allow_any_host" || { fail "cannot create subsystem $nqn"; return 1; }
	case "${kind%%:*}" in
	null|mem|dmem|slowmem)
		modprobe null_blk nr_devices=0 || { fail "cannot load null_blk"; return 1; }
		# null_blk names the disk after the configfs directory (at most 31 characters).
		local name
		name=rn_$(echo "${nqn##*:}" | tr -c 'a-zA-Z0-9\n' '_' | cut -c1-28)
		local n=/sys/kernel/config/nullb/$name
		mkdir "$n" && echo "$size" >"$n/size" && echo 512 >"$n/blocksize" &&
			{ [ "${kind%%:*}" = null ] || echo 1 >"$n/memory_backed"; } &&
			{ [ "${kind%%:*}" != dmem ] || echo 1 >"$n/discard"; } &&
			{ [ "${kind%%:*}" != slowmem ] || { echo 2 >"$n/irqmode" && echo 100000000 >"$n/completion_nsec"; }; } &&
			echo 1 >"$n/power" || { fail "cannot create null_blk device"; return 1; }
		dev=/dev/$name
		# devtmpfs creates the node asynchronously.
		wait_for 10 test -b "$dev" || { fail "$dev did not appear"; return 1; }
		echo "$n" >"/run/rnvme-nullb-$(echo "$nqn" | tr ':/' '__')"
		;;
	file)
		dev=/scratch/$(echo "$nqn" | tr ':/' '__').img
		truncate -s "${size}M" "$dev" || return 1
		;;
	*) fail "unknown backing '$kind'"; return 1;;
	esac
	mkdir "$s/namespaces/1" && echo -n "$dev" >"$s/namespaces/1/device_path" &&
		echo 1 >"$s/namespaces/1/enable" || { fail "cannot enable namespace on $dev"; return 1; }
	echo "$dev"
}

# target_subsys_link NQN FABRIC: expose the subsystem on the fabric's port.
target_subsys_link() {
	local l=$NVMET/ports/${FABRIC_PORT_ID[$2]}/subsystems/$1
	[ -e "$l" ] || ln -s "$NVMET/subsystems/$1" "$l" || { fail "cannot link $1 to port ${FABRIC_PORT_ID[$2]}"; return 1; }
}

# target_subsys_del NQN: unlink from every port and remove (host controllers must be gone).
target_subsys_del() {
	local nqn=$1 s=$NVMET/subsystems/$1 l nf
	[ -d "$s" ] || return 0
	for l in "$NVMET"/ports/*/subsystems/"$nqn"; do [ -L "$l" ] && rm "$l"; done
	[ -d "$s/namespaces/1" ] && { echo 0 >"$s/namespaces/1/enable"; rmdir "$s/namespaces/1"; }
	rmdir "$s" || return 1
	nf="/run/rnvme-nullb-$(echo "$nqn" | tr ':/' '__')"
	if [ -f "$nf" ]; then echo 0 >"$(cat "$nf")/power"; rmdir "$(cat "$nf")"; rm -f "$nf"; fi
	rm -f "/scratch/$(echo "$nqn" | tr ':/' '__').img"
}

# ctrl_of NQN: the /sys/class/nvme/nvmeX of the first host controller connected to NQN.
ctrl_of() {
	local c
	for c in /sys/class/nvme/nvme*; do
		[ -e "$c/subsysnqn" ] && [ "$(cat "$c/subsysnqn")" = "$1" ] && { echo "$c"; return 0; }
	done
	return 1
}

# ns_of NQN: the block device (/dev/nvmeXnY, the multipath head) of namespace 1 of NQN.
ns_of() {
	local s n
	for s in /sys/class/nvme-subsystem/nvme-subsys*; do
		[ "$(cat "$s/subsysnqn" 2>/dev/null)" = "$1" ] || continue
		for n in "$s"/nvme*n1; do
			[ -e "$n" ] && [ -b "/dev/$(basename "$n")" ] && { echo "/dev/$(basename "$n")"; return 0; }
		done
	done
	return 1
}

# host_connect FABRIC NQN [nvme connect options...]: connect and wait (30 s) for `live`.
# Prints the controller's sysfs directory.
host_connect() {
	local f=$1 nqn=$2 c; shift 2
	nvme connect -t rdma -a "${FABRIC_ADDR[$f]}" -s $TRSVCID -n "$nqn" "$@" >&2 || return 1
	wait_for 30 ctrl_of "$nqn" || { fail "no controller for $nqn"; return 1; }
	c=$(ctrl_of "$nqn")
	wait_for 30 grep -qx live "$c/state" || { fail "$(basename "$c") is $(cat "$c/state"), not live"; return 1; }
	echo "$c"
}

# host_disconnect NQN: disconnect every controller of NQN and wait until they are gone.
host_disconnect() {
	nvme disconnect -n "$1" >&2 || return 1
	wait_for 30 sh -c "! grep -lx '$1' /sys/class/nvme/nvme*/subsysnqn" || { fail "controllers of $1 remain"; return 1; }
}

# load_c_driver: the C nvme_rdma, loaded by path (the modprobe.d rule loads rnvme_rdma for nvme-rdma;
# a distribution's modules may be compressed: nvme-rdma.ko.xz).
load_c_driver() {
	[ -d /sys/module/nvme_rdma ] && return 0
	local ko
	ko=$(ls "/lib/modules/$(uname -r)/kernel/drivers/nvme/host/"nvme-rdma.ko* 2>/dev/null | head -n1)
	[ -n "$ko" ] || { fail "no C nvme-rdma module for $(uname -r)"; return 1; }
	modprobe nvme-fabrics && modprobe rdma_cm && insmod "$ko"
}

# fio_json FILE: from fio's JSON output of one job (or --group_reporting): FIO_ERR, FIO_WRITE and
# FIO_READ (the "io_bytes" of its "write" and "read" sections) and FIO_RUNTIME_MS; parsed with
# builtins (no exec).
fio_json() {
	local line sect="" v
	FIO_ERR="" FIO_WRITE="" FIO_READ="" FIO_RUNTIME_MS=0
	while IFS= read -r line; do
		case "$line" in
		*'"read" : {'*) sect=r;;
		*'"write" : {'*) sect=w;;
		*'"trim" : {'*|*'"sync" : {'*) sect="";;
		*'"io_bytes" : '*)
			v=${line##*: }; v=${v%,}
			case "$sect" in r) FIO_READ=${FIO_READ:-$v};; w) FIO_WRITE=${FIO_WRITE:-$v};; esac;;
		*'"error" : '*) v=${line##*: }; FIO_ERR=${FIO_ERR:-${v%,}};;
		*'"job_runtime" : '*) v=${line##*: }; FIO_RUNTIME_MS=${v%,};;
		esac
	done <"$1"
}

# dmesg_mark / dmesg_since_mark: the kernel log since the mark. The mark is a unique line written
# to the log (at info level: kept off the console), so a log buffer that has wrapped, or lines
# counted while others are printed, never shift the window; if the mark itself has left the
# buffer, nothing is returned and a test looking for a message fails visibly.
dmesg_mark() { _RNVME_MARK="rnvme-mark: $SRANDOM$SRANDOM"; echo "<6>$_RNVME_MARK" >/dev/kmsg; }
# (Safe on the left of `| grep -q` under pipefail, as every test runs: grep ends at its first
# match, and a writer still writing would die of SIGPIPE and fail the pipeline, a spurious failure
# that depends on how much log follows the match. The log is read whole first, and a closed pipe
# is ignored.)
dmesg_since_mark() {
	( trap '' PIPE
	  l=$(dmesg | awk -v m="${_RNVME_MARK:-none}" 'f; index($0, m) { f = 1 }')
	  printf '%s\n' "$l" 2>/dev/null
	  true )
}

# --- a pair of guests (scripts/vm-run --pair; run from the host guest)
# target_run [TIMEOUT] <<'EOF' ... EOF: run the script in the target guest (bash, with this file
# sourced) over the control wire; its output is relayed, its status returned (124: timed out
# there; 255: no answer). Bash builtins only: no exec per call.
target_run() {
	local LC_ALL=C t=${1:-60} s fd l rc=255
	s=$(cat)
	# (the braces: a redirection on a bare exec would stay on this shell for good)
	{ exec {fd}<>/dev/tcp/10.0.9.2/7777; } 2>/dev/null || { fail "target control link down"; return 255; }
	printf 'RUN %d %d\n%s' "$t" "${#s}" "$s" >&"$fd"
	while IFS= read -r -t $((t + 10)) l <&"$fd"; do
		[[ $l == 'rnvme-rc: '* ]] && { rc=${l#rnvme-rc: }; break; }
		printf '%s\n' "$l"
	done
	exec {fd}>&-
	return "$rc"
}
# target_wait [SECONDS]: the target guest answers (it boots beside the host guest).
target_wait() { wait_for "${1:-180}" bash -c ': <>/dev/tcp/10.0.9.2/7777'; }
# wire REQUEST: ask vm-run to act on the pair's QEMUs and wait for its answer (scripts/vm-run
# wire_do): "link host|target w_rxe|w_siw|nic_rxe|nic_siw up|down", "stop target", "cont target".
wire() {
	local id=${EPOCHREALTIME/./}-$BASHPID d=/results/wire
	echo "$*" >"$d/.$id.tmp" && mv "$d/.$id.tmp" "$d/$id.req" || { fail "wire $*: cannot write the request"; return 1; }
	wait_for 15 eval "[ -e $d/$id.ok ] || [ -e $d/$id.err ]"
	if [ -e "$d/$id.ok" ]; then rm -f "$d/$id.ok"; return 0; fi
	fail "wire $*: $(cat "$d/$id.err" 2>/dev/null || echo 'no answer from vm-run in 15 s')"
	rm -f "$d/$id.err"
	return 1
}

# --- TAP results (read by tools/check): one line per test in $RNVME_RESULTS/results.tap.
TAP_FILE=${RNVME_RESULTS:-/tmp}/results.tap
tap_ok() { echo "ok - $*" | tee -a "$TAP_FILE"; }
tap_not_ok() { echo "not ok - $*" | tee -a "$TAP_FILE"; }
tap_skip() { echo "ok - $1 # SKIP ${2:-}" | tee -a "$TAP_FILE"; }
# run_test NAME FUNC [ARGS...]: run FUNC in a subshell; its status decides the TAP line. The
# kernel log is marked at the test's start and end, so vm-run attributes any kernel warning to the
# test that was running (scripts/vm-run, problems.log). (RNVME_KMSG: where the marks go, for the
# runner's self-test on the host, tools/guest-lib-test; /dev/kmsg otherwise.)
# RNVME_ONLY (suite.sh only=TEXT[|TEXT...], for development): tests whose name has none of the
# TEXTs are not run. RNVME_REPEAT (suite.sh repeat=N, for development: a rare failure's
# reproducer): each test that runs runs N times, one TAP line per run.
# A test that causes I/O timeouts or error recovery on purpose says so (expects_recovery, from the
# test itself, or RNVME_GROUP_RECOVERS=yes for a group made of such tests: misbehave, faults,
# wire); in any other test, an "I/O tag ... timeout" or "starting error recovery" in the host's
# kernel log during the test fails it: a driver that loses a completion recovers through a reset
# and every later verify passes, so only the log can tell.
expects_recovery() { : >"${RNVME_RESULTS:-/tmp}/.expects-recovery"; }
# recoveries_since MARK: "TIMEOUTS RECOVERIES" in the kernel log after the last line holding MARK.
recoveries_since() {
	dmesg | awk -v m="$1" 'index($0, m) { t = 0; r = 0; next }
		/I\/O tag [0-9]+ .*timeout/ { t++ } /starting error recovery/ { r++ }
		END { print t + 0, r + 0 }'
}
run_test() {
	local name=$1; shift
	local t0=$SECONDS rc o i nt nr
	if [ -n "${RNVME_ONLY:-}" ]; then
		local -a only; IFS='|' read -ra only <<<"$RNVME_ONLY"
		for o in "${only[@]}"; do [[ $name == *"$o"* ]] && break; o=; done
		[ -n "$o" ] || return 0
	fi
	if [ "${RNVME_REPEAT:-1}" -gt 1 ] && [ -z "${RNVME_REPEATING:-}" ]; then
		for ((i = 1; i <= RNVME_REPEAT; i++)); do
			RNVME_REPEATING=1 run_test "$name [run $i of $RNVME_REPEAT]" "$@"
		done
		return 0
	fi
	echo "# --- $name"
	rm -f "${RNVME_RESULTS:-/tmp}/.expects-recovery"
	echo "rnvme-test: begin $name" >"${RNVME_KMSG:-/dev/kmsg}"
	[ "$RNVME_ROLE" != host ] || printf 'echo %q >/dev/kmsg' "rnvme-test: begin $name" | target_run 10 >/dev/null 2>&1
	( set -o pipefail; "$@" ) 2>&1 | sed 's/^/#   /'
	rc=${PIPESTATUS[0]}
	if [ "${RNVME_GROUP_RECOVERS:-}" != yes ] && [ ! -e "${RNVME_RESULTS:-/tmp}/.expects-recovery" ]; then
		read -r nt nr < <(recoveries_since "rnvme-test: begin $name")
		if [ "$((nt + nr))" -gt 0 ]; then
			echo "#   FAIL: unexpected in the kernel log: $nt I/O timeouts, $nr error recoveries (the test does not expect any)"
			dmesg | awk -v m="rnvme-test: begin $name" 'index($0, m) { n = 0; delete l; next }
				/I\/O tag [0-9]+ .*timeout|starting error recovery/ { l[n++] = $0 } END { for (i = 0; i < n && i < 5; i++) print "#     " l[i] }'
			[ "$rc" != 0 ] || rc=1
		fi
	fi
	echo "rnvme-test: end $name" >"${RNVME_KMSG:-/dev/kmsg}"
	[ "$RNVME_ROLE" != host ] || printf 'echo %q >/dev/kmsg' "rnvme-test: end $name" | target_run 10 >/dev/null 2>&1
	if [ "$rc" = 0 ]; then tap_ok "$name ($((SECONDS - t0)) s)"; else tap_not_ok "$name (exit $rc, $((SECONDS - t0)) s)"; fi
	return 0
}
# run_group NAME: the tests that follow belong to group NAME (tools/check counts them per group).
run_group() { echo "# group $1" | tee -a "$TAP_FILE"; }
