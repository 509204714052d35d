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

/** A date and time in full, as the reader's locale writes it (24-hour clock). */
export const absolute = (d: Date) => d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium", hourCycle: "h23" });

const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ["year", 365 * 86_400],
  ["month", 30 * 86_400],
  ["day", 86_400],
  ["hour", 3600],
  ["minute", 60],
  ["second", 1],
];

/** How far `d` is from `now`, in the largest whole unit: "3 minutes ago", "in 4 seconds", "yesterday". */
export function relative(d: Date, now: number): string {
  const seconds = (d.getTime() - now) / 1000;
  const [unit, size] = UNITS.find(([, size]) => Math.abs(seconds) >= size) ?? ["second", 1];
  return new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }).format(Math.round(seconds / size), unit);
}
