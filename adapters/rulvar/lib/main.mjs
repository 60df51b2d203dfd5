//! The rulvar adapters' protocol loop (docs/protocol.md, version 1): reads fencesim's requests on
//! stdin and hands each call to the worker thread of its connection, which answers on stdout
//! itself. `node main.mjs sqlite|postgres`.
//!
//! The loop is synchronous and lean (docs/real-stores.md, "Speed"): it reads stdin with blocking
//! reads into shared memory, routes a call by a scan of its line's top-level fields (`json.mjs`,
//! `routeOf`) without parsing the rest, hands the line's bounds to the worker and wakes it
//! (`hub.mjs`), and goes back to reading. Only `hello`, `open` and `close` are parsed here. A
//! connection's worker is a spare thread of an earlier connection when there is one (its store
//! module loaded, its store closed), so an `open` pays for a store instance, not a thread.

import { Worker } from "node:worker_threads";
import { BACKENDS } from "./backends.mjs";
import { CMD_CALL, CMD_CLOSE, CMD_EXIT, CMD_OPEN, Hub, LOADED, MAX_SLOTS, OPEN_OK, STOPPED, die, newMemory, writeLine } from "./hub.mjs";
import { routeOf } from "./json.mjs";

const PROTOCOL = 1;
const backendName = process.argv[2];
const backend = BACKENDS[backendName];
if (backend === undefined) {
  writeLine(2, `usage: main.mjs sqlite|postgres (got ${JSON.stringify(backendName)})`);
  process.exit(2);
}
if (backendName === "postgres" && !process.env.FENCESIM_PG_URL) {
  writeLine(2, "rulvar-postgres: FENCESIM_PG_URL is not set; start a server with scripts/pg-cluster or name yours");
  process.exit(2);
}

const CAPABILITIES = { leases: true, fenced_writes: true, fault_points: true, exact_integers: false };

/** Idle worker threads kept for the next `open`s (a world opens one connection per node). */
const MAX_SPARES = 32;

const memory = newMemory();
const hub = new Hub(memory);
/** Worker threads by slot. */
const workers = [];
/** Slots whose worker's connection closed, ready for another; slots whose worker ended. */
const spares = [];
const free = [];
/** Open connections: conn id -> slot. */
const conns = new Map();
let nextConn = 1;

function spawn() {
  const slot = free.pop() ?? workers.length;
  if (slot >= MAX_SLOTS) return -1;
  hub.clear(slot);
  if (slot === workers.length) workers.push(null);
  const worker = new Worker(new URL("./conn-worker.mjs", import.meta.url), { workerData: { backendName, memory, slot } });
  // Seen whenever the main thread yields to its event loop (after each open and close); a
  // worker's failure while the main thread reads is the worker's to report (hub.mjs, `die`).
  worker.on("error", (e) => die(`connection worker failed: ${e?.stack ?? e}`));
  workers[slot] = worker;
  // Its store module loaded before it serves anything: a thread's start and the module's load
  // (tens of ms, unevenly) are never inside an `open`.
  if (hub.waitDone(slot, "loading the store module") !== LOADED) die(`connection worker of slot ${slot} did not report its load`);
  return slot;
}

function open(req) {
  const slot = spares.pop() ?? spawn();
  if (slot === -1) {
    writeLine(1, JSON.stringify({ id: req.id, error: { code: "config", message: `more than ${MAX_SLOTS} open connections` } }));
    return;
  }
  hub.setMail(JSON.stringify({ id: req.id, location: req.location, ttl_ms: req.ttl_ms }));
  hub.command(slot, CMD_OPEN);
  if (hub.waitDone(slot) !== OPEN_OK) {
    // The worker answered the refusal; it serves the next open.
    spares.push(slot);
    return;
  }
  const conn = nextConn++;
  conns.set(conn, slot);
  writeLine(1, JSON.stringify({ id: req.id, ok: { conn, ttl_ms: req.ttl_ms } }));
}

function close(conn) {
  const slot = conns.get(conn);
  if (slot === undefined) return;
  if (hub.state(slot) === STOPPED) die(`close of connection ${conn}, whose call is stopped`);
  conns.delete(conn);
  hub.command(slot, CMD_CLOSE);
  hub.waitDone(slot);
  if (spares.length < MAX_SPARES) {
    spares.push(slot);
  } else {
    // The thread ends itself; its slot is given out again once it has (no two threads on a slot).
    const worker = workers[slot];
    worker.once("exit", () => {
      workers[slot] = null;
      free.push(slot);
    });
    hub.command(slot, CMD_EXIT);
  }
}

/* A Postgres location's schema outlives every adapter process: this one never drops it. The soak's
 * referee reads a storm's final state through a fresh adapter after every writer's adapter has
 * exited, so no adapter can know it is the last user; the private cluster of scripts/pg-cluster
 * goes whole, and docs/real-stores.md says how to drop the schemas on a server of one's own. (An
 * adapter that dropped the schema when it believed itself the last user made the soak read an
 * empty store: a false serial-history, fixed in 149e894 and brought back once by a rewrite of
 * this file; adapters/rulvar/test/postgres.pgtest.mjs holds it.) */

/** `hello`, `open` or `close`: answered here. */
function handle(text) {
  const req = JSON.parse(text);
  if (req.op === "hello") {
    // One spare connection thread, its store module loaded, before the answer: an adapter that has
    // shaken hands opens its first connection at once. The kit's boot race (B2) counts on that:
    // its racers say `ready` after the handshake, and a thread started inside the first `open`
    // spread their boots tens of ms apart, out of each other's way.
    if (spares.length === 0 && conns.size === 0) {
      const slot = spawn();
      if (slot !== -1) spares.push(slot);
    }
    const answer = req.protocol === PROTOCOL
      ? { id: req.id, ok: { protocol: PROTOCOL, name: backend.name, capabilities: CAPABILITIES } }
      : { id: req.id, error: { code: "config", message: `protocol ${req.protocol} is not ${PROTOCOL}` } };
    writeLine(1, JSON.stringify(answer));
  } else if (req.op === "open") {
    open(req);
  } else {
    close(req.conn);
    writeLine(1, JSON.stringify({ id: req.id, ok: null }));
  }
}

/** The route of a line `routeOf` would not read (escapes in its keys): from a full parse. */
function fullRoute(buf, start, end) {
  let req;
  try {
    req = JSON.parse(buf.toString("utf8", start, end));
  } catch {
    return null;
  }
  if (req === null || typeof req !== "object" || Array.isArray(req)) return null;
  return {
    op: req.op === undefined ? undefined : typeof req.op === "string" ? req.op : null,
    conn: req.conn,
    id: req.id,
    nowMs: req.now_ms,
    resume: req.resume === true,
  };
}

/**
 * Serves lines until one needs the event loop's turn (after an `open` or a `close`, so that the
 * Worker objects' events are seen), or the input ends. Calls, resumes and times stay in here.
 */
function pump() {
  const { buf } = hub;
  for (;;) {
    const bounds = hub.nextLine();
    if (bounds === null) {
      leave();
      return;
    }
    const [start, end] = bounds;
    const route = routeOf(buf, start, end) ?? fullRoute(buf, start, end);
    if (route === null) die(`a request line that is not a JSON object: ${buf.toString("utf8", start, Math.min(end, start + 200))}`);
    if (route.op === undefined) {
      // A resume or a time: for the worker stopped in that request, at once.
      let stopped = -1;
      for (const slot of conns.values()) if (hub.isStoppedIn(slot, route.id)) stopped = slot;
      if (stopped === -1) die(`a resume or time for request ${route.id}, which is not stopped`);
      hub.wake(stopped, route.resume ? undefined : route.nowMs);
      continue;
    }
    if (route.op === "hello" || route.op === "open" || route.op === "close") {
      handle(buf.toString("utf8", start, end));
      setImmediate(pump);
      return;
    }
    // A call: handed to its worker, which answers; the next line may arrive while it is stopped.
    const slot = conns.get(route.conn);
    if (slot === undefined) {
      writeLine(1, JSON.stringify({ id: route.id, error: { code: "config", message: `no open connection ${route.conn}` } }));
      continue;
    }
    hub.command(slot, CMD_CALL, start, end);
  }
}

/** End of input: close what is open (a connection stopped mid-call is left to the exit) and go. */
async function leave() {
  for (const conn of [...conns.keys()]) {
    if (hub.state(conns.get(conn)) !== STOPPED) close(conn);
  }
  process.exit(0);
}

pump();
