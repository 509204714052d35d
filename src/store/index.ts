// The store: the only code that talks to MongoDB, and the only place its query and update
// language is written. Services, routes and executors call its verbs; `db` (the collection
// handles) is for tests and tools.
import type { Database } from "./connection.js";
import { counterStore, type CounterStore } from "./counters.js";
import { directoryStore, type DirectoryStore } from "./directory.js";
import { idempotencyKeyStore, type IdempotencyKeyStore } from "./idempotency-keys.js";
import { immutableStore, type ImmutableStore } from "./immutable.js";
import { logStore, type LogStore } from "./logs.js";
import { noteStore, type NoteStore } from "./notes.js";
import { rateLimitStore, type RateLimitStore } from "./rate-limits.js";
import { recordStore, type RecordStore } from "./records.js";
import { runStore, type RunStore } from "./runs.js";

export interface Store {
  /** The collection handles, for tests and tools; runhook itself uses the verbs below. */
  db: Database;
  /** The database of runhook's own collections (environments' records live in others). */
  databaseName: string;
  runs: RunStore;
  logs: LogStore;
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

export function createStore(db: Database): Store {
  const counters = counterStore(db);
  return {
    db,
    databaseName: db.name,
    directory: directoryStore(db),
    runs: runStore(db),
    logs: logStore(db, counters),
    notes: noteStore(db, counters),
    counters,
    rateLimits: rateLimitStore(db),
    idempotencyKeys: idempotencyKeyStore(db),
    records: recordStore(db),
    immutable: immutableStore(db),
  };
}

export { connect, databaseName, type Database, type CommandFailedEvent, type CommandStartedEvent, type CommandSucceededEvent } from "./connection.js";
export { permissionId, projectRoleId, type WebhookChange } from "./directory.js";
export { ensureIndexes, sweepEveryMs, sweepExpired, ttlIndexes, SWEEP_EVERY_MS, type TtlIndex } from "./indexes.js";
export { isDuplicateKey, isUnavailable, MongoNetworkError, MongoServerError } from "./errors.js";
export { storeFixtures, type StoreFixtures } from "./fixtures.js";
