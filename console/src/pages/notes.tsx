// Notes of an environment's records (project admins): threads filtered by collection and record,
// a new thread, replies, archive and unarchive, delete. Content is HTML the server sanitized;
// the console shows its text only (parsed in an inert document: nothing in it runs or loads).
import { useState } from "preact/hooks";
import type { Note } from "../../../gen/runhook/v1/note_pb.js";
import { notes } from "../api.js";
import { go, useRoute } from "../route.js";
import { isAdmin, useCall, useFail, useLoad, useMe } from "../session.js";
import { Confirm, ErrorText, Field, FilterForm, Loading, More, When } from "../ui.js";
import { Crumbs, NotFound, Page, RunLink, useProject } from "./common.js";
import { noteRunsOf, RecordLink, UserName } from "./links.js";

const PAGE = 20;

/** The text of sanitized HTML, for display as text. */
export function textOf(html: string): string {
  const doc = new DOMParser().parseFromString(html, "text/html");
  for (const br of doc.querySelectorAll("br")) br.replaceWith("\n");
  return doc.body.textContent ?? "";
}

/** What the user typed, as HTML that says exactly that (line breaks kept). */
export function htmlOf(text: string): string {
  return text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll("\n", "<br>");
}

/** A note's writer (a run, linked, when one wrote it) and its messages, wherever a note is shown. */
export function NoteBody({ note, runId }: { note: Note; runId: string | undefined }) {
  return (
    <>
      {runId && (
        <p class="note-run">
          Written by <RunLink runId={runId} short />
        </p>
      )}
      <ol class="messages">
        {note.messages.map((m) => (
          <li key={m.id} class="message">
            <p class="meta">
              <UserName user={m.user} />, <When at={m.createdAt} />
            </p>
            <p class="content">{textOf(m.content)}</p>
          </li>
        ))}
      </ol>
    </>
  );
}

export function NotesPage({ projectId, environment }: { projectId: string; environment: string }) {
  const me = useMe();
  const fail = useFail();
  const project = useProject(projectId);
  const route = useRoute();
  const query = route.query.toString();
  const collection = route.query.get("collection") ?? "";
  const record = route.query.get("record") ?? "";
  const archived = route.query.get("archived") === "1";
  const allowed = isAdmin(me, projectId);
  const name = allowed ? project.data?.name : undefined;
  const scope = name ? { projectName: name, environmentName: environment } : null;
  const [list, setList] = useState<Note[] | null>(null);
  const [cursor, setCursor] = useState<string | undefined>();
  const [error, setError] = useState<string | null>(null);
  const [round, setRound] = useState(0);
  const writers = useLoad(
    async (signal) => (name ? noteRunsOf({ projectName: name, environmentName: environment, collection, recordId: record }, signal) : undefined),
    [name, environment, collection, record, round],
  );

  const fetchPage = (after: string) =>
    notes.listNotes({
      scope: scope!,
      options: { limit: PAGE, order: "desc", cursor: after },
      filter: { collection, recordId: record, ...(archived ? {} : { archived: false }) },
    });

  useCall(
    scope && (() => fetchPage("")),
    [name, query, round],
    (res) => {
      setList(res.notes);
      setCursor(res.nextCursor);
    },
    setError,
  );

  const crumbs = <Crumbs project={project.data} trail={[[`${environment}: notes`, null]]} />;
  if (project.missing) return <NotFound what="project" />;
  if (!allowed)
    return (
      <Page title="Notes" crumbs={crumbs}>
        <p class="error">Only the project's admins read and write notes here.</p>
      </Page>
    );
  const replace = (n: Note) => setList((l) => (l ?? []).map((x) => (x.id === n.id ? n : x)));
  const act = async (call: () => Promise<unknown>) => {
    setError(null);
    try {
      await call();
    } catch (err) {
      setError(fail(err));
    }
  };
  return (
    <Page title={`Notes in ${environment}`} crumbs={crumbs}>
      <ErrorText error={project.error} />
      <NoteFilters
        key={query}
        initial={{ collection, record, archived }}
        onApply={(f) => go(["p", projectId, "env", environment, "notes"], { collection: f.collection, record: f.record, archived: f.archived ? "1" : "" })}
      />
      {scope && (
        <NewNote
          initial={{ collection, record }}
          onCreate={(init) =>
            act(async () => {
              const { note } = await notes.createNote({ scope, ...init, content: htmlOf(init.content) });
              if (note) setList((l) => [note, ...(l ?? [])]);
            })
          }
        />
      )}
      <ErrorText error={error} />
      {list === null && !error && <Loading what="the notes" />}
      {list?.length === 0 && <p class="muted">No note matches.</p>}
      <ul class="notes">
        {(list ?? []).map((n) => (
          <NoteThread
            key={n.id}
            note={n}
            place={{ projectId, environment, runId: writers.data?.get(n.id) }}
            onReply={(content) =>
              act(async () => {
                const { message } = await notes.addNoteMessage({ scope: scope!, noteId: n.id, content: htmlOf(content) });
                if (message) replace({ ...n, messages: [...n.messages, message] });
              })
            }
            onArchive={(value) =>
              act(async () => {
                const { note } = await notes.updateNote({ scope: scope!, noteId: n.id, archived: value });
                if (note) replace(note);
              })
            }
            onDelete={() =>
              act(async () => {
                await notes.deleteNote({ scope: scope!, noteId: n.id });
                setList((l) => (l ?? []).filter((x) => x.id !== n.id));
              })
            }
          />
        ))}
      </ul>
      <More
        show={!!cursor}
        onMore={() =>
          act(async () => {
            const res = await fetchPage(cursor!);
            setList((l) => [...(l ?? []), ...res.notes]);
            setCursor(res.nextCursor);
          })
        }
      />
      <button type="button" class="secondary" onClick={() => setRound((r) => r + 1)}>
        Refresh
      </button>
    </Page>
  );
}

interface ThreadProps {
  note: Note;
  /** Where the note is, and the run that wrote it (when one did). */
  place: { projectId: string; environment: string; runId?: string };
  onReply: (content: string) => Promise<void>;
  onArchive: (archived: boolean) => Promise<void>;
  onDelete: () => Promise<void>;
}

function NoteThread({ note, place, onReply, onArchive, onDelete }: ThreadProps) {
  const [reply, setReply] = useState("");
  const isArchived = !!note.archivedAt;
  return (
    <li class={`note ${isArchived ? "archived" : ""}`} data-note={note.id}>
      <h3>
        {note.title || <span class="muted">Untitled note</span>}{" "}
        <span class="muted">
          on <RecordLink projectId={place.projectId} environment={place.environment} collection={note.collection} recordId={note.recordId} />
        </span>
        {isArchived && <span class="state"> archived</span>}
      </h3>
      <NoteBody note={note} runId={place.runId} />
      <form
        class="inline reply"
        onSubmit={async (e) => {
          e.preventDefault();
          if (!reply.trim()) return;
          await onReply(reply);
          setReply("");
        }}
      >
        <label>
          Reply
          <textarea name="reply" rows={2} value={reply} onInput={(e) => setReply(e.currentTarget.value)} />
        </label>
        <button type="submit">Reply</button>
      </form>
      <div class="actions">
        <button type="button" class="secondary" onClick={() => onArchive(!isArchived)}>
          {isArchived ? "Unarchive" : "Archive"}
        </button>
        <Confirm label="Delete" question="Delete this note and its messages? This cannot be undone." confirm="Delete the note" danger onConfirm={onDelete} />
      </div>
    </li>
  );
}

function NoteFilters({
  initial,
  onApply,
}: {
  initial: { collection: string; record: string; archived: boolean };
  onApply: (f: { collection: string; record: string; archived: boolean }) => void;
}) {
  const [f, setF] = useState(initial);
  return (
    <FilterForm onSearch={() => onApply(f)}>
      <Field name="collection" label="Collection" value={f.collection} onValue={(v) => setF({ ...f, collection: v })} />
      <Field name="record" label="Record id" value={f.record} onValue={(v) => setF({ ...f, record: v })} />
      <label class="check">
        <input type="checkbox" name="archived" checked={f.archived} onChange={(e) => setF({ ...f, archived: e.currentTarget.checked })} />
        Include archived notes
      </label>
    </FilterForm>
  );
}

function NewNote({
  initial,
  onCreate,
}: {
  initial: { collection: string; record: string };
  onCreate: (n: { collection: string; recordId: string; title: string; content: string }) => Promise<void>;
}) {
  const [open, setOpen] = useState(false);
  const [n, setN] = useState({ collection: initial.collection, recordId: initial.record, title: "", content: "" });
  if (!open)
    return (
      <button type="button" class="secondary new-note" onClick={() => setOpen(true)}>
        New note
      </button>
    );
  return (
    <form
      class="new-note-form"
      onSubmit={async (e) => {
        e.preventDefault();
        await onCreate(n);
        setOpen(false);
        setN({ ...n, title: "", content: "" });
      }}
    >
      <Field name="noteCollection" label="Collection" value={n.collection} onValue={(v) => setN({ ...n, collection: v })} />
      <Field name="noteRecord" label="Record id" value={n.recordId} onValue={(v) => setN({ ...n, recordId: v })} />
      <Field name="noteTitle" label="Title (optional)" value={n.title} onValue={(v) => setN({ ...n, title: v })} />
      <label>
        Message
        <textarea name="noteContent" rows={3} required value={n.content} onInput={(e) => setN({ ...n, content: e.currentTarget.value })} />
      </label>
      <button type="submit">Add note</button>{" "}
      <button type="button" class="secondary" onClick={() => setOpen(false)}>
        Cancel
      </button>
    </form>
  );
}
