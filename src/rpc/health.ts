// Standard gRPC health checking (grpc.health.v1.Health) as a Connect service.
//
// Semantics follow https://github.com/grpc/grpc/blob/master/doc/health-checking.md:
// - Check("") answers the overall status of the server; Check(<service>) the
//   status of one service (fully qualified name, e.g. "runhook.v1.TriggerService");
//   an unknown service is NOT_FOUND.
// - Watch sends the current status at once, then every change, until the
//   client goes away or the server shuts down; an unknown service is reported
//   as SERVICE_UNKNOWN without ending the stream.
// - List returns a snapshot of every known service.
//
// One HealthStatus is shared by every router it is registered on (native
// HTTP/2 gRPC server and Fastify gateway), so a single `shutdown()` flips all
// of them to NOT_SERVING. main.ts also sets everything NOT_SERVING while the
// database cannot be reached (src/store/monitor.ts) and SERVING once it answers
// again; after shutdown() nothing changes any more.

import { create } from "@bufbuild/protobuf";
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { ConnectRouter, HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { Health, HealthCheckResponseSchema, HealthCheckResponse_ServingStatus, HealthListResponseSchema } from "../../gen/grpc/health/v1/health_pb.js";
import type { HealthCheckResponse } from "../../gen/grpc/health/v1/health_pb.js";

export { Health, HealthCheckResponse_ServingStatus as ServingStatus };

/** Name of the overall server status in the health protocol. */
export const OVERALL = "";

type Listener = () => void;

/** Shared, mutable serving status of the server and its services. */
export interface HealthStatus {
  /** Status of one service ("" = the whole server); undefined when unknown. */
  get(service: string): HealthCheckResponse_ServingStatus | undefined;
  /** Sets (or adds) the status of one service and notifies watchers. */
  set(service: string, status: HealthCheckResponse_ServingStatus): void;
  /** Sets every known service, and the overall status, to one value. */
  setAll(status: HealthCheckResponse_ServingStatus): void;
  /** Snapshot of every known service and its status ("" included). */
  entries(): Array<[string, HealthCheckResponse_ServingStatus]>;
  /**
   * Marks everything NOT_SERVING, notifies every Watch stream, then ends those
   * streams so that `http2Server.close()` is not held open by them. Further
   * Watch calls answer NOT_SERVING once and end. Idempotent.
   */
  shutdown(): void;
  /** True once shutdown() was called. */
  readonly shuttingDown: boolean;
  /** Subscribes to changes; returns the unsubscribe function. */
  subscribe(listener: Listener): () => void;
}

export interface CreateHealthStatusOptions {
  /**
   * Services reported by name, as descriptors (e.g. TriggerService from
   * gen/runhook/v1/trigger_pb.js) or fully qualified names. The overall ""
   * entry is always present.
   */
  services?: ReadonlyArray<DescService | string>;
  /** Initial status of everything. Default SERVING. */
  initial?: HealthCheckResponse_ServingStatus;
}

/** Creates the shared health status; register it with registerHealth(). */
export function createHealthStatus(options: CreateHealthStatusOptions = {}): HealthStatus {
  const initial = options.initial ?? HealthCheckResponse_ServingStatus.SERVING;
  const statuses = new Map<string, HealthCheckResponse_ServingStatus>([[OVERALL, initial]]);
  for (const s of options.services ?? []) {
    statuses.set(typeof s === "string" ? s : s.typeName, initial);
  }
  const listeners = new Set<Listener>();
  let shuttingDown = false;
  const notify = () => {
    for (const l of [...listeners]) l();
  };
  return {
    get: (service) => statuses.get(service),
    set(service, status) {
      if (shuttingDown) return;
      if (statuses.get(service) === status) return;
      statuses.set(service, status);
      notify();
    },
    setAll(status) {
      if (shuttingDown) return;
      for (const key of statuses.keys()) statuses.set(key, status);
      notify();
    },
    entries: () => [...statuses.entries()],
    shutdown() {
      if (shuttingDown) return;
      for (const key of statuses.keys()) statuses.set(key, HealthCheckResponse_ServingStatus.NOT_SERVING);
      shuttingDown = true;
      notify();
    },
    get shuttingDown() {
      return shuttingDown;
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

function response(status: HealthCheckResponse_ServingStatus): HealthCheckResponse {
  return create(HealthCheckResponseSchema, { status });
}

/** The Connect implementation of grpc.health.v1.Health over a HealthStatus. */
export function createHealthService(health: HealthStatus): ServiceImpl<typeof Health> {
  return {
    check(req) {
      const status = health.get(req.service);
      if (status === undefined) {
        throw new ConnectError(`unknown service ${JSON.stringify(req.service)}`, Code.NotFound);
      }
      return response(status);
    },

    async *watch(req, ctx: HandlerContext) {
      // Wake-up signal for changes, client cancellation and shutdown.
      let wake: (() => void) | undefined;
      let pending = false;
      const poke = () => {
        pending = true;
        const w = wake;
        wake = undefined;
        w?.();
      };
      const unsubscribe = health.subscribe(poke);
      ctx.signal.addEventListener("abort", poke);
      try {
        let last: HealthCheckResponse_ServingStatus | undefined;
        for (;;) {
          pending = false;
          const status = health.get(req.service) ?? HealthCheckResponse_ServingStatus.SERVICE_UNKNOWN;
          if (status !== last) {
            last = status;
            yield response(status);
          }
          if (health.shuttingDown || ctx.signal.aborted) return;
          if (!pending) {
            await new Promise<void>((resolve) => {
              wake = resolve;
            });
          }
        }
      } finally {
        unsubscribe();
        ctx.signal.removeEventListener("abort", poke);
      }
    },

    list() {
      return create(HealthListResponseSchema, {
        statuses: Object.fromEntries(health.entries().map(([name, status]) => [name, response(status)])),
      });
    },
  };
}

/**
 * Registers grpc.health.v1.Health on a Connect router. Call it with the same
 * HealthStatus for every router (native gRPC server and gateway).
 */
export function registerHealth(router: ConnectRouter, health: HealthStatus): void {
  router.service(Health, createHealthService(health));
}
