// Who the client of a call is, one rule for both servers (the HTTP gateway and native gRPC): the
// peer of the connection, unless the peer is a proxy the operator trusts (RUNHOOK_TRUSTED_PROXIES),
// in which case the `X-Forwarded-For` header (gRPC: the `x-forwarded-for` metadata) is read from
// its right end, past every trusted proxy, and the first address that is not one is the client
// (the whole chain trusted: its leftmost address). An untrusted peer's header is ignored, so a
// client cannot choose the address it is counted by. The walk is proxy-addr's (Fastify's
// `trustProxy`), and the gateway's own `req.ip` trusts the same list.
import { BlockList, isIP } from "node:net";

export interface ClientAddressRule {
  /** Whether `address` is a proxy the operator trusts. */
  trusts(address: string): boolean;
  /** The client's address, from the connection's peer and the request's `x-forwarded-for` header(s). */
  clientAddress(peer: string | undefined, forwardedFor: string | string[] | undefined): string | undefined;
}

/** The trusted-proxy set of `trustedProxies` (addresses or CIDR ranges, as config.ts checked them). */
function proxySet(trustedProxies: readonly string[]): BlockList {
  const set = new BlockList();
  for (const p of trustedProxies) {
    const [addr = "", bits] = p.split("/");
    const type = isIP(addr) === 6 ? "ipv6" : "ipv4";
    if (bits === undefined) set.addAddress(addr, type);
    else set.addSubnet(addr, Number(bits), type);
  }
  return set;
}

/** The addresses of an `X-Forwarded-For` header, nearest first (the order proxies appended them, reversed). */
function forwardedHops(header: string | string[] | undefined): string[] {
  const joined = Array.isArray(header) ? header.join(",") : (header ?? "");
  return joined
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .reverse();
}

export function clientAddressRule(trustedProxies: readonly string[]): ClientAddressRule {
  const set = proxySet(trustedProxies);
  const trusts = (address: string): boolean => {
    const v = isIP(address);
    return v !== 0 && set.check(address, v === 6 ? "ipv6" : "ipv4");
  };
  return {
    trusts,
    clientAddress(peer, forwardedFor) {
      if (trustedProxies.length === 0 || peer === undefined || !trusts(peer)) return peer;
      let client = peer;
      for (const hop of forwardedHops(forwardedFor)) {
        client = hop;
        if (!trusts(hop)) break;
      }
      return client;
    },
  };
}
