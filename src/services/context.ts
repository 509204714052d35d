// What a service implementation learns about its call besides the request message: the
// entry point, the request id, the bearer token, and the webhook route's key and body.
import { createContextKey, type ContextValues, type HandlerContext } from "@connectrpc/connect";
import type { Deps } from "../deps.js";
import type { TriggerBody } from "../domain/trigger.js";
import type { DirectoryView } from "../store/directory-cache.js";
import type { RunVia } from "../store/types.js";
import { assertNotOrgApiToken } from "../domain/auth/access.js";
import { authenticateAny, type AppPrincipal } from "../domain/auth/tokens.js";
import { fail } from "../domain/errors.js";
import { MAX_TIMER_MS } from "../lib/sleep.js";

/** How a call reached the service: native gRPC / Connect, the webhook route, or /v1 REST. */
export type Via = "grpc" | "webhook" | "api";

export const viaKey = createContextKey<Via>("grpc", { description: "entry point of the call" });

/** The request id of the call (x-request-id, kept when well-formed, else made by the gateway). */
export const requestIdKey = createContextKey<string>("", { description: "request id of the call" });

/**
 * A call of the webhook route: the key exactly as in its path (never re-parsed as a URL), and
 * the body as the route read it, so that a bad body (wrong Content-Type, too deep, not JSON)
 * is reported only at its place in the trigger's check order.
 */
export const webhookCallKey = createContextKey<{ key: string; body: TriggerBody } | undefined>(undefined, { description: "the webhook route's key and body" });

export function viaOf(ctx: HandlerContext): Via {
  return ctx.values.get(viaKey);
}

/** Set on a call whose token the gateway took from the console's session cookie. */
export const viaSessionCookieKey = createContextKey<boolean>(false, { description: "token from the console's session cookie" });

/** How a run this call starts was started: from the console (its session cookie), /v1 REST, or gRPC and Connect. */
export function runViaOf(ctx: HandlerContext): RunVia {
  if (ctx.values.get(viaSessionCookieKey)) return "console";
  return viaOf(ctx) === "api" ? "api" : "grpc";
}

export function authorization(ctx: HandlerContext): string | null {
  return ctx.requestHeader.get("authorization");
}

const directoryViewKey = createContextKey<DirectoryView | undefined>(undefined, { description: "the call's view of the directory" });

/**
 * The call's view of the directory: its lookups share one read of each organization's version,
 * whoever makes them (the API rate limit's authentication, then the service).
 */
export function directoryOf(deps: Pick<Deps, "store">, values: ContextValues): DirectoryView {
  let view = values.get(directoryViewKey);
  if (!view) {
    view = deps.store.directory.view();
    values.set(directoryViewKey, view);
  }
  return view;
}

/**
 * A long call's hold on its caller's access, as `check` decided it on a view of the directory.
 * `wake` aborts once that decision may no longer hold — the directory changed (a revoke, a role,
 * a sign-out: on any process, noticed within CHANGE_POLL_MS), or a token or console session the
 * check read expired — and when the call ends; `recheck()` then decides again on a fresh view
 * (its refusal is the call's answer) and watches that one.
 */
export interface AccessWatch<R> {
  readonly wake: AbortSignal;
  /** Whether access may have changed since the last check. */
  readonly stale: boolean;
  recheck(): Promise<R>;
  stop(): void;
}

/** Watches the access `check` granted on `view` (the call's own view, already checked). */
export async function watchAccess<R>(
  deps: Pick<Deps, "store">,
  view: DirectoryView,
  check: (directory: DirectoryView) => Promise<R>,
  callEnd?: AbortSignal,
): Promise<AccessWatch<R>> {
  let wake = new AbortController();
  let stale = false;
  let unwatch = () => {};
  const onCallEnd = () => wake.abort();
  callEnd?.addEventListener("abort", onCallEnd, { once: true });
  async function watch(checked: DirectoryView): Promise<void> {
    unwatch();
    const mine = new AbortController();
    wake = mine;
    stale = false;
    if (callEnd?.aborted) mine.abort();
    const changed = () => {
      stale = true;
      mine.abort();
    };
    const stopListening = deps.store.directory.onChange(await checked.version(), changed);
    const at = checked.expiresAt();
    const timer = at === undefined ? undefined : setTimeout(changed, Math.min(Math.max(0, at - Date.now()), MAX_TIMER_MS));
    timer?.unref();
    unwatch = () => {
      stopListening();
      clearTimeout(timer);
    };
  }
  await watch(view);
  return {
    get wake() {
      return wake.signal;
    },
    get stale() {
      return stale;
    },
    async recheck() {
      const fresh = deps.store.directory.view();
      const granted = await check(fresh);
      await watch(fresh);
      return granted;
    },
    stop() {
      unwatch();
      callEnd?.removeEventListener("abort", onCallEnd);
    },
  };
}

/**
 * `items`, for as long as the caller keeps the access `check` asks for (already granted on the
 * call's view): once it may have changed (AccessWatch), `check` runs again on a fresh view
 * before the next item, and its refusal ends the stream.
 */
export async function* whileAllowed<T>(
  deps: Pick<Deps, "store">,
  values: ContextValues,
  check: (directory: DirectoryView) => Promise<unknown>,
  items: AsyncIterable<T>,
): AsyncGenerator<T> {
  const access = await watchAccess(deps, directoryOf(deps, values), check);
  try {
    for await (const item of items) {
      if (access.stale) await access.recheck();
      yield item;
    }
  } finally {
    access.stop();
  }
}

/**
 * The caller, by an application token: a project API token is PERMISSION_DENIED (what it may not
 * do: `act`, e.g. "runs are started"), as an organization API token is.
 */
export async function applicationCaller(view: DirectoryView, ctx: HandlerContext, act: string): Promise<AppPrincipal> {
  const principal = await authenticateAny(view, authorization(ctx));
  assertNotOrgApiToken(principal);
  if (principal.kind === "api") throw fail.denied(`${act} with an application token, not a project API token`);
  return principal;
}
