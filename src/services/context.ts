// What a service implementation learns about its call besides the request message: the
// entry point, the request id, the bearer token, and the webhook route's key and body.
import { createContextKey, type ContextValues, type HandlerContext } from "@connectrpc/connect";
import type { Deps } from "../deps.js";
import type { TriggerBody } from "../domain/trigger.js";
import type { DirectoryStamp, DirectoryView } from "../store/directory-cache.js";

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
 * `items`, for as long as the caller keeps the access `check` asks for: after a change of the
 * directory (noticed within a second, on every process), `check` runs again on a fresh view
 * before the next item, and its refusal ends the stream (a revoked token, a removed role).
 */
export async function* whileAllowed<T>(
  deps: Pick<Deps, "store">,
  values: ContextValues,
  check: (directory: DirectoryView) => Promise<unknown>,
  items: AsyncIterable<T>,
): AsyncGenerator<T> {
  let changed = false;
  const listen = (since: DirectoryStamp) => deps.store.directory.onChange(since, () => (changed = true));
  let stopListening = listen(await directoryOf(deps, values).version());
  try {
    for await (const item of items) {
      if (changed) {
        stopListening();
        changed = false;
        const fresh = deps.store.directory.view();
        await check(fresh);
        stopListening = listen(await fresh.version());
      }
      yield item;
    }
  } finally {
    stopListening();
  }
}
