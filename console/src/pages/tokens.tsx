// A table of tokens (application or project API tokens): name, made, last used, expiry, whether
// from an SSO session, revoked; the revoke control for those still valid.
import type { ComponentChildren } from "preact";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { dateOf } from "../time.js";
import { When } from "../ui.js";

interface Token {
  id: string;
  name: string;
  sso: boolean;
  createdAt?: Timestamp;
  lastUsedAt?: Timestamp;
  expiresAt?: Timestamp;
  revokedAt?: Timestamp;
  user?: { email: string };
}

export function TokenTable<T extends Token>({
  tokens,
  revoke,
  current,
  showOwner,
}: {
  tokens: T[];
  revoke: (t: T) => ComponentChildren;
  current?: string;
  showOwner?: boolean;
}) {
  if (tokens.length === 0) return <p class="muted">No token yet.</p>;
  const now = Date.now();
  return (
    <table class="list tokens">
      <thead>
        <tr>
          <th scope="col">Name</th>
          {showOwner && <th scope="col">Made by</th>}
          <th scope="col">Created</th>
          <th scope="col">Last used</th>
          <th scope="col">Expires</th>
          <th scope="col">Status</th>
        </tr>
      </thead>
      <tbody>
        {tokens.map((t) => {
          const expired = (dateOf(t.expiresAt)?.getTime() ?? Number.POSITIVE_INFINITY) <= now;
          const status = t.revokedAt ? "revoked" : expired ? "expired" : "valid";
          return (
            <tr key={t.id} data-token={t.id} class={`token ${status}`}>
              <td>
                {t.name || <span class="muted">unnamed</span>}
                {t.id === current && <span class="muted"> (this session's)</span>}
                {t.sso && <span class="muted"> · SSO</span>}
              </td>
              {showOwner && <td>{t.user?.email}</td>}
              <td>
                <When at={t.createdAt} />
              </td>
              <td>
                <When at={t.lastUsedAt} none="never" />
              </td>
              <td>
                <When at={t.expiresAt} />
              </td>
              <td>
                {status === "revoked" ? (
                  <>
                    revoked <When at={t.revokedAt} />
                  </>
                ) : (
                  status
                )}
                {status === "valid" && <> {revoke(t)}</>}
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
