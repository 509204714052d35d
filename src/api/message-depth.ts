// Deeply nested request messages over Connect, gRPC-Web and native gRPC.
//
// protobuf-es decodes recursively, so a message nested a few thousand levels deep (a
// google.protobuf.Struct such as PublishWorkflow's `set`, or unknown groups) overflows the
// stack while Connect decodes it, and the caller got Connect's view of that RangeError:
// "Maximum call stack size exceeded" (invalid_argument for JSON, internal for binary). A
// few hundred levels decode, but are then stored and cannot be written back (binary
// encoding overflows first; MongoDB refuses documents nested deeper than 100).
//
// So every request message is measured before Connect decodes it, in its ProtoJSON terms:
// each JSON object or array is one level, exactly as for the REST bodies (MAX_JSON_DEPTH).
// A JSON message is scanned as text; a binary one is walked along its descriptor without
// decoding it (recursion bounded by the limit). A message deeper than the limit is replaced
// by an empty one and the call fails with INVALID_ARGUMENT "the request message is nested
// deeper than 64 levels" — raised by an interceptor, so that Connect frames the error for
// whichever protocol the call came in.
import { gunzipSync, brotliDecompressSync } from "node:zlib";
import type { DescField, DescMessage } from "@bufbuild/protobuf";
import { createContextKey, createContextValues, type ConnectRouter, type Interceptor } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerRequest } from "@connectrpc/connect/protocol";
import { depthError, MAX_JSON_DEPTH } from "../json-depth.js";
import { fail } from "../errors.js";

export const MAX_MESSAGE_DEPTH = MAX_JSON_DEPTH;

/** Why the request message was refused before decoding (set by the guard, thrown by the interceptor). */
const refusedKey = createContextKey<string | undefined>(undefined, { description: "request message refused before decoding" });

const VALUE = "google.protobuf.Value";
const STRUCT = "google.protobuf.Struct";
const LIST_VALUE = "google.protobuf.ListValue";

// ------------------------------------------------------------------ binary

class TooDeep extends Error {}
class Malformed extends Error {}

const fieldsByNumber = new WeakMap<DescMessage, Map<number, DescField>>();
function fieldOf(desc: DescMessage, no: number): DescField | undefined {
  let m = fieldsByNumber.get(desc);
  if (!m) fieldsByNumber.set(desc, (m = new Map(desc.fields.map((f) => [f.number, f]))));
  return m.get(no);
}

class Scanner {
  pos: number;
  constructor(
    readonly buf: Uint8Array,
    readonly max: number,
  ) {
    this.pos = 0;
  }

  varint(): number {
    let n = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      if (this.pos >= this.buf.length) throw new Malformed();
      const b = this.buf[this.pos++]!;
      n += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return n;
    }
    throw new Malformed();
  }

  skip(n: number, end: number) {
    if (n > end - this.pos) throw new Malformed();
    this.pos += n;
  }

  /** Walks the message `desc` in [pos, end) whose ProtoJSON nesting level is `depth`. */
  message(desc: DescMessage, end: number, depth: number): void {
    if (depth > this.max) throw new TooDeep();
    while (this.pos < end) {
      const tag = this.varint();
      const no = Math.floor(tag / 8);
      const wt = tag % 8;
      switch (wt) {
        case 0:
          this.varint();
          break;
        case 1:
          this.skip(8, end);
          break;
        case 5:
          this.skip(4, end);
          break;
        case 2: {
          const len = this.varint();
          if (len > end - this.pos) throw new Malformed();
          const stop = this.pos + len;
          this.field(desc, fieldOf(desc, no), stop, depth);
          this.pos = stop;
          break;
        }
        case 3:
          this.group(end, depth);
          break;
        default:
          throw new Malformed(); // an end-group without its start, or a reserved wire type
      }
    }
    if (this.pos !== end) throw new Malformed();
  }

  /** A length-delimited field of `parent` (at `depth`) ending at `stop`. */
  private field(parent: DescMessage, f: DescField | undefined, stop: number, depth: number): void {
    if (!f) return;
    if (f.fieldKind === "message") this.child(f.message, stop, depth);
    else if (f.fieldKind === "list" && f.listKind === "message") {
      // A repeated field is a JSON array (one level), except ListValue's own, which is the array.
      this.child(f.message, stop, parent.typeName === LIST_VALUE ? depth : depth + 1);
    } else if (f.fieldKind === "map" && f.mapKind === "message") {
      // A map entry {1: key, 2: value}; the map is a JSON object, except Struct's, which is the object.
      const at = parent.typeName === STRUCT ? depth : depth + 1;
      while (this.pos < stop) {
        const tag = this.varint();
        if (tag === ((2 << 3) | 2)) {
          const len = this.varint();
          if (len > stop - this.pos) throw new Malformed();
          const end = this.pos + len;
          this.child(f.message, end, at);
          this.pos = end;
        } else this.skipField(tag % 8, stop, at);
      }
    }
  }

  /** A message nested in a message at `depth`: Value is transparent in JSON, anything else is an object or array. */
  private child(desc: DescMessage, end: number, depth: number): void {
    this.message(desc, end, desc.typeName === VALUE ? depth : depth + 1);
  }

  private skipField(wt: number, end: number, depth: number): void {
    if (wt === 0) this.varint();
    else if (wt === 1) this.skip(8, end);
    else if (wt === 5) this.skip(4, end);
    else if (wt === 2) this.skip(this.varint(), end);
    else if (wt === 3) this.group(end, depth);
    else throw new Malformed();
  }

  /** An unknown group (and the groups in it), after its start tag; each nested group is one more level. */
  private group(end: number, depth: number): void {
    let open = 1;
    while (open > 0) {
      if (depth + open > this.max) throw new TooDeep();
      if (this.pos >= end) throw new Malformed();
      const wt = this.varint() % 8;
      if (wt === 3) open++;
      else if (wt === 4) open--;
      else this.skipField(wt, end, depth + open);
    }
  }
}

/**
 * Whether the binary message `bytes` of type `desc` nests deeper than `max` levels in
 * ProtoJSON terms. Malformed input is not judged here (false): decoding reports it.
 */
export function binaryTooDeep(desc: DescMessage, bytes: Uint8Array, max = MAX_MESSAGE_DEPTH): boolean {
  const s = new Scanner(bytes, max);
  try {
    s.message(desc, bytes.length, 1);
    return false;
  } catch (e) {
    if (e instanceof TooDeep) return true;
    if (e instanceof Malformed) return false;
    throw e;
  }
}

// ------------------------------------------------------------------ the guard

type Framing = "unary" | "enveloped";

/** How the request carries its message, by Content-Type; undefined for what Connect will refuse anyway. */
function framingOf(contentType: string): { framing: Framing; json: boolean } | undefined {
  const media = contentType.split(";", 1)[0]!.trim().toLowerCase();
  switch (media) {
    case "application/json":
      return { framing: "unary", json: true };
    case "application/proto":
      return { framing: "unary", json: false };
    case "application/connect+json":
    case "application/grpc+json":
    case "application/grpc-web+json":
      return { framing: "enveloped", json: true };
    case "application/connect+proto":
    case "application/grpc":
    case "application/grpc+proto":
    case "application/grpc-web":
    case "application/grpc-web+proto":
      return { framing: "enveloped", json: false };
  }
  return undefined;
}

function decompress(encoding: string | null, bytes: Uint8Array, maxBytes: number): Uint8Array | undefined {
  try {
    switch ((encoding ?? "identity").toLowerCase()) {
      case "identity":
        return bytes;
      case "gzip":
        return gunzipSync(bytes, { maxOutputLength: maxBytes });
      case "br":
        return brotliDecompressSync(bytes, { maxOutputLength: maxBytes });
    }
  } catch {
    /* too large or corrupt: Connect reports it */
  }
  return undefined;
}

/**
 * Reads the whole body if it is at most `limit` bytes. `replay` gives the handler the same
 * body: what was read, then the rest unread — or the read error (a client that went away, a
 * stream reset), which the handler then reports its own way.
 */
async function readUpTo(body: AsyncIterable<Uint8Array>, limit: number): Promise<{ bytes?: Uint8Array; replay: AsyncIterable<Uint8Array> }> {
  const it = body[Symbol.asyncIterator]();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const r = await it.next();
      if (r.done) break;
      chunks.push(r.value);
      size += r.value.byteLength;
      if (size > limit) {
        const replay = (async function* () {
          yield* chunks;
          for (let n = await it.next(); !n.done; n = await it.next()) yield n.value;
        })();
        return { replay };
      }
    }
  } catch (err) {
    const replay = (async function* () {
      yield* chunks;
      throw err;
    })();
    return { replay };
  }
  const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  const replay = (async function* () {
    yield bytes;
  })();
  return { bytes, replay };
}

/** The messages of an enveloped body (flags, 4-byte length, payload), or undefined when not well-formed. */
function envelopes(bytes: Uint8Array): { flags: number; payload: Uint8Array }[] | undefined {
  const out: { flags: number; payload: Uint8Array }[] = [];
  for (let pos = 0; pos < bytes.length; ) {
    if (bytes.length - pos < 5) return undefined;
    const flags = bytes[pos]!;
    const len = ((bytes[pos + 1]! << 24) >>> 0) + (bytes[pos + 2]! << 16) + (bytes[pos + 3]! << 8) + bytes[pos + 4]!;
    if (len > bytes.length - pos - 5) return undefined;
    out.push({ flags, payload: bytes.subarray(pos + 5, pos + 5 + len) });
    pos += 5 + len;
  }
  return out;
}

function tooDeep(desc: DescMessage, payload: Uint8Array, json: boolean): boolean {
  if (json) return depthError(new TextDecoder().decode(payload), MAX_MESSAGE_DEPTH) !== null;
  return binaryTooDeep(desc, payload);
}

/**
 * Measures a request's message before the handler decodes it; a message nested deeper than
 * MAX_MESSAGE_DEPTH is swapped for an empty one, with the reason for the interceptor.
 */
async function guardRequest(handler: UniversalHandler, req: UniversalServerRequest, readMaxBytes: number): Promise<UniversalServerRequest> {
  const kind = framingOf(req.header.get("content-type") ?? "");
  const body = req.body;
  if (!kind || body === null || typeof body !== "object" || !(Symbol.asyncIterator in body)) return req;
  // Room for the envelopes' headers; a larger body is left to Connect's own read limit.
  const { bytes, replay } = await readUpTo(body as AsyncIterable<Uint8Array>, readMaxBytes + 64);
  const pass = { ...req, body: replay };
  if (!bytes) return pass;
  const desc = handler.method.input;
  let deep = false;
  if (kind.framing === "unary") {
    const plain = decompress(req.header.get("content-encoding"), bytes, readMaxBytes);
    deep = plain !== undefined && tooDeep(desc, plain, kind.json);
  } else {
    const encoding = req.header.get("connect-content-encoding") ?? req.header.get("grpc-encoding");
    for (const e of envelopes(bytes) ?? []) {
      const plain = e.flags & 0x01 ? decompress(encoding, e.payload, readMaxBytes) : e.payload;
      if (plain !== undefined && tooDeep(desc, plain, kind.json)) deep = true;
    }
  }
  if (!deep) return pass;

  const empty = kind.json ? new TextEncoder().encode("{}") : new Uint8Array(0);
  const framed = kind.framing === "unary" ? empty : Buffer.concat([Buffer.from([0, 0, 0, 0, empty.length]), empty]);
  const header = new Headers(req.header);
  header.delete("content-length");
  header.delete("content-encoding");
  return {
    ...req,
    header,
    body: (async function* () {
      yield framed;
    })(),
    contextValues: (req.contextValues ?? createContextValues()).set(refusedKey, `the request message is nested deeper than ${MAX_MESSAGE_DEPTH} levels`),
  };
}

/** Wraps every handler of `router` (after its services are registered) with the depth guard. */
export function guardMessageDepth(router: ConnectRouter, readMaxBytes: number): void {
  router.handlers.forEach((handler, i) => {
    const guarded = async (req: UniversalServerRequest) => handler(await guardRequest(handler, req, readMaxBytes));
    router.handlers[i] = Object.assign(guarded, {
      service: handler.service,
      method: handler.method,
      requestPath: handler.requestPath,
      supportedContentType: handler.supportedContentType,
      protocolNames: handler.protocolNames,
      allowedMethods: handler.allowedMethods,
    });
  });
}

/** Fails a call whose message the guard refused (INVALID_ARGUMENT), before its implementation runs. */
export const messageDepthInterceptor: Interceptor = (next) => async (req) => {
  const refused = req.contextValues.get(refusedKey);
  if (refused) throw fail.invalid(refused);
  return next(req);
};
