//! Tests of the kill matrix's pool (`mutants/pool.mjs`): results in the items' order whatever
//! order they finish in, never more than its width at once, the lowest failure thrown, and no
//! item started after a failure.
import assert from "node:assert/strict";
import { test } from "node:test";
import { pool } from "../mutants/pool.mjs";

const later = (ms, value) => new Promise((resolve) => setTimeout(() => resolve(value), ms));

test("results keep the items' order, at most width at once", async () => {
  let running = 0;
  let most = 0;
  const items = [...Array(9).keys()];
  const out = await pool(items, 3, async (n) => {
    running += 1;
    most = Math.max(most, running);
    // The later items finish first.
    await later(30 - 3 * n, null);
    running -= 1;
    return n * n;
  });
  assert.deepEqual(out, items.map((n) => n * n));
  assert.equal(most, 3);
  assert.deepEqual(await pool([], 2, async () => 1), []);
});

test("the lowest failing index is thrown, and nothing starts after a failure", async () => {
  const started = [];
  const fail = async (n) => {
    started.push(n);
    if (n === 2 || n === 4) throw new Error(`item ${n}`);
    return n;
  };
  await assert.rejects(pool([...Array(20).keys()], 4, fail), /item 2/);
  started.length = 0;
  await assert.rejects(pool([...Array(20).keys()], 1, fail), /item 2/);
  assert.deepEqual(started, [0, 1, 2]);
  await assert.rejects(pool([1], 0, fail), RangeError);
});
