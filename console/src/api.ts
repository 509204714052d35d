// How the console talks to runhook: the same services gRPC and /v1 users have, over Connect from
// the browser. The session cookie (HttpOnly: this code never sees it) rides on every call; the
// server accepts it from this origin only. Sign-in and sign-out are the only other requests.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { AdminService } from "../../gen/runhook/v1/admin_pb.js";
import { LogService } from "../../gen/runhook/v1/log_pb.js";
import { NoteService } from "../../gen/runhook/v1/note_pb.js";
import { RunService } from "../../gen/runhook/v1/run_pb.js";
import { OngoingRunSchema } from "../../gen/runhook/v1/trigger_pb.js";

const transport = createConnectTransport({ baseUrl: location.origin, useBinaryFormat: true });

export const admin = createClient(AdminService, transport);
export const runs = createClient(RunService, transport);
export const logs = createClient(LogService, transport);
export const notes = createClient(NoteService, transport);

export interface SignedIn {
  user: { id: string; email: string; name: string };
  expiresAt: string;
}

const SESSION = "/console/session";

async function session(init: RequestInit): Promise<Response> {
  return fetch(SESSION, { ...init, credentials: "same-origin", headers: init.body ? { "content-type": "application/json" } : {} });
}

/** Who is signed in, or null (no session, or it ended). */
export async function currentSession(): Promise<SignedIn | null> {
  const res = await session({ method: "GET" });
  const body = (await res.json().catch(() => ({}))) as Partial<SignedIn> & { error?: string };
  if (!res.ok) throw new Error(body.error ?? `could not ask who is signed in (${res.status})`);
  return body.user ? (body as SignedIn) : null;
}

/** Signs in with an application token; the error message of a refusal is the server's. */
export async function signIn(token: string): Promise<SignedIn> {
  const res = await session({ method: "POST", body: JSON.stringify({ token }) });
  const body = (await res.json().catch(() => ({}))) as SignedIn & { error?: string };
  if (!res.ok) throw new Error(body.error ?? `sign-in failed (${res.status})`);
  return body;
}

export async function signOut(): Promise<void> {
  const res = await session({ method: "DELETE" });
  if (!res.ok) throw new Error(`sign-out failed (${res.status})`);
}

/**
 * Every item of a List, page after page: a page may hold fewer items than asked while more follow
 * (the server bounds each answer's bytes).
 */
export async function allPages<R extends { nextPageToken: string }, T>(page: (pageToken: string) => Promise<R>, items: (answer: R) => T[]): Promise<T[]> {
  const all: T[] = [];
  let pageToken = "";
  do {
    const answer = await page(pageToken);
    all.push(...items(answer));
    pageToken = answer.nextPageToken;
  } while (pageToken);
  return all;
}

/** A call's error as a sentence, and whether it means the session is over. */
export function describe(err: unknown): { message: string; signedOut: boolean; code: Code | null } {
  if (!(err instanceof ConnectError) && err instanceof Error) return { message: err.message, signedOut: false, code: null };
  const e = ConnectError.from(err);
  return { message: e.rawMessage || e.message, signedOut: e.code === Code.Unauthenticated, code: e.code };
}

/**
 * The run ongoing on the record, from a refusal to start one (ALREADY_EXISTS): its id is in the
 * error's OngoingRun detail, and in a response header for clients that do not read details.
 */
export function ongoingRunOf(err: unknown): string | null {
  if (!(err instanceof ConnectError) || err.code !== Code.AlreadyExists) return null;
  return err.findDetails(OngoingRunSchema)[0]?.runId || err.metadata.get("runhook-ongoing-run-id") || null;
}

export { Code };
