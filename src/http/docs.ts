// GET /docs: the API reference page, Swagger UI over the very document GET /openapi.json
// serves (the same object, openapi.ts), with runhook's marked additions shown. Every asset
// comes from the installed packages (@fastify/swagger-ui ships swagger-ui-dist), so the page
// works without internet access; its validator badge is off (it would call
// validator.swagger.io), and a strict CSP keeps the page to this origin and, for "Try it
// out", to PUBLIC_BASE_URL.
import fastifySwagger from "@fastify/swagger";
import fastifySwaggerUi from "@fastify/swagger-ui";
import type { FastifyInstance } from "fastify";
import type { Schema } from "./openapi-schemas.js";
import { DOCS } from "./routes.js";

/** The page's Content-Security-Policy: scripts, styles and images of this origin only (Swagger UI sets inline styles, and uses data: images). */
export function docsCsp(publicBaseUrl: string): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    `connect-src 'self' ${new URL(publicBaseUrl).origin}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
}

const LOGO = `<svg xmlns="http://www.w3.org/2000/svg" width="160" height="40"><text x="0" y="29" font-family="sans-serif" font-size="26" font-weight="bold" fill="#fff">runhook</text></svg>`;

/** Registers GET /docs and its assets (/docs/static/…, and the document again at /docs/json). */
export async function registerDocsRoutes(app: FastifyInstance, doc: Schema, publicBaseUrl: string): Promise<void> {
  await app.register(async (scope) => {
    // Static mode: @fastify/swagger only hands our document to the UI; it describes no route itself.
    await scope.register(fastifySwagger, { mode: "static", specification: { document: doc as never } });
    await scope.register(fastifySwaggerUi, {
      routePrefix: DOCS.path,
      staticCSP: docsCsp(publicBaseUrl),
      logo: { type: "image/svg+xml", content: Buffer.from(LOGO) },
      theme: { title: "runhook API reference" },
      // showExtensions: the page shows which operations and parameters are runhook's additions (x-runhook-addition).
      uiConfig: { docExpansion: "list", deepLinking: true, displayRequestDuration: true, showExtensions: true },
    });
  });
}
