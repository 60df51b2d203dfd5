//! The two published rulvar stores as the adapter sees them: how one is opened over a location
//! fencesim made (and, for SQLite, how its connections commit), which of its errors mean `busy`,
//! and where its fault points are.
//!
//! Fault points and the live lease a refusal names are taken at the stores' own seams, without
//! changing what they do: `liveLease` (the lease row read inside the write lock) and
//! `assertFencing` (the fence check, inside the same transaction as the mutation that follows).
//! Both are methods of the store object in the published build; the adapter wraps them on each
//! instance, calling the store's own code and only observing the result.

import { createHash } from "node:crypto";
import { join } from "node:path";

/** The module each backend imports the store from; a mutant run points it at a copy. */
function storeModule(defaultName) {
  return process.env.FENCESIM_RULVAR_STORE_MODULE || defaultName;
}

/** The schema a location's data lives in, on the server FENCESIM_PG_URL names: one per location. */
export function pgSchema(location) {
  return `fencesim_${createHash("sha256").update(location).digest("hex").slice(0, 24)}`;
}

/**
 * The connection string the Postgres store is given: the user's, with a lock timeout, so that a
 * call waiting for a run's advisory lock held by a call paused at a fault point answers `busy`
 * instead of waiting for ever (docs/real-stores.md, "PostgreSQL").
 */
export function pgUrl(base) {
  const timeout = encodeURIComponent(`-c lock_timeout=${process.env.FENCESIM_PG_LOCK_TIMEOUT_MS || "250"}`);
  return `${base}${base.includes("?") ? "&" : "?"}options=${timeout}`;
}

/**
 * Whether the SQLite store's commits wait for an fsync (`synchronous=FULL`, what `node:sqlite`
 * opens with). Off unless FENCESIM_RULVAR_FSYNC=1: every failure fencesim injects is a process
 * death (a world's crash, the soak's SIGKILL), never a power cut, and what a commit wrote reaches
 * the OS either way; fencesim's own file worlds and soak writers commit the same way
 * (`without_fsync`). Locks, the WAL, checkpoints and every statement of the store are unchanged.
 * With an fsync per commit a fenced write took 5 ms on this project's machines.
 *
 * The store's boot (its schema, a dozen commits, in its constructor) keeps the syncs, as users run
 * it: 30 to 130 ms, once per location. Without them it took 1.4 ms, and the kit's boot race (B2)
 * then met no busy lock in 7 of 20 rounds on this project's machine (the matrix's no-boot-retry
 * row, whose store has no boot retry, was missed by a CI run); with them, in none of 20.
 */
const FSYNC = process.env.FENCESIM_RULVAR_FSYNC === "1";

/**
 * Whether a connection reuses the statements it prepared, by their SQL text. rulvar's store
 * prepares every statement on every call (`this.db.prepare(sql).run(...)`), and the prepare was
 * most of a call's time: in-process on this project's loaded machine an append took 345 us, 131 us
 * with reuse (putMeta 255 and 88, renew 138 and 43). Every statement the store runs is the one it
 * prepared, with its parameters; node:sqlite resets a statement when `run`, `get` or `all` return
 * (the store uses no other way to step one, and nothing reenters the driver mid-statement), and
 * SQLite re-prepares a reused statement by itself when the schema changed. Off with
 * FENCESIM_RULVAR_REUSE_STATEMENTS=0.
 */
const REUSE = process.env.FENCESIM_RULVAR_REUSE_STATEMENTS !== "0";
/** Statements kept a connection: the store's SQL texts are a few dozen (a listing's vary with its
 * filter's fields); past this many, new texts are prepared each time as the store asks. */
const REUSE_MAX = 256;

/** True while this thread runs a store's constructor (the SQLite store's is synchronous). */
let booting = false;

/**
 * The `node:sqlite` connection as the adapter runs it: unless FSYNC, each turns commit syncs off
 * before its first statement after the store's constructor (which boots the schema with the syncs
 * on); unless REUSE is off, `prepare` hands back the statement it prepared before for the same
 * text. Only the connection's setting and the statements' lifetime change; every statement the
 * store runs is its own.
 */
async function driverSettings() {
  const { DatabaseSync } = await import("node:sqlite");
  const synced = new WeakSet();
  const statements = new WeakMap();
  const { exec, prepare } = DatabaseSync.prototype;
  const unsync = (db) => {
    if (!FSYNC && !booting && !synced.has(db)) {
      synced.add(db);
      exec.call(db, "PRAGMA synchronous = OFF");
    }
  };
  DatabaseSync.prototype.exec = function (...args) {
    unsync(this);
    return exec.apply(this, args);
  };
  DatabaseSync.prototype.prepare = function (sql, ...rest) {
    unsync(this);
    if (!REUSE || typeof sql !== "string" || rest.length > 0) return prepare.call(this, sql, ...rest);
    let kept = statements.get(this);
    if (kept === undefined) statements.set(this, (kept = new Map()));
    let statement = kept.get(sql);
    if (statement === undefined) {
      statement = prepare.call(this, sql);
      if (kept.size < REUSE_MAX) kept.set(sql, statement);
    }
    return statement;
  };
}

let sqliteModule;

export const BACKENDS = {
  sqlite: {
    name: "rulvar-sqlite",
    /** The store's module (a spare worker loads it before its first open). */
    load() {
      sqliteModule ??= driverSettings().then(() => import(storeModule("@rulvar/store-sqlite")));
      return sqliteModule;
    },
    async open({ location, ttlMs, now }) {
      const { SqliteStore } = await BACKENDS.sqlite.load();
      booting = true;
      try {
        return new SqliteStore({ path: join(location, "store.db"), ttlMs, now });
      } finally {
        booting = false;
      }
    },
    sync: true,
    /** node:sqlite reports SQLITE_BUSY (5) and SQLITE_LOCKED (6), extended codes in the high bits. */
    isBusy(e) {
      return typeof e?.errcode === "number" && [5, 6].includes(e.errcode & 0xff);
    },
    async close(store) {
      store.close();
    },
  },
  postgres: {
    name: "rulvar-postgres",
    load: () => import(storeModule("@rulvar/store-postgres")),
    async open({ location, ttlMs, now }) {
      const base = process.env.FENCESIM_PG_URL;
      if (!base) throw new Error("FENCESIM_PG_URL is not set: the Postgres adapter needs a server (scripts/pg-cluster starts one)");
      const { PostgresStore } = await BACKENDS.postgres.load();
      return new PostgresStore({ url: pgUrl(base), schema: pgSchema(location), ttlMs, now, max: 2 });
    },
    sync: false,
    /** lock_not_available (the lock timeout above), deadlock, serialization failure, cancelled. */
    isBusy(e) {
      return ["55P03", "40P01", "40001", "57014"].includes(e?.code);
    },
    async close(store) {
      await store.close();
    },
  },
};

/**
 * Wraps the store's lease seams on this instance. `seen(live)` is told every live lease read
 * (undefined for none); `point(kind)` is called at `fence_checked` (the check passed, nothing
 * written) and `acquire_checked` (an acquire found no live lease, none written yet).
 */
export function instrument(store, backend, { seen, point, inAcquire }) {
  const proto = Object.getPrototypeOf(store);
  for (const method of ["liveLease", "assertFencing"]) {
    if (typeof proto[method] !== "function") {
      throw new Error(`the store has no ${method} method: this adapter knows rulvar 1.253.0's seams only`);
    }
  }
  if (backend.sync) {
    store.liveLease = function liveLease(...args) {
      const live = proto.liveLease.apply(this, args);
      seen(live);
      if (live === undefined && inAcquire()) point("acquire_checked");
      return live;
    };
    store.assertFencing = function assertFencing(...args) {
      proto.assertFencing.apply(this, args);
      point("fence_checked");
    };
  } else {
    store.liveLease = async function liveLease(...args) {
      const live = await proto.liveLease.apply(this, args);
      seen(live);
      if (live === undefined && inAcquire()) point("acquire_checked");
      return live;
    };
    store.assertFencing = async function assertFencing(...args) {
      await proto.assertFencing.apply(this, args);
      point("fence_checked");
    };
  }
}
