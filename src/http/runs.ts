// Following and cancelling a run over REST (README: "Following a run"):
//   GET  /v1/runs/{runId}[?wait=30s[&version=N]]  → RunService.GetRun
//        wait without version (or version=0): until the run is finished or the time is up;
//        wait with version: until the version differs, the run is finished or the time is up
//   POST /v1/runs/{runId}/cancel                  → RunService.CancelRun
// Both answer the Run itself as ProtoJSON at the top level.
import type { FastifyInstance } from "fastify";
import { RunSchema, RunService } from "../../gen/runhook/v1/run_pb.js";
import type { Deps } from "../deps.js";
import { fail } from "../errors.js";
import type { Services } from "../api/services.js";
import { callUnary } from "../api/call.js";
import { callOptions, protoJson, sendError } from "./bridge.js";
import { create } from "@bufbuild/protobuf";
import { MAX_WAIT_SECONDS } from "../api/runs.js";

/** `30`, `30s`, `1m`, `500ms` (rounded up to whole seconds) → seconds; undefined when malformed. */
export function parseWait(raw: string): number | undefined {
  const m = /^(\d{1,6})(ms|s|m)?$/.exec(raw);
  if (!m) return undefined;
  const n = Number(m[1]);
  const unit = m[2] ?? "s";
  return unit === "ms" ? Math.ceil(n / 1000) : unit === "m" ? n * 60 : n;
}

function single(q: Record<string, unknown>, name: string): string | undefined {
  const v = q[name];
  if (v === undefined) return undefined;
  if (typeof v !== "string") throw fail.invalid(`query parameter "${name}" must be given once`);
  return v;
}

export async function registerRunRoutes(app: FastifyInstance, _deps: Deps, services: Services): Promise<void> {
  const getRun = RunService.method.getRun;
  const cancelRun = RunService.method.cancelRun;
  // POST …/cancel takes no body: the /v1 plugin's parser (body.ts) accepts any, and it is never read.

  app.get<{ Params: { runId: string }; Querystring: Record<string, unknown> }>("/v1/runs/:runId", async (req, reply) => {
    try {
      const q = req.query ?? {};
      let waitSeconds = 0;
      let knownVersion = 0n;
      const wait = single(q, "wait");
      if (wait !== undefined && wait !== "") {
        const s = parseWait(wait);
        if (s === undefined || s > MAX_WAIT_SECONDS) throw fail.invalid(`wait must be a duration of at most ${MAX_WAIT_SECONDS}s, like 30s`);
        waitSeconds = s;
      }
      const version = single(q, "version");
      if (version !== undefined && version !== "") {
        if (!/^\d{1,15}$/.test(version)) throw fail.invalid("version must be a whole number (the run's `version`)");
        knownVersion = BigInt(version);
      }
      const res = await callUnary(services.run, getRun, { runId: req.params.runId, waitSeconds, knownVersion }, callOptions(req, reply, "api"));
      return reply.send(protoJson(RunSchema, res.run ?? create(RunSchema)));
    } catch (err) {
      return sendError(reply, err);
    }
  });

  app.post<{ Params: { runId: string } }>("/v1/runs/:runId/cancel", async (req, reply) => {
    try {
      const res = await callUnary(services.run, cancelRun, { runId: req.params.runId }, callOptions(req, reply, "api"));
      return reply.send(protoJson(RunSchema, res.run ?? create(RunSchema)));
    } catch (err) {
      return sendError(reply, err);
    }
  });
}
