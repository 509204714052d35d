// Project settings → API access (project admins): the project's API tokens for the public API
// (logs and notes over /v1): a new one with its secret shown once, revoking one.
import { admin } from "../api.js";
import { isAdmin, useLoad, useMe } from "../session.js";
import { Confirm, ErrorText, Loading, OnceSecret, Section } from "../ui.js";
import { Crumbs, NotFound, Page, useProject } from "./common.js";
import { NewTokenForm, TokenTable, useTokenActions } from "./tokens.js";

export function ApiAccessPage({ projectId }: { projectId: string }) {
  const me = useMe();
  const project = useProject(projectId);
  const allowed = isAdmin(me, projectId);
  const tokens = useLoad(
    async (signal) => (allowed ? (await admin.listApiTokens({ projectId, pageSize: 1000 }, { signal })).apiTokens : []),
    [projectId, allowed],
  );
  const actions = useTokenActions(tokens.reload);
  const crumbs = <Crumbs project={project.data} trail={[["API access", null]]} />;
  if (project.missing) return <NotFound what="project" />;
  if (!allowed)
    return (
      <Page title="API access" crumbs={crumbs}>
        <p class="error">Only the project's admins generate and revoke its API tokens.</p>
      </Page>
    );
  return (
    <Page title={`API access${project.data ? ` of ${project.data.name}` : ""}`} crumbs={crumbs}>
      <ErrorText error={project.error} />
      <Section title="Project API tokens">
        <p class="muted">
          Tokens for the public API (/v1: activity and admin logs, notes, runs) of this project. What a token writes is authored by its maker.
        </p>
        <ErrorText error={tokens.error ?? actions.error} />
        {actions.secret && <OnceSecret secret={actions.secret} onDone={actions.clearSecret} />}
        <NewTokenForm
          placeholder="e.g. SIEM forwarder"
          button="Generate new token"
          onSubmit={(name, ttlSeconds) => actions.generate(() => admin.createApiToken({ projectId, name, ttlSeconds }))}
        />
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
                onConfirm={() => actions.revoke(() => admin.revokeApiToken({ tokenId: t.id }))}
              />
            )}
          />
        )}
      </Section>
    </Page>
  );
}
