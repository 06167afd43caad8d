#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where the guest's work goes: a whole-guest sampling profile without the perf tool.

    profile.py OUT.json PERIOD_NS [MODULE,...]

Samples every online CPU with the software cpu-clock event (perf_event_open, one event per CPU,
idle excluded) until SIGTERM or SIGINT, then resolves the kernel samples against /proc/kallsyms
and writes OUT.json: the period, the number of samples (kernel, user, lost), the samples per
kernel module ("vmlinux" for the core kernel) and per kernel symbol ("name [module]"), and for
the symbols of the MODULEs named, the samples per instruction ("offsets": symbol -> offset in
bytes from its start -> samples; tools/bench-annotate puts them beside the disassembly).

Under `make bench --icount` (the default) the guest's clock counts instructions, so a sample is
taken every PERIOD_NS / 2^shift instructions a CPU executes: samples x period is the guest time
(= instructions) spent in each place, and that divided by the I/Os done meanwhile is the cost
per I/O of each module (tools/bench-report). The sampler's own cost lands in its own symbols
(perf_swevent_hrtimer and friends), the same for every driver measured.
"""
import bisect
import ctypes
import json
import mmap
import os
import select
import signal
import struct
import sys

NR_PERF_EVENT_OPEN = 298  # x86_64
PERF_TYPE_SOFTWARE = 1
PERF_COUNT_SW_CPU_CLOCK = 0
PERF_SAMPLE_IP = 1
PERF_RECORD_LOST = 2
PERF_RECORD_SAMPLE = 9
PERF_RECORD_MISC_KERNEL = 1
PERF_RECORD_MISC_CPUMODE_MASK = 7
IOC_ENABLE, IOC_DISABLE = 0x2400, 0x2401
FLAG_DISABLED, FLAG_EXCLUDE_HV, FLAG_EXCLUDE_IDLE = 1 << 0, 1 << 6, 1 << 7
# Data pages per CPU (a power of two): 4 MiB, 256k samples, a minute at 4 kHz, so that a drainer
# starved of CPU by a QD32 workload loses nothing (64 pages lost 7-9% of the samples there).
PAGES = 1024


def attr(period):
    # struct perf_event_attr, PERF_ATTR_SIZE_VER0 (64 bytes): type, size, config, sample_period,
    # sample_type, read_format, flags, wakeup_events, bp_type, bp_addr.
    return struct.pack("IIQQQQQIIQ", PERF_TYPE_SOFTWARE, 64, PERF_COUNT_SW_CPU_CLOCK, period,
                       PERF_SAMPLE_IP, 0, FLAG_DISABLED | FLAG_EXCLUDE_HV | FLAG_EXCLUDE_IDLE, 0, 0, 0)


def online_cpus():
    cpus = []
    for part in open("/sys/devices/system/cpu/online").read().strip().split(","):
        lo, _, hi = part.partition("-")
        cpus += range(int(lo), int(hi or lo) + 1)
    return cpus


class Ring:
    """One CPU's event and its mmap'd ring buffer."""

    def __init__(self, libc, cpu, period):
        a = ctypes.create_string_buffer(attr(period), 64)
        L = ctypes.c_long
        fd = libc.syscall(L(NR_PERF_EVENT_OPEN), a, L(-1), L(cpu), L(-1), ctypes.c_ulong(0))
        if fd < 0:
            raise OSError(ctypes.get_errno(), f"perf_event_open on CPU {cpu}: {os.strerror(ctypes.get_errno())}")
        self.fd = fd
        self.page = mmap.PAGESIZE
        self.size = PAGES * self.page
        self.m = mmap.mmap(fd, self.page + self.size)

    def drain(self, ips, counts):
        # perf_event_mmap_page: data_head at 1024, data_tail at 1032.
        head = struct.unpack_from("Q", self.m, 1024)[0]
        tail = struct.unpack_from("Q", self.m, 1032)[0]
        while tail < head:
            off = self.page + tail % self.size
            hdr = self.read(off, 8)
            typ, misc, size = struct.unpack("IHH", hdr)
            if size < 8:
                break
            rec = self.read(off, size)
            if typ == PERF_RECORD_SAMPLE:
                (ip,) = struct.unpack_from("Q", rec, 8)
                if misc & PERF_RECORD_MISC_CPUMODE_MASK == PERF_RECORD_MISC_KERNEL:
                    ips[ip] = ips.get(ip, 0) + 1
                else:
                    counts["user"] += 1
            elif typ == PERF_RECORD_LOST:
                counts["lost"] += struct.unpack_from("QQ", rec, 8)[1]
            tail += size
        struct.pack_into("Q", self.m, 1032, tail)

    def read(self, off, n):
        # A record may wrap around the end of the ring.
        end = self.page + self.size
        if off + n <= end:
            return self.m[off:off + n]
        return self.m[off:end] + self.m[self.page:self.page + n - (end - off)]


def kallsyms():
    """Sorted text symbol addresses and their names ("name [module]")."""
    syms = []
    for line in open("/proc/kallsyms"):
        p = line.split()
        if len(p) >= 3 and p[1] in "tT" and int(p[0], 16):
            syms.append((int(p[0], 16), p[2] + (" " + p[3] if len(p) > 3 else " [vmlinux]")))
    syms.sort()
    return [a for a, _ in syms], [n for _, n in syms]


def main():
    out, period = sys.argv[1], int(sys.argv[2])
    annotate = set(sys.argv[3].split(",")) if len(sys.argv) > 3 and sys.argv[3] else set()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    rings = [Ring(libc, c, period) for c in online_cpus()]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    ips, counts = {}, {"user": 0, "lost": 0}
    for r in rings:
        libc.ioctl(r.fd, ctypes.c_ulong(IOC_ENABLE), ctypes.c_ulong(0))
    # Ready: the caller starts the workload once this file exists.
    open(out + ".ready", "w").close()
    while not stop:
        try:
            select.select([], [], [], 0.2)
        except InterruptedError:
            pass
        for r in rings:
            r.drain(ips, counts)
    for r in rings:
        libc.ioctl(r.fd, ctypes.c_ulong(IOC_DISABLE), ctypes.c_ulong(0))
        r.drain(ips, counts)
    addrs, names = kallsyms()
    sym, mod, offs = {}, {}, {}
    for ip, n in ips.items():
        i = bisect.bisect_right(addrs, ip) - 1
        name = names[i] if i >= 0 else "? [unknown]"
        sym[name] = sym.get(name, 0) + n
        m = name.rsplit(" ", 1)[-1].strip("[]")
        mod[m] = mod.get(m, 0) + n
        if m in annotate:
            o = offs.setdefault(name, {})
            o[ip - addrs[i]] = o.get(ip - addrs[i], 0) + n
    json.dump({"period_ns": period, "kernel": sum(ips.values()), "user": counts["user"],
               "lost": counts["lost"], "modules": mod,
               "symbols": dict(sorted(sym.items(), key=lambda kv: -kv[1])),
               "offsets": {k: dict(sorted(v.items())) for k, v in offs.items()}}, open(out, "w"))
    os.unlink(out + ".ready")


if __name__ == "__main__":
    main()
