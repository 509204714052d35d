// Account settings: the user's own application tokens (the identity of webhook calls and of the
// console's sign-in): when each was made, last used and expires; a new one, its secret shown
// once with a copy button; revoking one (it answers 401 at once, and its console sessions end).
import { useState } from "preact/hooks";
import { admin } from "../api.js";
import { useFail, useLoad, useMe } from "../session.js";
import { Confirm, ErrorText, Field, Loading, OnceSecret, Section } from "../ui.js";
import { Crumbs, Page } from "./common.js";
import { TokenTable } from "./tokens.js";

export function AccountPage() {
  const me = useMe();
  const fail = useFail();
  const tokens = useLoad(async (signal) => (await admin.listApplicationTokens({ pageSize: 1000 }, { signal })).applicationTokens, []);
  const [name, setName] = useState("");
  const [days, setDays] = useState("90");
  const [secret, setSecret] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const create = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      const res = await admin.createApplicationToken({ name: name.trim(), ttlSeconds: Math.round(Number(days) * 86400) });
      setSecret(res.plaintext);
      setName("");
      tokens.reload();
    } catch (err) {
      setError(fail(err));
    }
  };
  const revoke = async (tokenId: string) => {
    setError(null);
    try {
      await admin.revokeApplicationToken({ tokenId });
      tokens.reload();
    } catch (err) {
      setError(fail(err));
    }
  };
  const u = me.who.user;
  return (
    <Page title="Account settings" crumbs={<Crumbs trail={[["Account", null]]} />}>
      <p>
        {u?.name} &lt;{u?.email}&gt; in {me.who.organization?.name}
        {u?.organizationAdmin && " (organization admin)"}
      </p>
      <Section title="Application tokens">
        <p class="muted">
          Your personal tokens: the identity of your webhook calls and of the runs they start, and how you sign in here. Revoking one stops it at once, and ends
          the console sessions signed in with it.
        </p>
        <ErrorText error={tokens.error ?? error} />
        {secret && <OnceSecret secret={secret} onDone={() => setSecret(null)} />}
        <form class="inline new-token" onSubmit={create}>
          <Field name="tokenName" label="Name of a new token" value={name} onValue={setName} placeholder="e.g. CRM integration" />
          <label>
            Valid for (days)
            <input name="days" type="number" min={1} max={365} required value={days} onInput={(e) => setDays(e.currentTarget.value)} />
          </label>
          <button type="submit">Generate token</button>
        </form>
        {!tokens.data && !tokens.error && <Loading what="your tokens" />}
        {tokens.data && (
          <TokenTable
            tokens={tokens.data}
            current={me.who.token?.id}
            revoke={(t) => (
              <Confirm
                label="Revoke"
                question={`Revoke "${t.name}"? Calls with it answer 401 at once${t.id === me.who.token?.id ? ", and this session ends" : ""}.`}
                confirm="Revoke the token"
                danger
                onConfirm={() => revoke(t.id)}
              />
            )}
          />
        )}
      </Section>
    </Page>
  );
}
