//! fencesim's stand-in for `@rulvar/core`, which rulvar does not publish: the names its published
//! stores and its published conformance kit (`@rulvar/store-conformance`) import, and no more
//! (README.md lists them and why). Written from their imports and documented behaviour; no rulvar
//! source is copied here.

/** The longest delay a Node timer honours (2^31 - 1 ms); the Postgres store bounds options by it. */
export const MAX_TIMER_DELAY_MS = 2147483647;
/** The quota window the stores' limiters account in (one minute); unused by fencesim. */
export const QUOTA_WINDOW_MS = 60000;

class RulvarError extends Error {
  constructor(message, code) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}

/** Bad options (a ttl out of range, an empty url): thrown before anything is opened. */
export class ConfigError extends RulvarError {
  constructor(message) {
    super(message, "config");
  }
}

/** An append whose seq is not above the stored tail (the journal's order guard). */
export class JournalOrderViolation extends RulvarError {
  constructor(message) {
    super(message, "journal_order_violation");
  }
}

/** A lease that is not (or no longer) the live holder, or an acquire that met a live lease. */
export class LeaseHeldError extends RulvarError {
  constructor(message) {
    super(message, "lease_held");
  }
}

/**
 * Whether a run record matches a listing filter: `status` and `statuses` match as "either" (an
 * empty `statuses` alone matches nothing), `name` exactly, and every tag in `tags` must be among
 * the record's tags. An absent filter, or absent fields, match everything.
 */
export function metaMatchesFilter(meta, filter) {
  if (filter === undefined || filter === null) return true;
  if (filter.status !== undefined || filter.statuses !== undefined) {
    const wanted = [...(filter.status === undefined ? [] : [filter.status]), ...(filter.statuses ?? [])];
    if (!wanted.includes(meta.status)) return false;
  }
  if (filter.name !== undefined && meta.name !== filter.name) return false;
  if (filter.tags !== undefined) {
    const have = Array.isArray(meta.tags) ? meta.tags : [];
    if (!filter.tags.every((tag) => have.includes(tag))) return false;
  }
  return true;
}

/**
 * A name the stand-in does not provide: a function that throws, saying so, when called (and, for
 * classes, `NotProvidedClass`, whose constructor throws). fencesim never drives what needs them, so
 * a silent wrong answer is impossible; they exist because an ES module's named imports must resolve.
 */
function notProvided(name, why) {
  return () => {
    throw new Error(`${name} is not provided by fencesim's @rulvar/core stand-in (${why})`);
  };
}
function notProvidedClass(name, why) {
  const Class = class {
    constructor() {
      notProvided(name, why)();
    }
  };
  Object.defineProperty(Class, "name", { value: name });
  return Class;
}

/** The quota and admission names the stores' limiters (and the kit's quota suite) import. */
const QUOTA = "fencesim drives no quota limiter";
export const mergeQuotaDenial = notProvided("mergeQuotaDenial", QUOTA);
export const quotaActualRequestsDelta = notProvided("quotaActualRequestsDelta", QUOTA);
export const quotaActualTokens = notProvided("quotaActualTokens", QUOTA);
export const quotaEstimateTokens = notProvided("quotaEstimateTokens", QUOTA);
export const quotaRuleAdmission = notProvided("quotaRuleAdmission", QUOTA);
export const quotaRuleKey = notProvided("quotaRuleKey", QUOTA);
export const quotaRuleMatches = notProvided("quotaRuleMatches", QUOTA);
export const snapshotQuotaRules = notProvided("snapshotQuotaRules", QUOTA);
export const MemoryAdmissionScheduler = notProvidedClass("MemoryAdmissionScheduler", QUOTA);

/**
 * The engine and kernel names `@rulvar/store-conformance` imports for its journal suite's kernel
 * checks (the replayer, the resolution fold, content keys, agent scopes, dispositions) and for its
 * effect-lane, kill-point and soak suites (the engine, workflows, tools, the effect lane, id
 * minting). That is rulvar's engine itself, which fencesim does not reimplement: the kill matrix
 * runs the kit's store suites only, and reports the kernel checks as not runnable here.
 * `CURRENT_HASH_VERSION` is a constant in rulvar; here it is a function like the others, so a
 * suite that reads it as a value gets no plausible hash version (only the effect-lane suite does).
 */
const KERNEL = "rulvar's engine and kernel are not published; fencesim runs only the store suites of rulvar's kit";
export const CURRENT_HASH_VERSION = notProvided("CURRENT_HASH_VERSION", KERNEL);
export const Replayer = notProvidedClass("Replayer", KERNEL);
export const ResolutionFold = notProvidedClass("ResolutionFold", KERNEL);
export const agentScope = notProvided("agentScope", KERNEL);
export const buildDeriverRegistry = notProvided("buildDeriverRegistry", KERNEL);
export const createCanonicalIdMinter = notProvided("createCanonicalIdMinter", KERNEL);
export const createEngine = notProvided("createEngine", KERNEL);
export const defineWorkflow = notProvided("defineWorkflow", KERNEL);
export const deriveContentKey = notProvided("deriveContentKey", KERNEL);
export const dispositionHook = notProvided("dispositionHook", KERNEL);
export const openEffectLane = notProvided("openEffectLane", KERNEL);
export const tool = notProvided("tool", KERNEL);
