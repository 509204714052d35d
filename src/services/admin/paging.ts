// Paging of the AdminService lists (AIP-158): `page_size` and opaque page tokens in the one
// cursor format of every list (domain/logs/cursor.ts), each bound to its caller and its query,
// so a token of another list, parent, filter or user is refused. Lists page by a key (an id),
// each read through an index that gives that order (store/directory.ts).
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

export interface Page {
  /** The key of the last item of the previous page; undefined on the first. */
  after: string | undefined;
  /** How many to read: one more than the page, to know whether another follows. */
  read: number;
  /** The page of `docs` (read after `after`, in key order) and the token of the next one. */
  cut<D>(docs: D[], keyOf: (doc: D) => string): { items: D[]; nextPageToken: string };
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
    cut(docs, keyOf) {
      const items = docs.slice(0, size);
      return { items, nextPageToken: docs.length > size ? codec.encode(keyOf(items[items.length - 1]!), hash) : "" };
    },
  };
}

/** The key of a document: its id. */
export const byId = (doc: { _id: string }) => doc._id;
