// Paging of the AdminService lists (AIP-158): `page_size` and opaque page tokens in the one
// cursor format of every list (domain/logs/cursor.ts), each bound to its caller and its query,
// so a token of another list, parent, filter or user is refused. Lists page by a key (an id),
// each read through an index that gives that order (store/directory.ts), and a page ends at its
// size or at LIST_BYTE_BUDGET, whichever comes first.
import { create, toBinary, toJsonString, type DescMessage, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import type { Config } from "../../config.js";
import type { Deps } from "../../deps.js";
import { fail } from "../../domain/errors.js";
import { bindingHash, keyCursorCodec, type KeyCursorCodec } from "../../domain/logs/cursor.js";
import type { AppPrincipal } from "../../domain/auth/tokens.js";

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 1000;

const codecs = new WeakMap<Config, KeyCursorCodec>();
function codecOf(config: Config): KeyCursorCodec {
  let codec = codecs.get(config);
  if (!codec) {
    codec = keyCursorCodec(config);
    codecs.set(config, codec);
  }
  return codec;
}

/**
 * What a List answer may hold: its items, each counted as the larger of its protobuf and its JSON
 * encoding, with room for the answer's own fields. A page ends early rather than pass it (its
 * next page token then follows the last item it holds); a first item alone larger than this would
 * still come on its own page, so that paging goes on, but no item of these lists comes near it.
 */
export const LIST_BYTE_BUDGET = 512 * 1024;
/** The answer's fields beside its items (the next page token), and each item's framing (tag and length; a comma). */
const ANSWER_BYTES = 1024;
const ITEM_FRAMING_BYTES = 6;

/** What a message weighs on the wire: its protobuf or its JSON encoding, whichever is larger. */
function encodedBytes<S extends DescMessage>(schema: S, message: MessageShape<S>): number {
  return Math.max(toBinary(schema, message).length, Buffer.byteLength(toJsonString(schema, message)));
}

export interface Page {
  /** The key of the last item of the previous page; undefined on the first. */
  after: string | undefined;
  /** How many to read: one more than the page, to know whether another follows. */
  read: number;
  /**
   * The page of `docs` (read after `after`, in key order) as messages of `schema` (`toMessage`
   * leaves a document out by answering null), at most the page size and LIST_BYTE_BUDGET, and
   * the token of the next page. `toMessage` is called for the documents the page holds, and one more.
   */
  cut<D, S extends DescMessage>(
    docs: D[],
    keyOf: (doc: D) => string,
    schema: S,
    toMessage: (doc: D) => MessageInitShape<S> | null | Promise<MessageInitShape<S> | null>,
  ): Promise<{ items: MessageShape<S>[]; nextPageToken: string }>;
}

/** The page a List request asks for; `query` names the list and everything that selects its items. */
export function pageOf(deps: Deps, p: AppPrincipal, query: Record<string, string>, req: { pageSize: number; pageToken: string }): Page {
  if (req.pageSize < 0) throw fail.invalid("page_size must not be negative");
  const size = Math.min(req.pageSize || DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
  const codec = codecOf(deps.config);
  const hash = bindingHash({ ...query, caller: p.user._id });
  return {
    after: req.pageToken ? codec.decode(req.pageToken, hash) : undefined,
    read: size + 1,
    async cut(docs, keyOf, schema, toMessage) {
      const items: MessageShape<typeof schema>[] = [];
      let bytes = ANSWER_BYTES;
      let last: string | undefined;
      for (const doc of docs.slice(0, size)) {
        const init = await toMessage(doc);
        if (init !== null) {
          const message = create(schema, init);
          bytes += encodedBytes(schema, message) + ITEM_FRAMING_BYTES;
          if (bytes > LIST_BYTE_BUDGET && items.length > 0) return { items, nextPageToken: codec.encode(last!, hash) };
          items.push(message);
        }
        last = keyOf(doc);
      }
      return { items, nextPageToken: docs.length > size ? codec.encode(last!, hash) : "" };
    },
  };
}

/** The key of a document: its id. */
export const byId = (doc: { _id: string }) => doc._id;
