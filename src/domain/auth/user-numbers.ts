// Every user has a number in its organization (the integer id the public REST API gives users).
// Users stored before runhook numbered them get theirs here, once, at start.
import type { DirectoryStore } from "../../store/directory.js";

const BATCH = 100;

/**
 * Numbers every user that has no number yet, in the order the store lists them. Safe to run from
 * several processes at once (a user numbered by another keeps that number; the number this one
 * took is never used). Returns how many it numbered.
 */
export async function numberUnnumberedUsers(dir: DirectoryStore): Promise<number> {
  let numbered = 0;
  for (;;) {
    const batch = await dir.users.unnumbered(BATCH);
    if (batch.length === 0) return numbered;
    for (const user of batch) if (await dir.users.number(user)) numbered++;
  }
}
