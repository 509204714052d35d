/** Freezes `value` and everything it holds: what a cache shares between calls cannot be changed by one of them. */
export function deepFreeze<V>(value: V): V {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
