// A record's page: one (collection, record id) of an environment. Its runs of every workflow the
// caller may see (ListRuns on the record, newest first), and for the project's admins its notes
// (each written by a run links to that run: the run's `note.created` entry names the note) and its
// activity entries. "Start a workflow" lists the workflows the caller may start on it.
import type { Workflow } from "../../../gen/runhook/v1/admin_pb.js";
import type { Note } from "../../../gen/runhook/v1/note_pb.js";
import type { Run } from "../../../gen/runhook/v1/run_pb.js";
import { admin, allPages, logs, notes, runs } from "../api.js";
import { href } from "../route.js";
import { isAdmin, mayChangeWorkflows, mayTrigger, type Me, useLoad, useMe } from "../session.js";
import { ErrorText, ListHead, Loading, Section, When } from "../ui.js";
import { Crumbs, NotFound, Page, RefusalText, RunOutcome, useProject, useRunStart } from "./common.js";
import { noteRunsOf, UserName, WorkflowLink } from "./links.js";
import { activityRow, LogTable } from "./logs.js";
import { NoteBody } from "./notes.js";

const PAGE = 50;

interface Props {
  projectId: string;
  environment: string;
  collection: string;
  recordId: string;
}

export function RecordPage({ projectId, environment, collection, recordId }: Props) {
  const me = useMe();
  const project = useProject(projectId);
  const name = project.data?.name;
  const where = name ? { projectName: name, environmentName: environment } : null;
  const list = useLoad(
    async (signal) =>
      where ? (await runs.listRuns({ ...where, filter: { collection, recordId }, options: { limit: PAGE, order: "desc" } }, { signal })).runs : undefined,
    [name, environment, collection, recordId],
  );
  // Another organization's project, or an environment that is not the caller's: the same words, no name.
  if (project.missing || list.missing) return <NotFound what="record" />;
  const adminHere = isAdmin(me, projectId);
  return (
    <Page
      title={
        <>
          Record {collection} / <code>{recordId}</code>
        </>
      }
      crumbs={
        <Crumbs
          project={project.data}
          trail={[
            [`${environment}: runs`, href(["p", projectId, "env", environment, "runs"])],
            [`${collection} / ${recordId}`, null],
          ]}
        />
      }
    >
      <ErrorText error={project.error} />
      <p class="muted">
        In {environment}. <a href={href(["p", projectId, "env", environment, "runs"], { collection, record: recordId })}>Search its runs</a>
        {adminHere && (
          <>
            {" · "}
            <a href={href(["p", projectId, "env", environment, "notes"], { collection, record: recordId })}>Write or answer notes</a>
          </>
        )}
      </p>
      <StartWorkflow me={me} projectId={projectId} environment={environment} collection={collection} recordId={recordId} seen={list.data} />
      <RecordRuns projectId={projectId} runs={list.data} error={list.error} />
      {where && adminHere && <RecordNotes where={where} collection={collection} recordId={recordId} />}
      {where && adminHere && <RecordActivity projectId={projectId} where={where} collection={collection} recordId={recordId} />}
    </Page>
  );
}

function RecordRuns({ projectId, runs: list, error }: { projectId: string; runs: Run[] | undefined; error: string | null }) {
  return (
    <Section title="Runs">
      <ErrorText error={error} />
      {!list && !error && <Loading what="the runs" />}
      {list?.length === 0 && <p class="muted">No run on this record that you may see. Start one above, or through its workflow's webhook.</p>}
      {list && list.length > 0 && (
        <div class="table-scroll">
          <table class="list record-runs">
            <ListHead columns={["Created", "Workflow", "State", "As, via"]} />
            <tbody>
              {list.map((r) => (
                <tr key={r.id} data-run={r.id}>
                  <td>
                    <a href={href(["runs", r.id])} title={`Run ${r.id}`}>
                      <When at={r.createdAt} />
                    </a>
                  </td>
                  <td>
                    <WorkflowLink projectId={projectId} renderingId={r.renderingId} workflowId={r.workflowId} name={r.workflowName} /> v{r.workflowVersion}
                  </td>
                  <td>
                    <RunOutcome run={r} />
                  </td>
                  <td>
                    <UserName user={r.user} />, {r.via}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {list && list.length === PAGE && <p class="muted">The newest {PAGE} runs; search its runs for the others.</p>}
    </Section>
  );
}

interface Where {
  projectName: string;
  environmentName: string;
}

function RecordNotes({ where, collection, recordId }: { where: Where; collection: string; recordId: string }) {
  const key = [where.projectName, where.environmentName, collection, recordId];
  const list = useLoad(
    async (signal) => (await notes.listNotes({ scope: where, filter: { collection, recordId }, options: { limit: PAGE, order: "desc" } }, { signal })).notes,
    key,
  );
  const writers = useLoad((signal) => noteRunsOf({ ...where, collection, recordId }, signal), key);
  return (
    <Section title="Notes">
      <ErrorText error={list.error} />
      {!list.data && !list.error && <Loading what="the notes" />}
      {list.data?.length === 0 && <p class="muted">No note on this record. Write one from the notes page (link above), or add a note step to a workflow.</p>}
      <ul class="notes">
        {(list.data ?? []).map((n) => (
          <RecordNote key={n.id} note={n} runId={writers.data?.get(n.id)} />
        ))}
      </ul>
    </Section>
  );
}

/** A note as the record's page shows it: title, who wrote it (a run, linked, when one did), its messages. */
export function RecordNote({ note, runId }: { note: Note; runId: string | undefined }) {
  return (
    <li class={`note ${note.archivedAt ? "archived" : ""}`} data-note={note.id}>
      <h3>
        {note.title || <span class="muted">Untitled note</span>}
        {note.archivedAt && <span class="state"> archived</span>}
      </h3>
      <NoteBody note={note} runId={runId} />
    </li>
  );
}

function RecordActivity({ projectId, where, collection, recordId }: { projectId: string; where: Where; collection: string; recordId: string }) {
  const entries = useLoad(
    async (signal) =>
      (await logs.listActivityLogs({ ...where, filter: { collection, recordId }, options: { limit: PAGE, order: "desc" } }, { signal })).activityLogs,
    [where.projectName, where.environmentName, collection, recordId],
  );
  const all = href(["p", projectId, "env", where.environmentName, "activity"], { collection, recordId });
  return (
    <Section title="Activity">
      <ErrorText error={entries.error} />
      {!entries.data && !entries.error && <Loading what="the activity entries" />}
      {entries.data?.length === 0 && <p class="muted">No activity entry on this record yet.</p>}
      {entries.data && entries.data.length > 0 && (
        <div class="table-scroll">
          <LogTable kind="activity" rows={entries.data.map(activityRow)} place={{ projectId, environment: where.environmentName, onRecordPage: true }} />
        </div>
      )}
      <p>
        <a href={all}>Its whole activity log</a>
      </p>
    </Section>
  );
}

/**
 * The workflows the caller may start on the record: of the environment's collection by that name,
 * with an active version, whose trigger roles allow the caller's role. Editors and admins list the
 * environment's renderings; anyone else sees the renderings of the record's runs shown to them.
 */
function useStartable(me: Me, projectId: string, environment: string, collection: string, seen: Run[] | undefined) {
  const listsAll = mayChangeWorkflows(me, projectId);
  const renderingsSeen = [...new Set((seen ?? []).map((r) => r.renderingId))].sort();
  return useLoad(
    async (signal): Promise<Workflow[] | undefined> => {
      if (!listsAll && !seen) return undefined;
      const page = { pageSize: 1000 };
      let renderingIds = renderingsSeen;
      let collectionId: string | undefined;
      if (listsAll) {
        const envs = await allPages(
          (pageToken) => admin.listEnvironments({ projectId, ...page, pageToken }, { signal }),
          (r) => r.environments,
        );
        const environmentId = envs.find((e) => e.name === environment)?.id;
        if (!environmentId) return [];
        const [renderings, collections] = await Promise.all([
          allPages(
            (pageToken) => admin.listRenderings({ projectId, environmentId, ...page, pageToken }, { signal }),
            (r) => r.renderings,
          ),
          allPages(
            (pageToken) => admin.listCollections({ environmentId, ...page, pageToken }, { signal }),
            (r) => r.collections,
          ),
        ]);
        renderingIds = renderings.map((r) => r.id);
        collectionId = collections.find((c) => c.name === collection)?.id;
      }
      const lists = await Promise.all(
        renderingIds.map((renderingId) =>
          allPages(
            (pageToken) => admin.listWorkflows({ renderingId, ...page, pageToken }, { signal }),
            (r) => r.workflows,
          ).catch(() => []),
        ),
      );
      const workflows = lists.flat();
      // Without the collections listed: the collection of the workflows that ran on this record.
      const ran = new Set((seen ?? []).map((r) => r.workflowId));
      collectionId ??= workflows.find((w) => ran.has(w.id))?.collectionId;
      return workflows
        .filter((w) => w.collectionId === collectionId && w.versions.some((v) => v.active) && mayTrigger(me, projectId, w))
        .sort((a, b) => a.name.localeCompare(b.name));
    },
    [projectId, environment, collection, listsAll, renderingsSeen.join(","), !!seen],
  );
}

function StartWorkflow(props: { me: Me; projectId: string; environment: string; collection: string; recordId: string; seen: Run[] | undefined }) {
  const { me, projectId, environment, collection, recordId } = props;
  const startable = useStartable(me, projectId, environment, collection, props.seen);
  const { busy, refusal, start } = useRunStart();
  const list = startable.data;
  return (
    <Section title="Start a workflow">
      <ErrorText error={startable.error} />
      {!list && !startable.error && <Loading what="the workflows you may start" />}
      {list?.length === 0 && (
        <p class="muted start-none">
          {mayChangeWorkflows(me, projectId)
            ? `No workflow you may start runs on ${collection} in ${environment}: publish one on this collection (a rendering's Workflows), with a trigger role that is yours.`
            : `No workflow you may start here that runhook can show you: a project editor or admin can tell you which workflow of ${collection} to start, and give your role its trigger.`}
        </p>
      )}
      {list && list.length > 0 && (
        <>
          <p class="muted">Starts a run of the workflow's latest active version on this record, as you.</p>
          <ul class="start-list">
            {list.map((w) => (
              <li key={w.id}>
                <button type="button" disabled={busy} onClick={() => start(() => runs.startRun({ workflowId: w.id, recordId }))}>
                  Start {w.name}
                </button>
              </li>
            ))}
          </ul>
        </>
      )}
      <RefusalText refusal={refusal} />
    </Section>
  );
}
