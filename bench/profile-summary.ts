// Summarizes V8 CPU profiles (.cpuprofile, as written by `node --cpu-prof`): the functions
// with the most self time, self time by package / source file, and inclusive time of
// runhook's own functions (src/, gen/).
//   node --import tsx bench/profile-summary.ts <file.cpuprofile | directory> [--top 25]
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  hitCount?: number;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

const ROOT = resolve(import.meta.dirname, "..");

function where(url: string): string {
  if (!url) return "(native)";
  const path = url.replace(/^file:\/\//, "");
  const nm = path.lastIndexOf("/node_modules/");
  if (nm >= 0) {
    const rest = path.slice(nm + "/node_modules/".length).split("/");
    return rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (path.startsWith("node:")) return path;
  if (path.startsWith(ROOT)) return relative(ROOT, path);
  return path;
}

function label(cf: CallFrame): string {
  const name = cf.functionName || "(anonymous)";
  if (!cf.url) return name;
  const file = where(cf.url);
  const short = file.startsWith("src/") || file.startsWith("gen/") || file.startsWith("node:") ? file : `${file}:${cf.url.split("/").pop()}`;
  return `${name}  ${short}:${cf.lineNumber + 1}`;
}

export interface Summary {
  file: string;
  totalMs: number;
  idleMs: number;
  gcMs: number;
  topSelf: { fn: string; ms: number; pct: number }[];
  byPlace: { place: string; ms: number; pct: number }[];
  ownInclusive: { fn: string; ms: number; pct: number }[];
}

export function summarize(file: string, top = 25): Summary {
  const p = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const n of p.nodes) {
    byId.set(n.id, n);
    for (const c of n.children ?? []) parent.set(c, n.id);
  }
  const self = new Map<number, number>();
  const samples = p.samples ?? [];
  const deltas = p.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) {
    // A sample's time is the delta to the next sample.
    const dt = (deltas[i + 1] ?? 0) / 1000;
    self.set(samples[i]!, (self.get(samples[i]!) ?? 0) + dt);
  }
  const total = (p.endTime - p.startTime) / 1000;
  const bySelfFn = new Map<string, number>();
  const byPlace = new Map<string, number>();
  let idle = 0;
  let gc = 0;
  const inclusive = new Map<string, number>();
  for (const [id, ms] of self) {
    const n = byId.get(id)!;
    const cf = n.callFrame;
    if (cf.functionName === "(idle)") idle += ms;
    if (cf.functionName === "(garbage collector)") gc += ms;
    const l = label(cf);
    bySelfFn.set(l, (bySelfFn.get(l) ?? 0) + ms);
    const place = cf.url ? where(cf.url) : cf.functionName;
    byPlace.set(place, (byPlace.get(place) ?? 0) + ms);
    // Inclusive time of our own functions: each function once per stack.
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const c = byId.get(cur)!.callFrame;
      const w = c.url ? where(c.url) : "";
      if (w.startsWith("src/") || w.startsWith("gen/")) {
        const key = label(c);
        if (!seen.has(key)) {
          seen.add(key);
          inclusive.set(key, (inclusive.get(key) ?? 0) + ms);
        }
      }
    }
  }
  const busy = Math.max(1, total - idle);
  const rows = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, ms]) => ({ k, ms: Math.round(ms), pct: Math.round((ms / busy) * 1000) / 10 }));
  return {
    file,
    totalMs: Math.round(total),
    idleMs: Math.round(idle),
    gcMs: Math.round(gc),
    topSelf: rows(new Map([...bySelfFn].filter(([k]) => !k.startsWith("(idle)")))).map((r) => ({ fn: r.k, ms: r.ms, pct: r.pct })),
    byPlace: rows(new Map([...byPlace].filter(([k]) => k !== "(idle)"))).map((r) => ({ place: r.k, ms: r.ms, pct: r.pct })),
    ownInclusive: rows(inclusive).map((r) => ({ fn: r.k, ms: r.ms, pct: r.pct })),
  };
}

export function formatSummary(s: Summary): string {
  const busy = s.totalMs - s.idleMs;
  const out = [
    `### ${relative(process.cwd(), s.file)}`,
    `profiled ${s.totalMs} ms, busy ${busy} ms (${Math.round((busy / Math.max(1, s.totalMs)) * 100)}%), GC ${s.gcMs} ms; % below are of busy time`,
    "",
    "Top self time:",
    "| ms | % | function |",
    "|---:|---:|---|",
    ...s.topSelf.map((r) => `| ${r.ms} | ${r.pct} | ${r.fn.replace(/\|/g, "\\|")} |`),
    "",
    "Self time by package / file:",
    "| ms | % | where |",
    "|---:|---:|---|",
    ...s.byPlace.map((r) => `| ${r.ms} | ${r.pct} | ${r.place} |`),
    "",
    "Inclusive time of runhook functions (src/, gen/):",
    "| ms | % | function |",
    "|---:|---:|---|",
    ...s.ownInclusive.map((r) => `| ${r.ms} | ${r.pct} | ${r.fn.replace(/\|/g, "\\|")} |`),
  ];
  return out.join("\n");
}

export function profileFiles(target: string): string[] {
  if (statSync(target).isFile()) return [target];
  const out: string[] = [];
  for (const e of readdirSync(target, { withFileTypes: true })) {
    const p = join(target, e.name);
    if (e.isDirectory()) out.push(...profileFiles(p));
    else if (e.name.endsWith(".cpuprofile")) out.push(p);
  }
  return out.sort();
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith("profile-summary.ts")) {
  const args = process.argv.slice(2);
  const ti = args.indexOf("--top");
  const top = ti >= 0 ? Number(args[ti + 1]) : 25;
  const targets = args.filter((a, i) => !a.startsWith("--") && !(ti >= 0 && i === ti + 1));
  if (!targets.length) {
    process.stderr.write("usage: node --import tsx bench/profile-summary.ts <file.cpuprofile | dir> [--top N]\n");
    process.exit(2);
  }
  for (const t of targets) for (const f of profileFiles(t)) process.stdout.write(`${formatSummary(summarize(f, top))}\n\n`);
}
