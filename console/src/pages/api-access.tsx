// Project settings → API access (project admins): the project's API tokens for the public API
// (logs and notes over /v1): a new one with its secret shown once, revoking one.
import { useState } from "preact/hooks";
import { admin } from "../api.js";
import { isAdmin, useFail, useLoad, useMe } from "../session.js";
import { Confirm, ErrorText, Field, Loading, OnceSecret, Section } from "../ui.js";
import { Crumbs, NotFound, Page, useProject } from "./common.js";
import { TokenTable } from "./tokens.js";

export function ApiAccessPage({ projectId }: { projectId: string }) {
  const me = useMe();
  const fail = useFail();
  const project = useProject(projectId);
  const allowed = isAdmin(me, projectId);
  const tokens = useLoad(
    async (signal) => (allowed ? (await admin.listApiTokens({ projectId, pageSize: 1000 }, { signal })).apiTokens : []),
    [projectId, allowed],
  );
  const [name, setName] = useState("");
  const [days, setDays] = useState("90");
  const [secret, setSecret] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const crumbs = <Crumbs project={project.data} trail={[["API access", null]]} />;
  if (project.missing) return <NotFound what="project" />;
  if (!allowed)
    return (
      <Page title="API access" crumbs={crumbs}>
        <p class="error">Only the project's admins generate and revoke its API tokens.</p>
      </Page>
    );
  const create = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      const res = await admin.createApiToken({ projectId, name: name.trim(), ttlSeconds: Math.round(Number(days) * 86400) });
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
      await admin.revokeApiToken({ tokenId });
      tokens.reload();
    } catch (err) {
      setError(fail(err));
    }
  };
  return (
    <Page title={`API access${project.data ? ` of ${project.data.name}` : ""}`} crumbs={crumbs}>
      <ErrorText error={project.error} />
      <Section title="Project API tokens">
        <p class="muted">
          Tokens for the public API (/v1: activity and admin logs, notes, runs) of this project. What a token writes is authored by its maker.
        </p>
        <ErrorText error={tokens.error ?? error} />
        {secret && <OnceSecret secret={secret} onDone={() => setSecret(null)} />}
        <form class="inline new-token" onSubmit={create}>
          <Field name="tokenName" label="Name of a new token" value={name} onValue={setName} placeholder="e.g. SIEM forwarder" />
          <label>
            Valid for (days)
            <input name="days" type="number" min={1} max={365} required value={days} onInput={(e) => setDays(e.currentTarget.value)} />
          </label>
          <button type="submit">Generate new token</button>
        </form>
        {!tokens.data && !tokens.error && <Loading what="the tokens" />}
        {tokens.data && (
          <TokenTable
            tokens={tokens.data}
            showOwner
            revoke={(t) => (
              <Confirm
                label="Revoke"
                question={`Revoke "${t.name}"? Calls with it answer 401 at once.`}
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
