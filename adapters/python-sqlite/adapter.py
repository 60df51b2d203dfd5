#!/usr/bin/env python3
"""A fenced run store over SQLite, speaking fencesim's store protocol (docs/protocol.md, version 1).

The reference adapter: Python 3 standard library only, written the way an engineer of another
project would write a store for a durable-run engine, contract by contract (docs/contracts.md).
fencesim starts it, sends one JSON request per line on stdin and reads one answer per line on
stdout; this program logs to stderr only.

    fencesim conformance --store cmd:'python3 adapters/python-sqlite/adapter.py'

Time is the caller's: a call that needs it carries `now_ms`, or `now_ms: null`, and then the
adapter asks fencesim for the time at the point it would read a clock, inside its transaction
(`Server.now`). Lease expiry is computed from that and from nothing else. The fence check and the
mutation share one BEGIN IMMEDIATE transaction and one reading of the time. Between them, when the
request says `"faults": true`, the adapter stops at the fault point and waits for fencesim's
`resume`, serving any request that arrives meanwhile (a takeover attempted from another
connection).

Planted defects, for proving that fencesim catches a foreign store's bugs: set
FENCESIM_ADAPTER_DEFECT to a comma-separated list of names from DEFECTS below.
"""

import json
import os
import sqlite3
import sys
import time

PROTOCOL = 1
TIMER_MS_MAX = 2_147_483_647
EPOCH_MAX = 2**63 - 1

DEFECTS = {
    "unfenced-meta": "put_meta ignores the caller's lease (a meta write nobody fences)",
    "check-outside-txn": "the lease check is an autocommit read before the write transaction",
    "epoch-reset-on-delete": "delete drops the run's epoch high-water mark with its rows",
    "expiry-inclusive": "a lease still counts as live at its expiry instant (<= instead of <)",
    "seq-guard-by-count": "append's order guard compares the seq with the entry count, not the tail",
    "stale-release-clears": "release deletes the run's lease row without checking who holds it",
    "doubles-integers": "payloads are read back as doubles, rounding integers beyond 2^53, undeclared",
}

ACTIVE = {name for name in os.environ.get("FENCESIM_ADAPTER_DEFECT", "").split(",") if name}
for name in ACTIVE:
    if name not in DEFECTS:
        sys.stderr.write(f"unknown defect {name!r}; known: {', '.join(sorted(DEFECTS))}\n")
        sys.exit(2)

DDL = """
CREATE TABLE IF NOT EXISTS entries (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL,
    seq INTEGER NOT NULL, payload TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS entries_run_seq ON entries (run_id, seq);
CREATE TABLE IF NOT EXISTS meta (run_id TEXT PRIMARY KEY, status TEXT NOT NULL, name TEXT,
    payload TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS leases (run_id TEXT PRIMARY KEY, owner TEXT NOT NULL,
    epoch INTEGER NOT NULL, expires_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS epochs (run_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS blobs (ref TEXT PRIMARY KEY, run_id TEXT NOT NULL, data BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS blobs_run_id ON blobs (run_id, ref);
"""


class StoreError(Exception):
    """A typed answer of contracts 1.5; `body` is the protocol's error object."""

    def __init__(self, body):
        super().__init__(body.get("code"))
        self.body = body


def busy(op, run):
    return StoreError({"code": "busy", "op": op, "run": run})


def storage(op, message):
    return StoreError({"code": "storage", "op": op, "message": message})


def stale(op, lease, live):
    live = None if live is None else {"owner": live[0], "epoch": live[1]}
    return StoreError({"code": "lease_held", "op": op, "lease": lease,
                       "rejection": {"kind": "stale", "live": live}})


def sql_error(op, run, error):
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return busy(op, run)
    if code is None and "locked" in str(error):
        return busy(op, run)
    return storage(op, f"{error} run={run}")


def decode(payload):
    """A stored payload as JSON; under `doubles-integers`, every integer read as a double would."""
    if "doubles-integers" in ACTIVE:
        return json.loads(payload, parse_int=lambda digits: int(float(digits)))
    return json.loads(payload)


# B2: a concurrent boot is retried whole while SQLite answers in the busy family (switching to
# WAL can answer SQLITE_BUSY at once, without waiting on the busy timeout), with short sleeps,
# up to this wall-clock bound; past it, or on any other error, the error surfaces.
BOOT_RETRY_S = 5.0


def boot(open_connection):
    deadline = time.monotonic() + BOOT_RETRY_S
    while True:
        try:
            return open_connection()
        except sqlite3.Error as e:
            error = sql_error("boot", None, e)
            if error.body["code"] != "busy" or time.monotonic() >= deadline:
                raise error
            time.sleep(0.002)


def run_of_ref(ref):
    return ref.split("/", 1)[0]


class Connection:
    """One connection over one location (a folder fencesim made for this adapter's files)."""

    def __init__(self, server, location, ttl_ms):
        self.server = server
        self.ttl_ms = ttl_ms
        path = os.path.join(location, "store.db")
        # isolation_level=None: no implicit transactions; every write transaction is explicit.
        self.db = sqlite3.connect(path, timeout=5.0, isolation_level=None, check_same_thread=False)
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            # In WAL mode NORMAL loses no commit to a process crash (only to a power cut): a
            # commit does not wait for an fsync, the checkpoint does.
            self.db.execute("PRAGMA synchronous=NORMAL")
            # Every statement is idempotent, so concurrent boots may each run it whole (B2).
            self.db.executescript(DDL)
        except BaseException:
            # A failed boot leaves no connection open behind it (`boot` may try again).
            self.db.close()
            raise
        # Runtime calls never wait for a lock: busy is a typed answer the caller backs off from.
        self.db.execute("PRAGMA busy_timeout=0")

    def close(self):
        self.db.close()

    # -- transactions and the fence -------------------------------------------------------------

    def write_txn(self, op, run, body):
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise sql_error(op, run, e)
        try:
            value = body()
            self.db.execute("COMMIT")
            return value
        except sqlite3.Error as e:
            self.rollback()
            raise sql_error(op, run, e)
        except BaseException:
            self.rollback()
            raise

    def rollback(self):
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")

    def live_row(self, run, now):
        row = self.db.execute("SELECT owner, epoch, expires_at FROM leases WHERE run_id = ?", (run,)).fetchone()
        if row is None:
            return None
        live = now <= row[2] if "expiry-inclusive" in ACTIVE else now < row[2]
        return (row[0], row[1]) if live else None

    def check_lease(self, op, lease, now):
        live = self.live_row(lease["run"], now)
        if live is None or live != (lease["owner"], lease["epoch"]):
            raise stale(op, lease, live)

    def fenced(self, req, op, target, lease, mutate):
        if lease["run"] != target:
            raise StoreError({"code": "lease_held", "op": op, "lease": lease,
                              "rejection": {"kind": "run_mismatch", "target": target}})
        if "check-outside-txn" in ACTIVE:
            now = self.server.now(req)
            try:
                self.check_lease(op, lease, now)
            except sqlite3.Error as e:
                raise sql_error(op, target, e)
            self.server.fault_point(req, "fence_checked", op, lease["run"])
            return self.write_txn(op, target, lambda: mutate(now))

        def body():
            now = self.server.now(req)
            self.check_lease(op, lease, now)
            self.server.fault_point(req, "fence_checked", op, lease["run"])
            return mutate(now)

        return self.write_txn(op, target, body)

    def maybe_fenced(self, req, op, target, lease, mutate, txn=False):
        """`mutate(now)` under the lease, or unfenced (then `now` is None: no time is needed)."""
        if lease is None:
            if txn:
                return self.write_txn(op, target, lambda: mutate(None))
            try:
                return mutate(None)
            except sqlite3.Error as e:
                raise sql_error(op, target, e)
        return self.fenced(req, op, target, lease, mutate)

    # -- journal --------------------------------------------------------------------------------

    def append(self, req):
        run, entry = req["run"], req["entry"]
        seq = entry["seq"]
        payload = json.dumps(entry, separators=(",", ":"))

        def insert(_now):
            if "seq-guard-by-count" in ACTIVE:
                guard = "SELECT ?1, ?2, ?3 WHERE ?2 > (SELECT count(*) FROM entries WHERE run_id = ?1)"
            else:
                guard = "SELECT ?1, ?2, ?3 WHERE NOT EXISTS (SELECT 1 FROM entries WHERE run_id = ?1 AND seq >= ?2)"
            cur = self.db.execute("INSERT INTO entries (run_id, seq, payload) " + guard, (run, seq, payload))
            if cur.rowcount == 1:
                return None
            tail = self.db.execute("SELECT max(seq) FROM entries WHERE run_id = ?", (run,)).fetchone()[0]
            raise StoreError({"code": "journal_order_violation", "run": run, "seq": seq, "tail": tail})

        return self.maybe_fenced(req, "append", run, req.get("lease"), insert)

    def load(self, req):
        rows = self.read("load", req["run"], "SELECT payload FROM entries WHERE run_id = ? ORDER BY id", (req["run"],))
        return [decode(r[0]) for r in rows]

    def put_meta(self, req):
        meta = req["meta"]
        run = meta["run_id"]
        payload = json.dumps(meta, separators=(",", ":"))

        def upsert(_now):
            self.db.execute(
                "INSERT INTO meta (run_id, status, name, payload) VALUES (?, ?, ?, ?) ON CONFLICT (run_id) "
                "DO UPDATE SET status = excluded.status, name = excluded.name, payload = excluded.payload",
                (run, meta["status"], meta.get("name"), payload))

        lease = None if "unfenced-meta" in ACTIVE else req.get("lease")
        return self.maybe_fenced(req, "put_meta", run, lease, upsert)

    def get_meta(self, req):
        rows = self.read("get_meta", req["run"], "SELECT payload FROM meta WHERE run_id = ?", (req["run"],))
        return decode(rows[0][0]) if rows else None

    def list_runs(self, req):
        f = req["filter"]
        statuses = None
        if f.get("status") is not None or f.get("statuses") is not None:
            statuses = set(f.get("statuses") or [])
            if f.get("status") is not None:
                statuses.add(f["status"])
        out = []
        for run, status, name, payload in self.read("list_runs", None, "SELECT run_id, status, name, payload FROM meta ORDER BY run_id", ()):
            if statuses is not None and status not in statuses:
                continue
            if f.get("name") is not None and name != f["name"]:
                continue
            meta = decode(payload)
            if all(tag in meta.get("tags", []) for tag in f.get("tags") or []):
                out.append(meta)
        return out

    def delete(self, req):
        run, lease = req["run"], req.get("lease")

        def remove(_now):
            for table in ("entries", "meta", "leases"):
                self.db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run,))
            if "epoch-reset-on-delete" in ACTIVE:
                self.db.execute("DELETE FROM epochs WHERE run_id = ?", (run,))

        return self.maybe_fenced(req, "delete", run, lease, remove, txn=True)

    # -- leases ---------------------------------------------------------------------------------

    def acquire(self, req):
        run, owner = req["run"], req["owner"]

        def take():
            now = self.server.now(req)
            row = self.db.execute("SELECT owner, epoch FROM leases WHERE run_id = ? AND expires_at > ?",
                                  (run, now)).fetchone()
            if row is not None:
                raise StoreError({"code": "lease_held", "op": "acquire",
                                  "lease": {"run": run, "owner": owner, "epoch": 0},
                                  "rejection": {"kind": "held_by", "owner": row[0], "epoch": row[1]}})
            self.server.fault_point(req, "acquire_checked", "acquire", run)
            high = self.db.execute("SELECT epoch FROM epochs WHERE run_id = ?", (run,)).fetchone()
            high = 0 if high is None else high[0]
            if high >= EPOCH_MAX or high < 0:
                raise StoreError({"code": "overflow", "op": "acquire", "run": run, "what": f"epoch {high}"})
            epoch = high + 1
            self.db.execute("INSERT INTO epochs (run_id, epoch) VALUES (?, ?) "
                            "ON CONFLICT (run_id) DO UPDATE SET epoch = excluded.epoch", (run, epoch))
            self.db.execute("INSERT INTO leases (run_id, owner, epoch, expires_at) VALUES (?, ?, ?, ?) "
                            "ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch, "
                            "expires_at = excluded.expires_at", (run, owner, epoch, now + self.ttl_ms))
            return {"run": run, "owner": owner, "epoch": epoch}

        return self.write_txn("acquire", run, take)

    def pinned(self, op, lease, changed):
        if changed != 1:
            raise storage(op, f"fence check passed but {changed} lease rows matched run={lease['run']}")

    def renew(self, req):
        lease = req["lease"]

        def extend(now):
            cur = self.db.execute("UPDATE leases SET expires_at = ? WHERE run_id = ? AND owner = ? AND epoch = ?",
                                  (now + self.ttl_ms, lease["run"], lease["owner"], lease["epoch"]))
            self.pinned("renew", lease, cur.rowcount)

        return self.fenced(req, "renew", lease["run"], lease, extend)

    def release(self, req):
        lease = req["lease"]
        if "stale-release-clears" in ACTIVE:
            def clear():
                self.db.execute("DELETE FROM leases WHERE run_id = ?", (lease["run"],))
            return self.write_txn("release", lease["run"], clear)

        def drop(_now):
            cur = self.db.execute("DELETE FROM leases WHERE run_id = ? AND owner = ? AND epoch = ?",
                                  (lease["run"], lease["owner"], lease["epoch"]))
            self.pinned("release", lease, cur.rowcount)

        return self.fenced(req, "release", lease["run"], lease, drop)

    # -- transcripts ----------------------------------------------------------------------------

    def put_blob(self, req):
        ref = req["ref"]
        data = bytes.fromhex(req["hex"])

        def put(_now):
            self.db.execute("INSERT INTO blobs (ref, run_id, data) VALUES (?, ?, ?) "
                            "ON CONFLICT (ref) DO UPDATE SET data = excluded.data", (ref, run_of_ref(ref), data))

        return self.maybe_fenced(req, "put_blob", run_of_ref(ref), req.get("lease"), put)

    def get_blob(self, req):
        rows = self.read("get_blob", run_of_ref(req["ref"]), "SELECT data FROM blobs WHERE ref = ?", (req["ref"],))
        return bytes(rows[0][0]).hex() if rows else None

    def list_blobs(self, req):
        run = req["run"]
        rows = self.read("list_blobs", run, "SELECT ref FROM blobs WHERE run_id = ? AND ref <> ? ORDER BY ref", (run, run))
        return [r[0] for r in rows]

    def delete_blob(self, req):
        ref = req["ref"]

        def remove(_now):
            self.db.execute("DELETE FROM blobs WHERE ref = ?", (ref,))

        return self.maybe_fenced(req, "delete_blob", run_of_ref(ref), req.get("lease"), remove)

    def read(self, op, run, sql, args):
        try:
            return self.db.execute(sql, args).fetchall()
        except sqlite3.Error as e:
            raise sql_error(op, run, e)


CALLS = ("append", "load", "put_meta", "get_meta", "list_runs", "delete", "acquire", "renew", "release",
         "put_blob", "get_blob", "list_blobs", "delete_blob")


class Server:
    def __init__(self, stdin, stdout):
        self.stdin = stdin
        self.stdout = stdout
        self.conns = {}
        self.next_conn = 1

    def write(self, message):
        self.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
        self.stdout.flush()

    def read(self):
        line = self.stdin.readline()
        if not line:
            raise EOFError
        return json.loads(line)

    def serve(self):
        try:
            while True:
                self.handle(self.read())
        except EOFError:
            for conn in self.conns.values():
                conn.close()

    def handle(self, req):
        try:
            self.write({"id": req["id"], "ok": self.dispatch(req)})
        except StoreError as e:
            self.write({"id": req["id"], "error": e.body})

    def dispatch(self, req):
        op = req["op"]
        if op == "hello":
            return {"protocol": PROTOCOL, "name": "python-sqlite",
                    "capabilities": {"leases": True, "fenced_writes": True, "fault_points": True}}
        if op == "open":
            return self.open(req)
        if op == "close":
            conn = self.conns.pop(req["conn"], None)
            if conn is not None:
                conn.close()
            return None
        if op in CALLS:
            conn = self.conns.get(req["conn"])
            if conn is None:
                raise StoreError({"code": "config", "message": f"no open connection {req['conn']}"})
            return getattr(conn, op)(req)
        raise StoreError({"code": "config", "message": f"unknown op {op!r}"})

    def open(self, req):
        ttl = req["ttl_ms"]
        # B1: the ttl is checked before anything exists at the location.
        if not isinstance(ttl, int) or isinstance(ttl, bool) or not 1 <= ttl <= TIMER_MS_MAX:
            raise StoreError({"code": "config",
                              "message": f"lease ttl must be an integer in 1..={TIMER_MS_MAX} ms ttl_ms={ttl}"})
        conn = boot(lambda: Connection(self, req["location"], ttl))
        number = self.next_conn
        self.next_conn += 1
        self.conns[number] = conn
        return {"conn": number, "ttl_ms": ttl}

    def fault_point(self, req, point, op, run):
        """Stop at a fault point when asked to: tell fencesim, serve what it sends meanwhile, and
        go on at its `resume`."""
        if req.get("faults"):
            self.write({"id": req["id"], "fault": point, "op": op, "run": run})
            self.wait_for(req["id"], "resume")

    def now(self, req):
        """The request's time; when it came as null, fencesim's clock read now (in-lock)."""
        if req.get("now_ms") is not None:
            return req["now_ms"]
        self.write({"id": req["id"], "time": True})
        return self.wait_for(req["id"], "now_ms")

    def wait_for(self, request_id, key):
        """Serve what fencesim sends until the message for this request carrying `key`."""
        while True:
            message = self.read()
            if "op" not in message and message.get("id") == request_id and key in message:
                return message[key]
            self.handle(message)


def main():
    if ACTIVE:
        sys.stderr.write(f"python-sqlite adapter: planted defects {sorted(ACTIVE)}\n")
    Server(sys.stdin, sys.stdout).serve()


if __name__ == "__main__":
    main()
