//! Tests of the adapters' JSON reading: exact integers in, repeated keys found.
import assert from "node:assert/strict";
import { test } from "node:test";
import { isRawInteger, parseExact, repeatedKey } from "../lib/json.mjs";

test("integers beyond 2^53 reach the store digit for digit", () => {
  const v = parseExact('{"a":9007199254740993,"b":-9223372036854775808,"c":1.5,"d":7,"e":1e300}');
  assert.ok(isRawInteger(v.a));
  assert.ok(isRawInteger(v.b));
  assert.equal(v.c, 1.5);
  assert.equal(v.d, 7);
  assert.equal(v.e, 1e300);
  assert.equal(JSON.stringify(v), '{"a":9007199254740993,"b":-9223372036854775808,"c":1.5,"d":7,"e":1e+300}');
});

test("a repeated key is found at any depth, and only within one object", () => {
  assert.equal(repeatedKey('{"seq":1,"kind":"k","seq":99}'), "seq");
  assert.equal(repeatedKey('{"a":{"x":1,"x":2}}'), "x");
  assert.equal(repeatedKey('{"a":{"x":1},"b":{"x":2}}'), null);
  assert.equal(repeatedKey('{"a":["x","x"],"b":"a"}'), null);
  assert.equal(repeatedKey('{"s":"\\"a\\":1,\\"a\\":2"}'), null);
  assert.equal(repeatedKey('{"\\u0061":1,"a":2}'), "a");
});
