// When each token last authenticated a call, so that stale tokens can be found. The write is
// made after the call authenticated and never awaited by it: a slow or failed write neither
// delays nor fails a call. Each process writes a token at most once a minute (it remembers when
// it last did, for a bounded number of tokens), so a busy token costs one small update a minute
// per process. The write goes straight to the token's document, outside the directory's
// version protocol: it changes nothing a caller may do, so no cache has to be cleared for it
// (a cached token document may show an older lastUsedAt, which nothing decides on).

/** The kinds of token, as principals name them. */
export type TokenKind = "app" | "api" | "org";

/** A token's lastUsedAt is written at most this often per process. */
export const LAST_USED_EVERY_MS = 60_000;
/** Tokens a process remembers writing; beyond, those written over a minute ago are forgotten (and if none is, all are). */
export const MAX_REMEMBERED_TOKENS = 10_000;

/** Records a use of token `id` of `kind` at `now`: writes it (fire and forget) unless this process did within the minute. */
export type TokenUseRecorder = (kind: TokenKind, id: string, now?: number) => void;

export function tokenUseRecorder(write: (kind: TokenKind, id: string, at: Date) => Promise<unknown>): TokenUseRecorder {
  const written = new Map<string, number>();
  function forgetOld(now: number): void {
    for (const [key, at] of written) if (now - at >= LAST_USED_EVERY_MS) written.delete(key);
    if (written.size >= MAX_REMEMBERED_TOKENS) written.clear();
  }
  return (kind, id, now = Date.now()) => {
    const key = `${kind}:${id}`;
    const last = written.get(key);
    if (last !== undefined && now - last < LAST_USED_EVERY_MS) return;
    if (written.size >= MAX_REMEMBERED_TOKENS) forgetOld(now);
    written.set(key, now);
    // A lost write is written again by the first use after the minute; the call never waits for it.
    void Promise.resolve()
      .then(() => write(kind, id, new Date(now)))
      .catch(() => {});
  };
}
