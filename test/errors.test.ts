// The one error table: Connect code → HTTP status and wire name, for every status the service
// answers over HTTP.
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { fail } from "../src/domain/errors.js";
import { codeName, httpStatusOf, ONGOING_RUN_ID, toConnectError, toHttpError } from "../src/rpc/errors.js";
import { MongoBulkWriteError, MongoNetworkError, MongoServerError } from "../src/store/index.js";
import { errorBody } from "../src/rpc/errors.js";

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
});
