// What the rate limits have stored, as a test checks it.
import { storeFixtures, type Store } from "../../src/store/index.js";

/** The live token buckets: an address's failed authentications have a document of their own (`auth:<address>:<window>`), not counted. */
export async function liveTokenBuckets(store: Store): Promise<number> {
  const live = await storeFixtures(store)
    .rateLimits.find({ expiresAt: { $gt: new Date() } })
    .toArray();
  return live.filter((d) => !d._id.startsWith("auth:")).length;
}
