// Small client for the /v1 REST API in tests.
export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export function apiClient(baseUrl: string, token?: string) {
  async function call<T = any>(method: string, path: string, opts: { body?: unknown; rawBody?: string; headers?: Record<string, string>; token?: string | null } = {}): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    const tok = opts.token === undefined ? token : opts.token;
    if (tok) headers.authorization = `Bearer ${tok}`;
    let body: string | undefined;
    if (opts.rawBody !== undefined) body = opts.rawBody;
    else if (opts.body !== undefined) body = JSON.stringify(opts.body);
    if (body !== undefined && !headers["content-type"]) headers["content-type"] = "application/json";
    const res = await fetch(`${baseUrl}${path}`, { method, headers, body });
    const text = await res.text();
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
