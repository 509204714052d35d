// AdminService: collections of an environment's data database, and which roles of a
// rendering may read and edit their records.
import { randomUUID } from "node:crypto";
import { permissionId } from "../../store/index.js";
import type * as T from "../../store/types.js";
import type { Deps } from "../../deps.js";
import { fail } from "../../domain/errors.js";
import { adminLog, caller, environmentOf, insertUnique, renderingWithCollection, validRoles, type AdminImpl } from "./common.js";
import { collectionToProto, isFieldName, permissionToProto } from "./convert.js";

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

export function collectionMethods(deps: Deps): Pick<AdminImpl, "createCollection" | "setCollectionPermission"> {
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
