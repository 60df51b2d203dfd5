//! The adapters' JSON reading: integers beyond 2^53 kept digit for digit, and objects with a
//! repeated key refused (a JavaScript object cannot hold both values, so the store would keep one
//! silently).

const INTEGER = /^-?(0|[1-9][0-9]*)$/;
const SIXTEEN_DIGITS = /[0-9]{16}/;

/**
 * Parses one protocol line. An integer literal that a double cannot hold exactly becomes a
 * `JSON.rawJSON` value, which `JSON.stringify` writes back digit for digit: what the adapter
 * hands the store is exactly what fencesim sent. (What the store does when it reads it back is
 * the store's business; see docs/real-stores.md, "Numbers".)
 */
export function parseExact(line) {
  // An integer literal of 15 digits or fewer is below 2^53: without a run of 16 digits anywhere
  // in the line (strings included), no value needs the reviver, which costs a call per value.
  if (!SIXTEEN_DIGITS.test(line)) return JSON.parse(line);
  return JSON.parse(line, (_key, value, context) => {
    if (typeof value === "number" && !Number.isSafeInteger(value) && context !== undefined
      && INTEGER.test(context.source)) {
      return JSON.rawJSON(context.source);
    }
    return value;
  });
}

/** True for a value `parseExact` kept as raw digits. */
export function isRawInteger(value) {
  return value !== null && typeof value === "object" && JSON.isRawJSON(value);
}

/**
 * The first key repeated within one object anywhere in `text` (a JSON document already known to
 * parse), or null. A linear scan that tracks strings and nesting only.
 */
export function repeatedKey(text) {
  const stack = [];
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x7b /* { */) {
      stack.push(new Set());
      i += 1;
    } else if (c === 0x5b /* [ */) {
      stack.push(null);
      i += 1;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
      i += 1;
    } else if (c === 0x22 /* " */) {
      let j = i + 1;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d === 0x5c /* \ */) j += 2;
        else if (d === 0x22) break;
        else j += 1;
      }
      const top = stack[stack.length - 1];
      if (top instanceof Set) {
        let k = j + 1;
        while (k < n && isSpace(text.charCodeAt(k))) k += 1;
        if (text.charCodeAt(k) === 0x3a /* : */) {
          const raw = text.slice(i + 1, j);
          const key = raw.includes("\\") ? JSON.parse(`"${raw}"`) : raw;
          if (top.has(key)) return key;
          top.add(key);
        }
      }
      i = j + 1;
    } else {
      i += 1;
    }
  }
  return null;
}

const isSpace = (c) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

/**
 * What the main thread routes a request line by, read from its bytes (`bytes[start, end)`, one
 * line without its newline) without parsing the rest: the top-level `op` (a string; `null` when
 * present but not a string; undefined when absent), `conn` and `id` and `now_ms` (numbers, as
 * `JSON.parse` reads them), `resume` (whether it is `true`). A later repeat of a key wins, as in
 * `JSON.parse`. Returns null when the line is not one JSON object, or when a top-level key or the
 * op is written with an escape: the caller then parses the line whole.
 */
export function routeOf(bytes, start, end) {
  const b = bytes;
  let i = skipSpace(b, start, end);
  if (b[i] !== 0x7b /* { */) return null;
  i = skipSpace(b, i + 1, end);
  const route = { op: undefined, conn: undefined, id: undefined, nowMs: undefined, resume: false };
  if (b[i] === 0x7d /* } */) return skipSpace(b, i + 1, end) === end ? route : null;
  for (;;) {
    if (b[i] !== 0x22 /* " */) return null;
    const keyStart = i + 1;
    i = skipString(b, i, end);
    if (i < 0) return null;
    const keyEnd = i - 1;
    i = skipSpace(b, i, end);
    if (b[i] !== 0x3a /* : */) return null;
    i = skipSpace(b, i + 1, end);
    const valueStart = i;
    i = skipValue(b, i, end);
    if (i < 0) return null;
    const valueEnd = i;
    const n = keyEnd - keyStart;
    if (hasBackslash(b, keyStart, keyEnd)) return null;
    if (n === 2 && b[keyStart] === 0x6f && b[keyStart + 1] === 0x70) {
      // "op"
      if (b[valueStart] !== 0x22) route.op = null;
      else if (hasBackslash(b, valueStart, valueEnd)) return null;
      else route.op = b.latin1Slice(valueStart + 1, valueEnd - 1);
    } else if (n === 4 && b[keyStart] === 0x63 && b.latin1Slice(keyStart, keyEnd) === "conn") {
      route.conn = numberOf(b, valueStart, valueEnd);
    } else if (n === 2 && b[keyStart] === 0x69 && b[keyStart + 1] === 0x64) {
      // "id"
      route.id = numberOf(b, valueStart, valueEnd);
    } else if (n === 6 && b[keyStart] === 0x6e && b.latin1Slice(keyStart, keyEnd) === "now_ms") {
      route.nowMs = numberOf(b, valueStart, valueEnd);
    } else if (n === 6 && b[keyStart] === 0x72 && b.latin1Slice(keyStart, keyEnd) === "resume") {
      route.resume = valueEnd - valueStart === 4 && b.latin1Slice(valueStart, valueEnd) === "true";
    }
    i = skipSpace(b, i, end);
    if (b[i] === 0x2c /* , */) {
      i = skipSpace(b, i + 1, end);
      continue;
    }
    if (b[i] === 0x7d /* } */) return skipSpace(b, i + 1, end) === end ? route : null;
    return null;
  }
}

function hasBackslash(b, from, to) {
  for (let i = from; i < to; i += 1) if (b[i] === 0x5c) return true;
  return false;
}

function skipSpace(b, i, end) {
  while (i < end && isSpace(b[i])) i += 1;
  return i;
}

/** From the opening quote at `i`: the index after the closing quote, or -1. */
function skipString(b, i, end) {
  i += 1;
  while (i < end) {
    const c = b[i];
    if (c === 0x5c) i += 2;
    else if (c === 0x22) return i + 1;
    else i += 1;
  }
  return -1;
}

/** From a value's first byte at `i`: the index after it, or -1 (nesting and strings skipped
 * whole; scalars end at the next delimiter, and `JSON.parse` judges them later). */
function skipValue(b, i, end) {
  const c = b[i];
  if (c === 0x22) return skipString(b, i, end);
  if (c === 0x7b || c === 0x5b) {
    let depth = 0;
    while (i < end) {
      const d = b[i];
      if (d === 0x22) {
        i = skipString(b, i, end);
        if (i < 0) return -1;
        continue;
      }
      if (d === 0x7b || d === 0x5b) depth += 1;
      else if (d === 0x7d || d === 0x5d) {
        depth -= 1;
        if (depth === 0) return i + 1;
      }
      i += 1;
    }
    return -1;
  }
  const from = i;
  while (i < end && b[i] !== 0x2c && b[i] !== 0x7d && b[i] !== 0x5d && !isSpace(b[i])) i += 1;
  return i === from ? -1 : i;
}

/** A scalar's value as `JSON.parse` reads it when it is a number; NaN for anything else. */
function numberOf(b, start, end) {
  const c = b[start];
  if (c !== 0x2d && (c < 0x30 || c > 0x39)) return Number.NaN;
  return Number(b.latin1Slice(start, end));
}
