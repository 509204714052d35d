// /v1 REST routes: placeholder until the public API issue lands.
import type { FastifyInstance } from "fastify";
import type { Deps } from "../deps.js";
import type { Services } from "../services.js";

export async function registerV1Routes(_app: FastifyInstance, _deps: Deps, _services: Services): Promise<void> {}
