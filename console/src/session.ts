// Who is signed in, what they may do (WhoAmI's roles: the server decides, the pages only hide
// what it would refuse), and how a page turns a failed call into a message.
import { createContext } from "preact";
import { useCallback, useContext, useEffect, useRef, useState } from "preact/hooks";
import type { WhoAmIResponse } from "../../gen/runhook/v1/admin_pb.js";
import { Code, describe } from "./api.js";

export type Role = "admin" | "editor" | "user";

export interface Me {
  who: WhoAmIResponse;
  /** The session ended (or was refused): back to sign-in. */
  signedOut: () => void;
}

export const MeContext = createContext<Me | null>(null);

export function useMe(): Me {
  const me = useContext(MeContext);
  if (!me) throw new Error("useMe outside the signed-in console");
  return me;
}

/** The caller's role on a project (an organization admin administers every one), or null. */
export function roleOn(me: Me, projectId: string): Role | null {
  if (me.who.user?.organizationAdmin) return "admin";
  const role = me.who.roles.find((r) => r.projectId === projectId)?.role;
  return role === "admin" || role === "editor" || role === "user" ? role : null;
}

export const isAdmin = (me: Me, projectId: string) => roleOn(me, projectId) === "admin";
/**
 * Whether the caller may start runs of `workflow` (StartRun, RetryRun): a role of its own on the
 * project that the workflow's trigger roles allow. The rendering's team is the server's to check
 * (the console does not see it): a caller outside it is refused with the reason.
 */
export function mayTrigger(me: Me, projectId: string, workflow: { triggerRoles: string[] }): boolean {
  const role = me.who.roles.find((r) => r.projectId === projectId)?.role;
  return !!role && (workflow.triggerRoles.length === 0 || workflow.triggerRoles.includes(role));
}

export const mayChangeWorkflows = (me: Me, projectId: string) => ["admin", "editor"].includes(roleOn(me, projectId) ?? "");

/** A failed call as the server's message; an ended session signs out. */
export function useFail(): (err: unknown) => string {
  const me = useContext(MeContext);
  return useCallback(
    (err: unknown) => {
      const d = describe(err);
      if (d.signedOut) me?.signedOut();
      return d.message;
    },
    [me],
  );
}

/** Whether a failed call means "not there for you": not found, or refused. */
export function isMissing(err: unknown): boolean {
  const { code } = describe(err);
  return code === Code.NotFound || code === Code.PermissionDenied;
}

/**
 * Makes `call` whenever `deps` change (none while it is null), and hands its answer to `then`, or
 * its failure to `failed` as the server's message, unless `deps` changed in the meantime.
 */
export function useCall<T>(call: (() => Promise<T>) | null, deps: unknown[], then: (answer: T) => void, failed: (message: string) => void): void {
  const fail = useFail();
  useEffect(() => {
    if (!call) return;
    let stopped = false;
    call().then(
      (answer) => !stopped && then(answer),
      (err) => !stopped && failed(fail(err)),
    );
    return () => {
      stopped = true;
    };
  }, deps);
}

export interface Loaded<T> {
  data: T | undefined;
  error: string | null;
  /** The server answered that it does not exist or is not the caller's (NotFound, PermissionDenied). */
  missing: boolean;
  reload: () => void;
  set: (value: T) => void;
}

/** Loads with `load` whenever `deps` change; the data, the server's error, a reload. */
export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]): Loaded<T> {
  const fail = useFail();
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const [missing, setMissing] = useState(false);
  const [round, setRound] = useState(0);
  const key = JSON.stringify(deps);
  const lastKey = useRef(key);
  useEffect(() => {
    const stop = new AbortController();
    setError(null);
    setMissing(false);
    // Another thing to load (not a reload of the same): what was shown is not it.
    if (lastKey.current !== key) {
      lastKey.current = key;
      setData(undefined);
    }
    load(stop.signal).then(
      (value) => !stop.signal.aborted && setData(value),
      (err) => {
        if (stop.signal.aborted) return;
        setMissing(isMissing(err));
        setError(fail(err));
      },
    );
    return () => stop.abort();
  }, [key, round]);
  return { data, error, missing, reload: () => setRound((n) => n + 1), set: setData };
}
