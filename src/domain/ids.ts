// Every id runhook makes is a UUID (crypto.randomUUID, lower case); one check for all of them.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether `id` is spelled as a UUID (either case). */
export function isUuid(id: string): boolean {
  return UUID.test(id);
}
