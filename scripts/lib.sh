# Common helpers for rnvme-rdma scripts. Source it; it sets -euo pipefail.
set -euo pipefail
RNVME_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=versions
. "$RNVME_TOP/scripts/versions"
RNVME_CACHE=${RNVME_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/rnvme-rdma}
mkdir -p "$RNVME_CACHE"
_rnvme_t0=${_rnvme_t0:-$(date +%s)}
export _rnvme_t0

log() { printf '[%5ds] %s\n' "$(($(date +%s) - _rnvme_t0))" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Content hash of the named files/directories/strings: the cache key of a build step. Only
# contents and paths relative to the checkout count, never where the checkout lives (CI clones
# elsewhere and must reuse the same cache). A missing path counts as its relative name.
key_of() {
	local f g
	for f in "$@"; do
		if [ -d "$f" ]; then
			while IFS= read -r -d '' g; do
				printf '%s\n' "${g#"$RNVME_TOP"/}"
				cat "$g"
			done < <(find "$f" -type f -print0 | sort -z)
		elif [ -e "$f" ]; then
			cat "$f"
		else
			printf '%s\n' "${f#"$RNVME_TOP"/}"
		fi
	done | sha256sum | cut -c1-12
}

# The root is keyed by the pinned versions only; package-list changes are applied in place.
ROOT_KEY=$(key_of "$RNVME_TOP/scripts/versions" root-v1)
ROOT="$RNVME_CACHE/root-$ROOT_KEY"
# A second root, an admin's Debian host running Debian's own kernel (scripts/debian-kernel,
# tools/debian-check). scripts/buildroot makes it with RNVME_ROOT_KIND=debian-host; `ROOT=$DHROOT
# in_root ...` runs a command in it.
DHROOT="$RNVME_CACHE/debian-host-$ROOT_KEY"

# Kernel source tarballs (scripts/buildroot fetches them; kept outside the root).
KSRC_CACHE="$RNVME_CACHE/linux-source"
# kernel_source: the tarball to build: the pinned $LINUX_VERSION, else the newest cached
# ${LINUX_VERSION%.*}.x (see scripts/buildroot for the policy). Fails when there is none.
kernel_source() {
	local t
	if [ -f "$KSRC_CACHE/linux-$LINUX_VERSION.tar.xz" ]; then echo "$KSRC_CACHE/linux-$LINUX_VERSION.tar.xz"; return 0; fi
	t=$(ls "$KSRC_CACHE"/linux-"${LINUX_VERSION%.*}".*.tar.xz 2>/dev/null | sort -V | tail -n1)
	[ -n "$t" ] || return 1
	echo "$t"
}

# Mount /proc, /sys, /dev (and optional binds) into the root for the duration of a command.
# Usage: in_root [--bind HOSTDIR ROOTDIR]... -- CMD...
in_root() {
	local binds=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do
		[ "$1" = "--bind" ] || die "in_root: bad argument $1"
		binds+=("$2" "$3")
		shift 3
	done
	shift
	[ -x "$ROOT/bin/sh" ] || die "build root $ROOT missing: run scripts/buildroot"
	# A private mount namespace: mounts vanish with the command, even if it is killed.
	unshare -m --propagation private bash -c '
		set -e
		root=$1; shift
		mount -t proc proc "$root/proc"
		mount -t sysfs sys "$root/sys"
		mount --rbind /dev "$root/dev"
		while [ "$1" != "--" ]; do
			mkdir -p "$root$2"
			mount --bind "$1" "$root$2"
			shift 2
		done
		shift
		exec chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
	' rnvme-root "$ROOT" "${binds[@]}" -- "$@"
}

# Serialise heavy steps (root creation, kernel builds) across concurrent invocations.
with_lock() {
	local name=$1; shift
	exec {lockfd}>"$RNVME_CACHE/$name.lock"
	flock "$lockfd"
	"$@"
	exec {lockfd}>&-
}
