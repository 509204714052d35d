// Changes that only tests and benchmarks make: they put documents into states that time, a
// crash or an administrator would otherwise produce, so that a test need not wait for them.
// runhook itself never calls them; they live here because only the store writes updates.
import type { Database } from "./connection.js";
import type { Role, RunDoc, RunState } from "./types.js";

export function storeFixtures(d: Database) {
  return {
    /** A run finished as if its executor had succeeded: its record's slot is free again. */
    finishRun: async (runId: string) =>
      void (await d.runs.updateOne({ _id: runId }, { $set: { state: "SUCCEEDED", activeKey: runId, finishedAt: new Date() } })),
    /** A run's state forced (its slot kept): what an executor's claim leaves, without one. */
    setRunState: async (runId: string, state: RunState) => void (await d.runs.updateOne({ _id: runId }, { $set: { state } })),
    /** Every run of a workflow cancelled at once, so that executors let them go. */
    cancelRunsOf: async (workflowId: string) => void (await d.runs.updateMany({ workflowId }, { $set: { state: "CANCELLED" } })),
    /** A run claimed by an executor that died at once: RUNNING, its lease already expired. */
    strandRun: async (runId: string, expiredMsAgo = 1000) =>
      void (await d.runs.updateOne(
        { _id: runId },
        { $set: { state: "RUNNING", startedAt: new Date(), lease: { owner: "dead#1", expiresAt: new Date(Date.now() - expiredMsAgo) } } },
      )),
    /** An idempotency key's expiry or reservation time moved (by the run it names). */
    setIdempotencyKeyTimes: async (runId: string, times: { expiresAt?: Date; reservedAt?: Date }) =>
      void (await d.idempotencyKeys.updateOne({ runId }, { $set: times })),
    /** A user taken out of a team's members. */
    removeTeamMember: async (teamId: string, userId: string) => void (await d.teams.updateOne({ _id: teamId }, { $pull: { memberIds: userId } })),
    /** The roles that may edit a collection through a rendering. */
    setEditRoles: async (renderingId: string, collectionId: string, roles: Role[]) =>
      void (await d.permissions.updateOne({ _id: `${renderingId}:${collectionId}` }, { $set: { editRoles: roles } })),
    /** The roles that may trigger a workflow. */
    setTriggerRoles: async (workflowId: string, roles: Role[]) => void (await d.workflows.updateOne({ _id: workflowId }, { $set: { triggerRoles: roles } })),
    /** A log stream's counter set to `seq` (entries written in bulk by a test). */
    setCounter: async (stream: string, seq: number) => void (await d.counters.updateOne({ _id: stream }, { $set: { seq } }, { upsert: true })),
    /** The reference point of the end-to-end benchmark: one run's cycle written by hand (insert, claim, read and update the record, finish). */
    async rawRunCycle(run: RunDoc, data: { database: string; collection: string; recordId: string }): Promise<"ok" | "claim-lost" | "record-missing"> {
      const records = d.dataDb(data.database).collection<{ id: string; status: string }>(data.collection);
      await d.runs.insertOne(run);
      const lease = { owner: "raw", expiresAt: new Date(Date.now() + 10_000) };
      const claimed = await d.runs.findOneAndUpdate({ _id: run._id, state: "QUEUED" }, { $set: { state: "RUNNING", startedAt: new Date(), lease } });
      if (!claimed) return "claim-lost";
      if (!(await records.findOne({ id: data.recordId }))) return "record-missing";
      await records.updateOne({ id: data.recordId }, { $set: { status: "done" } });
      await d.runs.updateOne({ _id: run._id }, { $set: { state: "SUCCEEDED", finishedAt: new Date(), activeKey: run._id, lease: null } });
      return "ok";
    },
  };
}

export type StoreFixtures = ReturnType<typeof storeFixtures>;
