//! The memory an adapter process's threads share, and the main thread's reading of fencesim's
//! requests into it. Nothing on a call's path goes through `postMessage`: the main thread reads a
//! request line into the shared input buffer, routes it by a scan of its top-level fields
//! (`json.mjs`, `routeOf`), writes its bounds into the slot of its connection's worker and wakes
//! that worker (one futex wake), and reads on; the worker decodes the line from the same memory,
//! serves it and writes its answer (or its fault stop, or its ask for the time) straight to stdout.
//!
//! The protocol alternates: fencesim sends a line only once it read the adapter's line for the
//! one before. So at most one worker runs a call at a time, only it writes to stdout meanwhile,
//! and a line the main thread handed over is decoded before the next one arrives. (A client that
//! writes requests without waiting is served in order all the same: the main thread waits for a
//! worker to take its last line before it hands it another or reuses the buffer under it.)
//!
//! Two SharedArrayBuffers. The control block, of a fixed size: a header of 32-bit words (the input
//! buffer's bounds) and one block per worker slot (its inbox, stop and state words, the
//! connection it serves, the bounds of the line handed to it, the time fencesim sent it, the
//! request it is stopped in, the result of an open or close), then a mail area (an `open`'s
//! arguments). And the input buffer, 64 MiB of address space of which a request touches only its
//! own pages (fencesim's answers stop at 64 MiB too; lines follow one another through its first
//! MiB, then start again at its front). Neither grows: V8 reads a view of a growable
//! buffer through a slower path at every element (a fifth of the routing's time, measured).
//!
//! Every wait re-checks its word: V8's `Atomics.wait` returned "ok" with the word unchanged about
//! once in 50,000 calls on this project's machines.

import { readSync, writeSync } from "node:fs";
import { isMainThread } from "node:worker_threads";

// Header words.
const IN_START = 0; // the input buffer's unread bytes: [IN_START, IN_END)
const IN_END = 1;
const IN_EOF = 2; // 1 once stdin ended
const MAIL_LEN = 3; // the mail's byte length
const HEADER_WORDS = 4;

// Slot words: SLOT_WORDS words a slot, the last four holding two doubles.
const INBOX = 0; // a command for the worker (CMD_*); 0 once it took it
const STOP = 1; // 0 while a stopped call waits; 1 once the main thread passed it its resume or time
const STATE = 2; // IDLE, SERVING or STOPPED
const DONE = 3; // a new worker loaded its store (LOADED), an open or close finished (OPEN_OK, OPEN_FAILED, CLOSED)
const LINE_START = 4; // the line handed over with CMD_CALL: [LINE_START, LINE_END) of the input
const LINE_END = 5;
const TIME = 8; // (double) the time fencesim sent a stopped call
const STOPPED_ID = 10; // (double) the request the worker is stopped in
const SLOT_WORDS = 12;

export const MAX_SLOTS = 1024;

export const CMD_CALL = 1;
export const CMD_OPEN = 2;
export const CMD_CLOSE = 3;
export const CMD_EXIT = 4;

export const IDLE = 0;
export const SERVING = 1;
export const STOPPED = 2;

export const OPEN_OK = 1;
export const OPEN_FAILED = 2;
export const CLOSED = 3;
export const LOADED = 4;

const SLOTS_AT = HEADER_WORDS * 4;
const MAIL_AT = SLOTS_AT + MAX_SLOTS * SLOT_WORDS * 4;
const MAIL_BYTES = 64 * 1024;
export const MAX_LINE_BYTES = 64 * 1024 * 1024;
/** Lines are read one after another until this far into the input buffer, then from its front. */
const WRAP_AT = 1024 * 1024;

/** The shared memory of a new adapter process. */
export function newMemory() {
  return { control: new SharedArrayBuffer(MAIL_AT + MAIL_BYTES), input: new SharedArrayBuffer(MAX_LINE_BYTES) };
}

const nap = new Int32Array(new SharedArrayBuffer(4));

/**
 * Write `text` and a newline to `fd` (1: fencesim's stdout; 2: the log), whole, from any thread.
 * No thread touches `process.stdout`, whose pipe handle writes through the main thread's event
 * loop and sets the pipe non-blocking; a fd non-blocking already is retried after a short nap.
 */
export function writeLine(fd, text) {
  const bytes = Buffer.from(`${text}\n`, "utf8");
  let at = 0;
  while (at < bytes.length) {
    try {
      at += writeSync(fd, bytes, at, bytes.length - at);
    } catch (e) {
      if (e.code !== "EAGAIN") throw e;
      Atomics.wait(nap, 0, 0, 1);
    }
  }
}

/** The adapter failed (not a store call, which is answered): say why on stderr and end the
 * process. A worker cannot exit the process itself, and the main thread may be blocked reading. */
export function die(message) {
  writeLine(2, `rulvar adapter: ${message}`);
  if (isMainThread) process.exit(2);
  process.kill(process.pid, "SIGTERM");
}

export class Hub {
  constructor(memory) {
    this.w = new Int32Array(memory.control, 0, MAIL_AT >> 2);
    this.f = new Float64Array(memory.control, 0, MAIL_AT >> 3);
    this.mailBuf = Buffer.from(memory.control, MAIL_AT, MAIL_BYTES);
    this.buf = Buffer.from(memory.input, 0, MAX_LINE_BYTES);
    /** Main thread: slots handed a line they may not have decoded yet. */
    this.handed = new Set();
  }

  at(slot, field) {
    return (SLOTS_AT >> 2) + slot * SLOT_WORDS + field;
  }

  /** Wait until word `at` is no longer `value` (a wakeup that finds it unchanged waits again). */
  waitWhile(at, value, ms = undefined) {
    while (Atomics.load(this.w, at) === value) Atomics.wait(this.w, at, value, ms);
  }

  async waitWhileAsync(at, value) {
    while (Atomics.load(this.w, at) === value) {
      const waiting = Atomics.waitAsync(this.w, at, value);
      if (waiting.async) await waiting.value;
    }
  }

  /** Main thread: a slot given to a new worker, its last worker's words cleared. */
  clear(slot) {
    for (let i = 0; i < SLOT_WORDS; i += 1) this.w[this.at(slot, 0) + i] = 0;
  }

  state(slot) {
    return Atomics.load(this.w, this.at(slot, STATE));
  }

  setState(slot, state) {
    Atomics.store(this.w, this.at(slot, STATE), state);
  }

  // -- The main thread's side --

  /** Hand `slot` a command; for CMD_CALL the line at [start, end) of the input. */
  command(slot, cmd, start = 0, end = 0) {
    const inbox = this.at(slot, INBOX);
    // The worker took its last command (fencesim waits for each answer; a client that does not
    // gets its requests served in order all the same).
    while (Atomics.load(this.w, inbox) !== 0) {
      if (this.state(slot) === STOPPED) die("a request for a connection whose call is stopped");
      Atomics.wait(this.w, inbox, Atomics.load(this.w, inbox), 10);
    }
    this.w[this.at(slot, LINE_START)] = start;
    this.w[this.at(slot, LINE_END)] = end;
    if (cmd === CMD_CALL) this.handed.add(slot);
    Atomics.store(this.w, inbox, cmd);
    Atomics.notify(this.w, inbox);
  }

  /** Whether `slot`'s worker is stopped in request `id`. */
  isStoppedIn(slot, id) {
    return this.state(slot) === STOPPED && this.f[this.at(slot, STOPPED_ID) >> 1] === id;
  }

  /** Pass a stopped worker its resume (nowMs undefined) or its time. */
  wake(slot, nowMs) {
    if (nowMs !== undefined) this.f[this.at(slot, TIME) >> 1] = nowMs;
    const stop = this.at(slot, STOP);
    Atomics.store(this.w, stop, 1);
    Atomics.notify(this.w, stop);
  }

  /** An `open`'s arguments, for the worker it opens on. */
  setMail(text) {
    const bytes = Buffer.from(text, "utf8");
    if (bytes.length > MAIL_BYTES) throw new Error(`an open's arguments over ${MAIL_BYTES} bytes`);
    bytes.copy(this.mailBuf, 0);
    this.w[MAIL_LEN] = bytes.length;
  }

  /** Wait for a new worker's load, an open or a close to finish; returns what the worker said. A
   * worker that says nothing in `ms` (one whose module failed to load: its error event needs the
   * event loop this thread is blocking) ends the process, naming what it was `doing`. */
  waitDone(slot, doing = "an open or close", ms = 120_000) {
    const at = this.at(slot, DONE);
    const deadline = performance.now() + ms;
    while (Atomics.load(this.w, at) === 0) {
      const left = deadline - performance.now();
      if (left <= 0) die(`the connection worker of slot ${slot} did not finish ${doing} in ${ms} ms`);
      Atomics.wait(this.w, at, 0, left);
    }
    const what = Atomics.load(this.w, at);
    Atomics.store(this.w, at, 0);
    return what;
  }

  /** The next line's bounds in `buf` (without its newline), or null at the end of input. */
  nextLine() {
    const w = this.w;
    for (;;) {
      const start = w[IN_START];
      const end = w[IN_END];
      if (start < end) {
        // Bounded: past `end` are the stale bytes of earlier lines.
        const at = this.buf.subarray(start, end).indexOf(10);
        if (at !== -1) {
          w[IN_START] = start + at + 1;
          return [start, start + at];
        }
      }
      if (w[IN_EOF] === 1) {
        if (start === end) return null;
        w[IN_START] = end;
        return [start, end];
      }
      if (end >= WRAP_AT) {
        // Back to the front of the buffer. What is there may be lines handed over: each must have
        // been taken (decoded) first. (Lines follow one another through the first MiB, so this
        // happens once every few thousand lines, long after they were taken.)
        for (const slot of this.handed) this.waitWhile(this.at(slot, INBOX), CMD_CALL, 10);
        this.handed.clear();
        if (start > 0) {
          this.buf.copy(this.buf, 0, start, end);
          w[IN_END] = end - start;
          w[IN_START] = 0;
        } else if (end === MAX_LINE_BYTES) {
          die(`a request line over ${MAX_LINE_BYTES} bytes`);
        }
      }
      const from = w[IN_END];
      let n;
      try {
        n = readSync(0, this.buf, from, MAX_LINE_BYTES - from, null);
      } catch (e) {
        if (e.code === "EAGAIN") {
          Atomics.wait(nap, 0, 0, 1);
          continue;
        }
        if (e.code !== "EOF") throw e;
        n = 0;
      }
      if (n === 0) w[IN_EOF] = 1;
      w[IN_END] += n;
    }
  }

  // -- A worker's side --

  /** Wait for a command, blocking the thread; returns it. */
  take(slot) {
    const inbox = this.at(slot, INBOX);
    this.waitWhile(inbox, 0);
    return Atomics.load(this.w, inbox);
  }

  /** The same with the thread's event loop turning meanwhile (the caller keeps the loop alive: a
   * pending `waitAsync` does not). */
  async takeAsync(slot) {
    const inbox = this.at(slot, INBOX);
    await this.waitWhileAsync(inbox, 0);
    return Atomics.load(this.w, inbox);
  }

  /** The command is done with (for CMD_CALL: its line decoded, `line`); the inbox is free. (The
   * main thread waits for that only with a client that does not wait for answers, in 10 ms
   * naps: no wakeup is owed.) */
  taken(slot) {
    Atomics.store(this.w, this.at(slot, INBOX), 0);
  }

  /** The line handed over with CMD_CALL, as text. */
  line(slot) {
    return this.buf.toString("utf8", this.w[this.at(slot, LINE_START)], this.w[this.at(slot, LINE_END)]);
  }

  mail() {
    return this.mailBuf.toString("utf8", 0, this.w[MAIL_LEN]);
  }

  done(slot, what) {
    const at = this.at(slot, DONE);
    Atomics.store(this.w, at, what);
    Atomics.notify(this.w, at);
  }

  /** Mark this worker stopped in request `id` (before telling fencesim so). */
  stop(slot, id) {
    this.f[this.at(slot, STOPPED_ID) >> 1] = id;
    Atomics.store(this.w, this.at(slot, STOP), 0);
    this.setState(slot, STOPPED);
  }

  /** Wait, stopped, until the main thread passes the resume or the time; returns the time. */
  waitWoken(slot) {
    this.waitWhile(this.at(slot, STOP), 0);
    this.setState(slot, SERVING);
    return this.f[this.at(slot, TIME) >> 1];
  }
}
