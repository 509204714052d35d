// What a workflow's history costs per call: the webhook trigger (until its 202) and GetRun
// (GET /v1/runs/{id}, as a user of the rendering, whose access check reads the workflow) on a
// one-version workflow, on one of 100 versions as large as a workflow's total allows (published
// through the API), and on one of 100 versions of 64 KiB stored inside the workflow document
// (about 6.4 MB, as earlier versions of runhook stored them and upgraded databases keep them).
// One caller at a time, the three workflows taken in turn, executors off (runs stay QUEUED).
// Prints p50/p99 per workflow and the ratios of the p50s to the one-version workflow's (target:
// within 1.2), and writes bench/results/<date>-workflow-history[-quick].md and .json.
//   node --import tsx bench/workflow-history.ts [--quick]
import { randomUUID } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { Pool } from "undici";
import { callAdmin } from "../src/cli/demo.js";
import { MAX_KEPT_VERSIONS, MAX_VERSION_BYTES, MAX_WORKFLOW_BYTES, stepToProto } from "../src/services/admin/convert.js";
import { storeFixtures, type Store } from "../src/store/index.js";
import type { StepDoc } from "../src/store/types.js";
import { keyOfUrl } from "../src/domain/webhook-keys.js";
import { benchWorld, openStore, servicesOn, spawnFor, type BenchContext, type BenchWorld } from "./lib/context.js";
import { httpLimitMet, WEBHOOK_RATE_LIMIT_PER_MINUTE } from "./lib/limits.js";
import { ratio, summarize } from "./lib/load.js";
import { standalone } from "./lib/standalone.js";

const TARGET = 1.2;

interface Subject {
  name: string;
  workflowId: string;
  hookPath: string;
  trigger: number[];
  getRun: number[];
}

/** Steps of about `bytes` as JSON: a record's load, then an update carrying a blob. */
const steps = (bytes: number, tag: string): StepDoc[] => [
  { type: "load_record" },
  { type: "update_record", set: { status: tag, blob: "x".repeat(Math.max(0, bytes - 120)) } },
];

/** Enables the workflow's webhook, with a rate limit no load meets (above the API's maximum: through the store, as benchWorld does). */
async function hookOf(ctx: BenchContext, store: Store, w: BenchWorld, workflowId: string): Promise<string> {
  const app = servicesOn(ctx, store);
  const answer = (await callAdmin(app.services.admin, "enableWebhook", w.ownerToken, { workflowId })) as { webhook?: { url: string } };
  await store.directory.workflows.setWebhookRateLimit(w.orgId, workflowId, WEBHOOK_RATE_LIMIT_PER_MINUTE);
  return `/hooks/${keyOfUrl(answer.webhook!.url)}`;
}

/** A workflow of MAX_KEPT_VERSIONS versions published through the AdminService, as large as MAX_WORKFLOW_BYTES allows. */
async function publishedHistory(ctx: BenchContext, store: Store, w: BenchWorld): Promise<string> {
  const app = servicesOn(ctx, store);
  const call = (method: "createWorkflow" | "publishWorkflow", init: object) =>
    callAdmin(app.services.admin, method, w.ownerToken, init as never) as Promise<{ workflow?: { id: string } }>;
  const each = Math.floor(MAX_WORKFLOW_BYTES / MAX_KEPT_VERSIONS) - 100;
  const created = await call("createWorkflow", {
    renderingId: w.renderingId,
    collectionId: w.collectionId,
    name: "published history",
    steps: steps(each, "v1").map(stepToProto),
  });
  const workflowId = created.workflow!.id;
  for (let v = 2; v <= MAX_KEPT_VERSIONS; v++) await call("publishWorkflow", { workflowId, steps: steps(each, `v${v}`).map(stepToProto) });
  return workflowId;
}

/** A workflow of MAX_KEPT_VERSIONS versions of MAX_VERSION_BYTES each, stored with the steps inside it. */
async function embeddedHistory(store: Store, w: BenchWorld): Promise<string> {
  const { versions: _, ...base } = (await store.directory.workflows.get(w.workflowId))!;
  const workflowId = randomUUID();
  const publishedAt = new Date();
  const versions = Array.from({ length: MAX_KEPT_VERSIONS }, (_, i) => ({
    version: i + 1,
    active: true,
    publishedAt,
    steps: steps(MAX_VERSION_BYTES, `v${i + 1}`),
  }));
  await storeFixtures(store).insertEmbeddedStepsWorkflow({ ...base, _id: workflowId, name: "stored history", versions });
  return workflowId;
}

/** One trigger and one GetRun of `s`, timed; throws on any other answer than 202 and 200. */
async function round(pool: Pool, w: BenchWorld, s: Subject, recordId: string, measure: boolean): Promise<void> {
  const auth = { authorization: `Bearer ${w.userToken}` };
  let t = performance.now();
  const hook = await pool.request({
    method: "POST",
    path: s.hookPath,
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ record_id: recordId }),
  });
  const text = await hook.body.text();
  const met = httpLimitMet(hook.statusCode, text);
  if (met) throw met;
  const body = JSON.parse(text) as { runId?: string };
  if (hook.statusCode !== 202) throw new Error(`${s.name}: trigger answered ${hook.statusCode} ${JSON.stringify(body)}`);
  if (measure) s.trigger.push(performance.now() - t);
  t = performance.now();
  const run = await pool.request({ method: "GET", path: `/v1/runs/${body.runId}`, headers: auth });
  const runText = await run.body.text();
  const runMet = httpLimitMet(run.statusCode, runText);
  if (runMet) throw runMet;
  if (run.statusCode !== 200) throw new Error(`${s.name}: GetRun answered ${run.statusCode}`);
  if (measure) s.getRun.push(performance.now() - t);
}

function report(ctx: BenchContext, subjects: Subject[], calls: number) {
  const [one, ...large] = subjects;
  const figures = subjects.map((s) => ({ name: s.name, trigger: summarize(s.trigger), getRun: summarize(s.getRun) }));
  const ratios = large.map((s) => ({
    name: s.name,
    trigger: ratio(summarize(s.trigger).p50Ms, summarize(one!.trigger).p50Ms),
    getRun: ratio(summarize(s.getRun).p50Ms, summarize(one!.getRun).p50Ms),
  }));
  const met = ratios.every((r) => r.trigger !== null && r.getRun !== null && r.trigger <= TARGET && r.getRun <= TARGET);
  const command = `node --import tsx bench/workflow-history.ts${ctx.quick ? " --quick" : ""}`;
  const md = [
    `# A workflow's history per call — ${new Date().toISOString()}`,
    "",
    `\`${command}\`: ${calls} triggers and GetRuns per workflow, one at a time, the workflows in turn; executors off. ${cpus().length} CPUs; load average at the end ${loadavg()
      .map((x) => x.toFixed(1))
      .join(", ")}.`,
    "",
    "| workflow | trigger p50 / p99 ms | GetRun p50 / p99 ms | trigger ÷ one version | GetRun ÷ one version |",
    "|---|---:|---:|---:|---:|",
    ...figures.map((f, i) => {
      const r = i === 0 ? { trigger: 1, getRun: 1 } : ratios[i - 1]!;
      return `| ${f.name} | ${f.trigger.p50Ms} / ${f.trigger.p99Ms} | ${f.getRun.p50Ms} / ${f.getRun.p99Ms} | ${r.trigger} | ${r.getRun} |`;
    }),
    "",
    `Target: every ratio within ${TARGET} — ${met ? "met" : "NOT met"}.`,
    "",
  ].join("\n");
  const stamp = new Date().toISOString().slice(0, 19).replace(/:/g, "-");
  const out = join(import.meta.dirname, "results", `${stamp}-workflow-history${ctx.quick ? "-quick" : ""}`);
  mkdirSync(join(import.meta.dirname, "results"), { recursive: true });
  writeFileSync(`${out}.md`, md);
  writeFileSync(`${out}.json`, `${JSON.stringify({ command, calls, figures, ratios, target: TARGET, met }, null, 2)}\n`);
  ctx.log(`\n${md}\n(written ${out}.md and .json)`);
  ctx.log(JSON.stringify({ ratios, met }));
}

await standalone("workflow-history", async (ctx) => {
  const calls = ctx.quick ? 200 : 1000;
  const dbName = `${ctx.runTag}_history`;
  const store = await openStore(ctx, dbName);
  const w = await benchWorld(ctx, store);
  ctx.log("publishing 100 versions through the API, storing 100 of 64 KiB inside a workflow…");
  const published = await publishedHistory(ctx, store, w);
  const embedded = await embeddedHistory(store, w);
  const subjects: Subject[] = [
    { name: "one version", workflowId: w.workflowId, hookPath: w.hookPath, trigger: [], getRun: [] },
    {
      name: `${MAX_KEPT_VERSIONS} versions, ${Math.round(MAX_WORKFLOW_BYTES / 1024)} KiB in all`,
      workflowId: published,
      hookPath: "",
      trigger: [],
      getRun: [],
    },
    {
      name: `${MAX_KEPT_VERSIONS} versions of 64 KiB inside the workflow (stored by earlier versions)`,
      workflowId: embedded,
      hookPath: "",
      trigger: [],
      getRun: [],
    },
  ];
  for (const s of subjects.slice(1)) s.hookPath = await hookOf(ctx, store, w, s.workflowId);
  const server = await spawnFor(ctx, "workflow-history", "start", dbName, { RUNHOOK_EXECUTOR: "false" });
  const pool = new Pool(server.baseUrl!, { connections: 1, pipelining: 1 });
  try {
    for (let i = 0; i < 20; i++) for (const s of subjects) await round(pool, w, s, `warm-${i}`, false);
    // Each round starts with another workflow, so that none always follows the same one.
    for (let i = 0; i < calls; i++) for (let k = 0; k < subjects.length; k++) await round(pool, w, subjects[(i + k) % subjects.length]!, `r-${i}`, true);
  } finally {
    await pool.close();
  }
  report(ctx, subjects, calls);
});
process.exit(0);
