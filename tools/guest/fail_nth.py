#!/usr/bin/env python3
# fail_nth.py OPTIONS [POINTS]: systematic allocation-failure injection into `nvme connect`'s
# kernel path (the fabrics write that runs the transport's create_ctrl in this task).
#
# Counts the fallible slab allocations one connect makes in this task (fail-nth set far out,
# then read back), then, for each chosen point N, arms /proc/thread-self/fail-nth with N and
# writes OPTIONS to /dev/nvme-fabrics: the N-th allocation fails. After each attempt:
#   - the connect either failed (and left no controller) or succeeded (the controller is deleted
#     again); the kernel log (KASAN, lockdep, warnings) is vm-run's to judge.
# Prints one line per attempt: "N <rc> <errno or fabrics answer> hit|missed"; exits non-zero when
# a failed connect left a controller behind. POINTS: "all", or "K" for the first
# K points, the last K points and K points spread over the middle (default 16).
# Needs failslab's ignore-gfp-wait=N, verbose=0 (set by the caller).
import errno, os, sys, time

opts = sys.argv[1].encode()
sel = sys.argv[2] if len(sys.argv) > 2 else "16"
FN = "/proc/thread-self/fail-nth"


def connect(n):
    """One connect with the n-th allocation failing (0: none). Returns (rc, detail, left)."""
    # Everything is opened before arming (opening allocates); the fail-nth file cannot seek, so
    # one descriptor writes and another, still at offset 0, reads back.
    fd = os.open("/dev/nvme-fabrics", os.O_RDWR)
    fw = os.open(FN, os.O_WRONLY)
    fr = os.open(FN, os.O_RDONLY)
    try:
        os.write(fw, str(n).encode())
        try:
            os.write(fd, opts)
            rc, detail = 0, ""
        except OSError as e:
            rc, detail = e.errno, errno.errorcode.get(e.errno, str(e.errno))
        left = int(os.read(fr, 32).decode().strip() or "0")
        os.write(fw, b"0")
        if rc == 0:
            # The fabrics device answers the write with "instance=N,cntlid=M" (as nvme-cli reads it).
            detail = os.read(fd, 256).decode().strip()
        return rc, detail, left
    finally:
        os.close(fr)
        os.close(fw)
        os.close(fd)


def delete(detail):
    inst = dict(kv.split("=", 1) for kv in detail.split(",") if "=" in kv).get("instance")
    if inst is None:
        raise SystemExit(f"cannot parse the fabrics answer '{detail}'")
    with open(f"/sys/class/nvme/nvme{inst}/delete_controller", "w") as f:
        f.write("1")
    for _ in range(300):
        if not os.path.exists(f"/sys/class/nvme/nvme{inst}"):
            return
        time.sleep(0.1)
    raise SystemExit(f"nvme{inst} still present 30 s after delete_controller")


BIG = 1000000
rc, detail, left = connect(BIG)
if rc != 0:
    raise SystemExit(f"the unarmed connect failed: {detail}")
total = BIG - left
delete(detail)
if sel == "all":
    points = list(range(1, total + 1))
else:
    k = int(sel)
    points = sorted(set(list(range(1, min(k, total) + 1)) +
                        list(range(max(1, total - k + 1), total + 1)) +
                        [1 + i * total // (k + 1) for i in range(1, k + 1)]))
print(f"total {total} fallible allocations; {len(points)} points", flush=True)
for n in points:
    rc, detail, left = connect(n)
    hit = "missed" if left else "hit"
    print(f"{n} {rc} {detail} {hit}", flush=True)
    if rc == 0:
        delete(detail)
    else:
        # A failed connect leaves nothing behind (the guest has no other NVMe controller).
        time.sleep(0.5)
        left_behind = [c for c in os.listdir("/sys/class/nvme")] if os.path.isdir("/sys/class/nvme") else []
        if left_behind:
            raise SystemExit(f"point {n}: the connect failed ({detail}) but left {left_behind}")
