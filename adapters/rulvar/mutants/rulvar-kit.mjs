//! The kill matrix's `rulvar-kit` detector (matrix.mjs), run in a child Node process per copy of a
//! store: rulvar's own published conformance kit (`@rulvar/store-conformance`, pinned in
//! adapters/rulvar/package.json), its store suites that apply to a store, against fresh instances
//! of the store class the copy exports.
//!
//!     node adapters/rulvar/mutants/rulvar-kit.mjs --store sqlite|postgres --dir DIR
//!         [--check-timeout-s S] [--expiry-ttl-ms MS]
//!
//! The store module comes from FENCESIM_RULVAR_STORE_MODULE (the copy), loaded and constructed the
//! way the adapters do it (adapters/rulvar/lib/backends.mjs, `BACKENDS[store].open`): a fresh
//! location under DIR per factory call, which is a fresh SQLite file, or for PostgreSQL (under
//! FENCESIM_PG_URL) a fresh schema. The suites: journalStoreConformance,
//! leasableStoreConformance (main factory at the stores' default ttl, 60 s; its wall-clock expiry
//! check on a store of its own at `--expiry-ttl-ms`, default 1500), fencedWritesConformance and
//! fencedTranscriptsConformance (the store as the journal, its `transcripts()` as the transcript
//! store). A suite's `run()` stops at its first failing check, so each check of `suite.checks` is
//! run on its own, every one, bounded by `--check-timeout-s` (default 60).
//!
//! Output, one JSON object a line on stdout: `{"start":ID,"suite":NAME}` before a check, then
//! `{"suite","id","outcome","message","ms"}` with outcome `pass`, `fail`, `timeout`, or
//! `unavailable` (the check called a name fencesim's @rulvar/core stand-in does not provide:
//! rulvar's kernel, which is not published), and `{"done":true}` at the end. After each check its
//! stores are closed; at the end the PostgreSQL schemas it made are dropped and DIR is removed.

import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import {
  fencedTranscriptsConformance,
  fencedWritesConformance,
  journalStoreConformance,
  leasableStoreConformance,
} from "@rulvar/store-conformance";
import { BACKENDS, pgSchema, pgUrl } from "../lib/backends.mjs";

/** The message the stand-in's missing names throw with (core-stand-in/index.js). */
const NOT_PROVIDED = "is not provided by fencesim's @rulvar/core stand-in";
/** The stores' own default lease ttl: no scheduler stall crosses it inside a mandatory check. */
const MAIN_TTL_MS = 60_000;

function parseArgs(argv) {
  const o = { store: null, dir: null, checkTimeoutS: 60, expiryTtlMs: 1500 };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === "--store") o.store = value;
    else if (flag === "--dir") o.dir = value;
    else if (flag === "--check-timeout-s") o.checkTimeoutS = Number(value);
    else if (flag === "--expiry-ttl-ms") o.expiryTtlMs = Number(value);
    else throw new Error(`unknown argument '${flag}'`);
  }
  if (!(o.store in BACKENDS)) throw new Error(`--store must be sqlite or postgres, got '${o.store}'`);
  if (o.dir === null) throw new Error("--dir is required");
  if (!Number.isInteger(o.checkTimeoutS) || o.checkTimeoutS < 1) throw new Error("--check-timeout-s must be a positive whole number");
  if (!Number.isInteger(o.expiryTtlMs) || o.expiryTtlMs < 3) throw new Error("--expiry-ttl-ms must be a whole number of at least 3");
  return o;
}

const emit = (object) => process.stdout.write(`${JSON.stringify(object)}\n`);

/** A bounded wait: the promise's value, or `onTimeout` after `ms`. */
function within(promise, ms, onTimeout) {
  let timer;
  const limit = new Promise((resolve) => {
    timer = setTimeout(() => resolve(onTimeout), ms);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const backend = BACKENDS[o.store];
  // A matrix that died (SIGKILL) cannot stop this process: it stops itself once orphaned.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) process.exit(3);
  }, 1000).unref();
  // A mutant may leave a rejected promise nobody awaits (a check timed out, a store closed under
  // a pending call): reported, never fatal, so one check cannot take the others down.
  process.on("unhandledRejection", (e) => process.stderr.write(`rulvar-kit: unhandled rejection: ${e?.message ?? e}\n`));

  mkdirSync(o.dir, { recursive: true });
  const schemas = [];
  let opened = [];
  let made = 0;
  const fresh = async (ttlMs) => {
    made += 1;
    const location = join(o.dir, `store-${made}`);
    mkdirSync(location, { recursive: true });
    if (o.store === "postgres") schemas.push(pgSchema(location));
    const store = await backend.open({ location, ttlMs, now: undefined });
    opened.push(store);
    return store;
  };
  const main = () => fresh(MAIN_TTL_MS);
  const suites = [
    journalStoreConformance(main),
    leasableStoreConformance(main, { expiry: { ttlMs: o.expiryTtlMs, mk: () => fresh(o.expiryTtlMs) } }),
    fencedWritesConformance(main),
    fencedTranscriptsConformance(async () => {
      const store = await main();
      return { journal: store, transcripts: store.transcripts() };
    }),
  ];

  for (const suite of suites) {
    for (const check of suite.checks) {
      emit({ start: check.id, suite: suite.name });
      const started = Date.now();
      const result = await within(
        check.run().then(
          () => ({ outcome: "pass", message: "" }),
          (e) => {
            const message = String(e?.message ?? e);
            return { outcome: message.includes(NOT_PROVIDED) ? "unavailable" : "fail", message };
          },
        ),
        o.checkTimeoutS * 1000,
        { outcome: "timeout", message: `still running after --check-timeout-s ${o.checkTimeoutS}` },
      );
      emit({ suite: suite.name, id: check.id, ...result, message: result.message.slice(0, 400), ms: Date.now() - started });
      const closing = opened;
      opened = [];
      for (const store of closing) {
        await within(
          Promise.resolve()
            .then(() => backend.close(store))
            .catch(() => {}),
          5_000,
          undefined,
        );
      }
    }
  }

  if (schemas.length > 0) {
    const { default: pg } = await import("pg");
    const client = new pg.Client({ connectionString: pgUrl(process.env.FENCESIM_PG_URL) });
    try {
      await within(client.connect(), 10_000, undefined);
      for (const schema of schemas) await within(client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`), 10_000, undefined);
    } catch (e) {
      process.stderr.write(`rulvar-kit: could not drop the kit's schemas (${schemas.length}, fencesim_...): ${e?.message ?? e}\n`);
    } finally {
      await within(client.end().catch(() => {}), 5_000, undefined);
    }
  }
  rmSync(o.dir, { recursive: true, force: true });
  emit({ done: true });
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`rulvar-kit: ${e?.stack ?? e}\n`);
    process.exit(2);
  },
);
