// Claiming: runs come to this process's executors through MongoDB alone.
//
// A claim is one sorted findOneAndUpdate (store.runs.claimNext): a RUNNING run whose lease
// expired (its executor died, or let it go while stopping), or else a parked run whose wait
// is due, or else a QUEUED run. Any number of processes can claim from one database.
//
// Fair share. Slots are shared first between organizations, then between their projects: one
// organization holds at most `organizationConcurrency` of this process's slots and one project
// at most `projectConcurrency`, and every claim (a takeover, a due parked run, a QUEUED run)
// goes round-robin over the organizations that have one; QUEUED runs also round-robin over the
// projects of an organization (the oldest run of the next project after the last one claimed
// there). So one tenant's backlog, or its thousands of waits coming due at once, never keeps
// another tenant's run waiting for more than a free slot.
//
// Pick-up. A run queued on this instance (deps.events RUN_QUEUED) is claimed at once; runs
// queued elsewhere, and runs whose lease expired, within pollIntervalMs. A freed slot claims
// the next run at once (the executor pumps again).
//
// Database outages. Claims fail while the database cannot be reached; the claimer logs the
// outage once, and its end, as the database monitor (src/store/monitor.ts) sees them — not every
// failed poll. Claiming goes on at every poll (each claim waits at most RUNHOOK_DB_TIMEOUT_MS
// for the database), and at once when the monitor sees the database back.
import type { Logger } from "pino";
import type { Deps } from "../deps.js";
import type { RunDoc } from "../store/types.js";
import { isUnavailable } from "../store/index.js";
import type { Lease } from "../store/runs.js";
import { RUN_QUEUED } from "../domain/runs/model.js";
import type { RunStateMachine } from "../domain/runs/state.js";
import { coalesced } from "../lib/coalesce.js";

export interface ClaimerEnv {
  deps: Deps;
  machine: RunStateMachine;
  log: Logger;
  pollIntervalMs: number;
  /** The lease for the next claim. */
  newLease(): Lease;
  /** Whether the executors can take one more run. */
  hasFreeSlot(): boolean;
  /** Organizations that hold as many of this process's slots as one organization may. */
  busyOrganizations(): string[];
  /** Projects that hold as many of this process's slots as one project may. */
  busyProjects(): string[];
  /** A run just claimed, to run. */
  onClaimed(run: RunDoc): void;
}

export interface Claimer {
  /**
   * Claims runs while there are free slots and claimable runs. With `takeovers` (the poll, a
   * parked run's due time, the database back) runs whose lease expired and due parked runs
   * come first, in the next round that has a free slot, so that busy executors with a queue
   * still take over a dead executor's runs at their first free slot after a poll; other rounds
   * (a queued-run event, a freed slot) look for QUEUED runs only, which keeps a busy
   * executor's claims to one query or two.
   */
  pump(takeovers?: boolean): Promise<void>;
  /** Starts claiming: on queued-run events, every poll interval, and when the database is back. */
  start(): void;
  /** Claims nothing more. */
  stop(): void;
}

/** Organizations whose place in their projects' round-robin a process keeps (then it starts them over). */
const MAX_ROUND_ROBIN_ORGANIZATIONS = 10_000;

export function createClaimer(env: ClaimerEnv): Claimer {
  let stopped = false;
  /** The next round also takes over runs whose lease expired. */
  let takeovers = false;
  /** The organization of the last run claimed, and per organization its project: the round-robin goes on after them. */
  let afterOrganization: string | undefined;
  const afterProjectOf = new Map<string, string>();
  const claimRounds = coalesced(async () => {
    // Without a free slot nothing is claimed: `takeovers` stays for the next round that has one.
    if (stopped || !env.hasFreeSlot()) return false;
    let queuedOnly = !takeovers;
    takeovers = false;
    try {
      while (!stopped && env.hasFreeSlot()) {
        const claim = await env.machine.claimNext(env.newLease(), {
          queuedOnly,
          busyOrganizations: env.busyOrganizations(),
          busyProjects: env.busyProjects(),
          afterOrganization,
          afterProjectIn: (organizationId) => afterProjectOf.get(organizationId),
        });
        if (!claim) break;
        // A QUEUED run came: there was no expired lease nor due parked run to take first.
        if (!claim.takeover && !claim.resumed) queuedOnly = true;
        afterOrganization = claim.run.organizationId;
        if (afterOrganization !== undefined) {
          if (afterProjectOf.size >= MAX_ROUND_ROBIN_ORGANIZATIONS) afterProjectOf.clear();
          afterProjectOf.set(afterOrganization, claim.run.projectId);
        }
        env.onClaimed(claim.run);
      }
    } catch (err) {
      if (stopped) return false;
      if (isUnavailable(err)) env.log.debug({ err }, "claiming runs failed: the database is unreachable");
      else env.log.warn({ err }, "claiming runs failed");
      return false;
    }
    return !stopped && env.hasFreeSlot();
  });
  const pump = async (withTakeovers = false) => {
    if (stopped) return;
    takeovers ||= withTakeovers;
    await claimRounds();
  };
  let stopListening = () => {};
  return {
    pump,
    start() {
      stopListening = listenForWork(env, pump);
      void pump(true);
    },
    stop() {
      stopped = true;
      stopListening();
    },
  };
}

/** Pumps on each queued-run event, every poll interval, and when the database is back; returns what stops it. */
function listenForWork(env: ClaimerEnv, pump: (takeovers?: boolean) => Promise<void>): () => void {
  const { deps, log } = env;
  const onQueued = () => void pump();
  deps.events.on(RUN_QUEUED, onQueued);
  // The outage, once, and its end; claims at once when the database is back.
  let downSince = 0;
  const offDb = deps.dbMonitor.onChange((up, why) => {
    if (!up) {
      downSince = Date.now();
      log.warn({ err: why }, "database unreachable: executors pause claiming, and resume their runs once it is back");
      return;
    }
    log.info({ downMs: Date.now() - downSince }, "database reachable again: executors claim and run again");
    void pump(true);
  });
  const poller = setInterval(() => void pump(true), env.pollIntervalMs);
  return () => {
    clearInterval(poller);
    deps.events.off(RUN_QUEUED, onQueued);
    offDb();
  };
}
