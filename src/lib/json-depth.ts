// How deeply a JSON text nests, checked before it is parsed: the same limit for the webhook,
// /v1 bodies and Connect's JSON requests (a deep enough text overflows the parser's stack).

/** Deepest nesting of arrays and objects accepted in a JSON body. */
export const MAX_JSON_DEPTH = 64;

/** Why `text` nests arrays or objects deeper than `max`, or null. One pass, no parsing. */
export function depthError(text: string, max = MAX_JSON_DEPTH): string | null {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return `the JSON body is nested deeper than ${max} levels`;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return null;
}
