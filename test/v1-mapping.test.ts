// The one mapping of runhook's actions onto the published document's enums (ACTIVITY_MAPPING and
// ADMIN_MAPPING, src/http/published.ts) knows every action runhook writes. The actions are read
// from src/ itself — each string that reaches an activity or admin log entry — so that a new
// action without a mapping fails here; every mapped value is one of the document's enums, read
// from the document; and a real entry of each activity action answers its mapped action over /v1.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LogService } from "../gen/runhook/v1/log_pb.js";
import { ACTIVITY_MAPPING, ADMIN_MAPPING } from "../src/http/published.js";
import { RUNHOOK_ACTIVITY_ACTIONS } from "../src/lib/activity-actions.js";
import { createActionWorld, type ActionWorld } from "./helpers/action-world.js";
import { apiClient, qs } from "./helpers/api.js";
import { operation, publishedEnum } from "./helpers/published.js";
import { startServer, type TestServer } from "./helpers/server.js";

const ROOT = resolve(import.meta.dirname, "..");

// ---------------------------------------------------------------- the actions src/ writes

type Kind = "activity" | "admin";

/** Where an action becomes an entry: the store's appends. */
const SINKS = new Map<string, Kind>([
  ["appendActivity", "activity"],
  ["appendAdmin", "admin"],
]);

/**
 * Where an action becomes an entry stored with its change: a run's entry (domain/runs/activity.ts),
 * its action the argument at `index`. A data step's effect names its entry's action in
 * `entry: { action, … }` (worker/steps.ts), which the runner passes on as `effect.entry.action`.
 */
const RUN_ENTRY: Writer = { file: "src/domain/runs/activity.ts", index: 2, kind: "activity" };

/** A function that passes its parameter `index` on as an entry's action (adminLog, writeRunActivity, …). */
interface Writer {
  file: string;
  index: number;
  kind: Kind;
}

interface Scan {
  /** Every action written, by kind, with where (file:line). */
  written: Map<string, { kind: Kind; at: string }>;
  /** Actions this scan could not read: a new way of writing one, to teach it. */
  unread: string[];
}

const lineOf = (node: ts.Node) => `${node.getSourceFile().fileName}:${node.getSourceFile().getLineAndCharacterOfPosition(node.getStart()).line + 1}`;

const calleeName = (call: ts.CallExpression) =>
  ts.isIdentifier(call.expression) ? call.expression.text : ts.isPropertyAccessExpression(call.expression) ? call.expression.name.text : undefined;

/** The name a function is called by: its own, its variable's, or its property's. */
function functionName(fn: ts.Node): string | undefined {
  if ((ts.isFunctionDeclaration(fn) || ts.isMethodDeclaration(fn)) && fn.name) return fn.name.getText();
  const parent = fn.parent;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) && (ts.isArrowFunction(fn) || ts.isFunctionExpression(fn)))
    return parent.name.getText();
  return undefined;
}

/** The object literal a file declares as `const name = {…}` (a table of actions), if it does. */
function tableOf(source: ts.SourceFile, name: string): ts.ObjectLiteralExpression | undefined {
  let found: ts.ObjectLiteralExpression | undefined;
  const visit = (node: ts.Node): void => {
    if (ts.isVariableDeclaration(node) && node.name.getText() === name && node.initializer && ts.isObjectLiteralExpression(node.initializer))
      found = node.initializer;
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function sources(): ts.SourceFile[] {
  // src/store/ writes what it is given: no action starts there.
  return readdirSync(join(ROOT, "src"), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts"))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)))
    .filter((f) => !f.startsWith("src/store/"))
    .map((f) => ts.createSourceFile(f, readFileSync(join(ROOT, f), "utf8"), ts.ScriptTarget.Latest, true));
}

/** Every action src/ writes: the strings that reach a sink, directly or through the functions that pass one on. */
function scanActions(): Scan {
  const calls: ts.CallExpression[] = [];
  for (const source of sources()) {
    const visit = (node: ts.Node): void => {
      if (ts.isCallExpression(node)) calls.push(node);
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  const writers = new Map<string, Writer[]>([["runEntry", [RUN_ENTRY]]]);
  let scan: Scan;
  let learned = true;
  // Each round may find functions that pass an action on; their calls are read in the next.
  while (learned) {
    learned = false;
    scan = { written: new Map(), unread: [] };
    const read = (expr: ts.Expression, kind: Kind): void => {
      if (ts.isStringLiteralLike(expr)) scan.written.set(expr.text, { kind, at: lineOf(expr) });
      else if (ts.isConditionalExpression(expr)) for (const e of [expr.whenTrue, expr.whenFalse]) read(e, kind);
      else if (ts.isElementAccessExpression(expr) && ts.isIdentifier(expr.expression)) {
        const table = tableOf(expr.getSourceFile(), expr.expression.text);
        if (!table) scan.unread.push(`${lineOf(expr)}: ${expr.getText()}`);
        for (const p of table?.properties ?? []) if (ts.isPropertyAssignment(p)) read(p.initializer, kind);
      } else if (ts.isIdentifier(expr) && passedOn(expr, kind)) return;
      else if (ts.isPropertyAccessExpression(expr) && expr.getText().endsWith("entry.action")) for (const a of stepEntryActions(calls)) read(a, kind);
      else scan.unread.push(`${lineOf(expr)}: ${expr.getText()}`);
    };
    /** A parameter of a function around `id`: that function passes an action on. */
    const passedOn = (id: ts.Identifier, kind: Kind): boolean => {
      let fn: ts.Node | undefined = id.parent;
      const paramOf = (n: ts.Node) => (ts.isFunctionLike(n) ? n.parameters.findIndex((p) => p.name.getText() === id.text) : -1);
      while (fn && paramOf(fn) < 0) fn = fn.parent;
      const index = fn ? paramOf(fn) : -1;
      const name = fn && functionName(fn);
      if (index < 0 || !name) return false;
      const known = writers.get(name) ?? [];
      const file = id.getSourceFile().fileName;
      if (!known.some((w) => w.file === file && w.index === index)) {
        writers.set(name, [...known, { file, index, kind }]);
        learned = true;
      }
      return true;
    };
    for (const call of calls) readCall(call, writers, read, scan!);
  }
  return scan!;
}

/** The actions of data steps' effects: `entry: { action: … }` in what src/ returns. */
function stepEntryActions(calls: ts.CallExpression[]): ts.Expression[] {
  const found: ts.Expression[] = [];
  const seen = new Set<ts.SourceFile>();
  for (const source of calls.map((c) => c.getSourceFile())) {
    if (seen.has(source)) continue;
    seen.add(source);
    const visit = (node: ts.Node): void => {
      if (ts.isPropertyAssignment(node) && node.name.getText() === "entry" && ts.isObjectLiteralExpression(node.initializer))
        for (const p of node.initializer.properties) if (ts.isPropertyAssignment(p) && p.name.getText() === "action") found.push(p.initializer);
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

/** The actions one call writes: a sink's `action` field, or the argument a writer passes on. */
function readCall(call: ts.CallExpression, writers: Map<string, Writer[]>, read: (e: ts.Expression, k: Kind) => void, scan: Scan): void {
  const name = calleeName(call);
  if (!name) return;
  const sink = SINKS.get(name);
  if (sink) {
    const fields = call.arguments.flatMap((a) => (ts.isObjectLiteralExpression(a) ? a.properties.filter((p) => p.name?.getText() === "action") : []));
    for (const f of fields) read(ts.isShorthandPropertyAssignment(f) ? f.name : (f as ts.PropertyAssignment).initializer, sink);
    // A store append whose entry is not written out here hides its action.
    if (fields.length === 0) scan.unread.push(`${lineOf(call)}: ${call.getText().slice(0, 80)}`);
    return;
  }
  const file = call.getSourceFile().fileName;
  const candidates = writers.get(name) ?? [];
  const writer = candidates.find((w) => w.file === file) ?? (candidates.length === 1 ? candidates[0] : undefined);
  if (candidates.length > 1 && !writer) scan.unread.push(`${lineOf(call)}: ${name} is several writers`);
  const arg = writer && call.arguments[writer.index];
  if (writer && arg) read(arg, writer.kind);
}

const SCAN = scanActions();
const actionsOf = (kind: Kind) => [...SCAN.written].filter(([, w]) => w.kind === kind).map(([action]) => action);

// ---------------------------------------------------------------- the mapping

describe("the actions src/ writes", () => {
  it("are all read (each a string literal, a table's or passed on by a function)", () => {
    expect(SCAN.unread).toEqual([]);
    // Each way of writing one is seen: a run's entry (the trigger, the runner), a step's effect,
    // a local writer (notes), a table (the webhook's changes), a function about a user (adminLogAboutUser).
    expect(actionsOf("activity")).toEqual(expect.arrayContaining(["workflow.run.triggered", "note.deleted", "workflow.run.failed", "record.updated"]));
    expect(actionsOf("admin")).toEqual(expect.arrayContaining(["webhook.regenerated", "user.created", "organization.created", "permissions.changed"]));
    expect(actionsOf("activity").filter((a) => actionsOf("admin").includes(a))).toEqual([]);
  });

  it("the activity actions written are exactly the one list the filter checks and the console offers (src/lib/activity-actions.ts)", () => {
    expect([...new Set(actionsOf("activity"))].sort()).toEqual([...RUNHOOK_ACTIVITY_ACTIONS].sort());
  });

  it("every activity action maps onto the document's action enum, with a label", () => {
    const documented = publishedEnum("listActivityLogs", "action");
    expect(operation("listActivityLogs").item.properties.action.enum).toEqual(documented);
    const unmapped = actionsOf("activity").filter((a) => !(ACTIVITY_MAPPING as Record<string, unknown>)[a]);
    expect(unmapped, `activity actions without a mapping in ACTIVITY_MAPPING (src/http/published.ts): ${unmapped.join(", ")}`).toEqual([]);
    for (const [action, m] of Object.entries(ACTIVITY_MAPPING)) {
      expect(documented, action).toContain(m.action);
      expect(m.label("KYC Process"), action).toMatch(/\S/);
    }
  });

  it("every admin action maps onto the document's type, resource and initiator enums", () => {
    const [types, resources, initiators] = ["type", "resource", "initiator"].map((p) => publishedEnum("listAdminLogs", p));
    const unmapped = actionsOf("admin").filter((a) => !ADMIN_MAPPING[a]);
    expect(unmapped, `admin actions without a mapping in ADMIN_MAPPING (src/http/published.ts): ${unmapped.join(", ")}`).toEqual([]);
    for (const [action, m] of Object.entries(ADMIN_MAPPING)) {
      expect(types, action).toContain(m.type);
      expect(resources, action).toContain(m.resource);
      expect(initiators, action).toContain(m.initiator ?? "administrator");
    }
  });
});

// ---------------------------------------------------------------- real entries over /v1

describe("real entries over /v1", () => {
  let server: TestServer;
  let world: ActionWorld;
  beforeAll(async () => {
    server = await startServer();
    world = await createActionWorld(server);
  });
  afterAll(async () => {
    await server?.stop();
  });

  /** LogService (runhook's own messages, runhook's actions) over Connect, as the world's project API token. */
  const logService = () => {
    const client = createClient(LogService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
    return { client, headers: { authorization: `Bearer ${world.w.apiToken}` } };
  };

  it("an entry of each activity action answers its mapped action and label, and is selected by it", async () => {
    const { client, headers } = logService();
    const { w } = world;
    const entries = (await client.listActivityLogs({ projectName: w.projectName, environmentName: w.environmentName, options: { limit: 1000 } }, { headers }))
      .activityLogs;
    const path = `/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs`;
    const published = (await apiClient(server.gateway, w.apiToken).get(`${path}?limit=100`)).body.data as Record<string, any>[];
    expect(published).toHaveLength(entries.length);
    const seen = new Set(entries.map((e) => e.action));
    expect(
      actionsOf("activity").filter((a) => !seen.has(a)),
      "actions with no entry in the world (test/helpers/action-world.ts)",
    ).toEqual([]);
    for (const e of entries) {
      const mapped = (ACTIVITY_MAPPING as Record<string, (typeof ACTIVITY_MAPPING)[keyof typeof ACTIVITY_MAPPING]>)[e.action]!;
      const item = published.find((i) => i.id === e.id)!;
      expect({ action: item.action, label: item.label }, e.action).toEqual({ action: mapped.action, label: mapped.label(e.workflowName ?? "") });
      const selected = await apiClient(server.gateway, w.apiToken).get(path + qs({ action: mapped.action, "createdAt.eq": item.createdAt }));
      expect(selected.body.data, e.action).toEqual([item]);
    }
  });

  it("an entry of each admin action in the project's log answers its mapped type, resource and initiator", async () => {
    const { client, headers } = logService();
    const { w } = world;
    const entries = (await client.listAdminLogs({ projectName: w.projectName, options: { limit: 1000 } }, { headers })).adminLogs;
    const published = (await apiClient(server.gateway, w.apiToken).get(`/v1/project/${w.projectName}/admin-logs?limit=100`)).body.data as Record<string, any>[];
    expect(published).toHaveLength(entries.length);
    // The project's log has most of them (the organization's own — its creation, its API tokens — are in the organization's).
    expect(new Set(entries.map((e) => e.action)).size).toBeGreaterThanOrEqual(15);
    for (const e of entries) {
      const mapped = ADMIN_MAPPING[e.action]!;
      const item = published.find((i) => i.id === e.id)!;
      expect({ type: item.type, resource: item.resource, initiator: item.initiator }, e.action).toEqual({
        type: mapped.type,
        resource: mapped.resource,
        initiator: mapped.initiator ?? "administrator",
      });
    }
  });
});
