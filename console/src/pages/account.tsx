// Account settings: the user's own application tokens (the identity of webhook calls and of the
// console's sign-in): when each was made, last used and expires; a new one, its secret shown
// once with a copy button; revoking one (it answers 401 at once, and its console sessions end).
import { admin } from "../api.js";
import { useLoad, useMe } from "../session.js";
import { Confirm, ErrorText, Loading, OnceSecret, Section } from "../ui.js";
import { Crumbs, Page } from "./common.js";
import { NewTokenForm, TokenTable, useTokenActions } from "./tokens.js";

export function AccountPage() {
  const me = useMe();
  const tokens = useLoad(async (signal) => (await admin.listApplicationTokens({ pageSize: 1000 }, { signal })).applicationTokens, []);
  const actions = useTokenActions(tokens.reload);
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
        <ErrorText error={tokens.error ?? actions.error} />
        {actions.secret && <OnceSecret secret={actions.secret} onDone={actions.clearSecret} />}
        <NewTokenForm
          placeholder="e.g. CRM integration"
          button="Generate token"
          onSubmit={(name, ttlSeconds) => actions.generate(() => admin.createApplicationToken({ name, ttlSeconds }))}
        />
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
                onConfirm={() => actions.revoke(() => admin.revokeApplicationToken({ tokenId: t.id }))}
              />
            )}
          />
        )}
      </Section>
    </Page>
  );
}
