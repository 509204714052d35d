# Schemathesis hooks for the fuzz tests (test/fuzz/*schemathesis*.test.ts; loaded with SCHEMATHESIS_HOOKS).
#
# - runhook_error_body: a check that every error answer of the HTTP gateway is exactly
#   {"code": "<Connect code>", "message": "<message>", "error": "<the same message>"}, with
#   `runId` allowed on 409 only, and that the code belongs to the status (errors.ts maps one to
#   the other).
# - after_call: writes one JSON line per response to $RUNHOOK_ST_LOG (operation, status and
#   the error-body problem, if any), which the test reads to count requests and statuses.
import json
import os
import threading

import schemathesis

_LOG = os.environ.get("RUNHOOK_ST_LOG")
_lock = threading.Lock()

# HTTP status -> the Connect codes the gateway answers it with.
_CODES = {
    400: {"invalid_argument", "failed_precondition", "out_of_range"},
    401: {"unauthenticated"},
    403: {"permission_denied"},
    404: {"not_found"},
    408: {"deadline_exceeded"},
    409: {"already_exists", "aborted"},
    413: {"resource_exhausted"},
    429: {"resource_exhausted"},
    431: {"resource_exhausted"},
}


def error_body_problem(response):
    """Why an error answer's body is not the gateway's {code, message, error}, or None."""
    status = response.status_code
    if status < 400 or not response.content:
        return None
    try:
        body = json.loads(response.content)
    except ValueError:
        return "error body is not JSON: %r" % response.content[:200]
    if not isinstance(body, dict):
        return "error body is not a JSON object: %r" % response.content[:200]
    required = {"code", "message", "error"}
    allowed = required | ({"runId"} if status == 409 else set())
    keys = set(body)
    if not required <= keys or not keys <= allowed:
        return "error body has the fields %s, expected exactly %s" % (sorted(keys), sorted(allowed))
    if not isinstance(body["message"], str) or not body["message"]:
        return "message must be a non-empty string: %r" % (body["message"],)
    if body["error"] != body["message"]:
        return "error must repeat message: %r, %r" % (body["error"], body["message"])
    if not isinstance(body["code"], str) or body["code"] not in _CODES.get(status, {body["code"]}):
        return "code %r does not belong to status %d" % (body["code"], status)
    if "runId" in body and not isinstance(body["runId"], str):
        return "runId must be a string"
    return None


@schemathesis.check
def runhook_error_body(ctx, response, case):
    """Every error answer is exactly {code, message, error} (+ runId on 409), the code matching the status."""
    problem = error_body_problem(response)
    if problem:
        raise AssertionError(problem)
    return None


@schemathesis.hook
def after_call(context, case, response):
    if not _LOG:
        return
    line = json.dumps({"op": case.operation.label, "status": response.status_code, "ms": round(response.elapsed * 1000), "problem": error_body_problem(response)})
    with _lock:
        with open(_LOG, "a", encoding="utf-8") as f:
            f.write(line + "\n")
