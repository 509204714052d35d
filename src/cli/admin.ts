// `runhook admin …`: placeholder until the webhook issue lands.
export const ADMIN_USAGE = "";

export async function runAdminCommand(_args: string[]): Promise<number> {
  process.stderr.write("runhook admin: not implemented yet\n");
  return 2;
}
