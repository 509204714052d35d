// One round at a time, for the pollers and pumps that re-read the database when told to.

/**
 * Wraps `round` so that one runs at a time: a call while one is under way starts none, but
 * makes the running one go round once more when it ends (however many calls came meanwhile).
 * A round returns false when no further round should follow.
 */
export function coalesced(round: () => Promise<boolean>): () => Promise<void> {
  let running = false;
  let again = false;
  return async () => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      let more: boolean;
      do {
        again = false;
        more = await round();
      } while (again && more);
    } finally {
      running = false;
    }
  };
}
