// The store: the only code that talks to MongoDB, and the only place its query and update
// language is written. Services, routes, executors, tests and benchmarks call its verbs; the
// collection handles never leave src/store (tests put documents into states through
// fixtures.ts, and read them through its read-only views).
import { connect, type ConnectOptions, type Database, type WriteConcernInForce } from "./connection.js";
import { bindDatabase, databaseOf } from "./handle.js";
import * as indexes from "./indexes.js";
import type { Retention } from "../config.js";
import { counterStore, type CounterStore } from "./counters.js";
import { directoryStore, type DirectoryStore } from "./directory.js";
import { idempotencyKeyStore, type IdempotencyKeyStore } from "./idempotency-keys.js";
import { immutableStore, type ImmutableStore } from "./immutable.js";
import { logDigestStore, type LogDigestStore } from "./log-digests.js";
import { logStore, type LogStore } from "./logs.js";
import { noteStore, type NoteStore } from "./notes.js";
import { rateLimitStore, type RateLimitStore } from "./rate-limits.js";
import { recordStore, type RecordStore } from "./records.js";
import { runBatchStore, type RunBatchStore } from "./run-batches.js";
import { runStore, type RunStore } from "./runs.js";

export interface Store {
  /** The database of runhook's own collections (environments' records live in others). */
  databaseName: string;
  /** The write concern every write is acknowledged with. */
  writeConcern: WriteConcernInForce;
  /** Calls `listener` with the command's name whenever a command fails (not for a unique index's refusal, which is an answer). */
  onCommandFailed(listener: (command: string) => void): void;
  /** Calls `listener` whenever the database refuses a write because it is full (memory or disk). */
  onFull(listener: () => void): void;
  /** Resolves when the server answers a ping. */
  ping(): Promise<void>;
  /** How far the database server's clock is ahead of this process's (ms; NaN when the server does not say). */
  clockSkewMs(): Promise<number>;
  close(): Promise<void>;
  runs: RunStore;
  /** Run batches, and what each did with each run. */
  runBatches: RunBatchStore;
  logs: LogStore;
  /** The signed digests of the log streams. */
  logDigests: LogDigestStore;
  notes: NoteStore;
  counters: CounterStore;
  rateLimits: RateLimitStore;
  /** Idempotency keys of trigger calls. */
  idempotencyKeys: IdempotencyKeyStore;
  records: RecordStore;
  /** Organizations, users, projects, roles, environments, teams, renderings, collections, permissions, workflows, tokens. */
  directory: DirectoryStore;
  /** Renderings, environments and collections: never changed once created, so cached. */
  immutable: ImmutableStore;
}

/** Connects (see connect()) and returns the store on that connection. */
export async function openStore(uri: string, opts: ConnectOptions = {}): Promise<Store> {
  return createStore(await connect(uri, opts));
}

function createStore(db: Database): Store {
  const counters = counterStore(db);
  return bindDatabase<Store>(
    {
      databaseName: db.name,
      writeConcern: db.writeConcern,
      onCommandFailed: (listener) => db.onCommandFailed(listener),
      onFull: (listener) => db.onFull(listener),
      ping: () => db.ping(),
      clockSkewMs: () => db.clockSkewMs(),
      close: () => db.close(),
      directory: directoryStore(db),
      runs: runStore(db),
      runBatches: runBatchStore(db),
      logs: logStore(db, counters),
      logDigests: logDigestStore(db),
      notes: noteStore(db, counters),
      counters,
      rateLimits: rateLimitStore(db),
      idempotencyKeys: idempotencyKeyStore(db),
      records: recordStore(db),
      immutable: immutableStore(db),
    },
    db,
  );
}

/** Creates every index runhook's queries use, with TTL expiries after `retention`. */
export const ensureIndexes = (store: Store, retention?: Retention) => indexes.ensureIndexes(databaseOf(store), retention);

/** Removes what the TTL indexes have expired (for servers that never apply them); see indexes.ts. */
export const sweepExpired = (store: Store, ...rest: Parameters<typeof indexes.sweepExpired> extends [Database, ...infer R] ? R : never) =>
  indexes.sweepExpired(databaseOf(store), ...rest);

export { databaseName, pingServer, type CommandFailedEvent, type CommandStartedEvent, type CommandSucceededEvent, type ConnectOptions } from "./connection.js";
export { permissionId, projectRoleId, type WebhookChange } from "./directory.js";
export { STALE_INTENT_MS } from "./directory-version.js";
export { sweepEveryMs, ttlIndexes, SWEEP_EVERY_MS, type TtlIndex } from "./indexes.js";
export { isDatabaseFull, isDuplicateKey, isTimeLimitExceeded, isUnavailable, MongoBulkWriteError, MongoNetworkError, MongoServerError } from "./errors.js";
export { storeFixtures, type StoreFixtures } from "./fixtures.js";
export { finishedActiveKey } from "./runs.js";
export { LAST_USED_EVERY_MS, MAX_REMEMBERED_TOKENS, tokenUseRecorder, type TokenKind } from "./last-used.js";
