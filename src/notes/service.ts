// NoteService: placeholder until its issue lands.
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { NoteService } from "../../gen/runhook/v1/note_pb.js";
import type { Deps } from "../deps.js";

export function createNoteService(_deps: Deps): ServiceImpl<typeof NoteService> {
  const notYet = () => {
    throw new ConnectError("not implemented yet", Code.Unimplemented);
  };
  return Object.fromEntries(NoteService.methods.map((m) => [m.localName, notYet])) as unknown as ServiceImpl<typeof NoteService>;
}
