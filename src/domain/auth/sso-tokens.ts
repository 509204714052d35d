// An API token made in an SSO session never outlives that session's own SSO token. Tokens made
// before runhook recorded which SSO token made them are bound here, once, at start.
import type { DirectoryStore } from "../../store/directory.js";
import type { ApiTokenDoc, AppTokenDoc } from "../../store/types.js";

const BATCH = 100;

/**
 * The SSO token that made `token`, as far as the stored tokens tell: among its creator's SSO
 * tokens, those usable at the moment it was made, the one that expires last (the reading most
 * generous to the token's holder); none when they are all gone.
 */
async function sessionOf(dir: DirectoryStore, token: ApiTokenDoc): Promise<AppTokenDoc | undefined> {
  const made = token.createdAt.getTime();
  let best: AppTokenDoc | undefined;
  let after: string | undefined;
  for (;;) {
    const page = await dir.appTokens.ofUser(token.userId, after, BATCH);
    for (const t of page) {
      const usableThen = t.sso && t.createdAt.getTime() <= made && t.expiresAt.getTime() > made && (!t.revokedAt || t.revokedAt.getTime() > made);
      if (usableThen && (!best || t.expiresAt > best.expiresAt)) best = t;
    }
    if (page.length < BATCH) return best;
    after = page[page.length - 1]!._id;
  }
}

/**
 * Binds every SSO API token that is not yet bound to the SSO token that made it: its expiry is
 * brought forward to that token's, or to its own creation (it stops at once) when no SSO token
 * of its creator was usable then. Safe to run from several processes at once. Returns how many
 * it bound.
 */
export async function bindUnboundSsoApiTokens(dir: DirectoryStore): Promise<number> {
  let bound = 0;
  for (;;) {
    const batch = await dir.apiTokens.unboundSso(BATCH);
    if (batch.length === 0) return bound;
    for (const token of batch) {
      const [session, project] = await Promise.all([sessionOf(dir, token), dir.projects.get(token.projectId)]);
      const organizationId = project?.organizationId ?? (await dir.users.get(token.userId))?.organizationId ?? "";
      const until = session?.expiresAt ?? token.createdAt;
      if (await dir.apiTokens.bindToSsoToken(organizationId, token._id, session?._id ?? "", until)) bound++;
    }
  }
}
