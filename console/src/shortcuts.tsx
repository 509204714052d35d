// The console's keyboard shortcuts: `/` focuses the page's search field, `?` lists the shortcuts
// (in a modal dialog that Escape closes). Neither acts while the reader types in a field.
import { useEffect, useRef, useState } from "preact/hooks";

/**
 * Where the page's search field is, first match first: a field marked `data-search`, a search
 * input, the first text field of the page's filters (FilterForm), the projects page's "Open a
 * run by id".
 */
const SEARCH_FIELDS = ["main [data-search]", "main input[type=search]", "main form.filters input[type=text]", "main form.open-run input"];

/** The page's search field, if it has one on screen. */
const searchField = () =>
  SEARCH_FIELDS.flatMap((selector) => [...document.querySelectorAll<HTMLElement>(selector)]).find((field) => field.offsetParent !== null);

const SHORTCUTS: [string, string][] = [
  ["/", "Focus the page's search field"],
  ["?", "Show this list"],
  ["Esc", "Close this list"],
];

/** Whether a key pressed in `target` is the reader's typing (a field, a list box, editable text). */
function typing(target: EventTarget | null): boolean {
  return target instanceof HTMLElement && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName));
}

function ShortcutList({ onClose }: { onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = dialog.current!;
    d.showModal();
    return () => d.close();
  }, []);
  return (
    <dialog ref={dialog} class="shortcuts" aria-labelledby="shortcuts-title" onClose={onClose}>
      <h2 id="shortcuts-title">Keyboard shortcuts</h2>
      <dl>
        {SHORTCUTS.map(([key, what]) => (
          <div key={key}>
            <dt>
              <kbd>{key}</kbd>
            </dt>
            <dd>{what}</dd>
          </div>
        ))}
      </dl>
      <form method="dialog">
        <button type="submit" class="secondary">
          Close
        </button>
      </form>
    </dialog>
  );
}

/** Listens for the shortcuts on the whole document; shows their list while it is open. */
export function Shortcuts() {
  const [open, setOpen] = useState(false);
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.ctrlKey || e.metaKey || e.altKey || e.defaultPrevented || typing(e.target)) return;
      if (e.key === "?") {
        e.preventDefault();
        setOpen(true);
      } else if (e.key === "/") {
        const field = searchField();
        if (!field) return;
        e.preventDefault();
        field.focus();
      }
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, []);
  return open ? <ShortcutList onClose={() => setOpen(false)} /> : null;
}
