// Acting on many runs from the runs list (CreateRunBatch): the selected rows, or every run the
// list's filters match, retried or cancelled. A dry run first counts what would happen and why
// runs would be skipped; Confirm starts the real batch, whose progress (GetRunBatch, every
// second) shows until it is finished, with the reasons of the runs it skipped or failed on.
import type { MessageInitShape } from "@bufbuild/protobuf";
import { useEffect, useRef, useState } from "preact/hooks";
import type { CreateRunBatchRequestSchema, RunBatch } from "../../../gen/runhook/v1/run_pb.js";
import { runs } from "../api.js";
import { useFail } from "../session.js";
import { Confirm, ErrorText } from "../ui.js";
import { RunLink } from "./common.js";

export type BatchAction = "retry" | "cancel";

export interface BatchPlan {
  action: BatchAction;
  /** What it acts on, in words: "the 3 selected runs", "every run that matches the filters". */
  what: string;
  /** The batch's request, as a dry run or for real (the same runs either way). */
  request: (dryRun: boolean) => MessageInitShape<typeof CreateRunBatchRequestSchema>;
}

const POLL_MS = 1000;

const WORDS: Record<BatchAction, { verb: string; would: string; did: string; doing: string }> = {
  retry: { verb: "Retry", would: "would be retried", did: "retried", doing: "Retrying" },
  cancel: { verb: "Cancel", would: "would be cancelled", did: "cancelled", doing: "Cancelling" },
};

/** Asks for the batch every second until it is finished, handing each answer to `onBatch`. */
async function follow(batch: RunBatch, signal: AbortSignal, onBatch: (b: RunBatch) => void): Promise<void> {
  let b = batch;
  while (b.state === "RUNNING") {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    if (signal.aborted) return;
    const answer = (await runs.getRunBatch({ batchId: b.id }, { signal })).batch;
    if (!answer || signal.aborted) return;
    b = answer;
    onBatch(b);
  }
}

const plural = (n: bigint | number, one: string, many = `${one}s`) => `${n} ${n === 1n || n === 1 ? one : many}`;

/** The batch's counts as a sentence: "12 would be retried, 3 skipped: a run is ongoing on the record". */
function counts(b: RunBatch, action: BatchAction): string {
  const w = WORDS[action];
  const parts = [`${b.done} ${b.dryRun ? w.would : w.did}`];
  for (const r of b.reasons) parts.push(`${r.count} ${r.outcome === "skipped" ? "skipped" : b.dryRun ? "would fail" : "failed"}: ${r.reason}`);
  const unexplained = b.skipped + b.failed - b.reasons.reduce((n, r) => n + r.count, 0n);
  if (unexplained > 0n) parts.push(`${unexplained} skipped or failed`);
  return parts.join(", ");
}

/** The reasons of the skipped and failed runs, each with some of its runs as links. */
function Reasons({ batch }: { batch: RunBatch }) {
  if (batch.reasons.length === 0) return null;
  return (
    <ul class="batch-reasons">
      {batch.reasons.map((r) => (
        <li key={`${r.outcome}:${r.reason}`}>
          {plural(r.count, "run")} {r.outcome}: {r.reason}
          {r.runIds.length > 0 && (
            <>
              {" "}
              ({r.runIds.length < r.count ? "some of the runs" : r.count === 1n ? "the run" : "the runs"} {r.outcome === "skipped" ? "skipped" : "that failed"}:{" "}
              {r.runIds.map((id, i) => (
                <span key={id}>
                  {i > 0 && ", "}
                  <RunLink runId={id} short />
                </span>
              ))}
              )
            </>
          )}
        </li>
      ))}
    </ul>
  );
}

/** The real batch's progress, until it is finished, and a way to stop it. */
function Progress({ batch, expected, action, onStop }: { batch: RunBatch; expected: bigint; action: BatchAction; onStop: () => Promise<void> }) {
  const w = WORDS[action];
  const handled = batch.done + batch.skipped + batch.failed;
  const total = batch.state === "RUNNING" ? (expected > handled ? expected : handled) : batch.matched;
  const tally = `${batch.done} ${w.did}, ${batch.skipped} skipped, ${batch.failed} failed`;
  const said: Record<string, string> = {
    RUNNING: `${w.doing}: ${handled} of ${plural(total, "run")} handled so far (${tally}).`,
    SUCCEEDED: `Finished: ${plural(batch.matched, "run")} matched, ${tally}.`,
    CANCELLED: `Stopped: ${handled} of ${plural(batch.matched, "run")} handled before it stopped (${tally}); the runs it started stay started.`,
    FAILED: `The batch failed after ${handled} of ${plural(batch.matched, "run")} (${tally}): ${batch.error}`,
  };
  return (
    <>
      <progress max={Number(total) || 1} value={Number(handled)} aria-label="Runs handled" />
      <p role="status" class={`batch-progress ${batch.state.toLowerCase()}`}>
        {said[batch.state] ?? `${batch.state}: ${tally}`}
      </p>
      <Reasons batch={batch} />
      {batch.state === "RUNNING" && (
        <Confirm
          label="Stop the batch"
          question="Stop this batch? The runs it already started stay started."
          confirm="Stop the batch"
          danger
          onConfirm={onStop}
        />
      )}
    </>
  );
}

/** One batch from its dry run to its end: the counts, Confirm, then the progress. */
export function BatchPanel({ plan, onClose }: { plan: BatchPlan; onClose: () => void }) {
  const fail = useFail();
  const w = WORDS[plan.action];
  const [dry, setDry] = useState<RunBatch | null>(null);
  const [batch, setBatch] = useState<RunBatch | null>(null);
  const [error, setError] = useState<string | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);
  const safe = useRef<HTMLButtonElement>(null);
  const stop = useRef(new AbortController());
  const launch = async (dryRun: boolean, onBatch: (b: RunBatch) => void) => {
    setError(null);
    const { signal } = stop.current;
    try {
      const created = (await runs.createRunBatch(plan.request(dryRun), { signal })).batch;
      if (!created || signal.aborted) return;
      onBatch(created);
      await follow(created, signal, onBatch);
    } catch (err) {
      if (!signal.aborted) setError(fail(err));
    }
  };
  useEffect(() => {
    heading.current?.focus();
    void launch(true, setDry);
    return () => stop.current.abort();
  }, []);
  const counted = dry !== null && dry.state !== "RUNNING";
  // The counts take the focus on their safe answer (Enter does not act by accident); the real
  // batch's progress on the heading, as the question is gone.
  useEffect(() => void (counted && !batch && safe.current?.focus()), [counted]);
  useEffect(() => void (batch && heading.current?.focus()), [batch !== null]);
  const stopBatch = async () => {
    try {
      const answer = (await runs.cancelRunBatch({ batchId: batch!.id })).batch;
      if (answer) setBatch(answer);
    } catch (err) {
      setError(fail(err));
    }
  };
  const finished = batch !== null && batch.state !== "RUNNING";
  return (
    <section class="batch" aria-labelledby="batch-title">
      <h2 id="batch-title" ref={heading} tabIndex={-1}>
        {w.verb} {plan.what}
      </h2>
      {!counted && !error && <p class="muted">Counting the runs this would act on…</p>}
      {counted && !batch && <Question dry={dry} action={plan.action} safe={safe} onConfirm={() => launch(false, setBatch)} onClose={onClose} />}
      {batch && <Progress batch={batch} expected={dry?.done ?? 0n} action={plan.action} onStop={stopBatch} />}
      <ErrorText error={error} />
      {(finished || error) && (
        <button type="button" class="secondary" onClick={onClose}>
          Close
        </button>
      )}
    </section>
  );
}

/** The dry run's counts, and Confirm (when it would act on any run). */
function Question(props: { dry: RunBatch; action: BatchAction; safe: { current: HTMLButtonElement | null }; onConfirm: () => void; onClose: () => void }) {
  const { dry, action } = props;
  const w = WORDS[action];
  const [busy, setBusy] = useState(false);
  if (dry.state !== "SUCCEEDED") return <p class="error">The count did not finish: {dry.error || dry.state.toLowerCase()}.</p>;
  const none = dry.done === 0n;
  return (
    <div class="confirm" role="alertdialog" aria-labelledby="batch-title" aria-describedby="batch-counts">
      <p id="batch-counts">{dry.matched === 0n ? "No run matches: nothing to do." : `${plural(dry.matched, "run")} match: ${counts(dry, action)}.`}</p>
      <Reasons batch={dry} />
      {!none && (
        <button
          type="button"
          class={action === "cancel" ? "danger" : ""}
          disabled={busy}
          onClick={() => {
            setBusy(true);
            props.onConfirm();
          }}
        >
          Confirm: {w.verb.toLowerCase()} {plural(dry.done, "run")}
        </button>
      )}
      <button type="button" class="secondary" ref={props.safe} onClick={props.onClose}>
        {none ? "Close" : "Keep as is"}
      </button>
    </div>
  );
}
