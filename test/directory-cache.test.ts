// Two server processes on one database, each with its cache of directory documents warm: a
// change made through one (or straight into the database, by a writer that then dies) takes
// effect on the very next call to the other.
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RunService } from "../gen/runhook/v1/run_pb.js";
import { beforeEach, describe, expect, it } from "vitest";
import { openStore, storeFixtures, type CommandStartedEvent } from "../src/store/index.js";
import { addUser, addAppToken, createWorld, type World } from "../fixtures/world.js";
import { twoServersForFile, uriFor, type ChildServer } from "./helpers/server.js";
import { adminClient, postHook } from "./helpers/webhook.js";

const { app, a, b } = twoServersForFile({ RUNHOOK_EXECUTOR: "false" });

/** The webhook of `w` on `server` (its path, from the admin API). */
async function hookOn(server: ChildServer, w: World): Promise<string> {
  const wf = await adminClient(server.baseUrl, w.ownerToken).getWorkflow({ workflowId: w.workflowId });
  return server.baseUrl + new URL(wf.workflow!.webhook!.url).pathname;
}

/** A webhook call on `server` for a fresh record: its status and error code. */
async function call(url: string, token: string): Promise<[number, string | undefined]> {
  const r = await postHook(url, token, { record_id: randomUUID() });
  return [r.status, r.body.code];
}

let w: World;
let onA: string;
let onB: string;

beforeEach(async () => {
  w = await createWorld(app, { rateLimitPerMinute: 10_000 });
  [onA, onB] = [await hookOn(a, w), await hookOn(b, w)];
  // Both caches hold this world's documents (a second call on each is served from it).
  for (const url of [onA, onB, onA, onB]) expect(await call(url, w.userToken)).toEqual([202, undefined]);
});

describe("a directory change made on one instance holds on the other's very next call", () => {
  it("a revoked application token", async () => {
    const token = await addAppToken(app, w.user._id);
    expect(await call(onB, token.plaintext)).toEqual([202, undefined]);
    await adminClient(a.baseUrl, w.ownerToken).revokeApplicationToken({ tokenId: token.id });
    expect(await call(onB, token.plaintext)).toEqual([401, "unauthenticated"]);
  });

  it("a disabled webhook, then enabled again", async () => {
    await adminClient(a.baseUrl, w.ownerToken).disableWebhook({ workflowId: w.workflowId });
    expect(await call(onB, w.userToken)).toEqual([404, "not_found"]);
    await adminClient(a.baseUrl, w.ownerToken).enableWebhook({ workflowId: w.workflowId });
    expect(await call(onB, w.userToken)).toEqual([202, undefined]);
  });

  it("a regenerated webhook: the old URL is refused, the new one accepted", async () => {
    const regenerated = await adminClient(a.baseUrl, w.ownerToken).regenerateWebhook({ workflowId: w.workflowId });
    expect(await call(onB, w.userToken)).toEqual([400, "invalid_argument"]);
    const fresh = b.baseUrl + new URL(regenerated.webhook!.url).pathname;
    expect(await call(fresh, w.userToken)).toEqual([202, undefined]);
  });

  it("a removed role, and a member taken out of the rendering's team", async () => {
    const other = await addUser(app, w, "editor", { teamId: w.teamId });
    const token = (await addAppToken(app, other._id)).plaintext;
    expect(await call(onB, token)).toEqual([202, undefined]);
    await adminClient(a.baseUrl, w.ownerToken).setTeamMember({ teamId: w.teamId, userId: other._id, member: false });
    expect(await call(onB, token)).toEqual([403, "permission_denied"]);
    expect(await call(onB, w.userToken)).toEqual([202, undefined]);
    await adminClient(a.baseUrl, w.ownerToken).setProjectRole({ projectId: w.projectId, userId: w.user._id, role: "" });
    expect(await call(onB, w.userToken)).toEqual([403, "permission_denied"]);
  });

  it("trigger roles narrowed by a new version", async () => {
    const load = { kind: { case: "loadRecord" as const, value: {} } };
    await adminClient(a.baseUrl, w.ownerToken).publishWorkflow({ workflowId: w.workflowId, steps: [load], triggerRoles: ["admin"], updateTriggerRoles: true });
    expect(await call(onB, w.userToken)).toEqual([403, "permission_denied"]);
    expect(await call(onB, w.adminToken)).toEqual([202, undefined]);
  });
});

describe("a long call on one instance sees a change made through the other within a second", () => {
  const runs = (server: ChildServer) => createClient(RunService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
  const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
  /** A queued run of the world (no executor runs here: it stays queued, so a watch stays open). */
  async function queued(): Promise<string> {
    const r = await postHook(onB, w.userToken, { record_id: randomUUID() });
    expect(r.status).toBe(202);
    return r.body.runId!;
  }

  it("a token revoked during WatchRun: the stream ends unauthenticated", async () => {
    const token = await addAppToken(app, w.user._id);
    const runId = await queued();
    const stream = runs(b).watchRun({ runId }, bearer(token.plaintext))[Symbol.asyncIterator]();
    expect((await stream.next()).value?.run?.id).toBe(runId);
    const ended = stream.next().then(
      (r) => ({ done: r.done, code: undefined as Code | undefined, at: Date.now() }),
      (e: unknown) => ({ done: true, code: ConnectError.from(e).code, at: Date.now() }),
    );
    await sleep(300); // the watch is waiting
    await adminClient(a.baseUrl, w.ownerToken).revokeApplicationToken({ tokenId: token.id });
    const revokedAt = Date.now();
    const end = await ended;
    expect(end.code).toBe(Code.Unauthenticated);
    expect(end.at - revokedAt).toBeLessThan(1500);
  });

  it("a user demoted during a long poll (?wait): the answer is the refusal, at once rather than at the end of the wait", async () => {
    const runId = await queued();
    const run = await runs(b).getRun({ runId }, bearer(w.userToken));
    const waiting = runs(b)
      .getRun({ runId, waitSeconds: 30, knownVersion: run.run!.version }, bearer(w.userToken))
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e).code,
      );
    await sleep(300);
    await adminClient(a.baseUrl, w.ownerToken).setProjectRole({ projectId: w.projectId, userId: w.user._id, role: "" });
    const demotedAt = Date.now();
    expect(await waiting).toBe(Code.PermissionDenied);
    expect(Date.now() - demotedAt).toBeLessThan(3000);
  });

  it("a webhook disabled during a burst on both instances: no call that began after the disable is accepted", async () => {
    let disabledAt = Number.POSITIVE_INFINITY;
    const late: [number, number][] = [];
    let going = true;
    const burst = async (url: string) => {
      while (going) {
        const began = Date.now();
        const [status] = await call(url, w.userToken);
        if (began > disabledAt) late.push([status, began - disabledAt]);
      }
    };
    const callers = [onA, onB, onA, onB].map(burst);
    await sleep(500);
    await adminClient(a.baseUrl, w.ownerToken).disableWebhook({ workflowId: w.workflowId });
    disabledAt = Date.now();
    await sleep(1000);
    going = false;
    await Promise.all(callers);
    expect(late.length).toBeGreaterThan(4);
    expect(late.filter(([status]) => status !== 404)).toEqual([]);
  });
});

describe("each organization's documents are kept under its own version", () => {
  it("a change in one organization leaves another's cached documents in place; a change in it, or a raise of every organization, does not", async () => {
    const fx = storeFixtures(app.deps.store);
    const other = await createWorld(app, { rateLimitPerMinute: 10_000 });
    const token = await addAppToken(app, w.user._id);
    expect(await call(onB, token.plaintext)).toEqual([202, undefined]);
    // Revoked behind the caches (no version raised): process B keeps serving what it cached.
    await fx.revokeAppTokenBehindTheCaches(token.id);
    expect(await call(onB, token.plaintext)).toEqual([202, undefined]);

    // Another organization's changes, through process A: B's entries of this organization stay.
    const otherAdmin = adminClient(a.baseUrl, other.ownerToken);
    await otherAdmin.disableWebhook({ workflowId: other.workflowId });
    await otherAdmin.enableWebhook({ workflowId: other.workflowId });
    await otherAdmin.setWebhookRateLimit({ workflowId: other.workflowId, rateLimitPerMinute: 99 });
    expect(await call(onB, token.plaintext)).toEqual([202, undefined]);

    // A change in this organization: B reads its documents again, and finds the token revoked.
    await adminClient(a.baseUrl, w.ownerToken).setWebhookRateLimit({ workflowId: w.workflowId, rateLimitPerMinute: 9_999 });
    expect(await call(onB, token.plaintext)).toEqual([401, "unauthenticated"]);

    // And the raise operators make after an edit by hand reaches every organization.
    const second = await addAppToken(app, w.user._id);
    expect(await call(onB, second.plaintext)).toEqual([202, undefined]);
    await fx.revokeAppTokenBehindTheCaches(second.id);
    expect(await call(onB, second.plaintext)).toEqual([202, undefined]);
    await fx.raiseEveryOrganizationVersion();
    expect(await call(onB, second.plaintext)).toEqual([401, "unauthenticated"]);
  });
});

describe("a writer that dies between its change and the raise of the version hides nothing", () => {
  it("while its intent stands the other instances read the database; once stale, it is cleared and the version raised", async () => {
    const fx = storeFixtures(app.deps.store);
    const [fresh, old] = [await addAppToken(app, w.user._id), await addAppToken(app, w.user._id)];
    for (const t of [fresh, old]) expect(await call(onB, t.plaintext)).toEqual([202, undefined]);
    const before = (await fx.organizationVersion(w.user._id))!;

    await fx.revokeAppTokenAndDie(fresh.id);
    expect(await call(onB, fresh.plaintext)).toEqual([401, "unauthenticated"]);
    expect(await call(onA, fresh.plaintext)).toEqual([401, "unauthenticated"]);
    // Its intent is recent: it stays (the writer may still be at work), and so does the version.
    const during = (await fx.organizationVersion(w.user._id))!;
    expect([during.version, during.pending.length]).toEqual([before.version, 1]);

    // An intent older than any change takes: cleared by the next reader, which raises the version.
    await fx.removeDirectoryIntents(w.user._id);
    await fx.revokeAppTokenAndDie(old.id, new Date(Date.now() - 5 * 60_000));
    expect(await call(onB, old.plaintext)).toEqual([401, "unauthenticated"]);
    const after = (await fx.organizationVersion(w.user._id))!;
    expect(after.pending).toEqual([]);
    expect(after.version).toBeGreaterThan(before.version);
    expect(await call(onB, w.userToken)).toEqual([202, undefined]); // the caches serve again
  });
});

describe("the cache's assumptions", () => {
  it("reads the directory from the primary whatever the connection string asks", async () => {
    const base = uriFor(app.deps.store.databaseName);
    const store = await openStore(`${base}${base.includes("?") ? "&" : "?"}readPreference=secondaryPreferred`, { dbName: app.deps.store.databaseName });
    const sent: { name: string; readPreference?: unknown }[] = [];
    expect(storeFixtures(store).readPreferences()).toEqual({ service: "primary", data: "primary" });
    const events = storeFixtures(store).commandEvents();
    const record = (e: CommandStartedEvent) =>
      void sent.push({ name: e.commandName, readPreference: (e.command as { $readPreference?: unknown }).$readPreference });
    events.on("commandStarted", record);
    try {
      const view = store.directory.view();
      expect(await view.users.get(w.user._id)).toMatchObject({ _id: w.user._id });
      expect(await view.version()).toEqual(new Map([[w.orgId, { all: expect.any(Number), org: expect.any(Number) }]]));
      expect(await store.runs.get(randomUUID())).toBeNull();
    } finally {
      events.off("commandStarted", record);
      await store.close();
    }
    // On a replica set the driver also says so in each command.
    const finds = sent.filter((c) => c.name === "find");
    expect(finds.length).toBeGreaterThanOrEqual(3);
    for (const c of finds) expect((c.readPreference as { mode?: string } | undefined)?.mode ?? "primary").toBe("primary");
  });
});
