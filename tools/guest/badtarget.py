#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""badtarget: a small NVMe over Fabrics RDMA target in user space (rdma-core's pyverbs) that
misbehaves on command, for tests of the host transport (the misbehave group, Documentation/testing.rst).

It serves one NVM subsystem with one namespace backed by memory, over any RDMA device rdma_cm
binds the address to (rxe, siw). Everything else in it is deliberately simple and strict: all data
moves by RDMA READ/WRITE against the host's keyed SGLs (ioccsz 4: no in-capsule data), one
connection per queue, answers in order. One misbehaviour (--mode) is applied to the Nth command
(or connection request) of a class (--on), and to the C-1 after it with --count C; every other command is answered correctly, so a host
that recovers (reconnects) finds a working target again.

Usage: badtarget.py --addr IP [--port 4430] [--nqn NQN] [--mode MODE] [--on CLASS] [--nth N]
                    [--count C] [--lba BLOCK] [--delay S] [--size-mb M] [--ms BYTES] [--pi TYPE] [--no-inval]
                    [--verbose]
--no-inval: never answer with remote invalidation (SEND with Invalidate), even when the host's
keyed SGL asks for it; a target may (the host then invalidates its MR itself: LOCAL_INV).
A namespace with metadata (--ms, extended LBAs) and protection information (--pi 1-3, with
--ms 8) is served as a controller that inserts and strips PI itself: every read and write must
carry PRACT and a keyed SGL of exactly 512 bytes per block (no PI on the wire), and for types 1
and 2 the reference tag of its first block's LBA (low 32 bits); one that does not is refused
with Invalid Field. The target keeps a tuple per written block (its own CRC-16 of the block,
CCITT, never sent, and the reference tag) that each read checks (Guard or Reference Tag Check
Error on a mismatch). With --pi, SIGTERM prints the reads and writes it served with PRACT and
those it refused or failed ("badtarget: pi: ...") before it exits.
Modes, for a command of CLASS (io: read/write/flush on an I/O queue, with --lba only a read or write
that touches that block; admin: an admin command that
is not a Fabrics command; connect: Fabrics Connect on any queue; any: any command):
  ok            behave
  unknown-cid   answer with a command id whose tag the host never has (0xfff); never answer the real one
  stale-cid     answer with the command id of the previous command of the queue (already ended)
  dup           answer twice
  never-sent    first answer for a command id the host did not send (tag+1), then the real answer
  bad-inval     answer with remote invalidation of a wrong rkey
  inval-no-mr   answer a command without data with remote invalidation (of rkey 0x1234)
  short         an 8-byte response; long: a 64-byte response (bigger than the host's receive)
  dnr           status Internal Error with Do Not Retry; path: status Internal Path Error
  early         (reads) the response before the data
  slow          answer after --delay seconds
  hold          never answer (nor move the data of) the command: with --count, a batch of them
  drop          disconnect the queue instead of answering
  late          disconnect the queue instead of answering, then answer the command (success) on the
                queue's next connection, before that connection's Fabrics Connect: a response for
                a command the host has ended (cancelled by its error recovery)
  late-inval    as late, the answer with remote invalidation of the command's MR
  slow-connect  answer every I/O queue's Fabrics Connect --delay seconds late (CLASS and --nth are
                ignored): how long a connect with N I/O queues takes tells whether the host set
                them up one after the other (N x delay) or together (about one delay)
  auth-drop     (connect) answer the Fabrics Connect with "authentication required" (AUTHREQ ATR),
                then disconnect the queue instead of answering the host's first DH-HMAC-CHAP
                message (AUTH_Send, negotiate)
  auth-drop-recv  as auth-drop, but the negotiate is answered; the queue is disconnected instead of
                answering the AUTH_Receive that asks for the challenge
Modes for connection requests (CLASS is ignored; --nth counts requests: 1 = the admin queue):
  cm-silent     never answer the request; cm-reject-bad: reject with malformed private data;
  cm-qsize      accept with a queue size (crqsize) that contradicts the request (1)
Prints one line per event ("badtarget: ...") on stdout; runs until killed.
"""
import argparse
import binascii
import fcntl
import os
import select
import signal
import struct
import sys
import time

from pyverbs.cmid import AddrInfo, CMEvent, CMEventChannel, CMID, ConnParam
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

# Stable ABI values of verbs.h and rdma_cma.h.
WR_RDMA_WRITE, WR_SEND, WR_RDMA_READ, WR_SEND_WITH_INV = 0, 2, 4, 9
SEND_SIGNALED = 2
ACCESS_LOCAL_WRITE = 1
QPT_RC = 2
QPS_INIT, QPS_RTR, QPS_RTS = 1, 2, 3
WC_SUCCESS, WC_RECV = 0, 128
EV_CONNECT_REQUEST, EV_ESTABLISHED, EV_DISCONNECTED, EV_DEVICE_REMOVAL, EV_TIMEWAIT_EXIT = 4, 9, 10, 11, 15
RDMA_PS_TCP, RAI_PASSIVE = 0x0106, 1

CAPSULE, RESP = 64, 16
MAX_IO = 128 << 10          # mdts 5 with 4 KiB pages
K_RECV, K_SEND, K_READ, K_WRITE = 1, 2, 3, 4

T0 = time.monotonic()


def say(*a):
    print("badtarget: [%7.3f] %s" % (time.monotonic() - T0, " ".join(str(x) for x in a)), flush=True)


def status_field(sc, sct=0, dnr=False):
    return ((sc | (sct << 8) | (0x4000 if dnr else 0)) << 1) & 0xffff


class Queue:
    """One RDMA connection: a queue of the controller."""

    def __init__(self, tgt, cmid, qid, hrqsize, hsqsize):
        self.tgt, self.cmid, self.qid = tgt, cmid, qid
        self.depth = max(hrqsize, hsqsize + 1, 2)
        pd = tgt.listener.pd
        self.cq = CQ(tgt.listener.context, self.depth * 4 + 16, None, None, 0)
        cap = QPCap(max_send_wr=self.depth * 3 + 8, max_recv_wr=self.depth + 1, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(pd, QPInitAttr(qp_type=QPT_RC, scq=self.cq, rcq=self.cq, cap=cap, sq_sig_all=1))
        for st in (QPS_INIT, QPS_RTR, QPS_RTS):
            attr, mask = cmid.init_qp_attr(st)
            if st == QPS_RTR:
                attr.max_dest_rd_atomic = max(attr.max_dest_rd_atomic, 1)
            if st == QPS_RTS:
                attr.max_rd_atomic = max(attr.max_rd_atomic, 1)
            self.qp.modify(attr, mask)
        self.recv_mr = MR(pd, self.depth * CAPSULE, ACCESS_LOCAL_WRITE)
        self.send_mr = MR(pd, self.depth * 4 * CAPSULE, ACCESS_LOCAL_WRITE)
        self.data_mr = MR(pd, self.depth * MAX_IO, ACCESS_LOCAL_WRITE)
        self.free_send = list(range(self.depth * 4))
        self.free_data = list(range(self.depth))
        self.ops = {}            # data slot -> what to do when its RDMA READ/WRITE completes
        self.delayed = []        # (when, fn)
        self.last_cid = None
        self.auth = None         # the auth-drop mode this connection's Connect answer started
        self.cntlid = 0
        self.dead = False
        for i in range(self.depth):
            self.post_recv(i)

    # -- posting
    def post_recv(self, i):
        sge = SGE(self.recv_mr.buf + i * CAPSULE, CAPSULE, self.recv_mr.lkey)
        self.qp.post_recv(RecvWR(wr_id=(K_RECV << 32) | i, num_sge=1, sg=[sge]))

    def send(self, payload, inval=None):
        if self.dead:
            return
        s = self.free_send.pop()
        self.send_mr.write(payload, len(payload), s * CAPSULE)
        sge = SGE(self.send_mr.buf + s * CAPSULE, len(payload), self.send_mr.lkey)
        wr = SendWR(wr_id=(K_SEND << 32) | s, opcode=WR_SEND if inval is None else WR_SEND_WITH_INV,
                    num_sge=1, sg=[sge], send_flags=SEND_SIGNALED)
        if inval is not None:
            wr.imm_data = inval      # the union's invalidate_rkey
        self.qp.post_send(wr)

    def rdma(self, kind, slot, length, addr, rkey):
        sge = SGE(self.data_mr.buf + slot * MAX_IO, length, self.data_mr.lkey)
        wr = SendWR(wr_id=(kind << 32) | slot, opcode=WR_RDMA_READ if kind == K_READ else WR_RDMA_WRITE,
                    num_sge=1, sg=[sge], send_flags=SEND_SIGNALED)
        wr.set_wr_rdma(rkey, addr)
        self.qp.post_send(wr)

    # -- completions
    def poll(self):
        n, wcs = self.cq.poll(16)
        for wc in wcs:
            kind, idx = wc.wr_id >> 32, wc.wr_id & 0xffffffff
            if wc.status != WC_SUCCESS:
                if not self.dead:
                    say("qid", self.qid, "completion error status", wc.status, "kind", kind)
                self.dead = True
                continue
            if kind == K_RECV:
                cmd = bytes(self.recv_mr.read(CAPSULE, idx * CAPSULE))
                self.post_recv(idx)
                self.tgt.command(self, cmd)
            elif kind == K_SEND:
                self.free_send.append(idx)
            elif kind in (K_READ, K_WRITE):
                self.ops.pop(idx)(idx)
        now = time.monotonic()
        due = [d for d in self.delayed if d[0] <= now]
        self.delayed = [d for d in self.delayed if d[0] > now]
        for _, fn in due:
            fn()
        return n

    def close(self):
        self.dead = True
        # Not the CMID: pyverbs' close of a connection's id clears the device context and PD it
        # shares with the listener (the next connection then crashed in libibverbs). Ids are kept
        # for the life of the process instead (Target.ids).
        for o in (self.qp, self.cq, self.recv_mr, self.send_mr, self.data_mr):
            try:
                o.close()
            except Exception:   # noqa: BLE001 (best effort at teardown)
                pass


class Target:
    def __init__(self, a):
        self.a = a
        self.store = bytearray(a.size_mb << 20)
        self.channel = CMEventChannel()
        self.cm_fd = self._cm_fd()
        self.listener = CMID(creator=self.channel, port_space=RDMA_PS_TCP)
        self.listener.bind_addr(AddrInfo(src=a.addr, src_service=str(a.port), port_space=RDMA_PS_TCP, flags=RAI_PASSIVE))
        self.listener.listen()
        self.queues = {}         # id(cmid) -> Queue
        self.pending = {}        # id(cmid) -> cmid not yet a queue (silent requests)
        self.count = {"io": 0, "admin": 0, "connect": 0, "any": 0, "cm": 0}
        self.props = {"cc": 0, "csts": 0}
        self.cntlid = 1
        self.late = {}           # qid -> the response held back by mode late
        self.ids = []            # every connection's CMID, never closed (see Queue.close)
        self.pi = {}             # --pi: block -> (CRC-16 of the block, reference tag)
        self.pi_count = {"write": 0, "read": 0, "refused": 0, "check-failed": 0}
        say("listening on", "%s:%d" % (a.addr, a.port), "nqn", a.nqn, "mode", a.mode, "on", a.on, "nth", a.nth)

    @staticmethod
    def _cm_fd():
        # pyverbs hides the event channel's fd: find it (the newest rdma_cm file) and make it
        # non-blocking, so that one thread can serve both the CM and the completion queues.
        fds = []
        for f in os.listdir("/proc/self/fd"):
            try:
                if os.readlink("/proc/self/fd/" + f) == "/dev/infiniband/rdma_cm":
                    fds.append(int(f))
            except OSError:
                pass
        fd = max(fds)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        return fd

    # -- the misbehaviour selector
    def hit(self, cls):
        """Whether this command (of class cls) is the one to misbehave on."""
        if self.a.mode.startswith("cm-") or self.a.mode == "ok":
            return False
        keys = [cls, "any"] if cls not in ("fabrics", "io-other") else ["any"]
        hit = False
        for k in keys:
            self.count[k] += 1
            if k == self.a.on and self.a.nth <= self.count[k] < self.a.nth + self.a.count:
                hit = True
        return hit

    # -- rdma_cm
    def cm_event(self):
        try:
            ev = CMEvent(self.channel)
        except Exception:       # noqa: BLE001 (EAGAIN: no event)
            return False
        t = ev.event_type
        if t == EV_CONNECT_REQUEST:
            pdata = ev.private_data
            child = CMID(creator=ev, listen_id=self.listener)
            self.ids.append(child)
            ev.ack_cm_event()
            self.connect_request(child, pdata)
        else:
            ev.ack_cm_event()
            # (pyverbs' event does not name its id: a disconnected queue's QP flushes its receives,
            # and poll() then drops the queue)
            say("cm event", t)
        return True

    def connect_request(self, child, pdata):
        self.count["cm"] += 1
        nth = self.count["cm"] == self.a.nth
        if len(pdata) < 10:
            say("connect request with", len(pdata), "bytes of private data: rejected")
            child.reject(struct.pack("<HH", 0, 1))
            return
        _recfmt, qid, hrqsize, hsqsize = struct.unpack_from("<HHHH", pdata)
        say("connect request qid", qid, "hrqsize", hrqsize, "hsqsize", hsqsize)
        if nth and self.a.mode == "cm-silent":
            say("misbehave: never answering the connect request of qid", qid)
            self.pending[id(child)] = child
            return
        if nth and self.a.mode == "cm-reject-bad":
            say("misbehave: rejecting qid", qid, "with malformed private data")
            child.reject(b"\x07")
            return
        q = Queue(self, child, qid, hrqsize, hsqsize)
        crq = q.depth
        if nth and self.a.mode == "cm-qsize":
            crq = 1
            say("misbehave: accepting qid", qid, "with crqsize", crq, "for hrqsize", hrqsize)
        cp = ConnParam(resources=4, depth=4, qp_num=q.qp.qp_num, data_len=32)
        cp.set_private_data(struct.pack("<HH", 0, crq) + bytes(28))
        child.accept(cp)
        self.queues[id(child)] = q

    # -- commands
    def command(self, q, cmd):
        op, cid = cmd[0], struct.unpack_from("<H", cmd, 2)[0]
        if op == 0x7F:
            fct = cmd[4]
            cls = "connect" if fct == 0x01 else "fabrics"
            if fct in (0x05, 0x06) and q.auth and (q.auth == "auth-drop" or fct == 0x06):
                say("misbehave: disconnecting qid", q.qid, "in DH-HMAC-CHAP instead of answering its",
                    "AUTH_Send" if fct == 0x05 else "AUTH_Receive", "cid", hex(cid))
                q.dead = True
                q.cmid.disconnect()
                return
        elif q.qid == 0:
            cls = "admin"
        else:
            cls = "io"
        if cls == "io" and self.a.lba is not None:
            # only the I/O commands that touch --lba count (not the partition scan's reads)
            slba, = struct.unpack_from("<Q", cmd, 40)
            nlb = struct.unpack_from("<H", cmd, 48)[0] + 1
            if op not in (0x01, 0x02) or not slba <= self.a.lba < slba + nlb:
                cls = "io-other"
        hit = self.hit(cls)
        if self.a.verbose:
            say("qid", q.qid, "cid", hex(cid), "opcode", hex(op), "cdw10", hex(struct.unpack_from("<I", cmd, 40)[0]),
                "nsid", struct.unpack_from("<I", cmd, 4)[0])
        if op == 0x7F and cls == "connect" and q.qid in self.late:
            say("misbehave: late answer for cid", hex(struct.unpack_from("<H", self.late[q.qid][0], 12)[0]),
                "on the new connection of qid", q.qid, "before its fabrics connect")
            q.send(*self.late.pop(q.qid))
        if hit and self.a.mode in ("drop", "late", "late-inval"):
            say("misbehave: disconnecting qid", q.qid, "instead of answering cid", hex(cid))
            if self.a.mode.startswith("late"):
                # the answer: success; late-inval: with remote invalidation of the command's MR if
                # its SGL asked for it (as to_host and from_host answer)
                _addr, _len, key, typ = self.sgl(cmd)
                inval = key if self.a.mode == "late-inval" and typ & 0x0F == 0x0F else None
                self.late[q.qid] = (struct.pack("<QHHHH", 0, 0, q.qid, cid, 0), inval)
            q.dead = True
            q.cmid.disconnect()
            return
        if hit:
            say("misbehave:", self.a.mode, "on", cls, "command opcode", hex(op), "cid", hex(cid), "qid", q.qid)
        if hit and self.a.mode == "hold":
            return

        prev = q.last_cid          # the command before this one on the queue (stale-cid)
        q.last_cid = cid

        def done(result=0, status=0, inval=None):
            self.answer(q, cmd, cid, result, status, inval, hit, prev)

        try:
            if op == 0x7F:
                self.fabrics(q, cmd, done, hit)
            elif q.qid == 0:
                self.admin(q, cmd, done)
            else:
                self.io(q, cmd, done, hit)
        except Exception as ex:  # noqa: BLE001 (a bug here must not kill the target silently)
            say("error handling opcode", hex(op), ":", repr(ex))
            done(status=status_field(0x06))

    def answer(self, q, cmd, cid, result, status, inval, hit, prev=None):
        if self.a.verbose:
            say("qid", q.qid, "answer cid", hex(cid), "status", hex(status), "result", hex(result), "inval", inval)

        def resp(c, st=status):
            return struct.pack("<QHHHH", result, 0, q.qid, c, st)
        m = self.a.mode if hit else "ok"
        if m == "slow":
            q.delayed.append((time.monotonic() + self.a.delay, lambda: self.answer(q, cmd, cid, result, status, inval, False, prev)))
            return
        if m == "unknown-cid":
            q.send(resp((cid & 0xF000) | 0x0FFF), inval)
        elif m == "stale-cid":
            q.send(resp(prev if prev is not None else cid ^ 1), inval)
        elif m == "dup":
            q.send(resp(cid), inval)
            q.send(resp(cid), inval)
        elif m == "never-sent":
            q.send(resp((cid & 0xF000) | ((cid + 1) & 0x0FFF)))
            q.send(resp(cid), inval)
        elif m == "bad-inval":
            q.send(resp(cid), (inval if inval is not None else 0x1234) ^ 0x100)
        elif m == "inval-no-mr":
            q.send(resp(cid), 0x1234)
        elif m == "short":
            q.send(resp(cid)[:8])
        elif m == "long":
            q.send(resp(cid) + bytes(48), inval)
        elif m == "dnr":
            q.send(resp(cid, status_field(0x06, dnr=True)), inval)
        elif m == "path":
            q.send(resp(cid, status_field(0x70, sct=3)), inval)
        else:
            q.send(resp(cid), inval)

    @staticmethod
    def sgl(cmd):
        addr, = struct.unpack_from("<Q", cmd, 24)
        length = int.from_bytes(cmd[32:35], "little")
        key, = struct.unpack_from("<I", cmd, 35)
        typ = cmd[39]
        return addr, length, key, typ

    def to_host(self, q, cmd, data, done, result=0, early=False):
        """RDMA WRITE data to the host's keyed SGL, then answer (early: answer first)."""
        addr, length, key, typ = self.sgl(cmd)
        inval = key if typ & 0x0F == 0x0F and not self.a.no_inval else None
        n = min(len(data), length)
        if n == 0:
            done(result)
            return
        slot = q.free_data.pop()
        q.data_mr.write(bytes(data[:n]), n, slot * MAX_IO)
        if early:
            done(result, inval=inval)

        def written(s):
            q.free_data.append(s)
            if not early:
                done(result, inval=inval)
        q.ops[slot] = written
        q.rdma(K_WRITE, slot, n, addr, key)

    def from_host(self, q, cmd, then):
        """RDMA READ the host's keyed SGL, then then(bytes, inval)."""
        addr, length, key, typ = self.sgl(cmd)
        inval = key if typ & 0x0F == 0x0F and not self.a.no_inval else None
        slot = q.free_data.pop()

        def read(s):
            data = bytes(q.data_mr.read(length, s * MAX_IO))
            q.free_data.append(s)
            then(data, inval)
        q.ops[slot] = read
        q.rdma(K_READ, slot, length, addr, key)

    def fabrics(self, q, cmd, done, hit=False):
        fct = cmd[4]
        if fct == 0x01:                                  # Connect
            qid, sqsize = struct.unpack_from("<HH", cmd, 42)

            def connected(data, inval):
                nqn = data[256:512].split(b"\0")[0].decode(errors="replace")
                if nqn != self.a.nqn:
                    say("connect to unknown subsystem", nqn)
                    done(status=status_field(0x82, sct=1, dnr=True), inval=inval)   # Connect Invalid Parameters
                    return
                if qid == 0:
                    q.cntlid = self.cntlid
                    self.cntlid += 1
                    self.props = {"cc": 0, "csts": 0}
                say("fabrics connect qid", qid, "sqsize", sqsize, "cntlid", q.cntlid if qid == 0 else "-")
                atr = 0
                if self.a.mode == "slow-connect" and qid > 0:
                    say("misbehave: slow-connect: answering the fabrics connect of qid", qid, "in", self.a.delay, "s")
                    q.delayed.append((time.monotonic() + self.a.delay,
                                      lambda: done(result=0, inval=inval)))
                    return
                if hit and self.a.mode.startswith("auth-drop"):
                    q.auth = self.a.mode
                    atr = 1 << 17                          # AUTHREQ ATR: authentication required
                    say("misbehave:", self.a.mode, "qid", qid, "connect answered: authentication required")
                done(result=(q.cntlid if qid == 0 else 0) | atr, inval=inval)
            self.from_host(q, cmd, connected)
        elif fct == 0x05 and q.auth:                      # AUTH_Send (negotiate): taken, success
            self.from_host(q, cmd, lambda _data, inval: done(inval=inval))
        elif fct in (0x00, 0x04):                         # Property Set / Get
            size8 = cmd[40] & 7
            off, = struct.unpack_from("<I", cmd, 44)
            if fct == 0x00:
                val, = struct.unpack_from("<Q", cmd, 48)
                if off == 0x14:
                    self.props["cc"] = val
                    csts = 1 if val & 1 else 0
                    if (val >> 14) & 3:
                        csts |= 2 << 2                     # shutdown complete
                    self.props["csts"] = csts
                done()
            else:
                regs = {0x0: (127) | (1 << 16) | (10 << 24) | (1 << 37),      # CAP: MQES 127, CQR, TO 5 s, NVM
                        0x8: 0x00010400, 0x14: self.props["cc"], 0x1C: self.props["csts"]}
                v = regs.get(off, 0)
                done(result=v if size8 else v & 0xFFFFFFFF)
        else:
            done(status=status_field(0x01))                # Invalid Command Opcode

    def id_ctrl(self, cntlid):
        b = bytearray(4096)
        struct.pack_into("<HH", b, 0, 0x1B36, 0x1B36)
        b[4:24] = b"badtarget-0001".ljust(20)
        b[24:64] = b"rnvme-rdma misbehaving target".ljust(40)
        b[64:72] = b"1.0".ljust(8)
        b[76] = 0x02                                       # cmic: may have several controllers (as nvmet)
        b[77] = 5                                          # mdts: 128 KiB
        struct.pack_into("<HI", b, 78, cntlid, 0x00010400)
        b[111] = 1                                         # an I/O controller
        b[259] = 3                                         # aerl
        struct.pack_into("<H", b, 320, 1)                  # kas
        b[512], b[513] = 0x66, 0x44
        struct.pack_into("<HI", b, 514, 32, 1)             # maxcmd, nn
        struct.pack_into("<I", b, 536, (1 << 0) | (1 << 2))  # sgls: supported, keyed data blocks
        nqn = self.a.nqn.encode()
        b[768:768 + len(nqn)] = nqn
        struct.pack_into("<IIHBB", b, 1792, 4, 1, 0, 0, 1)  # ioccsz 4, iorcsz 1, icdoff, ctrattr, msdbd
        return b

    def id_ns(self):
        b = bytearray(4096)
        blocks = len(self.store) // 512
        struct.pack_into("<QQQ", b, 0, blocks, blocks, blocks)
        b[30] = 1                                          # nmic: shared (a multipath head, as nvmet)
        if self.a.ms:
            b[26] = 0x10                                   # flbas: lbaf 0, metadata in extended LBAs
            b[27] = 0x01                                   # mc: extended LBAs supported
        if self.a.pi:
            b[28] = (1 << (self.a.pi - 1)) | 0x08          # dpc: this PI type; PI in the first 8 bytes
            b[29] = self.a.pi | 0x08                       # dps: PI type, PI first (PI_FIRST)
        struct.pack_into("<H", b, 128, self.a.ms)          # lbaf 0: ms
        b[130] = 9                                         # lbaf 0: 512 B
        return b

    def pi_io(self, op, cmd, slba, nlb):
        """--pi: the PI checks of a read or write; returns an error status, or 0 to go on."""
        control = struct.unpack_from("<I", cmd, 48)[0] >> 16
        reftag, = struct.unpack_from("<I", cmd, 56)
        kind = "write" if op == 0x01 else "read"
        _addr, length, _key, _typ = self.sgl(cmd)
        why = None
        if not control & 0x2000:                           # PRACT
            why = "without PRACT (control %#x)" % control
        elif length != nlb * 512:
            why = "with %d bytes on the wire, not %d (no PI on the wire under PRACT)" % (length, nlb * 512)
        elif self.a.pi in (1, 2) and reftag != slba & 0xFFFFFFFF:
            why = "with reference tag %#x, not the LBA's %#x" % (reftag, slba & 0xFFFFFFFF)
        if why:
            self.pi_count["refused"] += 1
            say("pi:", kind, "of", nlb, "blocks at", slba, why + ": refused")
            return status_field(0x02, dnr=True)            # Invalid Field
        self.pi_count[kind] += 1
        return 0

    def pi_tuples(self, cmd, slba, data):
        """Each block of a read or write: (block, CRC-16 of its data, its reference tag)."""
        reftag, = struct.unpack_from("<I", cmd, 56)
        for i in range(len(data) // 512):
            ref = (reftag + i) & 0xFFFFFFFF if self.a.pi in (1, 2) else reftag
            yield slba + i, binascii.crc_hqx(data[i * 512:(i + 1) * 512], 0), ref

    def pi_store(self, cmd, slba, data):
        for block, crc, ref in self.pi_tuples(cmd, slba, data):
            self.pi[block] = (crc, ref)

    def pi_check(self, cmd, slba, data):
        for block, crc, ref in self.pi_tuples(cmd, slba, data):
            t = self.pi.get(block)
            if t is None:
                continue                                   # never written: no PI to check (as escapes)
            if t[0] != crc:
                self.pi_count["check-failed"] += 1
                say("pi: guard mismatch at block", block)
                return status_field(0x82, sct=2, dnr=True)  # End-to-end Guard Check Error
            if t[1] != ref:
                self.pi_count["check-failed"] += 1
                say("pi: reference tag", hex(ref), "for block", block, "stored", hex(t[1]))
                return status_field(0x84, sct=2, dnr=True)  # End-to-end Reference Tag Check Error
        return 0

    def pi_stats(self, *_):
        say("pi:", " ".join("%s=%d" % kv for kv in self.pi_count.items()))
        # (os._exit: no unwinding through the pyverbs objects kept open on purpose, Queue.close)
        os._exit(0)

    def admin(self, q, cmd, done):
        op = cmd[0]
        cdw10, cdw11 = struct.unpack_from("<II", cmd, 40)
        nsid, = struct.unpack_from("<I", cmd, 4)
        if op == 0x06:                                     # Identify
            cns = cdw10 & 0xFF
            if cns == 0x01:
                self.to_host(q, cmd, self.id_ctrl(q.cntlid), done)
            elif cns == 0x00:
                self.to_host(q, cmd, self.id_ns() if nsid == 1 else bytearray(4096), done)
            elif cns == 0x02:
                b = bytearray(4096)
                if nsid < 1:
                    struct.pack_into("<I", b, 0, 1)
                self.to_host(q, cmd, b, done)
            elif cns == 0x03:
                b = bytearray(4096)
                b[0], b[1] = 3, 16                         # a UUID descriptor
                b[4:20] = bytes.fromhex("6261647461726765742d6e7331000001")
                self.to_host(q, cmd, b, done)
            else:
                done(status=status_field(0x02, dnr=True))  # Invalid Field
        elif op == 0x09:                                   # Set Features
            fid = cdw10 & 0xFF
            if fid == 0x07:
                nq = min(cdw11 & 0xFFFF, 7)
                done(result=nq | (nq << 16))
            else:
                done()
        elif op == 0x0A:                                   # Get Features
            done()
        elif op == 0x0C:                                   # Async Event Request: held
            pass
        elif op == 0x18:                                   # Keep Alive
            done()
        elif op == 0x02:                                   # Get Log Page: zeros
            self.to_host(q, cmd, bytearray(((cdw10 >> 16) + 1) * 4), done)
        else:
            done(status=status_field(0x01, dnr=True))

    def io(self, q, cmd, done, hit):
        op = cmd[0]
        if op == 0x00:                                     # Flush
            done()
            return
        slba, = struct.unpack_from("<Q", cmd, 40)
        nlb = (struct.unpack_from("<H", cmd, 48)[0]) + 1
        off, n = slba * 512, nlb * 512
        if off + n > len(self.store):
            done(status=status_field(0x80))                # LBA Out of Range
            return
        if self.a.pi and op in (0x01, 0x02):
            st = self.pi_io(op, cmd, slba, nlb)
            if st == 0 and op == 0x02:
                st = self.pi_check(cmd, slba, self.store[off:off + n])
            if st:
                done(status=st)
                return
        if op == 0x02:                                     # Read
            self.to_host(q, cmd, self.store[off:off + n], done, early=hit and self.a.mode == "early")
        elif op == 0x01:                                   # Write

            def written(data, inval):
                self.store[off:off + n] = data[:n]
                if self.a.pi:
                    self.pi_store(cmd, slba, data[:n])
                done(inval=inval)
            self.from_host(q, cmd, written)
        else:
            done(status=status_field(0x01, dnr=True))

    def run(self):
        while True:
            busy = False
            while self.cm_event():
                busy = True
            for k, q in list(self.queues.items()):
                try:
                    if q.poll():
                        busy = True
                except Exception as ex:  # noqa: BLE001
                    say("queue", q.qid, "gone:", repr(ex))
                    q.dead = True
                if q.dead and not q.delayed:
                    q.close()
                    del self.queues[k]
            if not busy:
                select.select([self.cm_fd], [], [], 0.002)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--addr", required=True)
    p.add_argument("--port", type=int, default=4430)
    p.add_argument("--nqn", default="nqn.2026-12.io.rnvme:badtarget")
    p.add_argument("--mode", default="ok")
    p.add_argument("--on", default="io", choices=["io", "admin", "connect", "any"])
    p.add_argument("--nth", type=int, default=1)
    p.add_argument("--count", type=int, default=1, help="misbehave on the Nth command of CLASS and COUNT-1 after it")
    p.add_argument("--delay", type=float, default=40.0)
    p.add_argument("--lba", type=int, default=None, help="io: count only reads and writes that touch this block")
    p.add_argument("--size-mb", type=int, default=16)
    p.add_argument("--ms", type=int, default=0, help="metadata bytes per block (extended LBAs)")
    p.add_argument("--pi", type=int, default=0, choices=[0, 1, 2, 3], help="protection information type (needs --ms 8)")
    p.add_argument("--no-inval", action="store_true", help="never invalidate remotely (the host invalidates locally)")
    p.add_argument("--verbose", action="store_true", help="one line per command and answer")
    a = p.parse_args()
    if a.pi and a.ms != 8:
        p.error("--pi needs --ms 8 (PI only, as the host's nvme_ns_has_pi requires)")
    t = Target(a)
    if a.pi:
        signal.signal(signal.SIGTERM, t.pi_stats)
    t.run()


if __name__ == "__main__":
    sys.exit(main())
