// The few components every page shares: messages, a confirmation, a copy button, a secret shown
// once, a list's header row, filters and "more" pages, times, and the document's title.
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { absolute, dateOf, relative } from "./time.js";

export function ErrorText({ error }: { error: string | null | undefined }) {
  return error ? (
    <p class="error" role="alert">
      {error}
    </p>
  ) : null;
}

export function Loading({ what }: { what: string }) {
  return <p class="muted">Loading {what}…</p>;
}

/** A date and time as the reader's locale writes it, with the exact instant in a tooltip. */
export function When({ at, none = "–" }: { at: Timestamp | undefined; none?: string }) {
  const d = dateOf(at);
  if (!d) return <span class="muted">{none}</span>;
  return (
    <time dateTime={d.toISOString()} title={d.toISOString()}>
      {d.toLocaleString(undefined, { hour12: false })}
    </time>
  );
}

/** The time now, again every `everyMs`: what a relative time is counted from. */
export function useNow(everyMs: number): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(t);
  }, [everyMs]);
  return now;
}

/**
 * A time relative to now ("3 minutes ago"), kept current, with its full date and time in a
 * tooltip. A time in the past (unless `future`) that the reader's clock puts ahead reads "now".
 */
export function Ago({ at, none = "–", future = false }: { at: Timestamp | undefined; none?: string; future?: boolean }) {
  useNow(15_000);
  const d = dateOf(at);
  if (!d) return <span class="muted">{none}</span>;
  const now = Date.now();
  return (
    <time dateTime={d.toISOString()} title={absolute(d)}>
      {relative(future ? d : new Date(Math.min(d.getTime(), now)), now)}
    </time>
  );
}

/** The document's title while the page is shown: "<title> — runhook" (null: left as it is, until known). */
export function useTitle(title: string | null): void {
  useEffect(() => {
    if (title) document.title = `${title} — runhook`;
  }, [title]);
}

/** A button that asks before it acts: the question and its consequence stay on the page until answered. */
export function Confirm(props: {
  label: string;
  question: string;
  confirm: string;
  danger?: boolean;
  disabled?: boolean;
  onConfirm: () => Promise<void> | void;
}) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const keep = useRef<HTMLButtonElement>(null);
  const ask = useRef<HTMLButtonElement>(null);
  const wasAsking = useRef(false);
  // The question takes the focus, on its safe answer: Enter does not act by accident. Once
  // answered, the focus goes back to the button that asked (when it is still there).
  useEffect(() => {
    if (asking) keep.current?.focus();
    else if (wasAsking.current) ask.current?.focus();
    wasAsking.current = asking;
  }, [asking]);
  if (!asking)
    return (
      <button type="button" ref={ask} class={props.danger ? "danger" : "secondary"} disabled={props.disabled} onClick={() => setAsking(true)}>
        {props.label}
      </button>
    );
  const yes = async () => {
    setBusy(true);
    try {
      await props.onConfirm();
    } finally {
      setBusy(false);
      setAsking(false);
    }
  };
  return (
    <div class="confirm" role="alertdialog" aria-label={props.label}>
      <p>{props.question}</p>
      <button type="button" class={props.danger ? "danger" : ""} disabled={busy} onClick={yes}>
        {props.confirm}
      </button>
      <button type="button" class="secondary" onClick={() => setAsking(false)} ref={keep}>
        Keep as is
      </button>
    </div>
  );
}

/** Copies `text` to the clipboard; says whether it did. */
export function CopyButton({ text, label = "Copy" }: { text: string; label?: string }) {
  const [said, setSaid] = useState<string | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setSaid("Copied");
    } catch {
      setSaid("Could not copy: select the text and copy it");
    }
  };
  return (
    <>
      <button type="button" class="secondary copy" onClick={copy}>
        {label}
      </button>
      <span class="muted" role="status">
        {said}
      </span>
    </>
  );
}

/** A secret shown once, right after it was made, with a copy button. */
export function OnceSecret({ secret, onDone }: { secret: string; onDone: () => void }) {
  return (
    <div class="secret" role="status">
      <p>
        <strong>Copy this token now:</strong> runhook keeps only its hash and will not show it again.
      </p>
      <code class="secret-value">{secret}</code> <CopyButton text={secret} />
      <p>
        <button type="button" class="secondary" onClick={onDone}>
          I have copied it
        </button>
      </p>
    </div>
  );
}

/** The header row of a list's table; a column given as false (or undefined) is left out. */
export function ListHead({ columns }: { columns: (string | false | undefined)[] }) {
  return (
    <thead>
      <tr>
        {columns
          .filter((c): c is string => !!c)
          .map((c) => (
            <th key={c} scope="col">
              {c}
            </th>
          ))}
      </tr>
    </thead>
  );
}

/** A list's filters: its fields, then Search, which calls `onSearch` (the page stays). */
export function FilterForm({ onSearch, children }: { onSearch: () => void; children: ComponentChildren }) {
  return (
    <form
      class="filters"
      onSubmit={(e) => {
        e.preventDefault();
        onSearch();
      }}
    >
      {children}
      <button type="submit">Search</button>
    </form>
  );
}

export function More({ show, onMore, busy }: { show: boolean; onMore: () => void; busy?: boolean }) {
  return show ? (
    <button type="button" class="secondary more" onClick={onMore} disabled={busy}>
      More
    </button>
  ) : null;
}

export function Section({ title, children, actions }: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section>
      <div class="section-head">
        <h2>{title}</h2>
        {actions}
      </div>
      {children}
    </section>
  );
}

/** A labelled text (or date and time) input. */
export function Field(props: {
  name: string;
  label: string;
  value: string;
  onValue: (v: string) => void;
  type?: "text" | "datetime-local";
  placeholder?: string;
}) {
  const id = `field-${props.name}`;
  const common = {
    id,
    name: props.name,
    value: props.value,
    placeholder: props.placeholder,
    onInput: (e: { currentTarget: HTMLInputElement }) => props.onValue(e.currentTarget.value),
  };
  return (
    <label for={id}>
      {props.label}
      {props.type === "datetime-local" ? <input type="datetime-local" {...common} /> : <input type="text" {...common} />}
    </label>
  );
}
