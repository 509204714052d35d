// The run state machine: the only place a run changes state. Each change is one
// conditional single-document update (store.runs.transition); a change that does not
// apply (the run was cancelled, finished or taken over meanwhile) returns null.
//
//   QUEUED ──claim──▶ RUNNING ──finish──▶ SUCCEEDED | FAILED
//      └────────────── cancel ─────────────▶ CANCELLED (from either ongoing state)
//
// A wait step parks its run: it stays RUNNING, gives up its lease and gets `waitUntil`; a
// claimer takes it again once that time has passed (the executor's slot is free meanwhile).
import type { Store } from "../../store/index.js";
import type { Claim, ClaimScope, Lease, RunCondition } from "../../store/runs.js";
import { ONGOING_STATES, type RunDoc, type StepState } from "../../store/types.js";

export type FinalState = "SUCCEEDED" | "FAILED" | "CANCELLED";

/** The fields that finish a run: final state, and the (workflow, record) slot freed for the next call. */
function finishing(runId: string, state: FinalState, error: string, now: Date): Record<string, unknown> {
  return { state, error, finishedAt: now, updatedAt: now, lease: null, waitUntil: null, activeKey: runId };
}

function stepFields(index: number, fields: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).map(([k, v]) => [`steps.${index}.${k}`, v]));
}

export interface RunStateMachine {
  /** QUEUED → RUNNING (or, unless `queuedOnly`, a RUNNING run whose lease expired or whose wait is due) for a new lease. */
  claimNext(lease: Lease, scope?: ClaimScope): Promise<Claim | null>;
  /** Extends the owner's lease (not a visible change). */
  renew(id: string, owner: string, until: Date): Promise<RunDoc | null>;
  /** Lets another executor take the run at once: the owner gives up its lease. */
  release(id: string, owner: string): Promise<RunDoc | null>;
  /** Step `index` becomes RUNNING under the owner's lease, extended to `leaseUntil`. */
  stepStarted(id: string, owner: string, index: number, step: { startedAt: Date; attempts: number; executor: string }, leaseUntil: Date): Promise<RunDoc | null>;
  /** Step `index` SUCCEEDED; the run moves to the next step, or SUCCEEDS after its last one. */
  stepDone(id: string, owner: string, index: number, output: Record<string, unknown> | null, last: boolean, leaseUntil: Date): Promise<RunDoc | null>;
  /** The owner finishes the run (SUCCEEDED with no step left, or FAILED, with the failing step when there is one). */
  finish(id: string, owner: string, state: "SUCCEEDED" | "FAILED", error: string, failedStep: number | null): Promise<RunDoc | null>;
  /** The owner parks the run on its wait step `index` until `until`: it keeps RUNNING and lets its lease go. */
  park(id: string, owner: string, index: number, until: Date): Promise<RunDoc | null>;
  /** Anyone allowed: CANCELLED from the version the caller read, the current step with it. */
  cancel(run: RunDoc, error: string): Promise<RunDoc | null>;
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
  const owned = (owner: string, extra: RunCondition = {}): RunCondition => ({ state: ["RUNNING"], leaseOwner: owner, ...extra });
  return {
    async claimNext(lease, opts) {
      const claim = await runs.claimNext(lease, new Date(), opts);
      if (claim) {
        if (claim.takeover) hooks.takenOver?.(claim.run);
        else if (!claim.resumed) hooks.claimed?.(claim.run);
      }
      return claim;
    },
    renew: (id, owner, until) => runs.transition(id, owned(owner), { "lease.expiresAt": until }, { visible: false }),
    // A new owner name, so that a renewal still in flight cannot extend the lease again.
    release: (id, owner) => runs.transition(id, owned(owner), { lease: { owner: `${owner}/released`, expiresAt: new Date(0) } }, { visible: false }),
    stepStarted(id, owner, index, step, leaseUntil) {
      const set = stepFields(index, { state: "RUNNING" satisfies StepState, startedAt: step.startedAt, finishedAt: null, error: "", attempts: step.attempts, executor: step.executor });
      return runs.transition(id, owned(owner, { stepIndex: index }), { ...set, "lease.expiresAt": leaseUntil, updatedAt: new Date() });
    },
    stepDone(id, owner, index, output, last, leaseUntil) {
      const now = new Date();
      const set: Record<string, unknown> = { ...stepFields(index, { state: "SUCCEEDED" satisfies StepState, finishedAt: now, output }), stepIndex: index + 1, updatedAt: now };
      Object.assign(set, last ? finishing(id, "SUCCEEDED", "", now) : { "lease.expiresAt": leaseUntil });
      const run = runs.transition(id, owned(owner, { stepIndex: index }), set);
      return last ? run.then(finished) : run;
    },
    finish(id, owner, state, error, failedStep) {
      const now = new Date();
      const set = finishing(id, state, error, now);
      if (failedStep !== null) Object.assign(set, stepFields(failedStep, { state: "FAILED" satisfies StepState, error, finishedAt: now }));
      return runs.transition(id, owned(owner), set).then(finished);
    },
    park: (id, owner, index, until) => runs.transition(id, owned(owner, { stepIndex: index }), { lease: null, waitUntil: until, updatedAt: new Date() }),
    cancel(run, error) {
      const now = new Date();
      const set = finishing(run._id, "CANCELLED", error, now);
      if (run.stepIndex < run.steps.length) Object.assign(set, stepFields(run.stepIndex, { state: "CANCELLED" satisfies StepState, finishedAt: now }));
      return runs.transition(run._id, { version: run.version, state: ONGOING_STATES }, set).then(finished);
    },
  };
}
