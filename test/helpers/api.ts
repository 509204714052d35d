// Small client for the /v1 REST API in tests: over the network (a base URL), or in process
// through the gateway's inject() where the network adds nothing.
import type { FastifyInstance } from "fastify";

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

/** One HTTP exchange: by fetch to `target` when it is a base URL, else by `target.inject()`. */
async function exchange(
  target: string | FastifyInstance,
  method: string,
  path: string,
  headers: Record<string, string>,
  body: string | undefined,
): Promise<{ status: number; headers: Headers; text: string }> {
  if (typeof target === "string") {
    const res = await fetch(`${target}${path}`, { method, headers, body });
    return { status: res.status, headers: res.headers, text: await res.text() };
  }
  const res = await target.inject({ method: method as "GET", url: path, headers, payload: body });
  const h = new Headers();
  for (const [k, v] of Object.entries(res.headers)) for (const one of Array.isArray(v) ? v : [v]) if (one !== undefined) h.append(k, String(one));
  return { status: res.statusCode, headers: h, text: res.body };
}

export function apiClient(target: string | FastifyInstance, token?: string) {
  async function call<T = any>(
    method: string,
    path: string,
    opts: { body?: unknown; rawBody?: string; headers?: Record<string, string>; token?: string | null } = {},
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    const tok = opts.token === undefined ? token : opts.token;
    if (tok) headers.authorization = `Bearer ${tok}`;
    let body: string | undefined;
    if (opts.rawBody !== undefined) body = opts.rawBody;
    else if (opts.body !== undefined) body = JSON.stringify(opts.body);
    if (body !== undefined && !headers["content-type"]) headers["content-type"] = "application/json";
    const res = await exchange(target, method, path, headers, body);
    const text = res.text;
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON */
    }
    return { status: res.status, headers: res.headers, body: parsed as T };
  }
  return {
    call,
    get: <T = any>(path: string, opts?: Parameters<typeof call>[2]) => call<T>("GET", path, opts),
    post: <T = any>(path: string, body?: unknown, opts?: Parameters<typeof call>[2]) => call<T>("POST", path, { ...opts, body }),
    patch: <T = any>(path: string, body?: unknown, opts?: Parameters<typeof call>[2]) => call<T>("PATCH", path, { ...opts, body }),
    del: <T = any>(path: string, opts?: Parameters<typeof call>[2]) => call<T>("DELETE", path, opts),
  };
}

/** Query string from defined values. */
export function qs(params: Record<string, string | number | boolean | undefined>): string {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.set(k, String(v));
  const s = u.toString();
  return s ? `?${s}` : "";
}
