// Database round trips as the driver sends them: a recorder on a MongoClient created with
// monitorCommands (here: `?monitorCommands=true` in the URI runhook connects with), fed by
// the driver's commandStarted / commandSucceeded / commandFailed events.
import { performance } from "node:perf_hooks";
import type { CommandFailedEvent, CommandStartedEvent, CommandSucceededEvent, StoreFixtures } from "../../src/store/index.js";

export interface Command {
  /** Command name (find, insert, findAndModify, …). */
  name: string;
  /** The collection it addresses, when it has one. */
  collection: string;
  startMs: number;
  endMs: number;
  ok: boolean;
}

/** A group of commands whose time intervals overlap: issued in parallel. */
export interface Stage {
  commands: Command[];
  startMs: number;
  endMs: number;
}

const IGNORED = new Set(["hello", "ismaster", "isMaster", "ping", "saslStart", "saslContinue", "endSessions", "killCursors"]);

export interface CommandRecorder {
  /** Commands started since the last take() (finished or not), in start order. */
  take(): Command[];
  stop(): void;
}

export function recordCommands(client: ReturnType<StoreFixtures["commandEvents"]>): CommandRecorder {
  if (!client.options.monitorCommands) throw new Error("the client was not created with monitorCommands");
  const open = new Map<number, Command>();
  let list: Command[] = [];
  const onStart = (e: CommandStartedEvent) => {
    if (IGNORED.has(e.commandName)) return;
    const v = (e.command as Record<string, unknown>)[e.commandName];
    const c: Command = { name: e.commandName, collection: typeof v === "string" ? v : "", startMs: performance.now(), endMs: NaN, ok: false };
    open.set(e.requestId, c);
    list.push(c);
  };
  const onEnd = (ok: boolean) => (e: CommandSucceededEvent | CommandFailedEvent) => {
    const c = open.get(e.requestId);
    if (!c) return;
    open.delete(e.requestId);
    c.endMs = performance.now();
    c.ok = ok;
  };
  const succeeded = onEnd(true);
  const failed = onEnd(false);
  client.on("commandStarted", onStart);
  client.on("commandSucceeded", succeeded);
  client.on("commandFailed", failed);
  return {
    take() {
      const out = list;
      list = [];
      return out;
    },
    stop() {
      client.off("commandStarted", onStart);
      client.off("commandSucceeded", succeeded);
      client.off("commandFailed", failed);
    },
  };
}

/** Splits commands (in start order) into stages: a command that starts before every earlier one has ended joins their stage. */
export function stagesOf(commands: Command[]): Stage[] {
  const stages: Stage[] = [];
  for (const c of [...commands].sort((a, b) => a.startMs - b.startMs)) {
    const cur = stages[stages.length - 1];
    const end = Number.isNaN(c.endMs) ? c.startMs : c.endMs;
    if (cur && c.startMs < cur.endMs) {
      cur.commands.push(c);
      cur.endMs = Math.max(cur.endMs, end);
    } else stages.push({ commands: [c], startMs: c.startMs, endMs: end });
  }
  return stages;
}

/** `find runs`, `findAndModify counters`, …; a command the call did not wait for may still be under way when it answered. */
export function label(c: Command): string {
  const outcome = Number.isNaN(c.endMs) ? " (still under way when the call answered)" : c.ok ? "" : " (failed)";
  return `${c.name}${c.collection ? ` ${c.collection}` : ""}${outcome}`;
}
