// How deeply a request message may nest, over Connect, gRPC-Web and native gRPC, JSON or binary.
//
// The rule: at most MAX_MESSAGE_NESTING messages deep, counted as protobuf-es counts them for
// its decode recursionLimit (each message one level, so a google.protobuf.Struct nested in a
// Struct costs two: Struct and Value). 64 leaves room below 100, the limit of protobuf-es,
// Java and C++ clients, for the levels our answers add around what was stored (a workflow's
// steps come back inside GetWorkflowResponse), so whatever is accepted can be read back.
//
// Why a check of our own, beside protobuf-es's recursionLimit (which Connect also applies):
// - Connect 2.1 labels every binary decode error INTERNAL ("parse binary: …", in its
//   createBinarySerialization; JSON ones are INVALID_ARGUMENT), and it decodes a unary request
//   before any interceptor runs, so no interceptor can relabel it;
// - protobuf-es counts ProtoJSON differently (a Struct nested in a Value is free), so a JSON
//   message could be stored that binary clients then refuse to decode.
// So each request message is decoded here once more with protobuf-es, as it arrives (a stream
// is never held back: each chunk is passed on once the messages that end in it are checked),
// and one nested too deep fails the call with INVALID_ARGUMENT. Anything else wrong with a
// message (malformed, too large, bad compression) is left to Connect.
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { fromBinary, fromJsonString, toBinary, type DescMessage } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import type { UniversalServerRequest } from "@connectrpc/connect/protocol";
import { REQUEST_ID_HEADER } from "./request-id.js";
import { requestIdKey } from "../services/context.js";

export const MAX_MESSAGE_NESTING = 64;

/** The read options for both Connect servers, so that their own decoding stops at the same depth. */
export const nestingReadOptions = { recursionLimit: MAX_MESSAGE_NESTING };

const tooDeep = (e: unknown) => e instanceof Error && e.message.includes("maximum recursion depth");

/** The call whose request messages are checked. */
interface Call {
  desc: DescMessage;
  json: boolean;
  requestId: string;
}

/** Fails with INVALID_ARGUMENT when the message nests deeper than MAX_MESSAGE_NESTING. */
function checkNesting(call: Call, bytes: Uint8Array | undefined): void {
  if (!bytes) return;
  try {
    const { desc } = call;
    const binary = call.json ? toBinary(desc, fromJsonString(desc, new TextDecoder().decode(bytes), { ignoreUnknownFields: true })) : bytes;
    fromBinary(desc, binary, nestingReadOptions);
  } catch (e) {
    if (!tooDeep(e)) return; // anything else wrong: Connect's own decoding reports it
    // Answered before the interceptors run, so the request id is echoed here.
    const metadata = new Headers(call.requestId ? { [REQUEST_ID_HEADER]: call.requestId } : {});
    throw new ConnectError(`the request message is nested deeper than ${MAX_MESSAGE_NESTING} levels`, Code.InvalidArgument, metadata);
  }
}

/** How the request carries its messages, by Content-Type; undefined for what Connect refuses anyway. */
function framingOf(contentType: string): { enveloped: boolean; json: boolean } | undefined {
  const media = contentType.split(";", 1)[0]!.trim().toLowerCase();
  if (media === "application/json" || media === "application/proto") return { enveloped: false, json: media.endsWith("json") };
  const m = /^application\/(grpc|grpc-web|connect)(\+proto|\+json)?$/.exec(media);
  if (!m || (m[1] === "connect" && !m[2])) return undefined;
  return { enveloped: true, json: m[2] === "+json" };
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
 * A Connect unary body is one message: read whole (as Connect does), checked, then passed on.
 * A body over the limit is passed on as it comes, never held, for Connect to refuse.
 */
async function* unaryChecked(body: AsyncIterable<Uint8Array>, call: Call, encoding: string | null, maxBytes: number) {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.byteLength;
    if (size <= maxBytes) chunks.push(chunk);
    else {
      yield* chunks.splice(0);
      yield chunk;
    }
  }
  if (size > maxBytes) return;
  const bytes = Buffer.concat(chunks);
  checkNesting(call, decompress(encoding, bytes, maxBytes));
  yield bytes;
}

/**
 * Enveloped messages (flags, 4-byte length, payload), each checked when its last byte arrives.
 * Chunks are joined only once the header, then the whole message, is there: a message sent in
 * many small frames costs its size in copies, not its size times the number of frames.
 */
async function* envelopesChecked(body: AsyncIterable<Uint8Array>, call: Call, encoding: string | null, maxBytes: number) {
  let pending: Uint8Array[] = []; // the bytes after the last message checked
  let size = 0;
  let need = 5; // what the next step waits for: a header, then the message it announces
  let unchecked = false; // after a message over the limit, which Connect refuses anyway
  for await (const chunk of body) {
    if (!unchecked) {
      pending.push(chunk);
      size += chunk.byteLength;
    }
    while (!unchecked && size >= need) {
      const bytes = Buffer.concat(pending, size);
      const length = bytes.readUInt32BE(1);
      if (length > maxBytes) {
        unchecked = true;
        pending = [];
      } else if (bytes.length < 5 + length) {
        pending = [bytes];
        need = 5 + length;
      } else {
        const payload = bytes.subarray(5, 5 + length);
        checkNesting(call, bytes[0]! & 0x01 ? decompress(encoding, payload, maxBytes) : payload);
        pending = [bytes.subarray(5 + length)];
        size -= 5 + length;
        need = 5;
      }
    }
    yield chunk;
  }
}

function guarded(req: UniversalServerRequest, desc: DescMessage, maxBytes: number): UniversalServerRequest {
  const framing = framingOf(req.header.get("content-type") ?? "");
  const body = req.body;
  if (!framing || body === null || typeof body !== "object" || !(Symbol.asyncIterator in body)) return req;
  const bytes = body as AsyncIterable<Uint8Array>;
  const call = { desc, json: framing.json, requestId: req.contextValues?.get(requestIdKey) ?? "" };
  if (!framing.enveloped) return { ...req, body: unaryChecked(bytes, call, req.header.get("content-encoding"), maxBytes) };
  const encoding = req.header.get("grpc-encoding") ?? req.header.get("connect-content-encoding");
  return { ...req, body: envelopesChecked(bytes, call, encoding, maxBytes) };
}

/** Wraps every handler of `router` (after its services are registered) with the nesting check. */
export function guardMessageNesting(router: ConnectRouter, readMaxBytes: number): void {
  router.handlers.forEach((handler, i) => {
    const check = (req: UniversalServerRequest) => handler(guarded(req, handler.method.input, readMaxBytes));
    router.handlers[i] = Object.assign(check, {
      service: handler.service,
      method: handler.method,
      requestPath: handler.requestPath,
      supportedContentType: handler.supportedContentType,
      protocolNames: handler.protocolNames,
      allowedMethods: handler.allowedMethods,
    });
  });
}
