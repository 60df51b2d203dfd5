//! A connection worker: a thread that owns one published rulvar store instance at a time (one
//! protocol connection, between its `open` and its `close`) and serves that connection's calls,
//! one at a time. After a close the thread waits as a spare for the main thread's next `open`,
//! its store module already loaded.
//!
//! A thread of its own per connection is what lets a call stop inside the store's transaction (at
//! a fault point, or while fencesim is asked for the time: the stores read their clock
//! synchronously) while the main thread goes on serving the other connections: the worker blocks
//! inside its call until the main thread passes it the resume or the time. Its requests come
//! through the shared memory of `hub.mjs`, and every line of a call (its answer, a fault stop, an
//! ask for the time) is written by this thread straight to stdout.

import { workerData } from "node:worker_threads";
import { BACKENDS, instrument } from "./backends.mjs";
import { CLOSED, CMD_CALL, CMD_CLOSE, CMD_EXIT, CMD_OPEN, Hub, IDLE, LOADED, OPEN_FAILED, OPEN_OK, SERVING, die, writeLine } from "./hub.mjs";
import { isRawInteger, parseExact, repeatedKey } from "./json.mjs";

const { backendName, memory, slot } = workerData;
const backend = BACKENDS[backendName];
const hub = new Hub(memory);

/** The call being served: its request, its one reading of the time, the live lease it saw. */
let call = null;

/** A request id as the main thread reads it back from fencesim's resume or time line. */
const idNumber = (id) => (typeof id === "number" ? id : Number(JSON.stringify(id)));

/** Stop inside the call, having said so in `line`, until the main thread passes the resume or
 * the time; returns the time. */
function stopWith(line) {
  hub.stop(slot, idNumber(call.req.id));
  writeLine(1, line);
  return hub.waitWoken(slot);
}

/** The store's clock: the time fencesim sent, or asked for now (inside the store's lock). */
function now() {
  if (call === null) throw new Error("the store read its clock outside a call");
  if (call.nowMs === undefined) {
    if (call.req.now_ms !== null && call.req.now_ms !== undefined) {
      call.nowMs = call.req.now_ms;
    } else {
      call.nowMs = stopWith(JSON.stringify({ id: call.req.id, time: true }));
    }
  }
  return call.nowMs;
}

function point(kind) {
  if (call === null || call.req.faults !== true) return;
  stopWith(JSON.stringify({ id: call.req.id, fault: kind, op: call.req.op, run: call.run }));
}

class Refusal extends Error {
  constructor(body) {
    super(body.code);
    this.body = body;
  }
}

const invalid = (op, run, reason) => new Refusal({ code: "invalid_payload", op, run, reason });

/** The open connection's store instance (undefined between connections). */
let store;

const toLease = (l) => (l === null || l === undefined ? undefined : { runId: l.run, owner: l.owner, epoch: l.epoch });
const fromLease = (l) => ({ run: l.runId, owner: l.owner, epoch: l.epoch });
const runOfRef = (ref) => ref.split("/", 1)[0];

function toMeta(meta, op) {
  if (Object.hasOwn(meta, "runId")) {
    throw invalid(op, meta.run_id, "a meta field named runId: the rulvar store keys its records by that name");
  }
  const { run_id: runId, ...rest } = meta;
  return { runId, ...rest };
}

function fromMeta(meta) {
  if (meta === undefined || meta === null) return null;
  const { runId, ...rest } = meta;
  return { run_id: runId, ...rest };
}

function exactSeq(entry, run) {
  if (isRawInteger(entry.seq)) throw invalid("append", run, "seq beyond 2^53: this store compares seqs as doubles");
  return entry;
}

const CALLS = {
  append: (r) => store.append(r.run, exactSeq(r.entry, r.run), toLease(r.lease)),
  load: (r) => store.load(r.run),
  put_meta: (r) => store.putMeta(toMeta(r.meta, "put_meta"), toLease(r.lease)),
  get_meta: async (r) => fromMeta(await store.getMeta(r.run)),
  list_runs: async (r) => {
    const f = r.filter ?? {};
    const filter = {
      status: f.status ?? undefined,
      statuses: f.statuses ?? undefined,
      tags: f.tags && f.tags.length > 0 ? f.tags : undefined,
      name: f.name ?? undefined,
    };
    return (await store.listRuns(filter)).map(fromMeta);
  },
  delete: (r) => store.delete(r.run, toLease(r.lease)),
  acquire: async (r) => fromLease(await store.acquire(r.run, r.owner)),
  renew: (r) => store.renew(toLease(r.lease)),
  release: (r) => store.release(toLease(r.lease)),
  put_blob: (r) => store.transcripts().put(r.ref, new Uint8Array(Buffer.from(r.hex, "hex")), toLease(r.lease)),
  get_blob: async (r) => {
    const bytes = await store.transcripts().get(r.ref);
    return bytes === null || bytes === undefined ? null : Buffer.from(bytes).toString("hex");
  },
  list_blobs: (r) => store.transcripts().list(r.run),
  delete_blob: (r) => store.transcripts().delete(r.ref, toLease(r.lease)),
};

/** The run a call targets (a blob's run is its ref's text before the first `/`). */
function targetOf(req) {
  if (req.op === "put_meta") return req.meta.run_id;
  if (req.op === "put_blob" || req.op === "delete_blob" || req.op === "get_blob") return runOfRef(req.ref);
  if (req.op === "renew" || req.op === "release") return req.lease.run;
  return req.run ?? null;
}

function liveOf(live) {
  return live === undefined || live === null ? null : { owner: live.owner, epoch: Number(live.epoch) };
}

/** The protocol's error object for what the store threw. */
function errorBody(e, op, req) {
  if (e instanceof Refusal) return e.body;
  const run = req === null ? null : targetOf(req);
  if (e?.code === "lease_held" && req !== null) {
    if (op === "acquire") {
      const held = liveOf(call?.live);
      return {
        code: "lease_held", op, lease: { run: req.run, owner: req.owner, epoch: 0 },
        rejection: held === null ? { kind: "stale", live: null } : { kind: "held_by", ...held },
      };
    }
    const lease = req.lease;
    if (lease.run !== run) return { code: "lease_held", op, lease, rejection: { kind: "run_mismatch", target: run } };
    return { code: "lease_held", op, lease, rejection: { kind: "stale", live: liveOf(call?.live) } };
  }
  if (e?.code === "journal_order_violation") return { code: "journal_order_violation", run, seq: req.entry.seq, tail: null };
  if (e?.code === "config") return { code: "config", message: String(e.message) };
  if (backend.isBusy(e)) return { code: "busy", op, run };
  return { code: "storage", op, message: `${e?.name ?? "Error"}: ${e?.message ?? String(e)}${run === null ? "" : ` run=${run}`}` };
}

/** The stored tail a refused append met, read after the refusal on this connection. */
async function tailOf(run) {
  const entries = await store.load(run);
  return entries.length === 0 ? null : entries[entries.length - 1].seq;
}

async function serve(line) {
  const req = parseExact(line);
  const handler = CALLS[req.op];
  call = { req, run: req.op === "renew" || req.op === "release" ? req.lease?.run : targetOf(req), live: undefined, nowMs: undefined };
  hub.setState(slot, SERVING);
  let text;
  try {
    if (store === undefined) throw new Refusal({ code: "config", message: "the connection is not open" });
    if (handler === undefined) throw new Refusal({ code: "config", message: `unknown op ${JSON.stringify(req.op)}` });
    if (req.op === "append" || req.op === "put_meta") {
      const key = repeatedKey(line);
      if (key !== null) throw invalid(req.op, targetOf(req), `the key ${JSON.stringify(key)} appears twice in one object`);
    }
    const ok = await handler(req);
    text = JSON.stringify({ id: req.id, ok: ok === undefined ? null : ok });
  } catch (e) {
    const body = errorBody(e, req.op, req);
    if (body.code === "journal_order_violation") body.tail = await tailOf(body.run);
    text = JSON.stringify({ id: req.id, error: body });
  } finally {
    call = null;
  }
  hub.setState(slot, IDLE);
  writeLine(1, text);
}

/** `open`: a store instance over `location`; the answer is the main thread's to write (it numbers
 * the connection), a refusal is written here. */
async function open({ id, location, ttl_ms: ttlMs }) {
  let opened;
  try {
    opened = await backend.open({ location, ttlMs, now });
    instrument(opened, backend, {
      seen: (live) => {
        if (call !== null) call.live = live;
      },
      point,
      inAcquire: () => call !== null && call.req.op === "acquire",
    });
  } catch (e) {
    if (opened !== undefined) await backend.close(opened);
    writeLine(1, JSON.stringify({ id, error: errorBody(e, "boot", null) }));
    hub.done(slot, OPEN_FAILED);
    return;
  }
  store = opened;
  hub.done(slot, OPEN_OK);
}

async function close() {
  const closing = store;
  store = undefined;
  if (closing !== undefined) await backend.close(closing);
  hub.done(slot, CLOSED);
}

// An asynchronous store's thread waits for its next command with its event loop turning, which
// this handle keeps from ending while the pool holds no socket.
if (!backend.sync) setInterval(() => {}, 1 << 30);

try {
  // Load the store's module first, so that an `open` finds this spare thread ready; a module that
  // does not load is reported by each open, as its refusal.
  await backend.load().catch(() => {});
  hub.done(slot, LOADED);
  for (;;) {
    // Between calls SQLite's store has nothing to run (its calls are synchronous): the thread
    // sleeps on its inbox. PostgreSQL's pool keeps its event loop turning (sockets, timers).
    const cmd = backend.sync ? hub.take(slot) : await hub.takeAsync(slot);
    if (cmd === CMD_CALL) {
      const line = hub.line(slot);
      hub.taken(slot);
      await serve(line);
    } else if (cmd === CMD_OPEN) {
      const args = JSON.parse(hub.mail());
      hub.taken(slot);
      await open(args);
    } else if (cmd === CMD_CLOSE) {
      hub.taken(slot);
      await close();
    } else if (cmd === CMD_EXIT) {
      hub.taken(slot);
      process.exit(0);
    } else {
      throw new Error(`unknown command ${cmd}`);
    }
  }
} catch (e) {
  die(`connection worker failed: ${e?.stack ?? e}`);
}
