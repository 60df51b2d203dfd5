//! The mutants of the kill matrix on rulvar's code (`matrix.mjs`): one small edit each to the
//! published build of @rulvar/store-sqlite or @rulvar/store-postgres (dist/index.js, 1.253.0),
//! each planting back a fencing bug of the kind fencesim's own planted defects stand for.
//!
//! An edit is `[find, replace]`: `find` a string or a regular expression (without the `g` flag),
//! which must match the file exactly once (else the package is not the one these edits were
//! written against, and the matrix stops: a harness error, never a verdict); `replace` is the
//! text put in its place (a string, `$` taken literally) or a function of the match. Nothing of
//! rulvar's code is kept in this repository beyond these fragments: the matrix copies the
//! installed file at test time and edits the copy.
//!
//! `worlds` are the scenarios a mutant is hunted in, in order (the matrix stops at the first that
//! catches it); `soak` says whether the real-process store soak is expected to reach it (the
//! matrix runs the soak on every mutant either way, and reports what it saw). `races: true` marks
//! a mutant whose only catches are races between real processes (the kit's concurrent boot, the
//! soak's): the matrix hunts it alone, after the others, so that no other hunt's load spreads the
//! racers out of each other's way.

/** Runs the mutation in place of the fence: the guarded write without its check. */
const UNFENCED = "((_lease, mutate) => mutate())";

export const MUTANTS = [
  {
    name: "check-outside-txn",
    story: "the fence check runs before the write transaction, not inside it (a takeover lands between check and write)",
    worlds: ["mid-call-takeover", "swarm"],
    sqlite: [
      [
        /fenced\(lease, mutate\) \{\n(\s*)this\.db\.exec\("BEGIN IMMEDIATE"\);\n(\s*)try \{\n\s*this\.assertFencing\(lease\);\n/,
        (_, a, b) => `fenced(lease, mutate) {\n${a}this.assertFencing(lease);\n${a}this.db.exec("BEGIN IMMEDIATE");\n${b}try {\n`,
      ],
    ],
    postgres: [
      [
        /\tfenced\(lease, mutate\) \{\n(\s*)return this\.withRunLock\(lease\.runId, async \(client\) => \{\n\s*await this\.assertFencing\(client, lease\);\n/,
        (_, a) =>
          `\tasync fenced(lease, mutate) {\n${a}await this.booted();\n${a}await this.assertFencing(this.pool, lease);\n${a}return this.withRunLock(lease.runId, async (client) => {\n`,
      ],
    ],
  },
  {
    name: "epoch-only-fence",
    story: "the fence compares the epoch only, not the owner (a forger at the live epoch writes)",
    worlds: ["zombie-probes"],
    sqlite: [["live.owner !== lease.owner || ", ""]],
    postgres: [["live.owner !== lease.owner || ", ""]],
  },
  {
    name: "expiry-instant-live",
    story: "a lease is live at its expiry instant (`<` for `<=`: contracts 9.1)",
    worlds: ["zombie-probes", "swarm"],
    sqlite: [["row.expires_at <= this.now()", "row.expires_at < this.now()"]],
    postgres: [["lease.expires_at <= this.now()", "lease.expires_at < this.now()"]],
  },
  {
    name: "renew-extends-old-expiry",
    story: "a renew adds the ttl to the old expiry rather than to now (a holder renewing early gains time, one renewing late stays expired)",
    worlds: ["long-turns", "zombie-probes", "swarm", "skewed-clocks"],
    sqlite: [
      [
        `"UPDATE leases SET expires_at = ? WHERE run_id = ? AND owner = ? AND epoch = ?").run(this.now() + this.ttlMs, l.runId`,
        `"UPDATE leases SET expires_at = expires_at + ? WHERE run_id = ? AND owner = ? AND epoch = ?").run(this.ttlMs, l.runId`,
      ],
    ],
    postgres: [
      [
        /SET expires_at = \$1(\s+WHERE run_id = \$2 AND owner = \$3 AND epoch = \$4`, \[\s+)this\.now\(\) \+ this\.ttlMs,/,
        (_, between) => `SET expires_at = expires_at + $1${between}this.ttlMs,`,
      ],
    ],
  },
  {
    name: "release-unfenced",
    story: "a release is not fenced: a stale or forged release resolves ok (deleting whatever row matches)",
    worlds: ["zombie-probes", "swarm"],
    sqlite: [[/async release\(l\) \{\n(\s*)this\.fenced\(l, /, (_, a) => `async release(l) {\n${a}${UNFENCED}(l, `]],
    postgres: [[/\trelease\(l\) \{\n(\s*)return this\.fenced\(l, /, (_, a) => `\trelease(l) {\n${a}return this.withRunLock(l.runId, `]],
  },
  {
    name: "blob-delete-unfenced",
    story: "a blob delete ignores its lease (a superseded holder deletes the live holder's checkpoint)",
    worlds: ["zombie-probes", "stale-checkpoint", "swarm"],
    sqlite: [[/this\.fenced\(lease, \(\) => \{\n(\s*)deleteBlob\(ref\);/, (_, a) => `${UNFENCED}(lease, () => {\n${a}deleteBlob(ref);`]],
    postgres: [
      [
        "await this.fenced(lease, (client) => deleteBlob(client, ref));",
        "await this.withRunLock(lease.runId, (client) => deleteBlob(client, ref));",
      ],
    ],
  },
  {
    name: "delete-drops-tombstone",
    story: "a run's delete drops its epoch tombstone (the recreated run's epochs start over: a zombie of the old run is live again)",
    worlds: ["zombie-probes", "stale-retention", "swarm"],
    sqlite: [
      [
        `this.db.prepare("DELETE FROM leases WHERE run_id = ?").run(runId);`,
        `this.db.prepare("DELETE FROM leases WHERE run_id = ?").run(runId);\n\t\tthis.db.prepare("DELETE FROM epochs WHERE run_id = ?").run(runId);`,
      ],
    ],
    postgres: [
      [
        'await client.query(`DELETE FROM ${this.table("leases")} WHERE run_id = $1`, [runId]);',
        'await client.query(`DELETE FROM ${this.table("leases")} WHERE run_id = $1`, [runId]);\n\t\tawait client.query(`DELETE FROM ${this.table("epochs")} WHERE run_id = $1`, [runId]);',
      ],
    ],
  },
  {
    name: "list-blobs-prefix",
    story: "a blob listing matches refs by prefix (`LIKE 'run%'` for `run_id =`): listing r1 lists r10's blobs",
    worlds: ["look-alikes"],
    sqlite: [
      [
        `"SELECT ref FROM blobs WHERE run_id = ? AND ref <> run_id ORDER BY ref"`,
        `"SELECT ref FROM blobs WHERE ref LIKE ? || '%' AND ref <> run_id ORDER BY ref"`,
      ],
    ],
    postgres: [["WHERE run_id = $1 AND ref <> run_id ORDER BY ref", "WHERE ref LIKE $1::text || '%' AND ref <> run_id ORDER BY ref"]],
  },
  {
    name: "no-boot-retry",
    races: true,
    story: "two processes creating the schema at once are not serialized (sqlite: the boot's busy retry loop removed; postgres: the boot's advisory lock removed)",
    worlds: ["boot-storm"],
    sqlite: [["if (!isSqliteBusy$1(thrown) || wallClock$2() > bootDeadline) throw thrown;", "throw thrown;"]],
    postgres: [
      [
        /\n\s*await client\.query\("SELECT pg_advisory_xact_lock\(hashtextextended\(\$1, \$2\)\)", \[`rulvar-boot:\$\{this\.schema\}`, LOCK_SEED\$1\]\);/,
        "",
      ],
    ],
  },
  {
    name: "seq-guard-by-count",
    story: "the append guard compares the seq with the journal's entry count, not its tail seq (after a gap, a seq at or below the tail is accepted)",
    worlds: ["look-alikes"],
    sqlite: [
      [
        `WHERE NOT EXISTS (SELECT 1 FROM entries WHERE run_id = ? AND CAST(json_extract(payload, '$.seq') AS INTEGER) >= ?)"`,
        `WHERE (SELECT count(*) FROM entries WHERE run_id = ?) < ?"`,
      ],
    ],
    postgres: [
      [
        /WHERE NOT EXISTS \(\s*SELECT 1 FROM \$\{this\.table\("entries"\)\}\s*WHERE run_id = \$1 AND \(\(payload::jsonb ->> 'seq'\)\)::numeric >= \$3\)/,
        'WHERE (SELECT count(*) FROM ${this.table("entries")} WHERE run_id = $1) < $3',
      ],
    ],
  },
  {
    name: "put-meta-unfenced",
    story: "a meta write ignores its lease (a superseded holder's terminal meta lands)",
    worlds: ["stale-settle", "zombie-probes"],
    sqlite: [[/this\.fenced\(lease, \(\) => \{\n(\s*)this\.upsertMeta\(m\);/, (_, a) => `${UNFENCED}(lease, () => {\n${a}this.upsertMeta(m);`]],
    postgres: [
      [
        "await this.fenced(lease, (client) => this.upsertMeta(client, m));",
        "await this.withRunLock(m.runId, (client) => this.upsertMeta(client, m));",
      ],
    ],
  },
  {
    name: "acquire-skips-live-check",
    story: "an acquire does not look for a live lease: it takes the run from its live holder",
    worlds: ["swarm", "mid-call-takeover"],
    sqlite: [["if (live !== void 0) throw new LeaseHeldError(`run '${runId}' is leased by", "if (false) throw new LeaseHeldError(`run '${runId}' is leased by"]],
    postgres: [["if (live !== void 0) throw new LeaseHeldError(`run '${runId}' is leased by", "if (false) throw new LeaseHeldError(`run '${runId}' is leased by"]],
  },
  {
    name: "no-run-match",
    story: "a lease of one run guards writes to another (the run-match check dropped)",
    worlds: ["zombie-probes"],
    sqlite: [["if (lease.runId !== runId) throw new LeaseHeldError(`lease for run", "if (false) throw new LeaseHeldError(`lease for run"]],
    postgres: [["if (lease.runId !== runId) throw new LeaseHeldError(`lease for run", "if (false) throw new LeaseHeldError(`lease for run"]],
  },
  {
    name: "epoch-not-incremented",
    story: "a takeover is granted the epoch of the lease it replaces (the epoch is not incremented)",
    worlds: ["swarm", "zombie-probes"],
    sqlite: [[`.get(runId)?.epoch ?? 0) + 1;`, `.get(runId)?.epoch ?? 1);`]],
    postgres: [["Number(prior[0]?.epoch ?? 0) + 1;", "Number(prior[0]?.epoch ?? 1);"]],
  },
  {
    name: "renew-unfenced",
    story: "a renew is not fenced: an expired lease nobody took over is renewed back to life, a stale renew resolves ok",
    worlds: ["zombie-probes", "swarm"],
    sqlite: [[/async renew\(l\) \{\n(\s*)this\.fenced\(l, /, (_, a) => `async renew(l) {\n${a}${UNFENCED}(l, `]],
    postgres: [[/\trenew\(l\) \{\n(\s*)return this\.fenced\(l, /, (_, a) => `\trenew(l) {\n${a}return this.withRunLock(l.runId, `]],
  },
  {
    name: "delete-keeps-lease",
    story: "a run's delete keeps its lease row (the purged run's holder still holds it; the recreator is refused)",
    worlds: ["zombie-probes", "stale-retention"],
    sqlite: [[/\n\s*this\.db\.prepare\("DELETE FROM leases WHERE run_id = \?"\)\.run\(runId\);/, ""]],
    postgres: [[/\n\s*await client\.query\(`DELETE FROM \$\{this\.table\("leases"\)\} WHERE run_id = \$1`, \[runId\]\);/, ""]],
  },
];
