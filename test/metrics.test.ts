// Operating runhook: GET /metrics (Prometheus) after a scripted scenario, counted against
// what happened; and request ids from the gateway and gRPC to the run and its executor's logs.
import { describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { openTestApp, spawnServer, serverForFile, testDbName, type ChildServer } from "./helpers/server.js";
import { createWorld, type World } from "../fixtures/world.js";
import { waitForRun } from "./helpers/runs.js";
import { adminClient, grpcTrigger, local, postHook } from "./helpers/webhook.js";
import { sleep } from "../src/lib/sleep.js";

const server = serverForFile({ env: { METRICS_PORT: "0" } });

async function webhookOf(w: World): Promise<string> {
  const got = await adminClient(server.baseUrl, w.adminToken).getWorkflow({ workflowId: w.workflowId });
  return local(got.workflow!.webhook!.url, server.deps.config.publicBaseUrl, server.baseUrl);
}

/** The samples of the text format: `name{labels} value` → value, keyed by `name{labels}` as printed. */
async function scrape(): Promise<{ text: string; value(name: string, labels?: Record<string, string>): number }> {
  const res = await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  return {
    text,
    value(name, labels = {}) {
      let total = 0;
      for (const line of text.split("\n")) {
        const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
        if (!m || m[1] !== name) continue;
        const got = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
        if (Object.entries(labels).every(([k, v]) => got[k] === v)) total += Number(m[3]);
      }
      return total;
    },
  };
}

describe("GET /metrics", () => {
  it("counts a scripted scenario: webhook answers by status, runs created and finished, refusals, RPCs, HTTP routes", async () => {
    const w = await createWorld(server, { steps: [{ type: "load_record" }] });
    const url = await webhookOf(w);
    const before = await scrape();

    // Two accepted runs that succeed, one that fails (no such record), one 401 and one 400.
    const a = await postHook(url, w.userToken, { record_id: "r1" });
    const b = await postHook(url, w.userToken, { record_id: "r2" });
    const f = await postHook(url, w.userToken, { record_id: "missing" });
    expect([a.status, b.status, f.status]).toEqual([202, 202, 202]);
    expect((await postHook(url, "rh_app_bad", { record_id: "r3" })).status).toBe(401);
    expect((await postHook(url, w.userToken, { nothing: 1 })).status).toBe(400);
    // One over the webhook's limit.
    await adminClient(server.baseUrl, w.adminToken).setWebhookRateLimit({ workflowId: w.workflowId, rateLimitPerMinute: 1 });
    const limited = await postHook(url, w.userToken, { record_id: "r4" });
    expect(limited.status).toBe(429);
    // One native gRPC call (unknown webhook) and one /v1 read.
    const g = await grpcTrigger(server.grpcAddr, `${server.baseUrl}/hooks/AAAA`, "r1", w.userToken);
    expect(g.error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    const logs = await fetch(`${server.baseUrl}/v1/project/${w.projectName}/admin-logs?limit=1`, { headers: { authorization: `Bearer ${w.apiToken}` } });
    expect(logs.status).toBe(200);

    const runs = await Promise.all([a, b, f].map((r) => waitForRun(server.deps.store, r.body.runId!)));
    expect(runs.map((r) => r.state)).toEqual(["SUCCEEDED", "SUCCEEDED", "FAILED"]);
    // The finishing update and its metric happen together; give the event loop a moment.
    await sleep(100);

    const after = await scrape();
    const delta = (name: string, labels?: Record<string, string>) => after.value(name, labels) - before.value(name, labels);
    expect(delta("runhook_webhook_answers_total", { status: "202" })).toBe(3);
    expect(delta("runhook_webhook_answers_total", { status: "401" })).toBe(1);
    expect(delta("runhook_webhook_answers_total", { status: "400" })).toBe(1);
    expect(delta("runhook_webhook_answers_total", { status: "429" })).toBe(1);
    expect(delta("runhook_runs_created_total")).toBe(3);
    expect(delta("runhook_runs_finished_total", { state: "SUCCEEDED" })).toBe(2);
    expect(delta("runhook_runs_finished_total", { state: "FAILED" })).toBe(1);
    expect(delta("runhook_run_pickup_seconds_count")).toBe(3);
    expect(delta("runhook_run_duration_seconds_count", { state: "SUCCEEDED" })).toBe(2);
    expect(delta("runhook_rate_limit_refusals_total", { bucket: "webhook" })).toBe(1);
    expect(delta("runhook_rpc_calls_total", { protocol: "grpc", service: "runhook.v1.TriggerService", method: "TriggerRun", code: "invalid_argument" })).toBe(
      1,
    );
    expect(delta("runhook_http_request_duration_seconds_count", { route: "/hooks/*", status: "202" })).toBe(3);
    expect(delta("runhook_http_request_duration_seconds_count", { route: "/v1/project/:projectName/admin-logs", status: "200" })).toBe(1);
    // Nothing queued any more; the defaults of prom-client are there.
    expect(after.value("runhook_queue_depth")).toBe(0);
    expect(after.text).toContain("process_cpu_user_seconds_total");
    expect(after.text).toContain("runhook_lease_takeovers_total");
    expect(after.text).toContain("runhook_db_errors_total");
    // Route templates only: no webhook key, token or record id in any label.
    expect(after.text).not.toMatch(/hooks\/[A-Za-z0-9_-]{20,}|rh_(app|api)_|r1"/);
  });

  it("serves only GET /metrics on its port; the gateway has no /metrics", async () => {
    expect((await fetch(`http://127.0.0.1:${server.metricsPort}/other`)).status).toBe(404);
    expect((await fetch(`${server.baseUrl}/metrics`)).status).toBe(404);
  });
});

describe("request ids", () => {
  it("keeps a well-formed x-request-id, replaces a malformed one, and echoes it on HTTP and gRPC answers", async () => {
    const kept = await fetch(`${server.baseUrl}/healthz`, { headers: { "x-request-id": "abc-123.X_y:z" } });
    expect(kept.headers.get("x-request-id")).toBe("abc-123.X_y:z");
    const replaced = await fetch(`${server.baseUrl}/healthz`, { headers: { "x-request-id": "bad id <script>" } });
    expect(replaced.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const made = await fetch(`${server.baseUrl}/v1/project/x/admin-logs`);
    expect(made.status).toBe(401);
    expect(made.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);

    const client = new grpc.Client(server.grpcAddr, grpc.credentials.createInsecure());
    try {
      const md = new grpc.Metadata();
      md.set("x-request-id", "grpc-req-7");
      const trailers = await new Promise<grpc.Metadata>((resolve) => {
        const call = client.makeUnaryRequest(
          "/runhook.v1.TriggerService/TriggerRun",
          () => Buffer.alloc(0),
          (b: Buffer) => b,
          {},
          md,
          () => {},
        );
        call.on("status", (s: grpc.StatusObject) => resolve(s.metadata));
      });
      expect(trailers.get("x-request-id")).toEqual(["grpc-req-7"]);
    } finally {
      client.close();
    }
  });

  it("stores the webhook call's request id on the run, and the executor's log lines of that run carry it", async () => {
    // A server process of its own, so that its log lines (stdout) can be read.
    const dbName = testDbName();
    const child: ChildServer = await spawnServer(dbName);
    try {
      const lines: string[] = [];
      child.child.stdout!.on("data", (d: Buffer) => lines.push(...d.toString().split("\n")));
      const app = await openTestApp(dbName);
      try {
        const w = await createWorld(app, { steps: [{ type: "load_record" }] });
        const got = await adminClient(child.baseUrl, w.adminToken).getWorkflow({ workflowId: w.workflowId });
        const url = child.baseUrl + new URL(got.workflow!.webhook!.url).pathname;
        const res = await fetch(url, {
          method: "POST",
          headers: { authorization: `Bearer ${w.userToken}`, "content-type": "application/json", "x-request-id": "hook-req-42" },
          body: JSON.stringify({ record_id: "no-such-record" }),
        });
        expect(res.status).toBe(202);
        expect(res.headers.get("x-request-id")).toBe("hook-req-42");
        const { runId } = (await res.json()) as { runId: string };
        const run = await waitForRun(app.deps.store, runId);
        expect(run).toMatchObject({ state: "FAILED", requestId: "hook-req-42" });
        const shown = await fetch(`${child.baseUrl}/v1/runs/${runId}`, { headers: { authorization: `Bearer ${w.userToken}` } });
        expect(((await shown.json()) as { requestId: string }).requestId).toBe("hook-req-42");
        // The access log line of the call and the executor's line about the run both carry it.
        const end = Date.now() + 5000;
        const parsed = () => lines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>);
        while (!parsed().some((l) => l.msg === "run failed") && Date.now() < end) await sleep(50);
        expect(parsed().find((l) => l.msg === "run failed")).toMatchObject({ runId, requestId: "hook-req-42" });
        expect(parsed().find((l) => l.msg === "request" && l.status === 202)).toMatchObject({ requestId: "hook-req-42" });
      } finally {
        app.stop();
        await app.deps.store.close();
      }
    } finally {
      await child.stop();
    }
  });
});
