// Ids as the API takes them, checked in the page before they are sent: a run's (what a start
// answered, pasted), a workflow's (a filter that is an id, else a name).
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether `s` is spelled as a UUID (either case): every id runhook makes is one. */
export const isUuid = (s: string): boolean => UUID.test(s);

/**
 * The run id in what was pasted: the id itself (quotes around it allowed), or a start's whole
 * answer (`{"runId": "…"}`, a 202 body); null when it holds none.
 */
export function runIdOf(pasted: string): string | null {
  let text = pasted.trim();
  if (text.startsWith("{")) {
    try {
      const answer = JSON.parse(text) as { runId?: unknown };
      text = typeof answer.runId === "string" ? answer.runId.trim() : "";
    } catch {
      return null;
    }
  }
  text = text.replace(/^(["'])(.*)\1$/, "$2");
  return isUuid(text) ? text.toLowerCase() : null;
}
