// What several pages need: the project they are in (its name, for the calls that take names) and
// the trail back to it.
import type { ComponentChildren } from "preact";
import type { Project } from "../../../gen/runhook/v1/admin_pb.js";
import { admin } from "../api.js";
import { href } from "../route.js";
import { type Loaded, useLoad } from "../session.js";

export function useProject(projectId: string): Loaded<Project> {
  return useLoad(async (signal) => (await admin.getProject({ projectId }, { signal })).project!, [projectId]);
}

/** The trail above a page: runhook › project › … (each a link but the last). */
export function Crumbs({ project, trail = [] }: { project?: { id: string; name: string }; trail?: [string, string | null][] }) {
  const items: [string, string | null][] = [["Projects", href([])]];
  if (project) items.push([project.name || "project", href(["p", project.id])]);
  items.push(...trail);
  return (
    <nav class="crumbs" aria-label="Breadcrumb">
      {items.map(([label, link], i) => (
        <span key={i}>
          {i > 0 && " › "}
          {link && i < items.length - 1 ? <a href={link}>{label}</a> : <span aria-current={i === items.length - 1 ? "page" : undefined}>{label}</span>}
        </span>
      ))}
    </nav>
  );
}

export function Page({ title, children, crumbs }: { title: ComponentChildren; children: ComponentChildren; crumbs?: ComponentChildren }) {
  return (
    <section class="page">
      {crumbs}
      <h1>{title}</h1>
      {children}
    </section>
  );
}

/**
 * What a page shows when what its address names does not exist or is not the reader's (the
 * server answered NotFound or PermissionDenied): the same words either way, and nothing of the
 * address (a typed id is not echoed).
 */
export function NotFound({ what }: { what: string }) {
  return (
    <section class="page not-found">
      <Crumbs trail={[["Not found", null]]} />
      <h1>Not found</h1>
      <p class="error" role="alert">
        No such {what} for you: it does not exist, or your account has no access to it. <a href={href([])}>Back to your projects</a>
      </p>
    </section>
  );
}
