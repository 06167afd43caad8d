#!/usr/bin/env python3
"""Target guest's control server (scripts/vm-run --pair): runs bash scripts for the host guest.

Request: "RUN <timeout-seconds> <nbytes>\n" then <nbytes> of script, run by bash with
tools/guest/lib.sh sourced (target_port_up, target_subsys_* work as in a single guest). Reply: the
script's output (stdout and stderr), then "rnvme-rc: <status>" (124 on timeout). One request per
connection, several at once. The server ends when /results/stop appears (vm-run, once the host
guest is done): the guest init then saves the target's kernel log.
"""
import os
import socketserver
import subprocess

LIB = ". /project/tools/guest/lib.sh\n"


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        try:
            verb, timeout, n = self.rfile.readline().split()
            assert verb == b"RUN"
            script = self.rfile.read(int(n)).decode()
        except (ValueError, AssertionError):
            self.wfile.write(b"target-ctl: bad request\nrnvme-rc: 2\n")
            return
        try:
            p = subprocess.run(["bash", "-c", LIB + script], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=int(timeout))
            out, rc = p.stdout, p.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = (e.stdout or b"") + b"\ntarget-ctl: timeout\n", 124
        if out and not out.endswith(b"\n"):
            out += b"\n"
        self.wfile.write(out + b"rnvme-rc: %d\n" % rc)


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


with Server(("10.0.9.2", 7777), Handler) as srv:
    srv.timeout = 0.5
    print("target-ctl: serving on 10.0.9.2:7777", flush=True)
    while not os.path.exists("/results/stop"):
        srv.handle_request()
print("target-ctl: stop requested", flush=True)
