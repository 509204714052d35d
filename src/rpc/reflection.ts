// gRPC server reflection (grpc.reflection.v1 and grpc.reflection.v1alpha
// ServerReflection) as Connect services, so that grpcurl, `buf curl`,
// Postman, grpcui, ... can discover runhook's API without the .proto files.
//
// Descriptors come from the generated code in gen/ (protobuf-es v2 embeds
// each file's FileDescriptorProto): for every file we serve the serialized
// FileDescriptorProto of the file itself followed by all of its transitive
// dependencies (google/protobuf well-known types included), as grpc-go does.
//
// Supported requests: list_services, file_by_filename, file_containing_symbol
// (services, methods, messages incl. nested, enums, extensions),
// file_containing_extension and all_extension_numbers_of_type (runhook
// defines no extensions, so these answer from the generated registry).
//
// The RPC is bidirectional streaming: it works on the native HTTP/2 gRPC
// server; over HTTP/1.1 (Fastify gateway) Connect cannot do bidi streams.

import { createRegistry, fromBinary, toBinary, create } from "@bufbuild/protobuf";
import type { DescFile, DescService, Registry } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import {
  ServerReflection as ServerReflectionV1,
  ServerReflectionRequestSchema as RequestV1Schema,
  ServerReflectionResponseSchema as ResponseV1Schema,
} from "../../gen/grpc/reflection/v1/reflection_pb.js";
import type { ServerReflectionRequest as RequestV1, ServerReflectionResponse as ResponseV1 } from "../../gen/grpc/reflection/v1/reflection_pb.js";
import {
  ServerReflection as ServerReflectionV1alpha,
  ServerReflectionRequestSchema as RequestV1alphaSchema,
  ServerReflectionResponseSchema as ResponseV1alphaSchema,
} from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";

export { ServerReflectionV1, ServerReflectionV1alpha };

export interface ReflectionOptions {
  /**
   * Also list the two ServerReflection services themselves in
   * list_services (grpc-go does). Default true.
   */
  listSelf?: boolean;
}

/** Index of the files and symbols reachable from a set of services. */
export interface ReflectionIndex {
  /** Fully qualified names of the listed services, sorted. */
  readonly serviceNames: readonly string[];
  /** The file named `fileName` (e.g. "runhook/v1/trigger.proto") and its transitive deps, serialized. */
  fileByName(fileName: string): Uint8Array[] | undefined;
  /** The file defining `symbol` (service, method, message, enum, extension) and its transitive deps. */
  fileContainingSymbol(symbol: string): Uint8Array[] | undefined;
  /** The file defining extension `number` of message `typeName`, and its deps. */
  fileContainingExtension(typeName: string, number: number): Uint8Array[] | undefined;
  /** Extension numbers known for message `typeName`; undefined when the message is unknown. */
  extensionNumbers(typeName: string): number[] | undefined;
}

function protoFileName(file: DescFile): string {
  return file.proto.name;
}

/** The files of `services` and, transitively, their dependencies, by proto file name. */
function fileClosure(services: ReadonlyArray<DescService>): Map<string, DescFile> {
  const files = new Map<string, DescFile>();
  const visit = (file: DescFile) => {
    if (files.has(protoFileName(file))) return;
    files.set(protoFileName(file), file);
    for (const dep of file.dependencies) visit(dep);
  };
  for (const s of services) visit(s.file);
  return files;
}

/** Serializes a file followed by its transitive dependencies (each once); each file is serialized once and kept. */
function serializerWithDeps(): (file: DescFile) => Uint8Array[] {
  const serialized = new Map<string, Uint8Array>();
  const bytesOf = (file: DescFile): Uint8Array => {
    const name = protoFileName(file);
    let b = serialized.get(name);
    if (b === undefined) {
      b = toBinary(FileDescriptorProtoSchema, file.proto);
      serialized.set(name, b);
    }
    return b;
  };
  return (file) => {
    const out: Uint8Array[] = [];
    const seen = new Set<string>();
    const walk = (f: DescFile) => {
      if (seen.has(protoFileName(f))) return;
      seen.add(protoFileName(f));
      out.push(bytesOf(f));
      for (const d of f.dependencies) walk(d);
    };
    walk(file);
    return out;
  };
}

/** The file defining `symbol`: a type, or a member (method, field, oneof, enum value) of one. */
function fileOfSymbol(registry: Registry, symbol: string): DescFile | undefined {
  const name = symbol.startsWith(".") ? symbol.slice(1) : symbol;
  const desc = registry.get(name);
  if (desc !== undefined) return desc.file;
  // A method: <package>.<Service>.<Method>
  const dot = name.lastIndexOf(".");
  if (dot > 0) {
    const parent = registry.get(name.slice(0, dot));
    const member = name.slice(dot + 1);
    if (parent?.kind === "service" && parent.methods.some((m) => m.name === member)) return parent.file;
    if (parent?.kind === "message" && (parent.fields.some((f) => f.name === member) || parent.oneofs.some((o) => o.name === member))) {
      return parent.file;
    }
    if (parent?.kind === "enum" && parent.values.some((v) => v.name === member)) return parent.file;
  }
  return undefined;
}

function extensionsOf(registry: Registry, typeName: string) {
  const out = [];
  for (const d of registry) if (d.kind === "extension" && d.extendee.typeName === typeName) out.push(d);
  return out;
}

/** Builds the reflection index for the given services (and everything they reference). */
export function createReflectionIndex(services: ReadonlyArray<DescService>, options: ReflectionOptions = {}): ReflectionIndex {
  const listed = [...services];
  if (options.listSelf ?? true) listed.push(ServerReflectionV1, ServerReflectionV1alpha);
  const files = fileClosure(listed);
  const registry: Registry = createRegistry(...files.values());
  const withDeps = serializerWithDeps();
  return {
    serviceNames: [...new Set(listed.map((s) => s.typeName))].sort(),
    fileByName(fileName) {
      const file = files.get(fileName);
      return file && withDeps(file);
    },
    fileContainingSymbol(symbol) {
      const file = fileOfSymbol(registry, symbol);
      return file && withDeps(file);
    },
    fileContainingExtension(typeName, number) {
      const ext = extensionsOf(registry, typeName).find((e) => e.number === number);
      return ext && withDeps(ext.file);
    },
    extensionNumbers(typeName) {
      if (registry.getMessage(typeName) === undefined) return undefined;
      return extensionsOf(registry, typeName)
        .map((e) => e.number)
        .sort((a, b) => a - b);
    },
  };
}

function answer(index: ReflectionIndex, req: RequestV1): ResponseV1 {
  const base = { validHost: req.host, originalRequest: req };
  const files = (list: Uint8Array[] | undefined, what: string): ResponseV1 =>
    list === undefined
      ? error(Code.NotFound, `${what} not found`)
      : create(ResponseV1Schema, {
          ...base,
          messageResponse: { case: "fileDescriptorResponse", value: { fileDescriptorProto: list } },
        });
  const error = (code: Code, message: string): ResponseV1 =>
    create(ResponseV1Schema, {
      ...base,
      messageResponse: { case: "errorResponse", value: { errorCode: code, errorMessage: message } },
    });

  const r = req.messageRequest;
  switch (r.case) {
    case "listServices":
      return create(ResponseV1Schema, {
        ...base,
        messageResponse: {
          case: "listServicesResponse",
          value: { service: index.serviceNames.map((name) => ({ name })) },
        },
      });
    case "fileByFilename":
      return files(index.fileByName(r.value), `file ${JSON.stringify(r.value)}`);
    case "fileContainingSymbol":
      return files(index.fileContainingSymbol(r.value), `symbol ${JSON.stringify(r.value)}`);
    case "fileContainingExtension":
      return files(
        index.fileContainingExtension(r.value.containingType, r.value.extensionNumber),
        `extension ${r.value.extensionNumber} of ${JSON.stringify(r.value.containingType)}`,
      );
    case "allExtensionNumbersOfType": {
      const numbers = index.extensionNumbers(r.value);
      if (numbers === undefined) return error(Code.NotFound, `type ${JSON.stringify(r.value)} not found`);
      return create(ResponseV1Schema, {
        ...base,
        messageResponse: {
          case: "allExtensionNumbersResponse",
          value: { baseTypeName: r.value, extensionNumber: numbers },
        },
      });
    }
    default:
      return error(Code.InvalidArgument, "empty or unknown message_request");
  }
}

/** Connect implementation of grpc.reflection.v1.ServerReflection. */
export function createReflectionServiceV1(index: ReflectionIndex): ServiceImpl<typeof ServerReflectionV1> {
  return {
    async *serverReflectionInfo(requests) {
      for await (const req of requests) yield answer(index, req);
    },
  };
}

/**
 * Connect implementation of grpc.reflection.v1alpha.ServerReflection. The
 * v1alpha messages are wire-identical to v1, so requests and responses are
 * converted through their binary form.
 */
export function createReflectionServiceV1alpha(index: ReflectionIndex): ServiceImpl<typeof ServerReflectionV1alpha> {
  return {
    async *serverReflectionInfo(requests) {
      for await (const req of requests) {
        const v1 = fromBinary(RequestV1Schema, toBinary(RequestV1alphaSchema, req));
        yield fromBinary(ResponseV1alphaSchema, toBinary(ResponseV1Schema, answer(index, v1)));
      }
    },
  };
}

/**
 * Registers grpc.reflection.v1 and grpc.reflection.v1alpha ServerReflection
 * on a Connect router. `services` are the generated service descriptors to
 * expose (e.g. TriggerService, RunService, LogService, NoteService,
 * AdminService from gen/runhook/v1, and Health from gen/grpc/health/v1).
 * Returns the index (useful for tests and logging).
 */
export function registerReflection(router: ConnectRouter, services: ReadonlyArray<DescService>, options: ReflectionOptions = {}): ReflectionIndex {
  const index = createReflectionIndex(services, options);
  router.service(ServerReflectionV1, createReflectionServiceV1(index));
  router.service(ServerReflectionV1alpha, createReflectionServiceV1alpha(index));
  return index;
}
