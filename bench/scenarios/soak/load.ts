import { performance } from "node:perf_hooks";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { Pool } from "undici";
import { TriggerRunRequestSchema, TriggerRunResponseSchema } from "../../../gen/runhook/v1/trigger_pb.js";
import { FINISHED_STATES } from "../../../src/domain/runs/model.js";
import type { BenchWorld } from "../../lib/context.js";
import { grpcLimitMet, httpLimitMet, LimitMet } from "../../lib/limits.js";
import { CONFLICT_EVERY, FOLLOW_AFTER_MS, KINDS, LOG_PAGE, MIX, REQUEST_TIMEOUT_MS, type Kind } from "./model.js";

interface Tenant {
  w: BenchWorld;
  envPath: string;
  hookHeaders: Record<string, string>;
  userHeaders: Record<string, string>;
  apiHeaders: Record<string, string>;
  apiJsonHeaders: Record<string, string>;
  grpcMd: grpc.Metadata;
  nextRecord: number;
  triggers: number;
  /** Runs accepted, in order (trimmed). */
  runs: { id: string; at: number }[];
  cursor: string;
}

interface Answer {
  status: string;
  expected: boolean;
  accepted?: boolean;
  conflict?: boolean;
  /** Nothing to ask yet (no run accepted): not a request. */
  skipped?: boolean;
  /** GET of a run accepted ≥ 1 s before: was it finished? */
  finished?: boolean;
  entries?: number;
}

const FINISHED = new Set<string>(FINISHED_STATES);
const TRIGGER_PATH = "/runhook.v1.TriggerService/TriggerRun";
const encodeReq = (m: { webhookUrl: string; recordId: string }) => Buffer.from(toBinary(TriggerRunRequestSchema, create(TriggerRunRequestSchema, m)));
const errStatus = (err: unknown) => String((err as { code?: string }).code ?? (err as Error).name ?? "error");

export function tenantOf(w: BenchWorld): Tenant {
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${w.userToken}`);
  return {
    w,
    envPath: `/v1/project/${encodeURIComponent(w.projectName)}/environment/${encodeURIComponent(w.environmentName)}`,
    hookHeaders: { authorization: `Bearer ${w.userToken}`, "content-type": "application/json" },
    userHeaders: { authorization: `Bearer ${w.userToken}` },
    apiHeaders: { authorization: `Bearer ${w.apiToken}` },
    apiJsonHeaders: { authorization: `Bearer ${w.apiToken}`, "content-type": "application/json" },
    grpcMd: md,
    nextRecord: 0,
    triggers: 0,
    runs: [],
    cursor: "",
  };
}

/** The mixed load's requests against one server; one that meets a limit throws LimitMet. */
export function requests(pool: Pool, client: grpc.Client, tenants: Tenant[], records: number) {
  const counters: Record<Kind, number> = { webhook: 0, grpc: 0, runGet: 0, logsPage: 0, noteCreate: 0, noteList: 0 };

  /** The tenant's records in rotation: a pair comes back after `records` triggers, long after its run finished. */
  const pickRecord = (t: Tenant) => `r${t.nextRecord++ % records}`;
  function accepted(t: Tenant, id: string) {
    t.runs.push({ id, at: performance.now() });
    if (t.runs.length > 4000) t.runs.splice(0, 2000);
  }

  async function webhook(t: Tenant): Promise<Answer[]> {
    const body = JSON.stringify({ record_id: pickRecord(t) });
    const n = ++t.triggers;
    return Promise.all(Array.from({ length: n % CONFLICT_EVERY === 0 ? 2 : 1 }, () => webhookOnce(t, body)));
  }

  /** One HTTP request: its status and text; a limit's refusal throws (LimitMet). */
  async function ask(path: string, method: "GET" | "POST", headers: Record<string, string>, body?: string) {
    const res = await pool.request({ path, method, headers, body });
    const text = await res.body.text();
    const met = httpLimitMet(res.statusCode, text);
    if (met) throw met;
    return { statusCode: res.statusCode, text };
  }

  async function webhookOnce(t: Tenant, body: string): Promise<Answer> {
    const { statusCode, text } = await ask(t.w.hookPath, "POST", t.hookHeaders, body);
    if (statusCode === 202) {
      const id = /"runId"\s*:\s*"([^"]+)"/.exec(text)?.[1];
      if (!id) return { status: "202-without-runId", expected: false };
      accepted(t, id);
      return { status: "202", expected: true, accepted: true };
    }
    return { status: String(statusCode), expected: statusCode === 409, conflict: statusCode === 409 };
  }

  function grpcTrigger(t: Tenant): Promise<Answer> {
    const webhookUrl = `http://localhost${t.w.hookPath}`;
    return new Promise((resolve, reject) =>
      client.makeUnaryRequest(
        TRIGGER_PATH,
        encodeReq,
        (b: Buffer) => fromBinary(TriggerRunResponseSchema, b),
        { webhookUrl, recordId: pickRecord(t) },
        t.grpcMd,
        { deadline: Date.now() + REQUEST_TIMEOUT_MS },
        (err, value) => {
          const met = grpcLimitMet(err);
          if (met) return reject(met);
          if (err)
            return resolve({
              status: `grpc-${grpc.status[err.code] ?? err.code}`,
              expected: err.code === grpc.status.ALREADY_EXISTS,
              conflict: err.code === grpc.status.ALREADY_EXISTS,
            });
          if (!value?.runId) return resolve({ status: "ok-without-runId", expected: false });
          accepted(t, value.runId);
          resolve({ status: "OK", expected: true, accepted: true });
        },
      ),
    );
  }

  async function runGet(t: Tenant): Promise<Answer> {
    const cutoff = performance.now() - FOLLOW_AFTER_MS;
    let pick: { id: string; at: number } | undefined;
    for (let k = t.runs.length - 1; k >= 0; k--) {
      if (t.runs[k]!.at <= cutoff) {
        pick = t.runs[k];
        break;
      }
    }
    const aged = pick !== undefined;
    pick ??= t.runs[t.runs.length - 1];
    if (!pick) return { status: "no-run-yet", expected: true, skipped: true };
    const res = await ask(`/v1/runs/${pick.id}`, "GET", t.userHeaders);
    if (res.statusCode !== 200) return { status: String(res.statusCode), expected: false };
    const state = /"state"\s*:\s*"([A-Z_]+)"/.exec(res.text)?.[1] ?? "";
    return { status: "200", expected: true, ...(aged ? { finished: FINISHED.has(state) } : {}) };
  }

  async function logsPage(t: Tenant): Promise<Answer> {
    const used = t.cursor;
    const query = new URLSearchParams({ order: "asc", limit: String(LOG_PAGE), ...(used ? { cursor: used } : {}) });
    const res = await ask(`${t.envPath}/activity-logs?${query}`, "GET", t.apiHeaders);
    if (res.statusCode !== 200) return { status: String(res.statusCode), expected: false };
    const body = JSON.parse(res.text) as { data?: unknown[]; nextCursor?: string };
    // Two pages of one cursor in flight read the same entries: only the first to answer moves the tail on.
    if (body.nextCursor && t.cursor === used) {
      t.cursor = body.nextCursor;
      return { status: "200", expected: true, entries: body.data?.length ?? 0 };
    }
    return { status: "200", expected: true };
  }

  async function noteCreate(t: Tenant, n: number): Promise<Answer> {
    const body = JSON.stringify({
      collectionName: t.w.collection,
      recordId: `r${(n * 7919) % records}`,
      title: `soak ${n}`,
      content: `Soak note ${n}: <b>checked</b> at ${new Date().toISOString()}`,
    });
    const res = await ask(`${t.envPath}/notes`, "POST", t.apiJsonHeaders, body);
    return { status: String(res.statusCode), expected: res.statusCode === 201 };
  }

  async function noteList(t: Tenant, n: number): Promise<Answer> {
    const filter = n % 2 === 0 ? "" : `&collectionName=${encodeURIComponent(t.w.collection)}&recordId=r${(n * 7919) % records}`;
    const res = await ask(`${t.envPath}/notes?limit=20${filter}`, "GET", t.apiHeaders);
    return { status: String(res.statusCode), expected: res.statusCode === 200 };
  }

  const once = async (p: () => Promise<Answer>): Promise<Answer> => {
    try {
      return await p();
    } catch (err) {
      if (err instanceof LimitMet) throw err;
      return { status: errStatus(err), expected: false };
    }
  };
  /** One arrival of `kind`: its answer (two for a duplicated trigger). */
  return async function call(kind: Kind): Promise<Answer[]> {
    const n = counters[kind]++;
    const t = tenants[n % tenants.length]!;
    switch (kind) {
      case "webhook":
        return webhook(t).catch((err: unknown) => {
          if (err instanceof LimitMet) throw err;
          return [{ status: errStatus(err), expected: false }];
        });
      case "grpc":
        return [await once(() => grpcTrigger(t))];
      case "runGet":
        return [await once(() => runGet(t))];
      case "logsPage":
        return [await once(() => logsPage(t))];
      case "noteCreate":
        return [await once(() => noteCreate(t, n))];
      case "noteList":
        return [await once(() => noteList(t, n))];
    }
  };
}

/** The kind of arrival j: MIX's proportions in every 100 arrivals, in a fixed shuffled order. */
export function kindSequence(): (j: number) => Kind {
  const pattern: Kind[] = KINDS.flatMap((k) => Array.from({ length: MIX[k] }, () => k));
  let seed = 12345;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  for (let i = pattern.length - 1; i > 0; i--) {
    const k = Math.floor(rand() * (i + 1));
    [pattern[i], pattern[k]] = [pattern[k]!, pattern[i]!];
  }
  return (j) => pattern[j % pattern.length]!;
}
