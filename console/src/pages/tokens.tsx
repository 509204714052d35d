// Tokens as the account and API-access pages show them (application or project API tokens): a
// table (name, made, last used, expiry, whether from an SSO session, revoked; the revoke control
// for those still valid), and the form and actions that generate and revoke them.
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { useFail } from "../session.js";
import { dateOf } from "../time.js";
import { Field, ListHead, When } from "../ui.js";

/**
 * Generating and revoking tokens of one kind: `generate` makes one (its secret shown once),
 * `revoke` runs a revocation; each reloads the list, and an error of either is shown.
 */
export function useTokenActions(reload: () => void) {
  const fail = useFail();
  const [secret, setSecret] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const run = async (action: () => Promise<void>): Promise<boolean> => {
    setError(null);
    try {
      await action();
      reload();
      return true;
    } catch (err) {
      setError(fail(err));
      return false;
    }
  };
  return {
    error,
    secret,
    clearSecret: () => setSecret(null),
    /** Makes a token (`make`), whose secret is then shown once; whether it was made. */
    generate: (make: () => Promise<{ plaintext: string }>) => run(async () => setSecret((await make()).plaintext)),
    revoke: (drop: () => Promise<unknown>) => void run(async () => void (await drop())),
  };
}

/** A new token's name and lifetime (days); the name is cleared once the token is made. */
export function NewTokenForm({
  placeholder,
  button,
  onSubmit,
}: {
  placeholder: string;
  button: string;
  onSubmit: (name: string, ttlSeconds: number) => Promise<boolean>;
}) {
  const [name, setName] = useState("");
  const [days, setDays] = useState("90");
  const submit = async (e: Event) => {
    e.preventDefault();
    if (await onSubmit(name.trim(), Math.round(Number(days) * 86400))) setName("");
  };
  return (
    <form class="inline new-token" onSubmit={submit}>
      <Field name="tokenName" label="Name of a new token" value={name} onValue={setName} placeholder={placeholder} />
      <label>
        Valid for (days)
        <input name="days" type="number" min={1} max={365} required value={days} onInput={(e) => setDays(e.currentTarget.value)} />
      </label>
      <button type="submit">{button}</button>
    </form>
  );
}

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
      <ListHead columns={["Name", showOwner && "Made by", "Created", "Last used", "Expires", "Status"]} />
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
