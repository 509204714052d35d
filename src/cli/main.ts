// `runhook start | worker | seed [--json] | admin … | trigger | runs watch | logs tail`
// The server's modules (configuration, database driver, services) are loaded only by the
// commands that need them: the integrator commands (./integrator.ts) never load them.
import type { FirstStart, SeedOutput } from "./demo.js";
import { INTEGRATOR_COMMANDS, INTEGRATOR_USAGE } from "./integrator.js";

/** The usage text; the admin part is loaded with its module, only when the text is shown. */
async function usage(): Promise<string> {
  const { ADMIN_USAGE } = await import("./admin.js");
  return `usage: runhook <command>

  start            start the service (HTTP gateway, gRPC, executors); seeds a demo on an empty database
  worker           run executors only, sharing work with other processes through MongoDB
  seed [--json]    create the demo organization, project, workflow and fresh tokens, and print them
${ADMIN_USAGE}${INTEGRATOR_USAGE}
Configuration comes from environment variables; see docs/operators.md.`;
}

/** The demo's first runs (a first start's), in words: those on a record the demo does not have fail. */
function firstRunsLine(out: SeedOutput | FirstStart): string {
  if (!("firstRunRecords" in out)) return "";
  const missing = out.firstRunRecords.filter((r) => !out.recordIds.includes(r));
  const found = out.firstRunRecords.filter((r) => out.recordIds.includes(r));
  return `  first runs, to see in the console: on ${found.join(", ")}, and on ${missing.join(", ")}, which does not exist (it fails)\n`;
}

function printDemo(out: SeedOutput | FirstStart, metricsPort?: number): void {
  const [first] = out.recordIds;
  const metrics = metricsPort === undefined ? "" : `Metrics (Prometheus):\n  curl -s 'http://127.0.0.1:${metricsPort}/metrics'\n\n`;
  const firstRuns = firstRunsLine(out);
  process.stdout.write(`
runhook demo is ready
  project ${out.projectName}, environment ${out.environmentName}, collection ${out.collection}
  records: ${out.recordIds.join(", ")}
${firstRuns}  application token (the identity of webhook runs): ${out.userToken}
  project API token (public API):                   ${out.apiToken}
  console (admin: every page):                      ${out.adminToken}

Start a run (202), then again within 5 s (409):
  curl -i -X POST '${out.webhookUrl}' -H 'Authorization: Bearer ${out.userToken}' -H 'Content-Type: application/json' -d '{"record_id":"${first}"}'
  curl -i -X POST '${out.webhookUrl}' -H 'Authorization: Bearer ${out.userToken}' -H 'Content-Type: application/json' -d '{"record_id":"${first}"}'

In a browser: ${out.baseUrl}/console
  sign in with the console (admin) token to see every page: runs, activity and admin logs, notes, settings;
  with the application token to see what the demo user sees: the runs of its workflow

Follow a run (<runId> from the 202): answers once the run is finished, or after 60 s at most:
  curl -s '${out.baseUrl}/v1/runs/<runId>?wait=60s' -H 'Authorization: Bearer ${out.userToken}'

Activity logs, newest first (runhook logs tail follows them as they come):
  curl -s '${out.baseUrl}/v1/project/${out.projectName}/environment/${out.environmentName}/activity-logs?limit=10' -H 'Authorization: Bearer ${out.apiToken}'

The same from the command line:
  export RUNHOOK_TOKEN='${out.userToken}' RUNHOOK_URL='${out.baseUrl}'
  npx runhook runs watch "$(npx runhook trigger '${out.webhookUrl}' ${first})"

${metrics}`);
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === "help" || command === "--help" || command === "-h") {
    process.stdout.write(`${await usage()}\n`);
    return command ? 0 : 2;
  }
  if (INTEGRATOR_COMMANDS.includes(command)) return (await import("./integrator.js")).runIntegratorCommand(command, rest);
  if (command === "admin") return (await import("./admin.js")).runAdminCommand(rest);
  if (!["start", "worker", "seed"].includes(command)) {
    process.stderr.write(`runhook: unknown command "${command}"\n\n${await usage()}\n`);
    return 2;
  }
  const json = rest.includes("--json");
  const [{ configuredSecrets, loadConfig }, { createLogger }, { startRunhook }, { seedDemo, seedDemoIfEmpty }] = await Promise.all([
    import("../config.js"),
    import("../lib/logging.js"),
    import("../main.js"),
    import("./demo.js"),
  ]);
  const config = loadConfig();
  // With --json, stdout carries only the JSON object: logs go to stderr.
  const { processIndex, runPrimary } = await import("./cluster.js");
  const index = processIndex();
  // In a cluster, each process's lines say which process wrote them.
  const secrets = configuredSecrets(config);
  const logger =
    index === undefined ? createLogger(json ? "warn" : config.logLevel, { secrets }) : createLogger(config.logLevel, { secrets }).child({ process: index });
  if (command === "seed") {
    const rh = await startRunhook(config, { mode: "offline", logger });
    try {
      const out = await seedDemo(rh.deps, rh.services);
      if (json) process.stdout.write(`${JSON.stringify(out)}\n`);
      else printDemo(out);
    } finally {
      await rh.stop();
    }
    return 0;
  }
  if (index === undefined && config.processes > 1) return runPrimary(command === "worker" ? "worker" : "start", config.processes, config, logger);
  const rh = await startRunhook(config, { mode: command === "worker" ? "worker" : "server", logger, processIndex: index });
  if (command === "start" && config.demo && (index ?? 1) === 1) {
    const demo = await seedDemoIfEmpty(rh.deps, rh.services);
    if (demo) printDemo(demo, rh.metricsPort);
  }
  await new Promise<void>((resolve) => {
    let stopping = false;
    const onSignal = (sig: string) => {
      if (stopping) {
        logger.warn("second signal: exiting now");
        process.exit(130);
      }
      stopping = true;
      logger.info({ signal: sig }, "shutting down");
      rh.stop().then(resolve, (err) => {
        logger.error({ err }, "shutdown failed");
        resolve();
      });
    };
    process.once("SIGTERM", () => onSignal("SIGTERM"));
    if (index === undefined) process.once("SIGINT", () => onSignal("SIGINT"));
    else {
      // One of a cluster's processes: the primary stops it (SIGTERM), also on Ctrl-C; it goes if the primary does.
      process.on("SIGINT", () => {});
      process.once("disconnect", () => onSignal("SIGTERM"));
    }
  });
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    const kind = err instanceof Error && err.constructor.name === "ConfigError" ? "configuration: " : "";
    const message = err instanceof Error ? err.message : String(err);
    // A PortError says one thing per port, each on a line of its own.
    const lines = err instanceof Error && err.name === "PortError" ? message.split("\n") : [message];
    process.stderr.write(lines.map((line) => `runhook: ${kind}${line}\n`).join(""));
    process.exit(1);
  },
);
