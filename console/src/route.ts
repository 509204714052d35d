// The console's routes live in the location's hash (#/p/<project>/env/<name>/runs?state=FAILED):
// the server serves one page, and a route never reaches a log.
import type { RefObject } from "preact";
import { useEffect, useState } from "preact/hooks";

export interface Route {
  /** The path's segments, decoded. */
  parts: string[];
  /** The query after `?`. */
  query: URLSearchParams;
}

function parse(hash: string): Route {
  const [path = "", search = ""] = hash.replace(/^#/, "").split("?", 2);
  return { parts: path.split("/").filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(search) };
}

export function useRoute(): Route {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const onChange = () => setHash(location.hash);
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  return parse(hash);
}

export type Query = Record<string, string | string[] | undefined>;

/** A link to a route: each segment encoded; empty query values left out. */
export function href(parts: string[], query: Query = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) for (const one of Array.isArray(v) ? v : [v]) if (one) q.append(k, one);
  const search = q.toString();
  return `#/${parts.map(encodeURIComponent).join("/")}${search ? `?${search}` : ""}`;
}

export function go(parts: string[], query?: Query): void {
  location.hash = href(parts, query);
}

/** Whether the route was reached through `arrive` and its page has not taken the focus yet. */
let arriving = false;

/** Goes to a route after an action (a run started): the page there takes the focus (useArrivalFocus). */
export function arrive(parts: string[], query?: Query): void {
  arriving = true;
  go(parts, query);
}

/**
 * Moves the focus to `target` (the page's heading) once `shown`, when the page was reached through
 * `arrive`: the focus does not stay behind on a button that is gone.
 */
export function useArrivalFocus(target: RefObject<HTMLElement | null>, shown: boolean): void {
  useEffect(() => {
    if (!shown || !arriving) return;
    arriving = false;
    target.current?.focus();
  }, [shown]);
}
