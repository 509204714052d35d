// The demo world (`runhook seed`) with something in each of the published lists, made as its
// users make it: the demo workflow run over its webhook on each of the three records (triggered,
// record updated, a note added, completed), and notes with replies through /v1, one archived.
import { join } from "node:path";
import type { SeedOutput } from "../../src/cli/demo.js";
import { apiClient } from "./api.js";
import { waitForRun } from "./runs.js";
import { ROOT, seed, type TestServer } from "./server.js";
import { postHook } from "./webhook.js";

/** The published document, as kept in the repository. */
export const PUBLISHED_DOCUMENT = join(ROOT, "openapi/forest-public-api-1.38.0.json");

export interface PublishedNote {
  id: number;
  recordId: string;
  title: string;
  replies: number;
  archived: boolean;
}

export interface PublishedWorld extends SeedOutput {
  /** The demo's runs, one per record, finished. */
  runIds: string[];
  /** The e-mail address of the runs' user (the application token's). */
  runUser: string;
  /** The notes made through /v1, in the order made (the workflow's own notes are not among them). */
  notes: PublishedNote[];
  /** Their author's e-mail address (the API token's maker). */
  noteAuthor: string;
}

const NOTES = 5;

async function runDemoWorkflow(server: TestServer, demo: SeedOutput): Promise<{ runIds: string[]; runUser: string }> {
  const hook = `${server.baseUrl}${new URL(demo.webhookUrl).pathname}`;
  const runIds: string[] = [];
  for (const recordId of demo.recordIds) {
    const answer = await postHook(hook, demo.userToken, { record_id: recordId });
    if (answer.status !== 202 || !answer.body.runId) throw new Error(`the demo webhook answered ${answer.status} ${JSON.stringify(answer.body)}`);
    runIds.push(answer.body.runId);
  }
  // The demo workflow waits 5 s: the runs go on together.
  const done = await Promise.all(runIds.map((id) => waitForRun(server.deps.store, id, undefined, 30_000)));
  const failed = done.filter((r) => r.state !== "SUCCEEDED");
  if (failed.length > 0) throw new Error(`demo runs did not succeed: ${JSON.stringify(failed.map((r) => [r._id, r.state]))}`);
  return { runIds, runUser: done[0]!.userEmail };
}

/** Notes on the demo's records: even ones get a reply, the second is archived. */
async function writeNotes(server: TestServer, demo: SeedOutput): Promise<{ notes: PublishedNote[]; noteAuthor: string }> {
  const api = apiClient(server.baseUrl, demo.apiToken);
  const notes = `/v1/project/${demo.projectName}/environment/${demo.environmentName}/notes`;
  const made: PublishedNote[] = [];
  let noteAuthor = "";
  for (let i = 0; i < NOTES; i++) {
    const recordId = demo.recordIds[i % demo.recordIds.length]!;
    const title = `Review ${i + 1}`;
    const note = await api.post(notes, { collectionName: demo.collection, recordId, title, content: `<p>Checked order <b>${recordId}</b>.</p>` });
    if (note.status !== 201) throw new Error(`POST notes answered ${note.status} ${JSON.stringify(note.body)}`);
    const id = note.body.id as number;
    noteAuthor = note.body.user.email as string;
    const replies = i % 2 === 0 ? 1 : 0;
    if (replies) {
      const reply = await api.post(`${notes}/${id}/messages`, { content: "<p>Confirmed.</p>" });
      if (reply.status !== 201) throw new Error(`POST messages answered ${reply.status} ${JSON.stringify(reply.body)}`);
    }
    const archived = i === 1;
    if (archived) {
      const patched = await api.patch(`${notes}/${id}`, { archived: true });
      if (patched.status !== 200) throw new Error(`PATCH note answered ${patched.status} ${JSON.stringify(patched.body)}`);
    }
    made.push({ id, recordId, title, replies, archived });
  }
  return { notes: made, noteAuthor };
}

/** Seeds the demo on `server`'s database, runs its workflow on every record and writes notes. */
export async function seedPublishedWorld(server: TestServer): Promise<PublishedWorld> {
  const demo = await seed(server);
  const runs = await runDemoWorkflow(server, demo);
  const notes = await writeNotes(server, demo);
  return { ...demo, ...runs, ...notes };
}
