// AdminService: collections of an environment's data database, and which roles of a
// rendering may read and edit their records.
import { randomUUID } from "node:crypto";
import { permissionId } from "../../store/index.js";
import type * as T from "../../store/types.js";
import type { Deps } from "../../deps.js";
import { fail } from "../../domain/errors.js";
import { adminLog, caller, environmentOf, insertUnique, projectOf, reader, renderingWithCollection, required, validRoles, type AdminImpl } from "./common.js";
import { CollectionPermissionSchema, CollectionSchema } from "../../../gen/runhook/v1/admin_pb.js";
import { collectionToProto, isFieldName, permissionToProto } from "./convert.js";
import { byId, pageOf } from "./paging.js";

const COLLECTION_NAME = /^[A-Za-z0-9_-]{1,100}$/;

function primaryKeyOf(fields: string[]): string[] {
  const primaryKey = fields.length ? [...fields] : ["id"];
  for (const f of primaryKey) if (!isFieldName(f)) throw fail.invalid(`primary_key: "${f}" is not a valid field name (letters, digits, '_')`);
  if (new Set(primaryKey).size !== primaryKey.length) throw fail.invalid("primary_key: a field is listed twice");
  if (primaryKey.length > 8) throw fail.invalid("primary_key: at most 8 fields");
  return primaryKey;
}

/** A permission's scope: equality on fields, nothing nested. */
function scopeOf(given: Record<string, unknown>): Record<string, unknown> {
  const scope: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(given)) {
    if (!isFieldName(k)) throw fail.invalid(`permission.scope: "${k}" is not a valid field name (letters, digits, '_')`);
    if (v !== null && typeof v === "object") throw fail.invalid(`permission.scope.${k}: must be a string, number, boolean or null (equality)`);
    scope[k] = v;
  }
  return scope;
}

export function collectionMethods(deps: Deps): Pick<AdminImpl, "createCollection" | "setCollectionPermission"> & ReturnType<typeof collectionReads> {
  return { ...collectionChanges(deps), ...collectionReads(deps) };
}

/** Collections: editors and admins (CreateWorkflow names one); permissions: admins (who set them). */
function collectionReads(deps: Deps): Pick<AdminImpl, "listCollections" | "getCollection" | "listCollectionPermissions" | "getCollectionPermission"> {
  const dir = deps.store.directory;
  const { immutable } = deps.store;
  return {
    async listCollections(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const environment = await immutable.environment(required(req.environmentId, "environment_id"));
      await projectOf(view, p, environment?.projectId, "editor", `environment "${req.environmentId}"`);
      const page = pageOf(deps, p, { list: "collections", environmentId: environment!._id }, req);
      const docs = await dir.collections.list(environment!._id, page.after, page.read);
      const { items, nextPageToken } = await page.cut(docs, byId, CollectionSchema, collectionToProto);
      return { collections: items, nextPageToken };
    },

    async getCollection(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const collection = await immutable.collection(required(req.collectionId, "collection_id"));
      const environment = collection && (await immutable.environment(collection.environmentId));
      await projectOf(view, p, environment?.projectId, "editor", `collection "${req.collectionId}"`);
      return { collection: collectionToProto(collection!) };
    },

    async listCollectionPermissions(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const rendering = await immutable.rendering(required(req.renderingId, "rendering_id"));
      await projectOf(view, p, rendering?.projectId, "admin", `rendering "${req.renderingId}"`);
      const page = pageOf(deps, p, { list: "permissions", renderingId: rendering!._id }, req);
      const docs = await dir.permissions.ofRendering(rendering!._id, page.after, page.read);
      const { items, nextPageToken } = await page.cut(docs, byId, CollectionPermissionSchema, permissionToProto);
      return { collectionPermissions: items, nextPageToken };
    },

    async getCollectionPermission(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const rendering = await immutable.rendering(required(req.renderingId, "rendering_id"));
      await projectOf(view, p, rendering?.projectId, "admin", `rendering "${req.renderingId}"`);
      const permission = await dir.permissions.get(rendering!._id, required(req.collectionId, "collection_id"));
      if (!permission) throw fail.notFound(`the rendering has no permission on collection "${req.collectionId}"`);
      return { permission: permissionToProto(permission) };
    },
  };
}

function collectionChanges(deps: Deps): Pick<AdminImpl, "createCollection" | "setCollectionPermission"> {
  const dir = deps.store.directory;
  return {
    async createCollection(req, ctx) {
      const p = await caller(dir, ctx);
      const { environment, project } = await environmentOf(dir, p, req.environmentId, "admin");
      if (!COLLECTION_NAME.test(req.name) || req.name.startsWith("system"))
        throw fail.invalid("name: 1-100 letters, digits, '_' or '-', not starting with 'system'");
      const primaryKey = primaryKeyOf(req.primaryKey);
      const collection = await insertUnique(
        dir.collections.insert,
        { _id: randomUUID(), environmentId: environment._id, name: req.name, primaryKey, createdAt: new Date() },
        `collection "${req.name}"`,
      );
      await deps.store.records.ensureKeyIndex(environment.dataDatabase, req.name, primaryKey);
      await adminLog(
        deps,
        p.user,
        "collection.created",
        `collection/${collection._id}`,
        { name: req.name, primaryKey },
        { projectId: project._id, environment: environment.name },
      );
      return { collection: collectionToProto(collection) };
    },

    async setCollectionPermission(req, ctx) {
      const p = await caller(dir, ctx);
      const perm = req.permission;
      if (!perm) throw fail.invalid("permission is required");
      const { rendering, project, collection } = await renderingWithCollection(dir, p, perm, "admin", "permission.");
      const scope = scopeOf(perm.scope ?? {});
      const doc: T.PermissionDoc = {
        _id: permissionId(rendering._id, collection._id),
        renderingId: rendering._id,
        collectionId: collection._id,
        readRoles: validRoles(perm.readRoles, "permission.read_roles"),
        editRoles: validRoles(perm.editRoles, "permission.edit_roles"),
        scope,
      };
      await dir.permissions.put(project.organizationId, doc);
      const environment = await dir.environments.get(rendering.environmentId);
      const details = { renderingId: rendering._id, collection: collection.name, readRoles: doc.readRoles, editRoles: doc.editRoles, scope };
      await adminLog(deps, p.user, "permissions.changed", `permission/${doc._id}`, details, { projectId: project._id, environment: environment?.name ?? null });
      return { permission: permissionToProto(doc) };
    },
  };
}
