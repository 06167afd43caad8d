#!/bin/bash
# The upstream peer suite in a guest: blktests' nvme group over rdma, with each host
# driver named (tools/blktests boots once per driver). Run by tools/blktests (`make blktests`)
# under scripts/vm-run.
# Usage: blktests.sh fabric=rxe|siw [drivers=rnvme,c] [tests="nvme/004 nvme/008 ..."] [img=SIZE]
#                    [timed=SECONDS]  (blktests' TIMEOUT: the fio runtime of its TIMED tests)
#                    [io_timeout=SECONDS]  (nvme_core's I/O timeout, for both drivers; unset: the
#                    kernel's 30 s)
#   blktests is the unmodified copy tools/blktests installed in the build root (/opt/blktests),
#   with its helpers built there; it is copied to /tmp (it writes next to itself).
# Per test, one `./check` run (so the lockdep state and the kernel log are known per test). Every
# test starts with lockdep on: 7.3.4's target-side lockdep report (nvmet_config_sem against the
# rdma_cm handler mutex, at the port removal of a test's cleanup once an I/O queue's Fabrics
# Connect was handled in the target's CM handler; with either host driver) switches lockdep off
# for the rest of a boot, so after a test that ended with lockdep off this script stops and
# writes the tests not yet run to /results/blktests/remaining; tools/blktests boots again for
# them. Writes, in /results/blktests:
#   results.tsv (driver, test, condition, status, reason, runtime, wall seconds, lockdep on at its
#   start/end), DRIVER/... (blktests' own result folders: per-test .full, .out, .dmesg, status
#   files), DRIVER/NNN.console (./check's console output), DRIVER/NNN.dmesg-all (its kernel log).
#   blktests' OUTPUT (with the file backend's image) is on tmpfs, copied to /results per test.
. "$RNVME_PROJECT/tools/guest/lib.sh"

FABRIC=rxe DRIVERS=rnvme,c TESTS="" IMG=512m TIMED="" IO_TIMEOUT=""
for a in "$@"; do
	case "$a" in
	fabric=*) FABRIC=${a#fabric=};;
	drivers=*) DRIVERS=${a#drivers=};;
	tests=*) TESTS=${a#tests=};;
	img=*) IMG=${a#img=};;
	timed=*) TIMED=${a#timed=};;
	io_timeout=*) IO_TIMEOUT=${a#io_timeout=};;
	*) fail "unknown argument $a"; exit 2;;
	esac
done
[[ $FABRIC == rxe || $FABRIC == siw ]] || { fail "fabric= must be rxe or siw"; exit 2; }
[ -x /opt/blktests/check ] || { fail "no blktests in the build root (/opt/blktests): run tools/blktests"; exit 2; }

OUT=/results/blktests
mkdir -p "$OUT"
BT=/tmp/blktests
rm -rf "$BT"; cp -a /opt/blktests "$BT"
if [ -z "$TESTS" ]; then
	TESTS=$(cd "$BT" && ls tests/nvme/ | grep -E '^[0-9]{3}$' | sed 's|^|nvme/|' | tr '\n' ' ')
fi
read -ra list <<<"$TESTS"

# The host driver: `modprobe nvme-rdma` (which blktests runs) loads rnvme_rdma through the rule of
# scripts/rnvme-rdma.conf; without the file, the C nvme_rdma.
ALIAS=/etc/modprobe.d/rnvme-rdma.conf
ALIAS_SAVE=$(cat "$ALIAS" 2>/dev/null)
use_driver() {
	local m
	for m in rnvme_rdma nvme_rdma; do
		[ ! -d "/sys/module/$m" ] || rmmod "$m" || { fail "cannot unload $m"; return 1; }
	done
	case "$1" in
	rnvme) echo "$ALIAS_SAVE" >"$ALIAS";;
	c) rm -f "$ALIAS";;
	esac
	modprobe nvme-rdma || { fail "modprobe nvme-rdma ($1) failed"; return 1; }
	case "$1" in
	rnvme) [ -d /sys/module/rnvme_rdma ] && [ ! -d /sys/module/nvme_rdma ];;
	c) [ -d /sys/module/nvme_rdma ] && [ ! -d /sys/module/rnvme_rdma ];;
	esac || { fail "modprobe nvme-rdma did not load the $1 driver"; return 1; }
}

# nvme_core's I/O timeout: a modprobe option (blktests may reload the module) and, while it is
# loaded, its parameter; checked at each test's start (use_io_timeout).
if [ -n "$IO_TIMEOUT" ]; then
	echo "options nvme_core io_timeout=$IO_TIMEOUT" >/etc/modprobe.d/rnvme-io-timeout.conf
fi
use_io_timeout() {
	local v
	[ -n "$IO_TIMEOUT" ] || return 0
	[ ! -d /sys/module/nvme_core ] || echo "$IO_TIMEOUT" >/sys/module/nvme_core/parameters/io_timeout
	v=$(cat /sys/module/nvme_core/parameters/io_timeout 2>/dev/null)
	[ "$v" = "$IO_TIMEOUT" ] || { fail "nvme_core io_timeout is '$v', not $IO_TIMEOUT"; return 1; }
}

write_config() {   # write_config DRIVER
	{
		echo "NVMET_TRTYPES=rdma"
		[ "$FABRIC" = rxe ] && echo "USE_RXE=1"
		echo "NVME_IMG_SIZE=$IMG"
		[ -z "$TIMED" ] || echo "TIMEOUT=$TIMED"
		# (on tmpfs: the file backend's image lives under OUTPUT and is opened O_DIRECT; the
		# results are copied to /results after each test)
		echo "OUTPUT=/tmp/bt-out/$1"
	} >"$BT/config"
}

# Objects kmemleak found at boot are not a test's: blktests scans after each test and would blame
# the first (nvme/003 did). Scan once now and clear what is known.
if [ -w /sys/kernel/debug/kmemleak ]; then
	echo scan >/sys/kernel/debug/kmemleak 2>/dev/null
	echo clear >/sys/kernel/debug/kmemleak 2>/dev/null
fi

: >"$OUT/results.tsv"; rm -f "$OUT/remaining"
lockdep_on() { grep -qE '^ *debug_locks: *1' /proc/lockdep_stats && echo yes || echo no; }

# run_one DRIVER TEST: one ./check run; appends its rows (one per condition) to results.tsv.
run_one() {
	local d=$1 t=$2 n=${2#nvme/} t0 t1 f st reason rt cond ld0
	ld0=$(lockdep_on)
	{ use_driver "$d" && use_io_timeout; } || { printf '%s\t%s\t-\tnot run\tdriver\t-\t0\t%s/%s\n' "$d" "$t" "$ld0" "$(lockdep_on)" >>"$OUT/results.tsv"; return; }
	write_config "$d"
	mkdir -p "$OUT/$d"
	dmesg_mark
	# (vm-run attributes every kernel-log problem of the run to the test it appeared in)
	echo "rnvme-test: begin blktests $d $t" >/dev/kmsg
	t0=$SECONDS
	(cd "$BT" && timeout 1800 ./check "$t") >"$OUT/$d/$n.console" 2>&1
	t1=$SECONDS
	echo "rnvme-test: end blktests $d $t" >/dev/kmsg
	dmesg_since_mark >"$OUT/$d/$n.dmesg-all"
	sed 's/^/# /' "$OUT/$d/$n.console" | tail -n 8
	local found=0
	mkdir -p "/tmp/bt-out/$d"
	rsync -a --exclude img --exclude '*.img' "/tmp/bt-out/$d/" "$OUT/$d/" 2>/dev/null
	for f in "/tmp/bt-out/$d"/*/nvme/"$n"; do
		[ -f "$f" ] || continue
		found=1
		cond=$(basename "$(dirname "$(dirname "$f")")")
		st=$(sed -n 's/^status\t//p' "$f") reason=$(sed -n 's/^reason\t//p' "$f") rt=$(sed -n 's/^runtime\t//p' "$f")
		# (a skip's reason is only on the console: the indented line after the "[not run]")
		[ "$st" != "not run" ] || [ -n "$reason" ] ||
			reason=$(grep -A3 '\[not run\]' "$OUT/$d/$n.console" | grep -m1 -E '^    [a-zA-Z_]' | sed 's/^ *//')
		# A dmesg failure whose every report is a known one of the reference kernel (named by
		# its lock or call chain, tools/kernel-reports, as vm-run waives them for a pair's
		# target) is named so: not the host driver's.
		if [ "$reason" = dmesg ] && [ -f "$f.dmesg" ]; then
			local kr
			kr=$("$RNVME_PROJECT/tools/kernel-reports" "$f.dmesg" || true)
			if [ -n "$kr" ] && ! grep -q '^unknown' <<<"$kr"; then
				reason="dmesg: only 7.3.4's known target-side reports ($(cut -f2 <<<"$kr" | sort -u | paste -sd, -))"
			fi
		fi
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s/%s\n' "$d" "$t" "$cond" "${st:-?}" "${reason:--}" "${rt:--}" $((t1 - t0)) "$ld0" "$(lockdep_on)" >>"$OUT/results.tsv"
	done
	if [ $found = 0 ]; then
		# "not run" leaves no status file: the reason is on the console
		reason=$(grep -m1 -A3 'not run' "$OUT/$d/$n.console" | grep -vE 'not run|^\s*$' | head -n1 | sed 's/^ *//')
		st=$(grep -q 'not run' "$OUT/$d/$n.console" && echo "not run" || echo "no result")
		printf '%s\t%s\t-\t%s\t%s\t-\t%s\t%s/%s\n' "$d" "$t" "$st" "${reason:--}" $((t1 - t0)) "$ld0" "$(lockdep_on)" >>"$OUT/results.tsv"
	fi
}

LD_BOOT=$(lockdep_on)
info "blktests $(cat /opt/blktests/.rnvme-commit 2>/dev/null) nvme group over rdma on $FABRIC, drivers $DRIVERS, nvme_core io_timeout ${IO_TIMEOUT:-30 (kernel default)} s, lockdep $LD_BOOT at start: ${list[*]}"
i=0
for t in "${list[@]}"; do
	i=$((i + 1))
	for d in ${DRIVERS//,/ }; do
		echo "# --- blktests $d $t (lockdep $(lockdep_on))"
		run_one "$d" "$t"
		tail -n 1 "$OUT/results.tsv" | sed 's/^/#   /'
	done
	# (lockdep off: the rest needs a fresh boot; if it was off from the start, nothing gains)
	if [ "$(lockdep_on)" = no ] && [ $i -lt ${#list[@]} ] && [ "$LD_BOOT" = yes ]; then
		echo "${list[*]:$i}" >"$OUT/remaining"
		echo "# lockdep is off after $t: stopping; $((${#list[@]} - i)) tests remain for the next boot"
		break
	fi
done
for m in rnvme_rdma nvme_rdma; do [ ! -d "/sys/module/$m" ] || rmmod "$m"; done
echo "$ALIAS_SAVE" >"$ALIAS"
echo "# blktests boot done: $(wc -l <"$OUT/results.tsv") result rows in results.tsv$([ -s "$OUT/remaining" ] && echo ", $(wc -w <"$OUT/remaining") tests remain")"
