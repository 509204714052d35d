// The integrator commands: `trigger`, `runs start|retry|watch|list|batch`, `logs tail|verify`. They call the public REST API
// with fetch, like any integrator; loaded without the server's modules (no database, no
// configuration), so they start fast and touch nothing on disk but an explicit --cursor-file.
import { BATCH_USAGE, runBatch } from "./batch.js";
import { EXIT } from "./common.js";
import { LIST_USAGE, runList } from "./list.js";
import { runTail, TAIL_USAGE } from "./tail.js";
import { RETRY_USAGE, runRetry, runStart, START_USAGE } from "./start.js";
import { runTrigger } from "./trigger.js";
import { runVerify, VERIFY_USAGE } from "./verify.js";
import { runWatch, WATCH_USAGE } from "./watch.js";

export const INTEGRATOR_COMMANDS = ["trigger", "runs", "logs"];

export const INTEGRATOR_USAGE = `
  For integrators (public REST API; env RUNHOOK_URL, RUNHOOK_TOKEN; --help on each):
    trigger <webhook-url> <record-id> [--json]   start a run on a record, print its runId
    runs start --workflow ID --record R          start a run on a record as the token's user
    runs retry <runId> [--from-failed-step]      start a finished run again, print the new runId
    runs watch <runId>                           follow a run's steps until it finishes
    runs list --project P --environment E        search runs (--state FAILED --since 1h …):
                                                 a table, or NDJSON when piped
    runs batch retry|cancel --project P --environment E [filters] [--dry-run]
                                                 retry or cancel every run the filters match, in
                                                 the background, and follow the batch's progress
    logs tail --project P --environment E        print activity (or --admin: admin) log entries
              [--cursor-file F] [filters]        as NDJSON, forever, resuming from F
    logs verify FILE --key URL|FILE              check a log export offline against its signed
                                                 digests: complete, unaltered, in order
`;

const RUNS_USAGE = `usage: runhook runs start --workflow ID --record R   (runhook runs start --help)
       runhook runs retry <runId> [--from-failed-step]   (runhook runs retry --help)
       runhook runs watch <runId> [--base-url URL] [--token TOKEN]   (runhook runs watch --help)
       runhook runs list --project P --environment E [filters]   (runhook runs list --help)
       runhook runs batch retry|cancel --project P --environment E [filters]   (runhook runs batch --help)`;
const LOGS_USAGE = `usage: runhook logs tail --project P (--environment E | --admin) [filters] [--cursor-file F]   (runhook logs tail --help)
       runhook logs verify FILE --key URL|FILE [--filtered]   (runhook logs verify --help)`;

/** A command group: `actions` by name, each with its runner and full usage. */
function group(name: string, usage: string, sub: string | undefined, actions: Record<string, [() => Promise<number>, string]>): Promise<number> {
  const action = sub !== undefined && Object.hasOwn(actions, sub) ? actions[sub] : undefined;
  if (action) return action[0]();
  const full = Object.values(actions)
    .map(([, text]) => text)
    .join("\n\n");
  if (sub === undefined || sub === "--help" || sub === "-h" || sub === "help") {
    process.stdout.write(`${sub ? full : usage}\n`);
    return Promise.resolve(sub ? EXIT.OK : EXIT.USAGE);
  }
  process.stderr.write(`runhook ${name}: unknown command "${sub}"\n${usage}\n`);
  return Promise.resolve(EXIT.USAGE);
}

export function runIntegratorCommand(command: string, args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  switch (command) {
    case "trigger":
      return runTrigger(args);
    case "runs":
      return group("runs", RUNS_USAGE, sub, {
        start: [() => runStart(rest), START_USAGE],
        retry: [() => runRetry(rest), RETRY_USAGE],
        watch: [() => runWatch(rest), WATCH_USAGE],
        list: [() => runList(rest), LIST_USAGE],
        batch: [() => runBatch(rest), BATCH_USAGE],
      });
    case "logs":
      return group("logs", LOGS_USAGE, sub, { tail: [() => runTail(rest), TAIL_USAGE], verify: [() => runVerify(rest), VERIFY_USAGE] });
    default:
      throw new Error(`not an integrator command: ${command}`);
  }
}
