#!/bin/bash
# Where a connection's memory goes, by driver: /proc/meminfo (after dropping caches) and the
# vmalloc'd bytes by caller (/proc/vmallocinfo: rxe's queue buffers, its CQs and QPs, are
# vmalloc'd) before and after one connect with -i N -W N (N = vCPUs), C and rnvme_rdma
# alternating over two rounds (the first C connect also creates the device's shared CQ pool,
# which C keeps until the device goes). Run by hand, e.g.
#   scripts/vm-run --flavour release --cpus 8 --no-kmemleak tools/guest/conn-memory.sh
. "$RNVME_PROJECT/tools/guest/lib.sh"
. "$RNVME_PROJECT/tools/guest/datapath.sh"
msnap() {
	sync; echo 3 >/proc/sys/vm/drop_caches
	grep -E '^(MemAvailable|SUnreclaim|VmallocUsed|KernelStack|PageTables):' /proc/meminfo
}
# vbycaller FILE: total vmalloc'd bytes per caller in a copy of /proc/vmallocinfo.
vbycaller() {
	awk '{ c = "?"; for (i = 3; i <= NF; i++) if ($i ~ /\+0x/) { c = $i; sub(/\+.*/, "", c); break }
	       s[c] += $2 } END { for (k in s) print k, s[k] }' "$1" | sort
}
f=rxe nqn=nqn.2026-12.io.rnvme:conn-memory
fabric_up "$f" >/dev/null && target_port_up "$f" || exit 1
target_subsys_add "$nqn" null:1024 >/dev/null && target_subsys_link "$nqn" "$f" || exit 1
for d in c rnvme c rnvme; do
	dp_load "$d" || exit 1
	m0=$(msnap); cp /proc/vmallocinfo /tmp/v0
	dp_connect "$f" "$nqn" -i "$(nproc)" -W "$(nproc)" || exit 1
	echo "== $d: queue_count $(cat "$DP_CTRL/queue_count")"
	m1=$(msnap); cp /proc/vmallocinfo /tmp/v1
	paste <(echo "$m0") <(echo "$m1") | awk '{ printf "%-14s %8d -> %8d kB, delta %d\n", $1, $2, $5, $5 - $2 }'
	join -a1 -a2 -e0 -o 0,1.2,2.2 <(vbycaller /tmp/v0) <(vbycaller /tmp/v1) |
		awk '$3 != $2 { printf "  vmalloc by %s: %+d KiB\n", $1, ($3 - $2) / 1024 }'
	dp_disconnect "$DP_CTRL" || exit 1
	dp_unload "$d" || exit 1
	echo "   after disconnect and unload: VmallocUsed $(awk '$1 == "VmallocUsed:" { print $2 }' /proc/meminfo) kB"
done
