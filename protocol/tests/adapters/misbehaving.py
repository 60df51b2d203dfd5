#!/usr/bin/env python3
"""A minimal store adapter that misbehaves in one way, for protocol/tests/adapter_process.rs.

    misbehaving.py MODE [N]

It shakes hands, opens connections and answers every other call `null` (no store behind it),
except where MODE says otherwise:

- `plain`: nothing goes wrong;
- `no-read`: after answering `open` it never reads its stdin again;
- `trickle`: it answers `open` one space a 20th of a second for ten seconds, then whole;
- `flood-after-close`: when its stdin closes it writes to its stdout without end;
- `big`: it answers `get_blob` with N hex digits on one line;
- `stderr-flood`: at `open` it writes N bytes of noise to its stderr, then `last words`, and
  exits with status 3 without answering;
- `exit-late`: at `open` it closes its stdout, writes `closing down` to its stderr, and a fifth
  of a second later `last words`, then exits with status 3;
- `sigterm`: at `open` it closes its stdout and kills itself with SIGTERM;
- `close-twice`: it answers every `close` twice;
- `error-and-ok`: it refuses every `renew` with a lease error that also carries `"ok": null`.
"""

import json
import os
import signal
import sys
import time

mode = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 0


def write(message):
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def on_eof():
    if mode == "flood-after-close":
        line = "x" * 4095 + "\n"
        while True:
            sys.stdout.write(line)
            sys.stdout.flush()
    sys.exit(0)


def open_conn(req, conns):
    if mode == "no-read":
        write({"id": req["id"], "ok": {"conn": conns, "ttl_ms": req["ttl_ms"]}})
        signal.pause()
    if mode == "trickle":
        sys.stdout.write('{"id":%d,"ok":' % req["id"])
        for _ in range(200):
            sys.stdout.write(" ")
            sys.stdout.flush()
            time.sleep(0.05)
    if mode == "stderr-flood":
        noise = ("noise " * 16 + "\n").encode()
        for _ in range(n // len(noise)):
            os.write(2, noise)
        os.write(2, b"last words\n")
        os._exit(3)
    if mode in ("exit-late", "sigterm"):
        sys.stdout.flush()
        os.close(1)
        if mode == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        os.write(2, b"closing down\n")
        time.sleep(0.2)
        os.write(2, b"last words\n")
        os._exit(3)
    write({"id": req["id"], "ok": {"conn": conns, "ttl_ms": req["ttl_ms"]}})


def main():
    conns = 0
    while True:
        line = sys.stdin.readline()
        if not line:
            on_eof()
        req = json.loads(line)
        op, rid = req["op"], req["id"]
        if op == "hello":
            capabilities = {"leases": True, "fenced_writes": True, "fault_points": False}
            write({"id": rid, "ok": {"protocol": 1, "name": "misbehaving", "capabilities": capabilities}})
        elif op == "open":
            conns += 1
            open_conn(req, conns)
        elif op == "close":
            write({"id": rid, "ok": None})
            if mode == "close-twice":
                write({"id": rid, "ok": None})
        elif op == "get_blob" and mode == "big":
            write({"id": rid, "ok": "ab" * (n // 2)})
        elif op == "renew" and mode == "error-and-ok":
            lease = req["lease"]
            rejection = {"kind": "stale", "live": None}
            error = {"code": "lease_held", "op": "renew", "lease": lease, "rejection": rejection}
            write({"id": rid, "error": error, "ok": None})
        elif op in ("load", "list_runs", "list_blobs"):
            write({"id": rid, "ok": []})
        else:
            write({"id": rid, "ok": None})


main()
