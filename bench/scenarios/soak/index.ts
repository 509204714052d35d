// Soak mode (`npm run bench -- --soak 10m`): a mixed load at about half of the measured
// capacity for a long time, on one server (executors off) and worker processes, with per-minute
// figures: RSS of every runhook process and of the Java database, p50/p99 latency of each
// request kind, accepted/s, the run backlog. At the end a verdict: is RSS flat (slope after
// the first minute) and p99 stable (max/min of the per-minute p99 after the first minute)?
//
// The mix (per 100 arrivals): webhook triggers over REST on many records (50), native gRPC
// TriggerRun (3), GET /v1/runs/{id} of a run accepted about a second earlier (20), the next
// activity-log page after the tail's nextCursor (10), note create (7) and list (10). Two
// tenants (organizations with one workflow each), their records taken in rotation, so that a
// (workflow, record) pair comes back only long after its run finished; every 50th REST trigger of a
// tenant is sent twice at once (the arrival's request and a duplicate on the same record): one
// of the two is accepted, the other answered 409 — a 409 for every 50 triggers, by construction.
//
// Capacity: a closed loop of the same mix at concurrency 16 (executors running), then the
// backlog it left is drained with the load off. See `capacity` below for how the two combine.
// The soak itself is an open loop (fixed arrival rate, lib/open-loop.ts) at `share` (50%) of
// it, so that a slower server shows as latency, not as a lower rate.
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import * as grpc from "@grpc/grpc-js";
import { Pool } from "undici";
import { runStateMachine } from "../../../src/domain/runs/state.js";
import type { Store } from "../../../src/store/index.js";
import { storeFixtures } from "../../../src/store/index.js";
import type { RunState } from "../../../src/store/types.js";
import { benchWorld, openStore, spawnFor, type BenchContext } from "../../lib/context.js";
import { LimitMet } from "../../lib/limits.js";
import { closedLoop, round, sleep } from "../../lib/load.js";
import { openLoop } from "../../lib/open-loop.js";
import { rssMb, type Proc } from "../../lib/procs.js";
import { consoleLine, kindFigures, lat, newWindow, windowFigures, type DbFigures, type WindowAcc } from "./aggregate.js";
import { kindSequence, requests, tenantOf } from "./load.js";
import {
  KINDS,
  MIX,
  PRINT_GRACE_MS,
  REQUEST_TIMEOUT_MS,
  RSS_EVERY_MS,
  SHORT,
  TRIGGER_SHARE,
  type Capacity,
  type Kind,
  type KindFigures,
  type SoakOptions,
  type SoakResult,
} from "./model.js";
import { verdictOf } from "./verdict.js";

async function dbFigures(store: Store, fromWall: number, toWall: number): Promise<DbFigures> {
  const runs = storeFixtures(store).runs;
  const q = <T>(p: Promise<T>) => p.catch(() => null);
  const [finished, backlog, total, activity] = await Promise.all([
    q(runs.countDocuments({ finishedAt: { $gte: new Date(fromWall), $lt: new Date(toWall) } })),
    q(runs.countDocuments({ state: { $in: ["QUEUED", "RUNNING"] as RunState[] } })),
    q(runs.estimatedDocumentCount()),
    q(storeFixtures(store).activityLogs.estimatedDocumentCount()),
  ]);
  return { finished, backlog, runs: total, activity };
}

/** Waits until no run is QUEUED or RUNNING (at most `limitMs`), then cancels what is left. */
async function drain(store: Store, limitMs: number): Promise<{ ms: number; finished: number; cancelled: number }> {
  const t0 = Date.now();
  const ongoing = { state: { $in: ["QUEUED", "RUNNING"] as RunState[] } };
  while (Date.now() - t0 < limitMs && (await storeFixtures(store).runs.countDocuments(ongoing)) > 0) await sleep(250);
  const ms = Date.now() - t0;
  const finished = await storeFixtures(store).runs.countDocuments({ finishedAt: { $gte: new Date(t0) } });
  let cancelled = 0;
  const machine = runStateMachine(store);
  for (const d of await storeFixtures(store).runs.find(ongoing).toArray()) {
    if (await machine.cancel(d, "cancelled by the soak benchmark (capacity phase backlog)")) cancelled++;
  }
  return { ms, finished, cancelled };
}

export async function soakScenario(ctx: BenchContext, o: SoakOptions): Promise<SoakResult> {
  const dbName = `${ctx.runTag}_soak`;
  const store = await openStore(ctx, dbName);
  const records = Array.from({ length: o.records }, (_, k) => ({ id: `r${k}`, status: "new", region: k % 2 ? "eu" : "us" }));
  const steps = [{ type: "load_record" as const }, { type: "update_record" as const, set: { status: "done" } }];
  const worlds = [await benchWorld(ctx, store, { steps, records }), await benchWorld(ctx, store, { steps, records })];
  const tenants = worlds.map(tenantOf);
  const procs: Proc[] = [];
  try {
    procs.push(await spawnFor(ctx, "soak", "start", dbName, { RUNHOOK_EXECUTOR: o.workers > 0 ? "false" : "true" }));
    for (let i = 0; i < o.workers; i++) procs.push(await spawnFor(ctx, "soak", "worker", dbName));
    const server = procs[0]!;
    const pids: Record<string, number | undefined> = { server: server.pid };
    for (const [i, p] of procs.slice(1).entries()) pids[o.workers > 1 ? `worker${i + 1}` : "worker"] = p.pid;
    if (ctx.javaPid) pids.java = ctx.javaPid;
    const names = Object.keys(pids);
    const javaName = ctx.javaPid ? "java" : undefined;
    const rssNow = () => Object.fromEntries(names.map((n) => [n, pids[n] ? rssMb(pids[n]!) : null]));
    ctx.log(
      `  server pid ${server.pid}${
        o.workers
          ? `, ${o.workers} worker(s) (pids ${procs
              .slice(1)
              .map((p) => p.pid)
              .join(", ")})`
          : " with executors"
      }; ${tenants.length} tenants × ${o.records} records; RSS ${JSON.stringify(rssNow())} MB`,
    );

    const pool = new Pool(server.baseUrl!, { connections: 64, pipelining: 1, headersTimeout: REQUEST_TIMEOUT_MS, bodyTimeout: REQUEST_TIMEOUT_MS });
    const client = new grpc.Client(server.grpcAddr!, grpc.credentials.createInsecure());
    try {
      const call = requests(pool, client, tenants, o.records);
      const kindOf = kindSequence();
      const probe = (await call("webhook"))[0]!;
      if (!probe.accepted) throw new Error(`the webhook answered ${probe.status} to the first trigger`);

      // ---- capacity
      let capacity: Capacity | null = null;
      let target = o.ratePerSec ?? 0;
      if (!o.ratePerSec) {
        let measuring = false;
        let acceptedN = 0;
        const perKind = newWindow(0, 0, 0).kinds;
        let fromWall = 0;
        let j = 0;
        const st = await closedLoop({
          concurrency: o.capacityConcurrency,
          durationMs: o.capacityMs,
          warmupPerWorker: 3,
          onMeasureStart: () => {
            measuring = true;
            fromWall = Date.now();
          },
          fn: async () => {
            const kind = kindOf(j++);
            const t0 = performance.now();
            const answers = await call(kind);
            if (measuring) {
              perKind[kind].lat.push(performance.now() - t0);
              for (const a of answers) {
                if (a.accepted) acceptedN++;
                perKind[kind].statuses[a.status] = (perKind[kind].statuses[a.status] ?? 0) + 1;
                if (!a.expected) perKind[kind].errors++;
              }
            }
            const bad = answers.find((a) => !a.expected);
            return { ok: !bad, status: bad?.status ?? answers[0]!.status };
          },
        });
        const toWall = Date.now();
        const finishedN = await storeFixtures(store).runs.countDocuments({ finishedAt: { $gte: new Date(fromWall), $lt: new Date(toWall) } });
        const backlogAfter = await storeFixtures(store).runs.countDocuments({ state: { $in: ["QUEUED", "RUNNING"] as RunState[] } });
        const mixPerSec = round((st.requests / st.durationMs) * 1000, 1);
        const acceptedPerSec = round((acceptedN / st.durationMs) * 1000, 1);
        const finishedPerSec = round((finishedN / st.durationMs) * 1000, 1);
        const kinds = Object.fromEntries(KINDS.map((k) => [k, kindFigures(perKind[k])])) as Record<Kind, KindFigures>;
        ctx.log(
          `  capacity: closed loop c=${o.capacityConcurrency} ${st.durationMs} ms: ${mixPerSec} req/s (p50 ${st.p50Ms} p99 ${st.p99Ms} ms), ${acceptedPerSec} accepted/s, ${finishedPerSec} finished/s; backlog ${backlogAfter}; errors ${KINDS.reduce((a, k) => a + kinds[k].errors, 0)}`,
        );
        ctx.log(`    p50/p99 ms ${KINDS.map((k) => `${SHORT[k]} ${lat(kinds[k])}`).join(", ")}; draining…`);
        const d = await drain(store, 30_000);
        const drainRunsPerSec = d.ms >= 2000 && d.finished > 0 ? round((d.finished / d.ms) * 1000, 1) : null;
        let capacityPerSec: number;
        let how: string;
        if (drainRunsPerSec === null || acceptedPerSec <= finishedPerSec * 1.1) {
          capacityPerSec = mixPerSec;
          how = "The executors kept up with the closed loop (under 2 s of backlog): capacity = the closed loop's rate.";
        } else {
          // Both halves of the load share the machine. During the loop the executors ran at
          // finished/drain of their speed alone, so the requests had the rest: alone they would
          // have reached mix / (1 − finished/drain). R req/s of the mix then need R / that of
          // the machine for the requests and R × triggers share / drain for their runs.
          const execShare = Math.min(0.9, finishedPerSec / drainRunsPerSec);
          const requestsAlone = mixPerSec / (1 - execShare);
          capacityPerSec = 1 / (1 / requestsAlone + TRIGGER_SHARE / drainRunsPerSec);
          how = `The executors fell behind (${acceptedPerSec} accepted/s vs ${finishedPerSec} finished/s), so the runs bound the capacity: requests alone ≈ ${round(mixPerSec)} / (1 − ${round(execShare, 2)}) = ${round(requestsAlone)} req/s, runs alone ${drainRunsPerSec}/s (the drain), so capacity = 1 / (1/${round(requestsAlone)} + ${TRIGGER_SHARE}/${drainRunsPerSec}) ≈ ${round(capacityPerSec, 1)} req/s of the mix.`;
        }
        capacityPerSec = round(capacityPerSec, 1);
        target = round(capacityPerSec * o.share, 1);
        capacity = {
          concurrency: o.capacityConcurrency,
          durationMs: st.durationMs,
          mixPerSec,
          kinds,
          acceptedPerSec,
          finishedPerSec,
          backlogAfter,
          drainRunsPerSec,
          drainMs: d.ms,
          cancelled: d.cancelled,
          capacityPerSec,
          how,
        };
        ctx.log(
          `  drained in ${round(d.ms / 1000, 1)} s${drainRunsPerSec ? ` at ${drainRunsPerSec} runs/s` : ""}${d.cancelled ? `, ${d.cancelled} cancelled` : ""}. ${how}`,
        );
      }
      if (!(target > 0)) throw new Error(`no rate to run at (capacity ${capacity?.capacityPerSec})`);
      ctx.log(
        `  soak: open loop at ${target} req/s (≈ ${round(target * TRIGGER_SHARE, 1)} triggers/s) for ${o.durationMs / 1000} s, figures every ${o.windowMs / 1000} s`,
      );
      await sleep(1000);

      // ---- soak
      const nWindows = Math.ceil(o.durationMs / o.windowMs);
      const wins = Array.from({ length: nWindows }, (_, k) => newWindow(k + 1, k * o.windowMs, Math.min(o.durationMs, (k + 1) * o.windowMs)));
      const winAt = (relMs: number) => wins[Math.min(nWindows - 1, Math.max(0, Math.floor(relMs / o.windowMs)))]!;
      const samples: SoakResult["rssSamples"] = [];
      const start = performance.now() + 50;
      const wallStart = Date.now() + 50;
      const rel = () => performance.now() - start;
      const sample = () => samples.push({ t: round(rel() / 1000, 1), mb: rssNow() });
      const sampler = setInterval(sample, RSS_EVERY_MS);
      let accepted = 0;
      let conflicts = 0;
      let errors = 0;
      let finishedLoad = false;
      let met: LimitMet | undefined;

      const report = async (w: WindowAcc) => {
        w.db = await w.dbAtEnd!;
        w.printed = true;
        ctx.log(consoleLine(windowFigures(w, samples, names), names));
      };
      const reporter = (async () => {
        for (;;) {
          const now = rel();
          // At a window's end: RSS and the database's figures (the runs that finished in it, the backlog).
          for (const w of wins) {
            if (now < w.toMs) break;
            if (!w.rssEnd) {
              w.rssEnd = rssNow();
              w.loadAvg1 = round(loadavg()[0]!, 2);
              samples.push({ t: round(now / 1000, 1), mb: w.rssEnd });
            }
            w.dbAtEnd ??= dbFigures(store, wallStart + w.fromMs, wallStart + w.toMs);
          }
          // Printed in order, once every request of the window answered (or after a grace time).
          for (const w of wins) {
            if (w.printed) continue;
            if (now < w.toMs || !(w.pending === 0 || now >= w.toMs + PRINT_GRACE_MS || finishedLoad)) break;
            await report(w);
          }
          if (wins.every((w) => w.printed) || met) return;
          await sleep(250);
        }
      })();

      const loop = await openLoop({
        ratePerSec: target,
        durationMs: o.durationMs,
        maxInFlight: 2000,
        drainMs: REQUEST_TIMEOUT_MS + 5000,
        startMs: start,
        stopEarly: () => met !== undefined,
        onDrop: (_j, due) => {
          const w = winAt(due - start);
          w.arrivals++;
          w.dropped++;
        },
        issue: async (j, due, lagMs) => {
          const w = winAt(due - start);
          w.arrivals++;
          w.pending++;
          w.lag.push(lagMs);
          const kind = kindOf(j);
          const answers = await call(kind).catch((err: unknown) => {
            if (!(err instanceof LimitMet)) throw err;
            met ??= err;
            return [];
          });
          const ms = performance.now() - due;
          w.pending--;
          for (const a of answers) {
            if (a.skipped) continue;
            const k = w.kinds[kind];
            k.lat.push(ms);
            k.statuses[a.status] = (k.statuses[a.status] ?? 0) + 1;
            if (!a.expected) {
              k.errors++;
              errors++;
            }
            if (a.accepted) {
              w.accepted++;
              accepted++;
            }
            if (a.conflict) {
              w.conflicts++;
              conflicts++;
            }
            if (a.finished !== undefined) w.followed[a.finished ? "finished" : "unfinished"]++;
            if (a.entries) w.logEntries += a.entries;
          }
        },
      });
      finishedLoad = true;
      await reporter;
      if (met) throw met;
      clearInterval(sampler);
      sample();
      const windows = wins.map((w) => windowFigures(w, samples, names));
      const verdict = verdictOf(windows, samples, names, o.windowMs, javaName);
      const totals = {
        arrivals: loop.issued + loop.dropped,
        issued: loop.issued,
        dropped: loop.dropped,
        unanswered: loop.unanswered,
        maxInFlight: loop.maxInFlight,
        accepted,
        conflicts,
        errors,
        elapsedS: round((loop.endMs - start) / 1000, 1),
      };
      return { options: o, mix: MIX, processes: pids, tenants: tenants.length, capacity, targetPerSec: target, windows, rssSamples: samples, totals, verdict };
    } finally {
      client.close();
      await pool.close().catch(() => {});
    }
  } finally {
    await Promise.all(procs.map((p) => p.stop()));
  }
}
