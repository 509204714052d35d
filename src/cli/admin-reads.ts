// `runhook admin <group> list|get` and `admin whoami`: the AdminService reads, printed as a table
// on a terminal and as NDJSON (one JSON object a line) when stdout is piped, so that scripts read
// them with `jq` and people with their eyes. A list follows every page.
import { alignedRows, UsageError, terminalSafe } from "./common.js";

type Flags = Record<string, string | boolean | undefined>;
type JsonObject = Record<string, unknown>;

/** How a read's answer is printed: the items of a list, the one resource of a get, or the whole answer. */
export type Output = { kind: "list" | "get"; field: string; columns: string[] } | { kind: "whoami" };

/** A read subcommand, in the shape of admin.ts's commands (with how its answer is printed). */
export interface ReadCommand {
  rpc: string;
  flags: string[];
  build: (f: Flags) => JsonObject;
  output: Output;
}

const need = (f: Flags, name: string): string => {
  const v = f[name];
  if (typeof v !== "string") throw new UsageError(`--${name} is required`);
  return v;
};
const opt = (f: Flags, name: string): string => (typeof f[name] === "string" ? (f[name] as string) : "");

const TOKEN = ["id", "name", "createdAt", "expiresAt", "lastUsedAt", "revokedAt", "sso"];
const COLUMNS = {
  user: ["id", "email", "name", "organizationAdmin"],
  project: ["id", "name", "requiresSso"],
  environment: ["id", "name", "dataDatabase"],
  team: ["id", "name", "memberIds"],
  rendering: ["id", "teamId", "environmentId"],
  collection: ["id", "name", "primaryKey"],
  permission: ["renderingId", "collectionId", "readRoles", "editRoles", "scope"],
  workflow: ["id", "name", "collectionId", "triggerRoles", "versions", "webhook.enabled", "webhook.url"],
  version: ["version", "active", "publishedAt", "steps"],
  webhook: ["enabled", "url", "rateLimitPerMinute", "generation"],
  appToken: ["id", "name", "user.email", ...TOKEN.slice(2)],
  apiToken: ["id", "name", "projectId", "user.email", ...TOKEN.slice(2)],
  orgToken: ["id", "name", "user.email", ...TOKEN.slice(2, -1)],
};

/** A List: its parent flags (`--flag` → request field), and `--page-size`. */
function list(rpc: string, field: string, columns: string[], parents: Record<string, string> = {}, optional: Record<string, string> = {}): ReadCommand {
  return {
    rpc,
    flags: [...Object.keys(parents), ...Object.keys(optional), "page-size"],
    output: { kind: "list", field, columns },
    build: (f) => {
      const size = opt(f, "page-size");
      if (size && !/^\d+$/.test(size)) throw new UsageError("--page-size must be a whole number");
      return {
        ...Object.fromEntries(Object.entries(parents).map(([flag, key]) => [key, need(f, flag)])),
        ...Object.fromEntries(Object.entries(optional).map(([flag, key]) => [key, opt(f, flag)])),
        pageSize: size ? Number(size) : 0,
      };
    },
  };
}

function get(rpc: string, field: string, columns: string[], ids: Record<string, string>): ReadCommand {
  return {
    rpc,
    flags: Object.keys(ids),
    output: { kind: "get", field, columns },
    build: (f) => Object.fromEntries(Object.entries(ids).map(([flag, key]) => [key, need(f, flag)])),
  };
}

export const READ_COMMANDS: Record<string, ReadCommand> = {
  whoami: { rpc: "whoAmI", flags: [], build: () => ({}), output: { kind: "whoami" } },
  "organization get": get("getOrganization", "organization", ["id", "name"], {}),
  "users list": list("listUsers", "users", COLUMNS.user),
  "users get": get("getUser", "user", COLUMNS.user, { user: "userId" }),
  "projects list": list("listProjects", "projects", COLUMNS.project),
  "projects get": get("getProject", "project", COLUMNS.project, { project: "projectId" }),
  "environments list": list("listEnvironments", "environments", COLUMNS.environment, { project: "projectId" }),
  "environments get": get("getEnvironment", "environment", COLUMNS.environment, { environment: "environmentId" }),
  "teams list": list("listTeams", "teams", COLUMNS.team, { project: "projectId" }),
  "teams get": get("getTeam", "team", COLUMNS.team, { team: "teamId" }),
  "teams members": list("listTeamMembers", "users", COLUMNS.user, { team: "teamId" }),
  "renderings list": list("listRenderings", "renderings", COLUMNS.rendering, { project: "projectId" }, { environment: "environmentId" }),
  "renderings get": get("getRendering", "rendering", COLUMNS.rendering, { rendering: "renderingId" }),
  "collections list": list("listCollections", "collections", COLUMNS.collection, { environment: "environmentId" }),
  "collections get": get("getCollection", "collection", COLUMNS.collection, { collection: "collectionId" }),
  "permissions list": list("listCollectionPermissions", "collectionPermissions", COLUMNS.permission, { rendering: "renderingId" }),
  "permissions get": get("getCollectionPermission", "permission", COLUMNS.permission, { rendering: "renderingId", collection: "collectionId" }),
  "workflows list": list("listWorkflows", "workflows", COLUMNS.workflow, { rendering: "renderingId" }),
  "workflows versions": list("listWorkflowVersions", "workflowVersions", COLUMNS.version, { workflow: "workflowId" }),
  "webhook get": get("getWebhook", "webhook", COLUMNS.webhook, { workflow: "workflowId" }),
  "tokens list": list("listApplicationTokens", "applicationTokens", COLUMNS.appToken, {}, { user: "userId" }),
  "tokens get": get("getApplicationToken", "token", COLUMNS.appToken, { token: "tokenId" }),
  "api-tokens list": list("listApiTokens", "apiTokens", COLUMNS.apiToken, { project: "projectId" }),
  "api-tokens get": get("getApiToken", "token", COLUMNS.apiToken, { token: "tokenId" }),
  "org-api-tokens list": list("listOrganizationApiTokens", "organizationApiTokens", COLUMNS.orgToken),
  "org-api-tokens get": get("getOrganizationApiToken", "token", COLUMNS.orgToken, { token: "tokenId" }),
};

export const READ_USAGE = `    admin whoami                                  the token's user, organization, roles and SSO state
    admin <group> list [--page-size N] …           every page; a table on a terminal, NDJSON when piped
      users list | projects list | environments list --project ID | teams list --project ID
      teams members --team ID | renderings list --project ID [--environment ID]
      collections list --environment ID | permissions list --rendering ID
      workflows list --rendering ID | workflows versions --workflow ID
      tokens list [--user ID] | api-tokens list --project ID | org-api-tokens list
    admin <group> get --<group's id flag> ID       one resource, printed the same way
      organization get | users get --user | projects get --project | environments get --environment
      teams get --team | renderings get --rendering | collections get --collection
      permissions get --rendering ID --collection ID | webhook get --workflow | tokens get --token
      api-tokens get --token | org-api-tokens get --token
`;

/** One cell: a field by its dotted path; lists of names joined, lists of objects counted, objects as JSON, absent as `-`. */
function cell(item: JsonObject, path: string): string {
  let v: unknown = item;
  for (const key of path.split(".")) v = v && typeof v === "object" ? (v as JsonObject)[key] : undefined;
  if (v === undefined || v === null || v === "") return "-";
  if (Array.isArray(v)) return v.every((x) => typeof x !== "object") ? v.join(",") || "-" : String(v.length);
  return terminalSafe(typeof v === "object" ? JSON.stringify(v) : String(v));
}

/** Rows under their column names, each column as wide as its widest cell. */
export function table(items: JsonObject[], columns: string[]): string {
  return `${alignedRows([columns.map((c) => c.toUpperCase()), ...items.map((item) => columns.map((c) => cell(item, c)))])}\n`;
}

/** One line of NDJSON, escaped for a terminal like everything runhook prints. */
export const ndjson = (value: unknown): string => `${terminalSafe(JSON.stringify(value))}\n`;

/** WhoAmI on a terminal: the user, organization and token, then the roles as a table. */
export function whoamiText(res: JsonObject): string {
  const user = (res.user ?? {}) as JsonObject;
  const token = (res.token ?? {}) as JsonObject;
  const lines = [
    `user          ${cell(user, "email")} (${cell(user, "id")})${user.organizationAdmin ? ", organization admin" : ""}`,
    `organization  ${cell(res, "organization.name")} (${cell(res, "organization.id")})`,
    `token         ${cell(token, "name")} (${cell(token, "id")}), ${token.sso ? "SSO session" : "not from an SSO session"}, expires ${cell(token, "expiresAt")}`,
  ];
  const roles = (res.roles ?? []) as JsonObject[];
  return `${lines.join("\n")}\n\n${roles.length ? table(roles, ["projectName", "projectId", "role"]) : "no role on any project\n"}`;
}
