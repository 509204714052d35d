// The console: sign-in, then pages chosen by the location's hash (#/runs/<id>). Every page uses
// only RPCs that gRPC and /v1 users have.
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { currentSession, signIn, signOut, type SignedIn } from "./api.js";
import { RunPage } from "./run-page.js";

function useHashRoute(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const onChange = () => setHash(location.hash);
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  return hash.replace(/^#/, "") || "/";
}

function SignIn({ onSignedIn }: { onSignedIn: (s: SignedIn) => void }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState<string | null>(null);
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
      <label>
        Your application token
        <input name="token" type="password" autocomplete="off" value={token} onInput={(e) => setToken(e.currentTarget.value)} placeholder="rh_app_…" />
      </label>
      <button type="submit">Sign in</button>
      {error && <p class="error">{error}</p>}
      <p class="muted">The token stays on this page: the console keeps a session cookie that scripts cannot read.</p>
    </form>
  );
}

function Home() {
  const [runId, setRunId] = useState("");
  return (
    <form class="open-run" onSubmit={(e) => (e.preventDefault(), (location.hash = `#/runs/${runId.trim()}`))}>
      <h1>Runs</h1>
      <label>
        Run id
        <input name="runId" value={runId} onInput={(e) => setRunId(e.currentTarget.value)} placeholder="the runId a webhook call answered" />
      </label>
      <button type="submit">Open</button>
    </form>
  );
}

function App() {
  const [session, setSession] = useState<SignedIn | null | undefined>(undefined);
  const route = useHashRoute();
  useEffect(() => void currentSession().then(setSession, () => setSession(null)), []);
  if (session === undefined) return <p class="muted">Loading…</p>;
  if (session === null) return <SignIn onSignedIn={setSession} />;
  const run = /^\/runs\/([0-9a-f-]{36})$/.exec(route);
  return (
    <>
      <header>
        <a href="#/">runhook</a>
        <span class="who">{session.user.email}</span>
        <button type="button" onClick={async () => (await signOut(), setSession(null))}>
          Sign out
        </button>
      </header>
      {run ? <RunPage runId={run[1]!} onSignedOut={() => setSession(null)} /> : <Home />}
    </>
  );
}

render(<App />, document.getElementById("app")!);
