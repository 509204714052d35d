// A run's page: its steps on a timeline (durations to scale, waits drawn as waits, a failed
// step's error), followed live through WatchRun, and a cancel button while it is ongoing.
import { useEffect, useState } from "preact/hooks";
import type { Run, StepResult } from "../../../gen/runhook/v1/run_pb.js";
import { runs } from "../api.js";
import { href } from "../route.js";
import { isMissing, useFail } from "../session.js";
import { clock, dateOf, duration } from "../time.js";
import { Confirm } from "../ui.js";
import { Crumbs, NotFound } from "./common.js";

const FINISHED = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);

/** Follows the run through WatchRun (which ends once it is finished); its latest state, or the error. */
function useWatchedRun(runId: string) {
  const fail = useFail();
  const [run, setRun] = useState<Run | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [missing, setMissing] = useState(false);
  useEffect(() => {
    const stop = new AbortController();
    (async () => {
      try {
        for await (const res of runs.watchRun({ runId }, { signal: stop.signal })) if (res.run) setRun(res.run);
      } catch (err) {
        if (stop.signal.aborted) return;
        setMissing(isMissing(err));
        setError(fail(err));
      }
    })();
    return () => stop.abort();
  }, [runId]);
  return { run, setRun, error, setError, missing };
}

/** The span the timeline draws: from the run's creation to its end (or now). */
function span(run: Run, now: number): [number, number] {
  const start = dateOf(run.createdAt)?.getTime() ?? now;
  const end = dateOf(run.finishedAt)?.getTime() ?? now;
  return [start, Math.max(end, start + 1)];
}

function StepRow({ step, from, to, now }: { step: StepResult; from: number; to: number; now: number }) {
  const started = dateOf(step.startedAt)?.getTime();
  const finished = dateOf(step.finishedAt)?.getTime() ?? (step.state === "RUNNING" ? now : undefined);
  const drawn = started !== undefined && finished !== undefined;
  const left = drawn ? ((started - from) / (to - from)) * 100 : 0;
  const width = drawn ? Math.max(0.5, ((finished - started) / (to - from)) * 100) : 0;
  return (
    <li class={`step ${step.state.toLowerCase()} ${step.type === "wait" ? "wait" : ""}`} data-step={step.index}>
      <span class="step-name">
        {step.index + 1}. {step.type}
      </span>
      <span class="step-state">{step.state}</span>
      <span class="track">{drawn && <span class="bar" style={{ left: `${left}%`, width: `${width}%` }} />}</span>
      <span class="step-time">{drawn ? duration(finished - started) : "–"}</span>
      {step.error && <p class="step-error">{step.error}</p>}
    </li>
  );
}

export function RunPage({ runId }: { runId: string }) {
  const fail = useFail();
  const { run, setRun, error, setError, missing } = useWatchedRun(runId);
  const [now, setNow] = useState(Date.now());
  const ongoing = run !== null && !FINISHED.has(run.state);
  useEffect(() => {
    if (!ongoing) return;
    const t = setInterval(() => setNow(Date.now()), 250);
    return () => clearInterval(t);
  }, [ongoing]);
  if (!run && missing) return <NotFound what="run" />;
  if (!run) return <p class={error ? "error" : "muted"}>{error ?? "Loading the run…"}</p>;
  const [from, to] = span(run, now);
  const cancel = async () => {
    try {
      const res = await runs.cancelRun({ runId });
      if (res.run) setRun(res.run);
    } catch (err) {
      setError(fail(err));
    }
  };
  return (
    <section class="run">
      <Crumbs trail={[["Run", null]]} />
      <h1>
        Run <code>{run.id}</code> <span class={`state ${run.state.toLowerCase()}`}>{run.state}</span>
      </h1>
      <dl class="facts">
        <dt>Record</dt>
        <dd>
          {run.collection} / <code>{run.recordId}</code>
        </dd>
        <dt>Workflow</dt>
        <dd>
          <a href={href(["p", run.projectId, "r", run.renderingId, "w", run.workflowId])}>
            <code>{run.workflowId}</code>
          </a>{" "}
          v{run.workflowVersion}
        </dd>
        <dt>As</dt>
        <dd>
          {run.user?.email} via {run.via}
        </dd>
        <dt>Created</dt>
        <dd>{clock(dateOf(run.createdAt))}</dd>
        <dt>Finished</dt>
        <dd>{clock(dateOf(run.finishedAt))}</dd>
        {run.waitUntil && (
          <>
            <dt>Waiting until</dt>
            <dd>{clock(dateOf(run.waitUntil))}</dd>
          </>
        )}
      </dl>
      {run.error && <p class="error run-error">{run.error}</p>}
      {error && <p class="error">{error}</p>}
      <ol class="timeline">
        {run.steps.map((s) => (
          <StepRow key={s.index} step={s} from={from} to={to} now={now} />
        ))}
      </ol>
      {ongoing && (
        <Confirm
          label="Cancel run"
          question="Cancel this run? Its current step is stopped and the run ends CANCELLED."
          confirm="Cancel the run"
          danger
          onConfirm={cancel}
        />
      )}
    </section>
  );
}
