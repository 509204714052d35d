// What a list filter names, resolved within the caller's scope: a user by id or by number (the
// public REST API's user ids), a team by name. Shared by the activity log and the notes; and
// the run filter (its workflow name resolved), shared by the run search and the batches.
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { RunFilter } from "../../gen/runhook/v1/run_pb.js";
import type { ApiScope } from "../domain/auth/api-scope.js";
import { workflowsNamed, type RunListScope } from "../domain/auth/run-scope.js";
import { fail } from "../domain/errors.js";
import type { RunFilterInput } from "../domain/runs/search.js";
import type { Deps } from "../deps.js";

/** An id nothing has: what a filter naming no one (an unknown number, a team with no rendering here) selects by. */
const NO_ONE = "\u0000no-one";

/** The user a filter names by id or by number, in the organization (undefined: any; NO_ONE: none). */
export async function userOf(deps: Deps, organizationId: string, f: { userId: string; userNumber: bigint } | undefined): Promise<string | undefined> {
  if (!f?.userNumber) return f?.userId || undefined;
  const n = Number(f.userNumber);
  const user = Number.isSafeInteger(n) && n > 0 ? await deps.store.directory.users.byNumber(organizationId, n) : null;
  if (!user || (f.userId && f.userId !== user._id)) return NO_ONE;
  return user._id;
}

/** The renderings a team filter names in the scope's environment, null for none (undefined: any team). */
export async function renderingsOf(deps: Deps, scope: ApiScope, f: { team: string; withoutTeam: boolean } | undefined): Promise<(string | null)[] | undefined> {
  if (!f?.team && !f?.withoutTeam) return undefined;
  const out: (string | null)[] = f.withoutTeam ? [null] : [];
  if (f.team) {
    const team = await deps.store.directory.teams.byName(scope.project._id, f.team);
    const rendering = team && (await deps.store.directory.renderings.of(team._id, scope.environment!._id));
    out.push(rendering ? rendering._id : NO_ONE);
  }
  return out;
}

/** A request's time, or INVALID_ARGUMENT naming `name` when it is no time. */
export function timeOf(ts: Timestamp | undefined, name: string): Date | undefined {
  if (!ts) return undefined;
  const d = timestampDate(ts);
  if (Number.isNaN(d.getTime())) throw fail.invalid(`${name} is not a valid time`);
  return d;
}

/** A RunFilter's fields as the run search takes them (empty: no filter), its workflow name not yet resolved. */
function runFilterOf(f: RunFilter | undefined): Omit<RunFilterInput, "seenWorkflowIds" | "namedWorkflowIds"> {
  return {
    workflowId: f?.workflowId ?? "",
    workflowName: f?.workflowName ?? "",
    collection: f?.collection ?? "",
    recordId: f?.recordId ?? "",
    states: f?.states ?? [],
    via: f?.via ?? "",
    userId: f?.userId ?? "",
    finishedFrom: timeOf(f?.finishedFrom, "finished_from"),
    finishedTo: timeOf(f?.finishedTo, "finished_to"),
  };
}

/** A RunFilter in the scope of a run search or batch: the workflows the caller sees, and those its workflow name names. */
export async function scopedRunFilterOf(deps: Deps, scope: RunListScope, f: RunFilter | undefined): Promise<RunFilterInput> {
  const input = runFilterOf(f);
  const seenWorkflowIds = scope.workflowIds;
  const namedWorkflowIds = input.workflowName
    ? await workflowsNamed(deps.store.directory, scope.environment._id, input.workflowName, seenWorkflowIds)
    : undefined;
  return { ...input, seenWorkflowIds, namedWorkflowIds };
}
