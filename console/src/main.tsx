// The console: sign-in, then pages chosen by the location's hash (route.ts). Every page uses only
// RPCs that gRPC and /v1 users have; WhoAmI's roles decide which pages and buttons it shows (the
// server decides what it accepts).
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import type { WhoAmIResponse } from "../../gen/runhook/v1/admin_pb.js";
import { admin, currentSession, describe, signIn, signOut, type SignedIn } from "./api.js";
import { AccountPage } from "./pages/account.js";
import { ApiAccessPage } from "./pages/api-access.js";
import { LogsPage } from "./pages/logs.js";
import { NotesPage } from "./pages/notes.js";
import { ProjectPage } from "./pages/project.js";
import { ProjectsPage } from "./pages/projects.js";
import { RecordPage } from "./pages/record.js";
import { RenderingPage } from "./pages/rendering.js";
import { RunPage } from "./pages/run.js";
import { RunsPage } from "./pages/runs.js";
import { WorkflowPage } from "./pages/workflow.js";
import { href, type Route, useRoute } from "./route.js";
import { MeContext } from "./session.js";
import { Shortcuts } from "./shortcuts.js";
import { ErrorText, useTitle } from "./ui.js";

function SignIn({ onSignedIn, notice }: { onSignedIn: (s: SignedIn) => void; notice: string | null }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState<string | null>(null);
  useTitle("Sign in");
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      onSignedIn(await signIn(token.trim()));
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <form class="sign-in" onSubmit={submit}>
      <h1>Sign in to runhook</h1>
      {notice && <p class="notice">{notice}</p>}
      <label>
        Your application token
        <input name="token" type="password" autocomplete="off" value={token} onInput={(e) => setToken(e.currentTarget.value)} placeholder="rh_app_…" />
      </label>
      <button type="submit">Sign in</button>
      <ErrorText error={error} />
      <p class="muted">The token stays on this page: the console keeps a session cookie that scripts cannot read.</p>
    </form>
  );
}

/** The page for a route (path segments as route.ts decodes them). */
function pageOf({ parts }: Route) {
  const [a, b, c, d, e, f, g] = parts;
  if (parts.length === 0) return <ProjectsPage />;
  if (a === "account" && parts.length === 1) return <AccountPage />;
  if (a === "runs" && b && parts.length === 2) return <RunPage key={b} runId={b} />;
  if (a === "p" && b) {
    if (parts.length === 2) return <ProjectPage key={b} projectId={b} />;
    if (c === "api-access" && parts.length === 3) return <ApiAccessPage key={b} projectId={b} />;
    if (c === "admin-log" && parts.length === 3) return <LogsPage key={`${b}/admin`} kind="admin" projectId={b} />;
    if (c === "r" && d && parts.length === 4) return <RenderingPage key={d} projectId={b} renderingId={d} />;
    if (c === "r" && d && e === "w" && f && parts.length === 6) return <WorkflowPage key={f} projectId={b} renderingId={d} workflowId={f} />;
    if (c === "env" && d && e === "records" && f && g && parts.length === 7)
      return <RecordPage key={`${b}/${d}/${f}/${g}`} projectId={b} environment={d} collection={f} recordId={g} />;
    if (c === "env" && d && parts.length === 5) {
      const key = `${b}/${d}/${e}`;
      if (e === "runs") return <RunsPage key={key} projectId={b} environment={d} />;
      if (e === "activity") return <LogsPage key={key} kind="activity" projectId={b} environment={d} />;
      if (e === "notes") return <NotesPage key={key} projectId={b} environment={d} />;
    }
  }
  return <NoSuchPage />;
}

function NoSuchPage() {
  useTitle("No such page");
  return (
    <section class="page">
      <h1>No such page</h1>
      <p class="error" role="alert">
        No such page. <a href={href([])}>Back to the projects</a>
      </p>
    </section>
  );
}

function App() {
  const [session, setSession] = useState<SignedIn | null | undefined>(undefined);
  const [who, setWho] = useState<WhoAmIResponse | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const route = useRoute();
  const ended = (why: string | null) => {
    setWho(null);
    setSession(null);
    setNotice(why);
  };
  useEffect(() => void currentSession().then(setSession, () => setSession(null)), []);
  useEffect(() => {
    if (!session) return;
    admin.whoAmI({}).then(setWho, (err) => {
      const d = describe(err);
      if (d.signedOut) ended("Your session has ended: sign in again.");
      else setError(d.message);
    });
  }, [session]);
  if (session === undefined)
    return (
      <main>
        <p class="muted">Loading…</p>
      </main>
    );
  if (session === null)
    return (
      <main>
        <SignIn
          notice={notice}
          onSignedIn={(s) => {
            setNotice(null);
            setSession(s);
          }}
        />
        <Shortcuts />
      </main>
    );
  if (!who) return <main>{error ? <ErrorText error={error} /> : <p class="muted">Loading…</p>}</main>;
  return (
    <MeContext.Provider value={{ who, signedOut: () => ended("Your session has ended: sign in again.") }}>
      <header>
        <a class="home" href="#/">
          runhook
        </a>
        <nav aria-label="Main">
          <a href={href([])}>Projects</a>
          <a href={href(["account"])}>Account</a>
        </nav>
        <span class="who">{session.user.email}</span>
        <button
          type="button"
          class="sign-out"
          onClick={async () => {
            await signOut();
            ended(null);
          }}
        >
          Sign out
        </button>
      </header>
      <main>{pageOf(route)}</main>
      <Shortcuts />
    </MeContext.Provider>
  );
}

render(<App />, document.getElementById("app")!);
