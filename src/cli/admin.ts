// `runhook admin …`: AdminService over Connect (HTTP/1.1) on RUNHOOK_URL, authenticated with
// RUNHOOK_TOKEN (RUNHOOK_BOOTSTRAP_SECRET for bootstrap and sso-token). Prints the response as JSON.
import { ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { fromJson, toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { AdminService } from "../../gen/runhook/v1/admin_pb.js";
import { DEFAULT_BASE_URL, parse, terminalSafe, UsageError, type Parsed } from "./common.js";
import { ndjson, READ_COMMANDS, READ_USAGE, table, whoamiText, type Output } from "./admin-reads.js";

export const ADMIN_USAGE = `
  admin <group> <action> [--flag value …]   administration over AdminService (prints JSON)
      env: RUNHOOK_URL (default ${DEFAULT_BASE_URL}), RUNHOOK_TOKEN (application token),
           RUNHOOK_BOOTSTRAP_SECRET (for bootstrap and sso-token)
    admin bootstrap --org NAME --email EMAIL [--name NAME]
    admin users create --email EMAIL [--name NAME] [--org-admin]
    admin projects create --name NAME [--sso]
    admin projects update --project ID --sso true|false
    admin environments create --project ID --name NAME [--data-database DB]
      (--data-database: only a database the operator allowed for the organization, RUNHOOK_DATA_DATABASES_ALLOWED)
    admin teams create --project ID --name NAME
    admin teams add-member|remove-member --team ID --user ID
    admin renderings create --team ID --environment ID
    admin roles set --project ID --user ID --role admin|editor|user|none
    admin collections create --environment ID --name NAME [--primary-key f1,f2]
    admin permissions set --rendering ID --collection ID [--read roles] [--edit roles] [--scope JSON]
    admin workflows create --rendering ID --collection ID --name NAME --steps JSON [--trigger-roles roles]
    admin workflows publish --workflow ID --steps JSON [--trigger-roles roles]
    admin workflows deactivate --workflow ID --version N
    admin workflows get --workflow ID
    admin webhook enable|disable|regenerate --workflow ID
    admin webhook rate-limit --workflow ID --per-minute N
    admin tokens create [--user ID] [--name NAME] [--ttl SECONDS] [--sso]   (--sso: from an SSO token, for oneself, expiring no later than it)
    admin sso-token --user ID [--name NAME] [--ttl SECONDS]   (the operator, standing in for the identity provider)
    admin tokens revoke --token ID
    admin api-tokens create --project ID [--name NAME] [--ttl SECONDS]
    admin api-tokens revoke --token ID
    admin org-api-tokens create [--name NAME] [--ttl SECONDS]   (organization admins: reads the organization's admin log)
    admin org-api-tokens revoke --token ID
${READ_USAGE}      steps JSON: [{"load_record":{}},{"wait":{"seconds":5}},{"update_record":{"set":{"status":"done"}}},
                   {"add_note":{"content":"<p>hi</p>"}}]   (or [{"type":"wait","seconds":5}, …])
`;

type Flags = Parsed["values"];

const list = (v: string | boolean | undefined) =>
  typeof v === "string" && v !== ""
    ? v
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean)
    : [];
const str = (f: Flags, name: string, required = false): string | undefined => {
  const v = f[name];
  if (v === undefined) {
    if (required) throw new UsageError(`--${name} is required`);
    return undefined;
  }
  return String(v);
};
const req = (f: Flags, name: string) => str(f, name, true)!;
const num = (f: Flags, name: string, required = false): number | undefined => {
  const v = str(f, name, required);
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new UsageError(`--${name} must be a whole number`);
  return Number(v);
};
const json = (f: Flags, name: string, required = false): JsonValue | undefined => {
  const v = str(f, name, required);
  if (v === undefined) return undefined;
  try {
    return JSON.parse(v) as JsonValue;
  } catch {
    throw new UsageError(`--${name} is not valid JSON`);
  }
};

/** Accepts ProtoJSON steps and the shorter `{"type": "wait", "seconds": 5}` form. */
function steps(f: Flags, required: boolean): JsonValue[] | undefined {
  const v = json(f, "steps", required);
  if (v === undefined) return undefined;
  if (!Array.isArray(v)) throw new UsageError("--steps must be a JSON array");
  return v.map((s) => {
    if (s && typeof s === "object" && !Array.isArray(s) && typeof s.type === "string") {
      const { type, ...rest } = s as JsonObject;
      return { [type as string]: rest };
    }
    return s;
  });
}

/** A subcommand: its RPC, the flags it takes (value flags, then on/off switches), and the ProtoJSON request built from them. */
interface Command {
  rpc: string;
  flags: string[];
  switches?: string[];
  build: (f: Flags) => JsonObject;
  bootstrap?: true;
  /** A read: how its answer is printed (admin-reads.ts); the others print their answer as JSON. */
  output?: Output;
}

const COMMANDS: Record<string, Command> = {
  bootstrap: {
    rpc: "bootstrap",
    flags: ["org", "email", "name"],
    bootstrap: true,
    build: (f) => ({ organizationName: req(f, "org"), adminEmail: req(f, "email"), adminName: str(f, "name") ?? "" }),
  },
  "users create": {
    rpc: "createUser",
    flags: ["email", "name"],
    switches: ["org-admin"],
    build: (f) => ({ email: req(f, "email"), name: str(f, "name") ?? "", organizationAdmin: f["org-admin"] === true }),
  },
  "projects create": { rpc: "createProject", flags: ["name"], switches: ["sso"], build: (f) => ({ name: req(f, "name"), requiresSso: f.sso === true }) },
  "projects update": {
    rpc: "updateProject",
    flags: ["project", "sso"],
    build: (f) => {
      const sso = str(f, "sso");
      if (sso !== undefined && sso !== "true" && sso !== "false") throw new UsageError("--sso must be true or false");
      return { projectId: req(f, "project"), ...(sso !== undefined ? { requiresSso: sso === "true" } : {}) };
    },
  },
  "environments create": {
    rpc: "createEnvironment",
    flags: ["project", "name", "data-database"],
    build: (f) => ({ projectId: req(f, "project"), name: req(f, "name"), dataDatabase: str(f, "data-database") ?? "" }),
  },
  "teams create": { rpc: "createTeam", flags: ["project", "name"], build: (f) => ({ projectId: req(f, "project"), name: req(f, "name") }) },
  "teams add-member": { rpc: "setTeamMember", flags: ["team", "user"], build: (f) => ({ teamId: req(f, "team"), userId: req(f, "user"), member: true }) },
  "teams remove-member": { rpc: "setTeamMember", flags: ["team", "user"], build: (f) => ({ teamId: req(f, "team"), userId: req(f, "user"), member: false }) },
  "renderings create": {
    rpc: "createRendering",
    flags: ["team", "environment"],
    build: (f) => ({ teamId: req(f, "team"), environmentId: req(f, "environment") }),
  },
  "roles set": {
    rpc: "setProjectRole",
    flags: ["project", "user", "role"],
    build: (f) => ({ projectId: req(f, "project"), userId: req(f, "user"), role: req(f, "role") === "none" ? "" : req(f, "role") }),
  },
  "collections create": {
    rpc: "createCollection",
    flags: ["environment", "name", "primary-key"],
    build: (f) => ({ environmentId: req(f, "environment"), name: req(f, "name"), primaryKey: list(f["primary-key"]) }),
  },
  "permissions set": {
    rpc: "setCollectionPermission",
    flags: ["rendering", "collection", "read", "edit", "scope"],
    build: (f) => ({
      permission: {
        renderingId: req(f, "rendering"),
        collectionId: req(f, "collection"),
        readRoles: list(f.read),
        editRoles: list(f.edit),
        scope: json(f, "scope") ?? {},
      },
    }),
  },
  "workflows create": {
    rpc: "createWorkflow",
    flags: ["rendering", "collection", "name", "steps", "trigger-roles"],
    build: (f) => ({
      renderingId: req(f, "rendering"),
      collectionId: req(f, "collection"),
      name: req(f, "name"),
      steps: steps(f, true)!,
      triggerRoles: list(f["trigger-roles"]),
    }),
  },
  "workflows publish": {
    rpc: "publishWorkflow",
    flags: ["workflow", "steps", "trigger-roles"],
    build: (f) => ({
      workflowId: req(f, "workflow"),
      steps: steps(f, true)!,
      triggerRoles: list(f["trigger-roles"]),
      updateTriggerRoles: f["trigger-roles"] !== undefined,
    }),
  },
  "workflows deactivate": {
    rpc: "deactivateWorkflowVersion",
    flags: ["workflow", "version"],
    build: (f) => ({ workflowId: req(f, "workflow"), version: num(f, "version", true)! }),
  },
  "workflows get": { rpc: "getWorkflow", flags: ["workflow"], build: (f) => ({ workflowId: req(f, "workflow") }) },
  "webhook enable": { rpc: "enableWebhook", flags: ["workflow"], build: (f) => ({ workflowId: req(f, "workflow") }) },
  "webhook disable": { rpc: "disableWebhook", flags: ["workflow"], build: (f) => ({ workflowId: req(f, "workflow") }) },
  "webhook regenerate": { rpc: "regenerateWebhook", flags: ["workflow"], build: (f) => ({ workflowId: req(f, "workflow") }) },
  "webhook rate-limit": {
    rpc: "setWebhookRateLimit",
    flags: ["workflow", "per-minute"],
    build: (f) => ({ workflowId: req(f, "workflow"), rateLimitPerMinute: num(f, "per-minute", true)! }),
  },
  "tokens create": {
    rpc: "createApplicationToken",
    flags: ["user", "name", "ttl"],
    switches: ["sso"],
    build: (f) => ({ userId: str(f, "user") ?? "", name: str(f, "name") ?? "", ttlSeconds: num(f, "ttl") ?? 0, sso: f.sso === true }),
  },
  "sso-token": {
    rpc: "issueSsoToken",
    flags: ["user", "name", "ttl"],
    bootstrap: true,
    build: (f) => ({ userId: req(f, "user"), name: str(f, "name") ?? "", ttlSeconds: num(f, "ttl") ?? 0 }),
  },
  "tokens revoke": { rpc: "revokeApplicationToken", flags: ["token"], build: (f) => ({ tokenId: req(f, "token") }) },
  "api-tokens create": {
    rpc: "createApiToken",
    flags: ["project", "name", "ttl"],
    build: (f) => ({ projectId: req(f, "project"), name: str(f, "name") ?? "", ttlSeconds: num(f, "ttl") ?? 0 }),
  },
  "api-tokens revoke": { rpc: "revokeApiToken", flags: ["token"], build: (f) => ({ tokenId: req(f, "token") }) },
  "org-api-tokens create": {
    rpc: "createOrganizationApiToken",
    flags: ["name", "ttl"],
    build: (f) => ({ name: str(f, "name") ?? "", ttlSeconds: num(f, "ttl") ?? 0 }),
  },
  "org-api-tokens revoke": { rpc: "revokeOrganizationApiToken", flags: ["token"], build: (f) => ({ tokenId: req(f, "token") }) },
  ...(READ_COMMANDS as Record<string, Command>),
};

/** The subcommand named by the leading words (`group action`, or one word), and the arguments after them. */
function commandOf(args: string[]): { command: string; rest: string[] } {
  const words: string[] = [];
  for (const a of args) {
    if (a.startsWith("-") || words.length === 2) break;
    words.push(a);
  }
  const oneWord = words.length === 2 && !COMMANDS[words.join(" ")] && COMMANDS[words[0]!] !== undefined;
  const command = oneWord ? words[0]! : words.join(" ");
  return { command, rest: args.slice(oneWord ? 1 : words.length) };
}

/** The flags of `spec`, parsed strictly (the same parser as every other command): an unknown or valueless flag is a usage error. */
function flagsOf(spec: Command, rest: string[]): Flags {
  const options = Object.fromEntries([
    ...spec.flags.map((name) => [name, { type: "string" as const }]),
    ...(spec.switches ?? []).map((name) => [name, { type: "boolean" as const }]),
  ]);
  return parse(rest, options, 0).values;
}

export async function runAdminCommand(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    process.stdout.write(ADMIN_USAGE);
    return 0;
  }
  const { command, rest } = commandOf(args);
  const spec = COMMANDS[command];
  if (!spec) {
    process.stderr.write(`runhook admin: ${command ? `unknown command "${command}"` : "missing command"}\n${ADMIN_USAGE}`);
    return 2;
  }
  const method = AdminService.methods.find((m) => m.localName === spec.rpc)!;
  let request: unknown;
  try {
    request = fromJson(method.input, spec.build(flagsOf(spec, rest)));
  } catch (err) {
    process.stderr.write(`runhook admin ${command}: ${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  }
  const secret = spec.bootstrap ? env.RUNHOOK_BOOTSTRAP_SECRET : env.RUNHOOK_TOKEN;
  if (!secret) {
    process.stderr.write(`runhook admin ${command}: set ${spec.bootstrap ? "RUNHOOK_BOOTSTRAP_SECRET" : "RUNHOOK_TOKEN"}\n`);
    return 2;
  }
  const client = createClient(AdminService, createConnectTransport({ baseUrl: env.RUNHOOK_URL || DEFAULT_BASE_URL, httpVersion: "1.1" }));
  try {
    const fn = client[method.localName as keyof typeof client] as unknown as (r: unknown, o: unknown) => Promise<never>;
    const call = async (r: unknown) =>
      toJson(method.output, await fn(r, { headers: { authorization: `Bearer ${secret}` } }), { alwaysEmitImplicit: true }) as JsonObject;
    if (spec.output) {
      await printRead(spec.output, request as { pageToken?: string }, call);
      return 0;
    }
    const res = await call(request);
    // Pretty JSON: its only raw line breaks are its own; each line is escaped.
    process.stdout.write(`${JSON.stringify(res, null, 2).split("\n").map(terminalSafe).join("\n")}\n`);
    return 0;
  } catch (err) {
    const ce = ConnectError.from(err);
    process.stderr.write(`runhook admin ${command}: ${terminalSafe(ce.message)}\n`);
    return 1;
  }
}

/**
 * A read's answer: on a terminal a table (a list once all its pages are in); piped, NDJSON, one
 * object a line (a list's items as each page arrives). A list follows next_page_token to the end.
 */
async function printRead(output: Output, request: { pageToken?: string }, call: (r: unknown) => Promise<JsonObject>): Promise<void> {
  const tty = process.stdout.isTTY === true;
  if (output.kind === "whoami") {
    const res = await call(request);
    process.stdout.write(tty ? whoamiText(res) : ndjson(res));
    return;
  }
  if (output.kind === "get") {
    const item = (await call(request))[output.field] as JsonObject;
    process.stdout.write(tty ? table([item], output.columns) : ndjson(item));
    return;
  }
  const all: JsonObject[] = [];
  for (;;) {
    const res = await call(request);
    const items = (res[output.field] ?? []) as JsonObject[];
    if (tty) all.push(...items);
    else for (const item of items) process.stdout.write(ndjson(item));
    if (!res.nextPageToken) break;
    request.pageToken = res.nextPageToken as string;
  }
  if (tty) process.stdout.write(table(all, output.columns));
}
