// The signal a REST call hands to its service (the webhook, /v1): aborted when the client goes
// before its answer, and only then — never while the client is still waiting for it.
import Fastify, { type FastifyInstance } from "fastify";
import { afterAll, beforeAll, expect, it } from "vitest";
import { callOptions } from "../src/http/bridge.js";
import { sleep } from "../src/lib/sleep.js";

let app: FastifyInstance;
let base: string;
let hung: Promise<boolean>;
let signalOfHung: (s: AbortSignal) => void;

beforeAll(async () => {
  app = Fastify();
  // A call that takes a while, then says whether its signal was aborted meanwhile.
  app.post("/slow", async (req, reply) => {
    const { signal } = callOptions(req, reply, "api");
    await sleep(300);
    return { aborted: signal!.aborted };
  });
  // A call that never answers: the client gives up.
  hung = new Promise((resolve) => (signalOfHung = (s) => s.addEventListener("abort", () => resolve(true))));
  app.post("/hang", async (req, reply) => {
    signalOfHung(callOptions(req, reply, "api").signal!);
    await new Promise(() => {});
  });
  base = await app.listen({ host: "127.0.0.1", port: 0 });
});
afterAll(async () => {
  await app?.close();
});

it("is not aborted while the client waits, its body read long ago", async () => {
  const res = await fetch(`${base}/slow`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ record_id: "r1" }) });
  expect(await res.json()).toEqual({ aborted: false });
});

it("is aborted when the client goes before its answer", async () => {
  const gone = new AbortController();
  const call = fetch(`${base}/hang`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}", signal: gone.signal }).catch(() => "gone");
  await sleep(200);
  gone.abort();
  expect(await call).toBe("gone");
  expect(await Promise.race([hung, sleep(5_000).then(() => false)])).toBe(true);
});
