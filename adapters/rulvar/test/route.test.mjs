//! Tests of the main thread's routing scan (`routeOf`): it reads what `JSON.parse` reads for the
//! fields it routes by, on every shape fencesim sends and on awkward ones; and of `parseExact`'s
//! fast path (no reviver when no integer can be beyond 2^53).
import assert from "node:assert/strict";
import { test } from "node:test";
import { isRawInteger, parseExact, routeOf } from "../lib/json.mjs";

/** `routeOf` over a line, as the main thread calls it (bytes of a larger buffer). */
function route(line) {
  const bytes = Buffer.from(`xx${line}\nyy`, "utf8");
  return routeOf(bytes, 2, 2 + Buffer.byteLength(line));
}

/** What a full parse says about the same fields. */
function parsed(line) {
  const req = JSON.parse(line);
  return {
    op: req.op === undefined ? undefined : typeof req.op === "string" ? req.op : null,
    conn: typeof req.conn === "number" ? req.conn : req.conn === undefined ? undefined : Number.NaN,
    id: typeof req.id === "number" ? req.id : req.id === undefined ? undefined : Number.NaN,
    nowMs: typeof req.now_ms === "number" ? req.now_ms : req.now_ms === undefined ? undefined : Number.NaN,
    resume: req.resume === true,
  };
}

test("routeOf reads what JSON.parse reads", () => {
  const lines = [
    '{"id":0,"op":"hello","protocol":1}',
    '{"id":1,"location":"/tmp/x y/\\"q\\"","op":"open","ttl_ms":1000}',
    '{"conn":3,"entry":{"kind":"turn","op":"nested","seq":5,"status":"ok","text":"a}b]c\\\\","x":[1,{"conn":9}]},"id":12,"lease":{"epoch":4,"owner":"w-1","run":"r1"},"now_ms":1733300000123,"op":"append","run":"r1"}',
    '{"conn":2,"faults":true,"id":13,"lease":null,"meta":{"run_id":"r1","status":"running","segments":0},"op":"put_meta"}',
    '{"id":12,"resume":true}',
    '{"id":12,"now_ms":1733300000123}',
    '{"id":12,"now_ms":-5}',
    '{"id":12,"resume":false}',
    '{ "op" : "load" , "conn" : 1 , "id" : 7 , "run" : "r" }',
    '{"op":"load","conn":1,"id":7,"conn":2}',
    '{"op":null,"conn":1,"id":7}',
    '{"op":"close","conn":"1","id":7}',
    '{"op":"x","conn":1.5e0,"id":7}',
    "{}",
  ];
  for (const line of lines) assert.deepEqual(route(line), parsed(line), line);
});

test("routeOf leaves escaped keys and broken lines to a full parse", () => {
  assert.equal(route('{"o\\u0070":"load","conn":1,"id":7}'), null);
  assert.equal(route('{"op":"lo\\u0061d","conn":1,"id":7}'), null);
  assert.equal(route('{"op":"load","conn":1'), null);
  assert.equal(route('{"op":"load"} x'), null);
  assert.equal(route("[1,2]"), null);
  assert.equal(route(""), null);
  assert.equal(route('{"op":"load",}'), null);
});

test("parseExact reads exactly with and without its reviver", () => {
  const plain = '{"a":900719925474099,"b":"1234567890123456","c":-0.5}';
  assert.deepEqual(parseExact(plain), JSON.parse(plain));
  const big = parseExact('{"a":9007199254740993,"b":123456789012345}');
  assert.ok(isRawInteger(big.a));
  assert.equal(big.b, 123456789012345);
  // Sixteen digits in a string take the slow path and read the same.
  const inString = '{"h":"abc1234567890123456","n":7}';
  assert.deepEqual(parseExact(inString), JSON.parse(inString));
});
