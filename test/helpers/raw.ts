// HTTP/1.1 over a plain socket, for what fetch cannot send: request targets exactly as
// written (`/v1/./…`, `//v1/…`, absolute form), and clients that trickle bytes slowly.
import net from "node:net";

export interface RawExchange {
  /** Status of the first answer, or null when the server answered nothing. */
  status: number | null;
  headers: Record<string, string>;
  body: string;
  /** The server closed the connection (rather than the client giving up). */
  closedByServer: boolean;
  /** Milliseconds from connecting to the end of the exchange. */
  ms: number;
  /** Bytes of `trickle` the client managed to send before the end. */
  trickled: number;
}

/**
 * Connects to `baseUrl`, writes `head` at once, then `trickle` one character every
 * `intervalMs`; ends when the server closes the connection, or after `giveUpMs`
 * (then `closedByServer` is false). With `closeAfterAnswer`, the client closes as soon as
 * one complete answer (by Content-Length) has arrived.
 */
export function rawHttp(
  baseUrl: string,
  head: string | Buffer,
  opts: { trickle?: string; intervalMs?: number; giveUpMs?: number; closeAfterAnswer?: boolean } = {},
): Promise<RawExchange> {
  const u = new URL(baseUrl);
  const { trickle = "", intervalMs = 1000, giveUpMs = 15_000 } = opts;
  return new Promise((resolve) => {
    const t0 = Date.now();
    const chunks: Buffer[] = [];
    let trickled = 0;
    let done = false;
    const socket = net.connect(Number(u.port), u.hostname);
    const finish = (closedByServer: boolean) => {
      if (done) return;
      done = true;
      clearInterval(timer);
      clearTimeout(giveUp);
      socket.destroy();
      resolve({ ...parse(Buffer.concat(chunks).toString("latin1")), closedByServer, ms: Date.now() - t0, trickled });
    };
    const timer = setInterval(() => {
      if (trickled < trickle.length && socket.writable) socket.write(trickle[trickled++]!);
    }, intervalMs);
    const giveUp = setTimeout(() => finish(false), giveUpMs);
    socket.on("connect", () => {
      if (head.length > 0) socket.write(head);
    });
    socket.on("data", (d: Buffer) => {
      chunks.push(d);
      if (opts.closeAfterAnswer && complete(Buffer.concat(chunks).toString("latin1"))) finish(false);
    });
    socket.on("close", () => finish(true));
    socket.on("error", () => finish(true));
  });
}

function complete(text: string): boolean {
  const at = text.indexOf("\r\n\r\n");
  if (at < 0) return false;
  const m = /\r\ncontent-length:\s*(\d+)/i.exec(text.slice(0, at));
  return m ? Buffer.byteLength(text.slice(at + 4), "latin1") >= Number(m[1]) : false;
}

function parse(text: string): Pick<RawExchange, "status" | "headers" | "body"> {
  const at = text.indexOf("\r\n\r\n");
  if (at < 0) return { status: null, headers: {}, body: "" };
  const [statusLine, ...lines] = text.slice(0, at).split("\r\n");
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(":");
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  let body = text.slice(at + 4);
  if (headers["transfer-encoding"] === "chunked") {
    let out = "";
    for (let rest = body; ; ) {
      const nl = rest.indexOf("\r\n");
      const size = parseInt(rest.slice(0, nl), 16);
      if (!size) break;
      out += rest.slice(nl + 2, nl + 2 + size);
      rest = rest.slice(nl + 4 + size);
    }
    body = out;
  }
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine ?? "")?.[1] ?? NaN) || null, headers, body: Buffer.from(body, "latin1").toString("utf8") };
}

/** A GET (or other method without body) as raw text, `Connection: close`. */
export function rawRequest(method: string, target: string, headers: Record<string, string> = {}, body?: string): string {
  const lines = [`${method} ${target} HTTP/1.1`, "Host: runhook.test", "Connection: close"];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  if (body !== undefined) lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  return `${lines.join("\r\n")}\r\n\r\n${body ?? ""}`;
}
