// A run's page: its steps on a timeline (durations to scale, with the time it was queued, waits
// drawn as waits, an axis, a skipped step's run), its error once, followed live through WatchRun; a cancel button while it
// is ongoing, and once it failed or was cancelled, Retry (and Retry from the failed step) for
// whoever may trigger its workflow; the retries it is part of, each a link.
import { useEffect, useRef, useState } from "preact/hooks";
import type { Run, StepResult } from "../../../gen/runhook/v1/run_pb.js";
import { admin, runs } from "../api.js";
import { href, useArrivalFocus } from "../route.js";
import { isMissing, mayTrigger, useFail, useLoad, useMe } from "../session.js";
import { dateOf, duration } from "../time.js";
import { Ago, Confirm, useTitle } from "../ui.js";
import { runIdOf } from "../ids.js";
import { Crumbs, NotFound, OpenRunForm, Page, RefusalText, RunLink, useRunStart, useWorkflow } from "./common.js";
import { RecordLink, UserName } from "./links.js";

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

/** When the run left the queue: its first step's start; until then now (or its end, if it never started). */
function queuedUntil(run: Run, now: number): number {
  const starts = run.steps.flatMap((s) => dateOf(s.startedAt)?.getTime() ?? []);
  if (starts.length) return Math.min(...starts);
  return dateOf(run.finishedAt)?.getTime() ?? now;
}

/** Where `start`…`end` lies on a timeline of `from`…`to`, in percent of its width (a sliver at least). */
const barStyle = (start: number, end: number, from: number, to: number) => ({
  left: `${((start - from) / (to - from)) * 100}%`,
  width: `${Math.max(0.5, ((end - start) / (to - from)) * 100)}%`,
});

/** The id of a run shortened for titles and trails: its first 8 characters. */
const shortId = (id: string) => `${id.slice(0, 8)}…`;

function StepRow({ step, from, to, now, runError }: { step: StepResult; from: number; to: number; now: number; runError: string }) {
  const started = dateOf(step.startedAt)?.getTime();
  const finished = dateOf(step.finishedAt)?.getTime() ?? (step.state === "RUNNING" ? now : undefined);
  const drawn = started !== undefined && finished !== undefined;
  return (
    <li class={`step ${step.state.toLowerCase()} ${step.type === "wait" ? "wait" : ""}`} data-step={step.index}>
      <span class="step-name">
        {step.index + 1}. {step.type}
      </span>
      <span class="step-state">{step.state}</span>
      <span class="track">{drawn && <span class="bar" style={barStyle(started, finished, from, to)} />}</span>
      <span class="step-time">{drawn ? duration(finished - started) : "–"}</span>
      {/* The run's error is shown once, above the timeline. */}
      {step.error && step.error !== runError && <p class="step-error">{step.error}</p>}
      {step.doneInRunId && (
        <p class="step-note">
          Done in <RunLink runId={step.doneInRunId} />
        </p>
      )}
    </li>
  );
}

/** The time the run waited in the queue, from its creation to its first step's start, on the timeline's scale. */
function QueueLane({ run, from, to, now }: { run: Run; from: number; to: number; now: number }) {
  const until = queuedUntil(run, now);
  return (
    <div class="lane queue">
      <span class="step-name">Queued</span>
      <span class="step-state">{run.state === "QUEUED" ? "QUEUED" : ""}</span>
      <span class="track">
        <span class="bar" style={barStyle(from, until, from, to)} />
      </span>
      <span class="step-time">{duration(until - from)}</span>
    </div>
  );
}

const TICKS = [0, 0.25, 0.5, 0.75, 1];

/** The timeline's scale: time since the run was created, under the tracks. */
function Axis({ from, to }: { from: number; to: number }) {
  return (
    <div class="lane axis" aria-hidden="true">
      <span class="track">
        {TICKS.map((f) => (
          <span key={f} class="tick" style={{ left: `${f * 100}%` }}>
            {f === 0 ? "0 s" : duration((to - from) * f)}
          </span>
        ))}
      </span>
    </div>
  );
}

/** The run's error, once: with the step it failed at, when a step failed. */
function RunError({ run }: { run: Run }) {
  if (!run.error) return null;
  const step = run.steps.find((s) => s.error === run.error);
  const where = step && !/^step \d/i.test(run.error) ? `Step ${step.index + 1} (${step.type}) failed: ` : "";
  return (
    <p class="error run-error">
      {where}
      {run.error}
    </p>
  );
}

/** Where the run is: its project, environment and workflow, by name once known (ids until then). */
function useRunPlace(run: Run | null) {
  const project = useLoad(
    async (signal) => (run ? ((await admin.getProject({ projectId: run.projectId }, { signal })).project ?? null) : null),
    [run?.projectId],
  );
  const environment = useLoad(
    async (signal) => (run ? ((await admin.getEnvironment({ environmentId: run.environmentId }, { signal })).environment?.name ?? null) : null),
    [run?.environmentId],
  );
  const workflow = useWorkflow(run?.renderingId, run?.workflowId);
  return { project: project.data ?? undefined, environment: environment.data ?? null, workflow: workflow.data ?? null };
}

type Place = ReturnType<typeof useRunPlace>;

/**
 * A run's page, from the id in its address (or a start's answer pasted there); an address that
 * holds no run id is explained, with a form to open one, and nothing is asked of the server.
 */
export function RunPage({ runId }: { runId: string }) {
  const id = runIdOf(runId);
  if (!id)
    return (
      <Page title="Not a run id" crumbs={<Crumbs trail={[["Run", null]]} />}>
        <p class="error" role="alert">
          This address names no run: a run's address ends with its id, a UUID such as 0b6f9d0e-3c1a-4e7b-9f2d-5a8c7b6e4d3f.
        </p>
        <OpenRunForm />
      </Page>
    );
  return <RunView runId={id} />;
}

function RunView({ runId }: { runId: string }) {
  const fail = useFail();
  const { run, setRun, error, setError, missing } = useWatchedRun(runId);
  const place = useRunPlace(run);
  const [now, setNow] = useState(Date.now());
  const heading = useRef<HTMLHeadingElement>(null);
  const ongoing = run !== null && !FINISHED.has(run.state);
  // Until the run is known, nothing of the address (the not-found page titles itself).
  useTitle(run ? `Run ${shortId(run.id)} · ${run.collection}/${run.recordId}` : missing ? null : "Run");
  useArrivalFocus(heading, run !== null);
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
  const runsOfEnvironment = place.environment ? href(["p", run.projectId, "env", place.environment, "runs"]) : null;
  return (
    <section class="run">
      <Crumbs
        project={place.project}
        trail={[...(runsOfEnvironment ? [[place.environment, runsOfEnvironment] as [string, string]] : []), [`Run ${shortId(run.id)}`, null]]}
      />
      <h1 ref={heading} tabIndex={-1}>
        Run <code>{run.id}</code> <span class={`state ${run.state.toLowerCase()}`}>{run.state}</span>
      </h1>
      <RunFacts run={run} place={place} />
      <RunError run={run} />
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <div class="timeline-box">
        <QueueLane run={run} from={from} to={to} now={now} />
        <ol class="timeline" aria-label="Steps">
          {run.steps.map((s) => (
            <StepRow key={s.index} step={s} from={from} to={to} now={now} runError={run.error} />
          ))}
        </ol>
        <Axis from={from} to={to} />
      </div>
      {ongoing && (
        <Confirm
          label="Cancel run"
          question="Cancel this run? Its current step is stopped and the run ends CANCELLED."
          confirm="Cancel the run"
          danger
          onConfirm={cancel}
        />
      )}
      <RetryActions run={run} place={place} />
    </section>
  );
}

function RunFacts({ run, place }: { run: Run; place: Place }) {
  return (
    <dl class="facts">
      <dt>Record</dt>
      <dd>
        <RecordLink projectId={run.projectId} environment={place.environment} collection={run.collection} recordId={run.recordId} />
      </dd>
      <dt>Workflow</dt>
      <dd>
        <a href={href(["p", run.projectId, "r", run.renderingId, "w", run.workflowId])}>
          {place.workflow?.name || run.workflowName || <code>{run.workflowId}</code>}
        </a>{" "}
        v{run.workflowVersion}
      </dd>
      <dt>As</dt>
      <dd>
        <UserName user={run.user} /> via {run.via}
      </dd>
      <dt>Created</dt>
      <dd>
        <Ago at={run.createdAt} />
      </dd>
      <dt>Finished</dt>
      <dd>
        <Ago at={run.finishedAt} none="not yet" />
      </dd>
      {run.waitUntil && (
        <>
          <dt>Waiting until</dt>
          <dd>
            <Ago at={run.waitUntil} future />
          </dd>
        </>
      )}
      {run.retryOf && (
        <>
          <dt>Retry of</dt>
          <dd>
            <RunLink runId={run.retryOf} />
          </dd>
        </>
      )}
      {run.retries.length > 0 && (
        <>
          <dt>Retried by</dt>
          <dd>
            <ul class="retries">
              {run.retries.map((id) => (
                <li key={id}>
                  <RunLink runId={id} />
                </li>
              ))}
            </ul>
          </dd>
        </>
      )}
    </dl>
  );
}

/** The failed step of a run that failed at one, or undefined. */
const failedStep = (run: Run) => (run.state === "FAILED" ? run.steps.find((s) => s.state === "FAILED") : undefined);

/** Retry and Retry from the failed step, for a failed or cancelled run, to whoever may trigger its workflow. */
function RetryActions({ run, place }: { run: Run; place: Place }) {
  const me = useMe();
  const { busy, refusal, start } = useRunStart();
  if (run.state !== "FAILED" && run.state !== "CANCELLED") return null;
  if (!place.workflow || !mayTrigger(me, run.projectId, place.workflow)) return null;
  const step = failedStep(run);
  const retry = (fromFailedStep: boolean) => start(() => runs.retryRun({ runId: run.id, fromFailedStep }));
  return (
    <div class="retry">
      <h2>Retry</h2>
      <p class="muted">
        Retry starts a new run on the same record: the latest active version, from the first step.
        {step &&
          ` Retry from the failed step runs version ${run.workflowVersion} again from step ${step.index + 1} (${step.type})${step.index > 0 ? ": the steps before it, done in this run, are skipped." : "."}`}
      </p>
      <div class="actions">
        <button type="button" disabled={busy} onClick={() => retry(false)}>
          Retry
        </button>
        {step && (
          <button type="button" class="secondary" disabled={busy} onClick={() => retry(true)}>
            Retry from the failed step
          </button>
        )}
      </div>
      <RefusalText refusal={refusal} />
    </div>
  );
}
