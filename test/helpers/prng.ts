// A seeded PRNG for the tests that draw their cases or their schedule at random: a failure names
// its seed, and the same seed draws the same sequence again.

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
export function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return { next, int, pick: <T>(xs: readonly T[]) => xs[int(xs.length)]!, chance: (p: number) => next() < p };
}

export type Rng = ReturnType<typeof prng>;
