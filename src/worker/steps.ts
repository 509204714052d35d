// The data steps of a workflow. Each one re-checks, at the moment it runs,
// that the run's user still exists and may read (or edit) the record through the run's
// rendering, and that the record exists within the rendering's scope.
import type { DataAccess } from "../domain/auth/access.js";
import { collectionAccess } from "../domain/auth/access.js";
import { DomainError } from "../domain/errors.js";
import type { Deps } from "../deps.js";
import { DATA_QUERY_TIME_LIMIT_MS, type RecordDoc, type RecordMatch } from "../store/records.js";
import { isTimeLimitExceeded } from "../store/index.js";
import type { CollectionDoc, EnvironmentDoc, RunDoc, StepDoc, UserDoc } from "../store/types.js";
import { createNote } from "../domain/notes/threads.js";
import { derivedUuid } from "../domain/ids.js";
import { recordMatch } from "../domain/runs/records.js";

/** A step that fails the run, with a message meant for the run's reader. */
export class StepFailure extends Error {}

interface RecordContext {
  user: UserDoc;
  environment: EnvironmentDoc;
  collection: CollectionDoc;
  match: RecordMatch;
  record: RecordDoc;
  notFound(): StepFailure;
}

/** A query of the run's records; one stopped at its time limit fails the step, saying so. */
async function timeLimited<T>(query: Promise<T>): Promise<T> {
  try {
    return await query;
  } catch (err) {
    if (isTimeLimitExceeded(err)) throw new StepFailure(`the record's query took longer than its limit of ${DATA_QUERY_TIME_LIMIT_MS / 1000} s`);
    throw err;
  }
}

/** Finds the run's record as the run's user sees it now, or throws a StepFailure. */
export async function recordAs(deps: Deps, run: RunDoc, need: DataAccess): Promise<RecordContext> {
  const directory = deps.store.directory.view();
  const [user, project, rendering, environment, collection] = await Promise.all([
    directory.users.get(run.userId),
    directory.projects.get(run.projectId),
    deps.store.immutable.rendering(run.renderingId),
    deps.store.immutable.environment(run.environmentId),
    deps.store.immutable.collection(run.collectionId),
  ]);
  if (!user) throw new StepFailure(`the run's user ${run.userEmail} no longer exists`);
  if (!project) throw new StepFailure("the run's project no longer exists");
  if (!rendering) throw new StepFailure("the run's rendering no longer exists");
  if (!environment) throw new StepFailure("the run's environment no longer exists");
  if (!collection) throw new StepFailure(`the collection "${run.collection}" no longer exists`);
  const notFound = (why?: string) =>
    new StepFailure(`record "${run.recordId}" of collection "${collection.name}" not found or not accessible${why ? ` (${why})` : ""}`);
  const access = await collectionAccess(directory, { user, project, rendering, collectionId: collection._id, need });
  if (!access.allowed) throw notFound(access.reason);
  const match = recordMatch(collection.primaryKey, run.recordId, access.scope);
  if (!match) throw notFound(`the id does not have the ${collection.primaryKey.length} part(s) of the collection's primary key`);
  const record = await timeLimited(deps.store.records.find(environment.dataDatabase, collection.name, match));
  if (!record) throw notFound();
  return { user, environment, collection, match, record, notFound: () => notFound() };
}

function sameValue(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** What a data step did: its output, and the activity entry about its effect (written with the step's end). */
export interface StepEffect {
  output: Record<string, unknown> | null;
  entry?: { action: string; details: Record<string, unknown> & { step: number } };
}

/**
 * Runs one data step. Its effect is made once whatever the attempt: a set of fields, a note of
 * an id derived from the run and the step; its entry is stored with the step's end (runner.ts).
 */
export async function runDataStep(deps: Deps, run: RunDoc, step: Exclude<StepDoc, { type: "wait" }>): Promise<StepEffect> {
  const stepNumber = run.stepIndex + 1;
  switch (step.type) {
    case "load_record": {
      await recordAs(deps, run, "read");
      return { output: null };
    }
    case "update_record": {
      const set = step.set;
      if (!set || typeof set !== "object" || Array.isArray(set)) throw new StepFailure("update_record: `set` must be an object");
      const ctx = await recordAs(deps, run, "edit");
      for (const field of Object.keys(set)) {
        if (!field || field.startsWith("$") || field === "_id") throw new StepFailure(`update_record: invalid field name "${field}"`);
        if (ctx.collection.primaryKey.includes(field)) throw new StepFailure(`update_record: primary key field "${field}" cannot be set`);
      }
      const changed: Record<string, unknown> = {};
      const unchanged: string[] = [];
      for (const [field, value] of Object.entries(set)) {
        if (sameValue(ctx.record[field], value)) unchanged.push(field);
        else changed[field] = value;
      }
      if (Object.keys(set).length > 0) {
        // The same match as the read: a record that left the scope meanwhile is not written.
        if (!(await timeLimited(deps.store.records.set(ctx.environment.dataDatabase, ctx.collection.name, ctx.match, set)))) throw ctx.notFound();
      }
      // Written for every update_record step, once: `unchanged` names the fields set to the value
      // they had (all of them when the step changed nothing, or when an earlier attempt cut off by a crash made the change).
      const details = { fields: changed, ...(unchanged.length > 0 ? { unchanged } : {}), step: stepNumber };
      return { output: { changed: Object.keys(changed) }, entry: { action: "record.updated", details } };
    }
    case "add_note": {
      const ctx = await recordAs(deps, run, "read");
      let noteId: string;
      try {
        const note = await createNote(deps.store, {
          projectId: run.projectId,
          environmentId: run.environmentId,
          collection: ctx.collection.name,
          recordId: run.recordId,
          title: typeof step.title === "string" ? step.title : "",
          content: typeof step.content === "string" ? step.content : "",
          user: { id: ctx.user._id, email: ctx.user.email },
          renderingId: run.renderingId,
          // The same note whichever attempt of the step writes it.
          id: derivedUuid(`note:${run._id}:${run.stepIndex}`),
        });
        noteId = note._id;
      } catch (err) {
        if (err instanceof DomainError) throw new StepFailure(`add_note: ${err.message}`);
        throw err;
      }
      return { output: { noteId }, entry: { action: "note.created", details: { noteId, step: stepNumber } } };
    }
    default:
      throw new StepFailure(`unknown step type "${(step as { type: string }).type}"`);
  }
}
