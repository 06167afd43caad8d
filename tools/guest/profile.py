#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where the guest's work goes: a whole-guest sampling profile taken by perf (linux-perf, the
reference kernel's version, in the build root), summed for tools/bench-report.

    profile.py OUT.json PERIOD_NS [MODULE,...]

Runs `perf record -a -g -e cpu-clock -c PERIOD_NS` (every online CPU, the software cpu-clock
event, kernel call chains) until SIGTERM or SIGINT, then reads the samples back with
`perf script` (symbols unmangled as the module has them, so they match objdump's; the call chains
read back only for the MODULEs' samples) and writes
OUT.json: the period, the number of samples (kernel, user, lost), the samples per kernel module
("vmlinux" for the core kernel) and per kernel symbol ("name [module]"); for the symbols of the
MODULEs named, the samples per instruction ("offsets": symbol -> offset in bytes from its start
-> samples; tools/bench-annotate puts them beside the disassembly) and the call chains that led
there ("chains": the sample's symbol and the two frames above it outside the module ->
samples). Samples of the idle task are left out (perf's cpu-clock counts idle time; the profile
is of the work).

Under `make bench --icount` (the default) the guest's clock counts instructions, so a sample is
taken every PERIOD_NS / 2^shift instructions a CPU executes: samples x period is the guest time
(= instructions) spent in each place, and that divided by the I/Os done meanwhile is the cost
per I/O of each module (tools/bench-report). perf's own cost lands in its own symbols
(perf_swevent_hrtimer and friends, the perf process as user time), the same for every driver
measured.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

KERNEL_MIN = 0xFFFF800000000000
# "\tffffffffc0a1b2c3 name+0x23 ([module])" (perf script's call chain lines)
FRAME = re.compile(r"^\s+([0-9a-f]+)\s+(.*?)(?:\+0x([0-9a-f]+))?\s+\((.*)\)\s*$")
# Everything from cpu-clock up: the sampling interrupt's frames above the sampled one.
SAMPLER = ("perf_swevent_hrtimer", "__hrtimer_run_queues", "hrtimer_interrupt")


def module_of(dso):
    d = dso.strip("[]")
    return "vmlinux" if d in ("kernel.kallsyms", "vmlinux") or d.startswith("kernel.kallsyms") else d


def frame(m):
    """(ip, name, offset, module) of a FRAME match."""
    return int(m.group(1), 16), m.group(2), int(m.group(3) or "0", 16), module_of(m.group(4))


def perf_script(data, *args):
    """The lines of `perf script` on DATA with ARGS (pid, ip, symbol+offset, dso; unmangled)."""
    p = subprocess.Popen(["perf", "script", "-i", data, "-F", "pid,ip,sym,symoff,dso", "--no-demangle", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, errors="replace")
    yield from p.stdout
    if p.wait() != 0:
        raise SystemExit(f"perf script failed ({p.returncode})")


def head_sample(line):
    """The pid of a sample's first line and its frame if the line has one (a sample without a
    call chain has its one frame on that line: "   1234 ffffffffc0a1b2c3 name+0x23 ([module])")."""
    head = line.split(None, 1)
    pid = int(head[0]) if head and head[0].isdigit() else -1
    m = FRAME.match("\t" + head[1]) if len(head) > 1 else None
    return pid, [frame(m)] if m else []


def samples(data, *args):
    """The pid and frames [(ip, name, offset, module)] of each sample with its call chain, leaf
    first (perf script with ARGS: a first line with the pid, a line per frame, a blank line)."""
    pid, frames = None, []
    for line in perf_script(data, *args):
        if not line.strip():
            if pid is not None:
                yield pid, frames
            pid, frames = None, []
            continue
        m = FRAME.match(line) if line[0] in " \t" and pid is not None else None
        if m:
            frames.append(frame(m))
            continue
        if pid is not None:
            yield pid, frames
        pid, frames = head_sample(line)
    if pid is not None:
        yield pid, frames


def flat_samples(data):
    """The pid and sampled frame of each sample, without the call chains (perf script -G prints
    one line per sample)."""
    for line in perf_script(data, "-G"):
        if line.strip():
            yield head_sample(line)


def lost_samples(data):
    """What perf could not record (its ring buffers full): the LOST counts of perf report --stats."""
    out = subprocess.run(["perf", "report", "-i", data, "--stats"], capture_output=True, text=True).stdout
    return sum(int(m.group(1)) for m in re.finditer(r"^\s*LOST(?:_SAMPLES)? events:\s+(\d+)", out, re.M))


def main():
    out, period = sys.argv[1], int(sys.argv[2])
    annotate = set(sys.argv[3].split(",")) if len(sys.argv) > 3 and sys.argv[3] else set()
    data = f"/tmp/perf-{os.getpid()}.data"
    rec = subprocess.Popen(["perf", "record", "-q", "-a", "-g", "-e", "cpu-clock", "-c", str(period),
                            "-o", data], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    # perf has its events open once it has written the file's header.
    for _ in range(200):
        if rec.poll() is not None:
            raise SystemExit(f"perf record exited: {rec.stderr.read()[-500:]}")
        if os.path.exists(data) and os.path.getsize(data) > 0:
            break
        time.sleep(0.05)
    time.sleep(0.2)
    # Ready: the caller starts the workload once this file exists.
    open(out + ".ready", "w").close()
    while not stop:
        time.sleep(0.2)
    rec.send_signal(signal.SIGINT)
    # perf record ends by raising the signal it stopped on again (after writing its data).
    if rec.wait() not in (0, -signal.SIGINT):
        raise SystemExit(f"perf record failed: {rec.stderr.read()[-500:]}")
    kernel = user = 0
    sym, mod, offs, chains = {}, {}, {}, {}
    lost = lost_samples(data)
    # Two passes: every sample without its call chain (-G), then the call chains of only the
    # samples in the MODULEs named (--dsos). Under TCG, resolving and printing the chains of every
    # sample took ~7 times as long as both passes together (a 30 s profile, ~250,000 samples).
    for pid, frames in flat_samples(data):
        if pid == 0 or not frames:
            continue  # the idle task, or nothing to attribute
        ip, name, off, m = frames[0]
        if ip < KERNEL_MIN:
            user += 1
            continue
        kernel += 1
        key = f"{name} [{m}]"
        sym[key] = sym.get(key, 0) + 1
        mod[m] = mod.get(m, 0) + 1
        if m in annotate:
            o = offs.setdefault(key, {})
            o[off] = o.get(off, 0) + 1
    seen = sorted(m for m in annotate if m in mod)
    for pid, frames in samples(data, "--dsos", ",".join(f"[{m}]" for m in seen)) if seen else ():
        if pid == 0 or not frames or frames[0][3] not in annotate:
            continue
        _, name, _, m = frames[0]
        up = [f"{n} [{fm}]" for _, n, _, fm in frames[1:] if fm != m and n not in SAMPLER][:2]
        c = " <- ".join([f"{name} [{m}]"] + up)
        chains[c] = chains.get(c, 0) + 1
    os.unlink(data)
    json.dump({"period_ns": period, "kernel": kernel, "user": user, "lost": lost, "modules": mod,
               "symbols": dict(sorted(sym.items(), key=lambda kv: -kv[1])),
               "offsets": {k: dict(sorted(v.items())) for k, v in offs.items()},
               "chains": dict(sorted(chains.items(), key=lambda kv: -kv[1])[:40])}, open(out, "w"))
    os.unlink(out + ".ready")


if __name__ == "__main__":
    main()
