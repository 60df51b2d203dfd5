//! Tests of the @rulvar/core stand-in: the error classes the adapters map to protocol codes, the
//! listing filter, the names that must refuse to answer, and that the names it exports are exactly
//! those the installed rulvar packages import.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import * as core from "./index.js";

/** The names the stand-in implements; every other export refuses to answer. */
const PROVIDED = ["ConfigError", "JournalOrderViolation", "LeaseHeldError", "metaMatchesFilter", "MAX_TIMER_DELAY_MS", "QUOTA_WINDOW_MS"];
/** Exports that are classes (constructed with `new`). */
const CLASSES = ["MemoryAdmissionScheduler", "Replayer", "ResolutionFold"];
/** The published packages whose imports from @rulvar/core the stand-in answers. */
const IMPORTERS = ["store-sqlite", "store-postgres", "store-conformance"];

test("error classes carry their protocol code and name", () => {
  for (const [Class, code] of [
    [core.ConfigError, "config"],
    [core.JournalOrderViolation, "journal_order_violation"],
    [core.LeaseHeldError, "lease_held"],
  ]) {
    const e = new Class("why");
    assert.ok(e instanceof Error);
    assert.equal(e.code, code);
    assert.equal(e.name, Class.name);
    assert.equal(e.message, "why");
  }
});

test("metaMatchesFilter: status and statuses match as either, empty statuses alone matches nothing", () => {
  const m = { runId: "r", status: "running", name: "wf", tags: ["a", "b"] };
  assert.equal(core.metaMatchesFilter(m, undefined), true);
  assert.equal(core.metaMatchesFilter(m, {}), true);
  assert.equal(core.metaMatchesFilter(m, { status: "running" }), true);
  assert.equal(core.metaMatchesFilter(m, { status: "ok" }), false);
  assert.equal(core.metaMatchesFilter(m, { status: "ok", statuses: ["running"] }), true);
  assert.equal(core.metaMatchesFilter(m, { statuses: [] }), false);
  assert.equal(core.metaMatchesFilter(m, { name: "wf" }), true);
  assert.equal(core.metaMatchesFilter(m, { name: "other" }), false);
});

test("metaMatchesFilter: every tag must be present", () => {
  const m = { runId: "r", status: "ok", tags: ["a", "b"] };
  assert.equal(core.metaMatchesFilter(m, { tags: [] }), true);
  assert.equal(core.metaMatchesFilter(m, { tags: ["a"] }), true);
  assert.equal(core.metaMatchesFilter(m, { tags: ["a", "c"] }), false);
  assert.equal(core.metaMatchesFilter({ runId: "r", status: "ok" }, { tags: ["a"] }), false);
});

test("every name it does not implement refuses to answer, saying so", () => {
  const refusing = Object.keys(core).filter((name) => !PROVIDED.includes(name));
  assert.ok(refusing.length > 0);
  for (const name of refusing) {
    if (CLASSES.includes(name)) {
      assert.equal(core[name].name, name);
      assert.throws(() => new core[name]({}), new RegExp(`^Error: ${name} is not provided by fencesim's @rulvar/core stand-in`));
    } else {
      assert.equal(typeof core[name], "function", name);
      assert.throws(() => core[name]({}), new RegExp(`^Error: ${name} is not provided by fencesim's @rulvar/core stand-in`));
    }
  }
  assert.equal(core.MAX_TIMER_DELAY_MS, 2 ** 31 - 1);
  assert.equal(core.QUOTA_WINDOW_MS, 60_000);
});

test("it exports exactly the names the installed rulvar packages import from @rulvar/core", (t) => {
  const modules = join(dirname(fileURLToPath(import.meta.url)), "../node_modules/@rulvar");
  const imported = new Set();
  for (const pkg of IMPORTERS) {
    const file = join(modules, pkg, "dist/index.js");
    if (!existsSync(file)) {
      t.skip(`${pkg} is not installed (npm ci in adapters/rulvar)`);
      return;
    }
    const text = readFileSync(file, "utf8");
    const lines = [...text.matchAll(/^import \{([^}]*)\} from "@rulvar\/core";$/gm)];
    assert.ok(lines.length > 0, `${pkg} imports nothing from @rulvar/core?`);
    for (const [, names] of lines) for (const name of names.split(",")) if (name.trim() !== "") imported.add(name.trim().split(/\s+as\s+/)[0]);
  }
  assert.deepEqual(Object.keys(core).sort(), [...imported].sort());
});
