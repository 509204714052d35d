// POST /hooks/{key}: placeholder until the webhook issue lands.
import type { FastifyInstance } from "fastify";
import type { Deps } from "../deps.js";
import type { Services } from "../services.js";

export async function registerWebhookRoutes(_app: FastifyInstance, _deps: Deps, _services: Services): Promise<void> {}
