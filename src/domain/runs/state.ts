// The run state machine: the only place a run changes state. It decides which change
// applies; the run store spells each as one conditional single-document update (its verbs
// startStep, completeStep, park, finish, cancel…). A change that does not apply (the run
// was cancelled, finished or taken over meanwhile) returns null.
//
//   QUEUED ──claim──▶ RUNNING ──finish──▶ SUCCEEDED | FAILED
//      └────────────── cancel ─────────────▶ CANCELLED (from either ongoing state)
//
// A wait step parks its run: it stays RUNNING, gives up its lease and gets `waitUntil`; a
// claimer takes it again once that time has passed (the executor's slot is free meanwhile).
import type { Store } from "../../store/index.js";
import type { Claim, ClaimScope, Lease, StepStart } from "../../store/runs.js";
import type { PendingLogEntry, RunDoc } from "../../store/types.js";

export interface RunStateMachine {
  /** QUEUED → RUNNING (or, unless `queuedOnly`, a RUNNING run whose lease expired or whose wait is due) for a new lease. */
  claimNext(lease: Lease, scope?: ClaimScope): Promise<Claim | null>;
  /** Extends the owner's lease (not a visible change). */
  renew(id: string, owner: string, until: Date): Promise<RunDoc | null>;
  /** Lets another executor take the run at once: the owner gives up its lease. */
  release(id: string, owner: string): Promise<RunDoc | null>;
  /** Step `index` becomes RUNNING under the owner's lease, extended to `leaseUntil`. */
  stepStarted(id: string, owner: string, index: number, step: StepStart, leaseUntil: Date): Promise<RunDoc | null>;
  /** Step `index` SUCCEEDED; the run moves to the next step, or SUCCEEDS after its last one (`log`: the entries this implies, stored with it). */
  stepDone(
    id: string,
    owner: string,
    index: number,
    output: Record<string, unknown> | null,
    last: boolean,
    leaseUntil: Date,
    log?: PendingLogEntry[],
  ): Promise<RunDoc | null>;
  /** The owner finishes the run (SUCCEEDED with no step left, or FAILED, with the failing step when there is one). */
  finish(id: string, owner: string, state: "SUCCEEDED" | "FAILED", error: string, failedStep: number | null, log?: PendingLogEntry[]): Promise<RunDoc | null>;
  /** The owner parks the run on its wait step `index` until `until`: it keeps RUNNING and lets its lease go. */
  park(id: string, owner: string, index: number, until: Date): Promise<RunDoc | null>;
  /** Anyone allowed: CANCELLED from the version the caller read, the current step with it. */
  cancel(run: RunDoc, error: string, log?: PendingLogEntry[]): Promise<RunDoc | null>;
}

/** Told about transitions as they happen (metrics). */
export interface RunHooks {
  claimed?(run: RunDoc): void;
  takenOver?(run: RunDoc): void;
  finished?(run: RunDoc): void;
}

export function runStateMachine(store: Store, hooks: RunHooks = {}): RunStateMachine {
  const { runs } = store;
  const finished = (run: RunDoc | null) => {
    if (run && hooks.finished) hooks.finished(run);
    return run;
  };
  return {
    async claimNext(lease, opts) {
      const claim = await runs.claimNext(lease, new Date(), opts);
      if (claim) {
        if (claim.takeover) hooks.takenOver?.(claim.run);
        else if (!claim.resumed) hooks.claimed?.(claim.run);
      }
      return claim;
    },
    renew: (id, owner, until) => runs.renewLease(id, owner, until),
    // A new owner name, so that a renewal still in flight cannot extend the lease again.
    release: (id, owner) => runs.replaceLease(id, owner, { owner: `${owner}/released`, expiresAt: new Date(0) }),
    stepStarted: (id, owner, index, step, leaseUntil) => runs.startStep(id, owner, index, step, leaseUntil),
    stepDone: (id, owner, index, output, last, leaseUntil, log) =>
      last ? runs.completeLastStep(id, owner, index, output, log).then(finished) : runs.completeStep(id, owner, index, output, leaseUntil, log),
    finish: (id, owner, state, error, failedStep, log) => runs.finish(id, owner, state, error, failedStep, log).then(finished),
    park: (id, owner, index, until) => runs.park(id, owner, index, until),
    // The step under way (none once past the last) is cancelled with its run.
    cancel: (run, error, log) => runs.cancel(run._id, run.version, run.stepIndex < run.steps.length ? run.stepIndex : null, error, log).then(finished),
  };
}
