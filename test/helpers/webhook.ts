// Calls for the webhook and admin tests: the webhook over HTTP, TriggerService over native
// gRPC (@grpc/grpc-js), AdminService over Connect.
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { type Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { AdminService } from "../../gen/runhook/v1/admin_pb.js";
import { TriggerRunRequestSchema, TriggerRunResponseSchema } from "../../gen/runhook/v1/trigger_pb.js";

export interface HookAnswer {
  status: number;
  body: { runId?: string; error?: string; code?: string };
  headers: Headers;
}

/** POST {url} with a bearer token (omitted when undefined) and a raw or JSON body. */
export async function postHook(
  url: string,
  token: string | undefined,
  body: unknown,
  opts: { raw?: boolean; contentType?: string | null; headers?: Record<string, string> } = {},
): Promise<HookAnswer> {
  const headers: Record<string, string> = { ...opts.headers };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  if (opts.contentType !== null) headers["content-type"] = opts.contentType ?? "application/json";
  const res = await fetch(url, { method: "POST", headers, body: opts.raw ? (body as string) : JSON.stringify(body) });
  const text = await res.text();
  let parsed: HookAnswer["body"] = {};
  try {
    parsed = JSON.parse(text) as HookAnswer["body"];
  } catch {
    parsed = { error: text };
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

/** A webhook URL as the admin API returns it, pointed at the test server's address. */
export function local(url: string, publicBaseUrl: string, baseUrl: string): string {
  if (!url.startsWith(publicBaseUrl)) throw new Error(`unexpected webhook URL ${url}`);
  return baseUrl + url.slice(publicBaseUrl.length);
}

export function adminClient(baseUrl: string, token: string) {
  const client = createClient(AdminService, createConnectTransport({ baseUrl, httpVersion: "1.1" }));
  const headers = { authorization: `Bearer ${token}` };
  return new Proxy(client, {
    get(target, prop) {
      const fn = (target as unknown as Record<string, (req: unknown, opts: unknown) => unknown>)[prop as string];
      return (req: unknown) => fn!.call(target, req, { headers });
    },
  }) as typeof client;
}

/** How a Connect call ended: "ok", or the code it failed with. */
export async function code(p: Promise<unknown>): Promise<Code | "ok"> {
  try {
    await p;
    return "ok";
  } catch (err) {
    return ConnectError.from(err).code;
  }
}

export interface GrpcResult<T> {
  value?: T;
  error?: grpc.ServiceError;
}

export async function grpcUnary<I extends DescMessage, O extends DescMessage>(
  addr: string,
  path: string,
  input: I,
  output: O,
  req: unknown,
  token?: string,
  opts: { deadlineMs?: number; metadata?: Record<string, string> } = {},
): Promise<GrpcResult<MessageShape<O>>> {
  const client = new grpc.Client(addr, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  if (token) md.set("authorization", `Bearer ${token}`);
  for (const [k, v] of Object.entries(opts.metadata ?? {})) md.set(k, v);
  const callOptions: grpc.CallOptions = opts.deadlineMs ? { deadline: Date.now() + opts.deadlineMs } : {};
  try {
    return await new Promise((resolve) =>
      client.makeUnaryRequest(
        path,
        (m: unknown) => Buffer.from(toBinary(input, create(input, m as never))),
        (b: Buffer) => fromBinary(output, b),
        req as never,
        md,
        callOptions,
        (err, value) => resolve(err ? { error: err } : { value: value as MessageShape<O> }),
      ),
    );
  } finally {
    client.close();
  }
}

export function grpcTrigger(addr: string, webhookUrl: string, recordId: string, token?: string, opts: { deadlineMs?: number } = {}) {
  return grpcUnary(addr, "/runhook.v1.TriggerService/TriggerRun", TriggerRunRequestSchema, TriggerRunResponseSchema, { webhookUrl, recordId }, token, opts);
}

export { sleep } from "../../src/lib/sleep.js";
import { BOOTSTRAP_SECRET } from "./server.js";
import { sleep } from "../../src/lib/sleep.js";

/** Waits until at least `needMs` remain in the current rate-limit minute, so a burst lands in one window. */
export async function awaitFreshWindow(needMs: number): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < needMs) await sleep(left + 50);
}

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let tenants = 0;
/** A fresh organization and a project of its own, built through AdminService as a tenant would (`tag` keeps names unique). */
export async function bootstrapTenant(baseUrl: string) {
  const tag = `${Date.now().toString(36)}${tenants++}`;
  const boot = await adminClient(baseUrl, BOOTSTRAP_SECRET).bootstrap({
    organizationName: `org-${tag}`,
    adminEmail: `root-${tag}@example.test`,
    adminName: "Root",
  });
  const admin = adminClient(baseUrl, boot.adminToken);
  const project = (await admin.createProject({ name: `proj-${tag}` })).project!;
  return { tag, boot, orgId: boot.organization!.id, admin, project };
}
