// A TypeScript consumer of runhook over native gRPC with Connect (@connectrpc/connect-node) and
// the protobuf-es code in gen/, as docs/grpc.md shows it: trigger a run on the record, follow it
// with WatchRun until it is finished, then find it with RunService.ListRuns (the runs of its
// workflow on the record, SUCCEEDED, with the application token: a user sees its own runs).
//
// Configuration (environment): RUNHOOK_GRPC_ADDR (host:port), RUNHOOK_WEBHOOK_URL,
// RUNHOOK_USER_TOKEN, RUNHOOK_PROJECT, RUNHOOK_ENVIRONMENT, RUNHOOK_COLLECTION, RUNHOOK_RECORD_ID.
// On success it prints one JSON line and exits 0; otherwise "interop(typescript): FAIL <step>:
// <reason>" on stderr and exit code 1.
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { RunService, type Run } from "../../../gen/runhook/v1/run_pb.js";
import { TriggerService } from "../../../gen/runhook/v1/trigger_pb.js";

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`configuration: ${name} is not set`);
  return v;
};

async function step<T>(name: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw new Error(`${name}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

async function main(): Promise<void> {
  const transport = createGrpcTransport({ baseUrl: `http://${env("RUNHOOK_GRPC_ADDR")}` });
  const headers = { authorization: `Bearer ${env("RUNHOOK_USER_TOKEN")}` };
  const trigger = createClient(TriggerService, transport);
  const runs = createClient(RunService, transport);
  const started = Date.now();
  const { runId } = await step("TriggerRun", () => trigger.triggerRun({ webhookUrl: env("RUNHOOK_WEBHOOK_URL"), recordId: env("RUNHOOK_RECORD_ID") }, { headers }));
  let final: Run | undefined;
  await step("WatchRun", async () => {
    for await (const { run } of runs.watchRun({ runId }, { headers, timeoutMs: 60_000 })) final = run;
  });
  if (final?.state !== "SUCCEEDED") throw new Error(`run: ${runId} finished ${final?.state}: ${final?.error}`);
  const page = await step("ListRuns", () =>
    runs.listRuns(
      {
        projectName: env("RUNHOOK_PROJECT"),
        environmentName: env("RUNHOOK_ENVIRONMENT"),
        options: { limit: 10 },
        filter: { workflowId: final!.workflowId, collection: env("RUNHOOK_COLLECTION"), recordId: env("RUNHOOK_RECORD_ID"), states: ["SUCCEEDED"] },
      },
      { headers },
    ),
  );
  const listed = page.runs.find((r) => r.id === runId);
  if (!listed) throw new Error(`ListRuns: run ${runId} not among the ${page.runs.length} runs listed`);
  const result = { client: "typescript", ok: true, runId, finalState: final.state, runSeconds: (Date.now() - started) / 1000, listedRunId: listed.id };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`interop(typescript): FAIL ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
