// A console session's secret is good only as the console's cookie, which the gateway turns into
// the call's token (http/console.ts) and marks here. Sent any other way (an Authorization
// header, gRPC metadata, a /v1 call) it is no token: a session is the browser's, and an
// application token is no public-API token, whichever way it is dressed.
import type { Interceptor } from "@connectrpc/connect";
import { bearer, CONSOLE_SESSION_PREFIX } from "../domain/auth/tokens.js";
import { fail } from "../domain/errors.js";

import { viaSessionCookieKey } from "../services/context.js";

export function sessionOnlyAsCookieInterceptor(): Interceptor {
  return (next) => async (req) => {
    if (!req.contextValues.get(viaSessionCookieKey) && bearer(req.header.get("authorization"))?.startsWith(CONSOLE_SESSION_PREFIX)) {
      throw fail.unauthenticated("a console session is valid only as the console's cookie");
    }
    return next(req);
  };
}
