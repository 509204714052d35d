// Times as the console shows them.
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";

export const dateOf = (t: Timestamp | undefined): Date | null => (t ? timestampDate(t) : null);

/** A duration in the largest unit that reads well: 840 ms, 4.2 s, 3 min 5 s, 2 h 10 min. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(ms / 3_600_000)} h ${Math.round((ms % 3_600_000) / 60_000)} min`;
}

export const clock = (d: Date | null) => (d ? d.toLocaleTimeString(undefined, { hour12: false }) : "–");
