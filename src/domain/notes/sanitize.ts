// Note content is HTML, cleaned on write with an allow-list (sanitize-html).
import sanitizeHtml from "sanitize-html";
import { fail } from "../errors.js";

export const MAX_NOTE_CONTENT_BYTES = 64 * 1024;

const OPTIONS: sanitizeHtml.IOptions = {
  allowedTags: [
    "p",
    "br",
    "b",
    "strong",
    "i",
    "em",
    "u",
    "s",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "a",
    "h1",
    "h2",
    "h3",
    "h4",
    "span",
    "div",
    "hr",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
  ],
  // `rel` is allowed only because the transform below sets it on every link.
  allowedAttributes: { a: ["href", "title", "rel"] },
  allowedSchemes: ["http", "https", "mailto"],
  allowedSchemesAppliedToAttributes: ["href"],
  allowProtocolRelative: false,
  disallowedTagsMode: "discard",
  transformTags: { a: sanitizeHtml.simpleTransform("a", { rel: "noopener noreferrer nofollow" }) },
};

/** Validates size and returns the sanitized HTML; INVALID_ARGUMENT when empty or too large. */
export function sanitizeNoteContent(content: string): string {
  if (Buffer.byteLength(content, "utf8") > MAX_NOTE_CONTENT_BYTES) throw fail.invalid(`content is larger than ${MAX_NOTE_CONTENT_BYTES} bytes`);
  const clean = sanitizeHtml(content, OPTIONS).trim();
  if (!clean) throw fail.invalid("content is empty (after removing disallowed HTML)");
  return clean;
}
