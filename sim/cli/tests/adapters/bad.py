#!/usr/bin/env python3
"""A store adapter that breaks the protocol in one way, for sim/cli/tests/it/adapter_cli.rs.

    bad.py MODE [PIDFILE]

It shakes hands correctly (except in mode `version`) and then, at the first request after the
handshake (`open`), does what MODE says: `exit` (dies), `garbage` (answers a line that is not
JSON), `unasked` (answers another request's id), `hang` (never answers). Once started it writes
its pid to PIDFILE (atomically: a temporary name of its own, then a rename), so a test knows a
process that must be gone afterwards.
"""

import json
import os
import sys
import time

mode = sys.argv[1]
if len(sys.argv) > 2:
    # A temporary name of its own: a sweep starts several of these at once on one PIDFILE.
    temporary = f"{sys.argv[2]}.{os.getpid()}.tmp"
    with open(temporary, "w") as f:
        f.write(str(os.getpid()))
    os.rename(temporary, sys.argv[2])
sys.stderr.write(f"bad adapter: started in mode {mode}\n")
sys.stderr.flush()


def answer(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


while True:
    line = sys.stdin.readline()
    if not line:
        break
    request = json.loads(line)
    if request["op"] == "hello":
        capabilities = {"leases": True, "fenced_writes": True, "fault_points": True}
        answer({"id": request["id"], "ok": {"protocol": 99 if mode == "version" else 1, "name": "bad",
                                             "capabilities": capabilities}})
    elif mode == "exit":
        sys.stderr.write("bad adapter: giving up mid-call\n")
        sys.exit(3)
    elif mode == "garbage":
        sys.stdout.write("this is not json\n")
        sys.stdout.flush()
    elif mode == "unasked":
        answer({"id": request["id"] + 1000, "ok": None})
    elif mode == "hang":
        sys.stderr.write("bad adapter: hanging\n")
        sys.stderr.flush()
        time.sleep(3600)
