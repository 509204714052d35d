// GET /v1/runs/{runId}: placeholder until the runs issue lands.
import type { FastifyInstance } from "fastify";
import type { Deps } from "../deps.js";
import type { Services } from "../services.js";

export async function registerRunRoutes(_app: FastifyInstance, _deps: Deps, _services: Services): Promise<void> {}
