// The one error table: Connect code → HTTP status and wire name, for every status the service
// answers over HTTP.
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { fail } from "../src/domain/errors.js";
import { codeName, httpStatusOf, isInternal, ONGOING_RUN_ID, toConnectError, toHttpError } from "../src/rpc/errors.js";
import { MongoBulkWriteError, MongoNetworkError, MongoServerError } from "../src/store/index.js";
import { errorBody } from "../src/rpc/errors.js";
import { isDatabaseFull, isUnavailable } from "../src/store/index.js";
import { fullDatabaseReporter } from "../src/store/monitor.js";
import { hitRateLimits } from "../src/rpc/rate-limit.js";
import type { Deps } from "../src/deps.js";

const SPEC: [number, Code, string][] = [
  [400, Code.InvalidArgument, "invalid_argument"],
  [401, Code.Unauthenticated, "unauthenticated"],
  [403, Code.PermissionDenied, "permission_denied"],
  [404, Code.NotFound, "not_found"],
  [409, Code.AlreadyExists, "already_exists"],
  [429, Code.ResourceExhausted, "resource_exhausted"],
];

describe("error table", () => {
  it.each(SPEC)("HTTP %i ↔ %s", (status, code, name) => {
    expect(httpStatusOf(code)).toBe(status);
    expect(codeName(code)).toBe(name);
  });

  it("builds the {error, code} body, with runId on 409 and Retry-After on 429", () => {
    const conflict = toHttpError(new ConnectError("a run is ongoing", Code.AlreadyExists, { [ONGOING_RUN_ID]: "r-1" }));
    expect(conflict).toEqual({ status: 409, headers: {}, body: { ...errorBody("already_exists", "a run is ongoing"), runId: "r-1" } });
    const throttled = toHttpError(fail.throttled(17));
    expect(throttled.status).toBe(429);
    expect(throttled.headers["retry-after"]).toBe("17");
  });

  it("never leaks internal error messages", () => {
    const e = toHttpError(new Error("connection string mongodb://secret@host"));
    expect(e.status).toBe(500);
    expect(e.body).toEqual({ code: "internal", message: "internal error", error: "internal error" });
  });

  it("answers an unreachable database with 503 unavailable and Retry-After, the same error for every entry point", () => {
    const epipe = Object.assign(new Error("This socket has been ended by the other party"), { code: "EPIPE" });
    const shuttingDown = new MongoServerError({ message: "interrupted at shutdown", code: 11600 });
    // A grouped insert (insertMany) whose connection closed: the bulk error wraps the network error.
    const bulk = new MongoBulkWriteError(new MongoNetworkError("connection 5 to 127.0.0.1:27017 closed"), {} as never);
    for (const err of [new MongoNetworkError("connection 7 to 127.0.0.1:27017 closed"), epipe, shuttingDown, bulk]) {
      expect(toHttpError(err)).toEqual({
        status: 503,
        headers: { "retry-after": "5" },
        body: errorBody("unavailable", "the database is unavailable; retry later"),
      });
      const ce = toConnectError(err);
      expect([ce.code, ce.metadata.get("retry-after")]).toEqual([Code.Unavailable, "5"]);
    }
    // A server error that is not about reachability stays a bug of ours.
    expect(toHttpError(new MongoServerError({ message: "bad", code: 2 })).status).toBe(500);
  });

  it("answers a full database with 503 unavailable, Retry-After and its words, never as a bug", () => {
    const memory = new MongoServerError({ message: "the embedded database's memory is full", code: 146, codeName: "ExceededMemoryLimit" });
    const disk = new MongoServerError({ message: "the embedded database's disk is full", code: 14031, codeName: "OutOfDiskSpace" });
    // A grouped insert (insertMany) refused whole, and one whose documents were refused one by one.
    const bulkOfCommand = new MongoBulkWriteError(disk, {} as never);
    const bulkOfWrites = new MongoBulkWriteError(
      { message: "refused", code: 146, writeErrors: [{ index: 0, code: 146, errmsg: "full" }] } as never,
      {} as never,
    );
    for (const err of [memory, disk, bulkOfCommand, bulkOfWrites]) {
      expect(isDatabaseFull(err)).toBe(true);
      expect(isUnavailable(err)).toBe(true); // waiting for room is waiting: the worker retries, as after an outage
      expect(isInternal(err)).toBe(false);
      expect(toHttpError(err)).toEqual({
        status: 503,
        headers: { "retry-after": "30" },
        body: errorBody("unavailable", "the database is full: retry later"),
      });
      const ce = toConnectError(err);
      expect([ce.code, ce.metadata.get("retry-after"), ce.rawMessage]).toEqual([Code.Unavailable, "30", "the database is full: retry later"]);
    }
    // Other write errors and outages are not a full database.
    expect(isDatabaseFull(new MongoBulkWriteError({ message: "dup", code: 11000, writeErrors: [{ index: 0, code: 11000 }] } as never, {} as never))).toBe(
      false,
    );
    expect(isDatabaseFull(new MongoNetworkError("connection 7 to 127.0.0.1:27017 closed"))).toBe(false);
    expect(toHttpError(new MongoNetworkError("closed")).headers["retry-after"]).toBe("5");
  });

  it("lets a call go on uncounted when a full database cannot count it against a rate limit (reads still answer)", async () => {
    const full = new MongoServerError({ message: "the embedded database's disk is full", code: 14031 });
    const deps = (hit: () => Promise<never>) => ({ store: { rateLimits: { hitWindows: hit } } }) as unknown as Deps;
    expect(
      await hitRateLimits(
        deps(() => Promise.reject(full)),
        "api:app:t",
        [{ limit: 1, seconds: 60 }],
        "api",
      ),
    ).toEqual({ headers: {} });
    // Any other failure is not let through.
    const down = new MongoNetworkError("closed");
    await expect(
      hitRateLimits(
        deps(() => Promise.reject(down)),
        "api:app:t",
        [{ limit: 1, seconds: 60 }],
        "api",
      ),
    ).rejects.toBe(down);
  });

  it("tells of a full database at most once a minute, with the count of writes refused since the last line", () => {
    let now = 1_000_000;
    const lines: number[] = [];
    const refused = fullDatabaseReporter(
      (n) => lines.push(n),
      60_000,
      () => now,
    );
    refused(); // the first refusal is told at once
    for (let i = 0; i < 200; i++) {
      now += 250;
      refused();
    }
    // 50 s later: nothing more told; at 60 s, the 240 since the first line.
    expect(lines).toEqual([1]);
    for (let i = 0; i < 40; i++) {
      now += 250;
      refused();
    }
    expect(lines).toEqual([1, 240]);
  });
});
