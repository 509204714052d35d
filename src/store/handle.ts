// Which database a Store is built on. The collection handles never leave src/store: the
// store's own functions that take a Store (indexes, fixtures) find them here.
import type { Database } from "./connection.js";

const databases = new WeakMap<object, Database>();

export function bindDatabase<S extends object>(store: S, db: Database): S {
  databases.set(store, db);
  return store;
}

export function databaseOf(store: object): Database {
  const db = databases.get(store);
  if (!db) throw new Error("not a store made by openStore()");
  return db;
}
