// Who sees a run is one rule, the same for GetRun (REST and native gRPC), WatchRun and the run
// search (ListRuns): admins of the project or of its organization see every run; a user with
// another role sees the runs of the workflows it may trigger (in the rendering's team, a trigger
// role that allows its role), whoever started them; a user taken out of the team, a user of
// another organization, nobody else.
import { randomUUID } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it } from "vitest";
import { RunService } from "../gen/runhook/v1/run_pb.js";
import { addAppToken, addUser, createWorld, type UserRef, type World } from "../fixtures/world.js";
import { apiClient, qs } from "./helpers/api.js";
import { queueRun, grpcGetRun } from "./helpers/runs.js";
import { serverForFile } from "./helpers/server.js";
import { adminClient } from "./helpers/webhook.js";

const server = serverForFile({ env: { RUNHOOK_EXECUTOR: "false" } });

let w: World;
let other: World;
/** The callers of the matrix, by name: a token each. */
const tokens: Record<string, string> = {};
/** The runs: the user's and the removed user's on the open workflow, the editor's on the one users may not trigger. */
const runs: Record<"byUser" | "byRemoved" | "byEditorRestricted", string> = { byUser: "", byRemoved: "", byEditorRestricted: "" };

beforeAll(async () => {
  w = await createWorld(server);
  other = await createWorld(server);
  const editor = await addUser(server, w, "editor", { teamId: w.teamId });
  const removed = await addUser(server, w, "user", { teamId: w.teamId });
  const owner = adminClient(server.baseUrl, w.ownerToken);
  // A second workflow of the rendering that only admins and editors may trigger.
  const restricted = await owner.createWorkflow({
    renderingId: w.renderingId,
    collectionId: w.collectionId,
    name: "editors only",
    triggerRoles: ["admin", "editor"],
    steps: [{ kind: { case: "loadRecord", value: {} } }],
  });
  const as = (u: UserRef) => ({ userId: u._id, userEmail: u.email });
  runs.byUser = (await queueRun(server.deps.store, w, "r1", as(w.user)))._id;
  runs.byRemoved = (await queueRun(server.deps.store, w, "r2", as(removed)))._id;
  runs.byEditorRestricted = (await queueRun(server.deps.store, w, "r3", { ...as(editor), workflowId: restricted.workflow!.id }))._id;
  await owner.setTeamMember({ teamId: w.teamId, userId: removed._id, member: false });
  Object.assign(tokens, {
    projectAdmin: w.adminToken,
    organizationAdmin: w.ownerToken,
    editor: (await addAppToken(server, editor._id)).plaintext,
    user: w.userToken,
    removedFromTeam: (await addAppToken(server, removed._id)).plaintext,
    otherOrganization: other.userToken,
    otherOrganizationAdmin: other.ownerToken,
  });
});

type Seen = Record<keyof typeof runs, boolean>;
const everything: Seen = { byUser: true, byRemoved: true, byEditorRestricted: true };
const nothing: Seen = { byUser: false, byRemoved: false, byEditorRestricted: false };
const EXPECTED: Record<string, Seen> = {
  projectAdmin: everything,
  organizationAdmin: everything,
  editor: everything,
  user: { byUser: true, byRemoved: true, byEditorRestricted: false },
  removedFromTeam: nothing,
  otherOrganization: nothing,
  otherOrganizationAdmin: nothing,
};

/** Each run, seen or not, by one way of asking. */
async function seenBy(ask: (runId: string) => Promise<boolean>): Promise<Seen> {
  const out = {} as Seen;
  for (const [name, id] of Object.entries(runs)) out[name as keyof Seen] = await ask(id);
  return out;
}

/** How a caller is refused a run: another organization's run is as unknown as a missing one, any other is PERMISSION_DENIED. */
const refusalOf = (name: string) =>
  name.startsWith("otherOrganization") ? { code: Code.NotFound, status: 404 } : { code: Code.PermissionDenied, status: 403 };

/** Whether a call answered the run (true) or was refused as `name` is (false); anything else fails the test. */
async function allowed(name: string, p: Promise<unknown>): Promise<boolean> {
  try {
    await p;
    return true;
  } catch (err) {
    expect(ConnectError.from(err).code, name).toBe(refusalOf(name).code);
    return false;
  }
}

describe("who sees a run: the same answer on every way of asking", () => {
  it("GetRun over REST (/v1/runs/{id})", async () => {
    for (const [name, token] of Object.entries(tokens)) {
      const seen = await seenBy(async (id) => {
        const res = await apiClient(server.baseUrl, token).get(`/v1/runs/${id}`);
        expect([200, refusalOf(name).status], `${name}: ${JSON.stringify(res.body)}`).toContain(res.status);
        return res.status === 200;
      });
      expect(seen, name).toEqual(EXPECTED[name]);
    }
  });

  it("GetRun over native gRPC", async () => {
    for (const [name, token] of Object.entries(tokens)) {
      const seen = await seenBy(async (id) => {
        try {
          await grpcGetRun(server.grpcAddr, token, { runId: id });
          return true;
        } catch (err) {
          expect((err as { code: number }).code, name).toBe(refusalOf(name).code);
          return false;
        }
      });
      expect(seen, name).toEqual(EXPECTED[name]);
    }
  });

  it("WatchRun over Connect", async () => {
    const client = createClient(RunService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
    for (const [name, token] of Object.entries(tokens)) {
      const seen = await seenBy(async (id) => {
        const stop = new AbortController();
        const stream = client.watchRun({ runId: id }, { headers: { authorization: `Bearer ${token}` }, signal: stop.signal });
        const first = stream[Symbol.asyncIterator]().next();
        const ok = await allowed(name, first);
        if (ok) expect((await first).value?.run?.id).toBe(id);
        stop.abort();
        return ok;
      });
      expect(seen, name).toEqual(EXPECTED[name]);
    }
  });

  it("ListRuns over REST: the runs listed are the runs seen; another organization's caller is 403", async () => {
    const path = `/v1/project/${w.projectName}/environment/${w.environmentName}/runs`;
    for (const [name, token] of Object.entries(tokens)) {
      const res = await apiClient(server.baseUrl, token).get(path + qs({ limit: 1000 }));
      if (name.startsWith("otherOrganization")) {
        expect(res.status, name).toBe(403);
        continue;
      }
      expect(res.status, name).toBe(200);
      const listed = new Set(res.body.runs.map((r: { id: string }) => r.id));
      expect(await seenBy(async (id) => listed.has(id)), name).toEqual(EXPECTED[name]);
    }
    // Filters narrow what is seen, never widen it: the user asking for the restricted workflow's runs gets none.
    const restrictedWorkflow = (await server.deps.store.runs.get(runs.byEditorRestricted))!.workflowId;
    const narrowed = await apiClient(server.baseUrl, w.userToken).get(path + qs({ workflowId: restrictedWorkflow }));
    expect(narrowed.status).toBe(200);
    expect(narrowed.body.runs).toEqual([]);
    // The user filters by another user's id: the runs of that user it sees.
    const byRemoved = await apiClient(server.baseUrl, w.userToken).get(path + qs({ userId: (await server.deps.store.runs.get(runs.byRemoved))!.userId }));
    expect(byRemoved.body.runs.map((r: { id: string }) => r.id)).toEqual([runs.byRemoved]);
  });

  it("ListRuns of a user who sees many workflows, in several states: every run seen, once, in order", async () => {
    // More workflows × states than the search merges one query each: the workflows are read at once.
    const owner = adminClient(server.baseUrl, w.ownerToken);
    const expected: string[] = [];
    for (let i = 0; i < 9; i++) {
      const wf = await owner.createWorkflow({
        renderingId: w.renderingId,
        collectionId: w.collectionId,
        name: `many ${i}`,
        steps: [{ kind: { case: "loadRecord", value: {} } }],
      });
      expected.push((await queueRun(server.deps.store, w, `m${i}`, { workflowId: wf.workflow!.id, createdAt: new Date(Date.now() + i) }))._id);
    }
    const path = `/v1/project/${w.projectName}/environment/${w.environmentName}/runs`;
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const res = await apiClient(server.baseUrl, w.userToken).get(path + qs({ state: "QUEUED,RUNNING", order: "asc", limit: 4, cursor }));
      expect(res.status).toBe(200);
      seen.push(...res.body.runs.map((r: { id: string }) => r.id));
      cursor = res.body.runs.length > 0 ? res.body.nextCursor : undefined;
    } while (cursor);
    expect(seen.filter((id) => expected.includes(id))).toEqual(expected);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).not.toContain(runs.byEditorRestricted);
  });
});

it("a run id that does not exist is 404 for everyone who could see runs", async () => {
  const res = await apiClient(server.baseUrl, w.userToken).get(`/v1/runs/${randomUUID()}`);
  expect(res.status).toBe(404);
});
