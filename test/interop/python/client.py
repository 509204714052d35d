#!/usr/bin/env python3
"""Python gRPC client of runhook (interop check), built from the code that
scripts/generate-clients.sh generates into test/interop/python/gen.

Over native gRPC (HTTP/2, plaintext) it does, as an external consumer would:

 1. TriggerService.TriggerRun(webhook_url, record_id)              -> run_id
 2. TriggerRun again at once -> ALREADY_EXISTS, trailing metadata
    runhook-ongoing-run-id == run_id
 3. RunService.WatchRun (GetRun long-polling if WatchRun is unimplemented)
    until the run is finished; it must be SUCCEEDED (60 s timeout)
 4. LogService.ListActivityLogs(project, environment, filter.run_id) with the
    project API token -> an entry with action workflow.run.triggered
 5. NoteService.CreateNote(scope, collection, record_id, "<p>hi</p>") with the
    project API token -> a note id
 6. RunService.ListRuns(project, environment, filter workflow_id + collection +
    record_id + states SUCCEEDED) with the application token (a user sees its
    own runs) -> the run triggered in step 1

Configuration (environment): RUNHOOK_GRPC_ADDR (host:port), RUNHOOK_WEBHOOK_URL,
RUNHOOK_USER_TOKEN (application token), RUNHOOK_API_TOKEN (project API token),
RUNHOOK_PROJECT, RUNHOOK_ENVIRONMENT, RUNHOOK_COLLECTION, RUNHOOK_RECORD_ID.

Run it with the interpreter of the venv the script made (its path is in
test/interop/python/gen/PYTHON): it has grpcio and protobuf.

On success prints one JSON line and exits 0; otherwise prints
"interop(python): FAIL <step>: <reason>" on stderr and exits 1 (2 for a
configuration or import error).
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "gen"))

try:
    import grpc

    from runhook.v1 import log_pb2, log_pb2_grpc
    from runhook.v1 import note_pb2, note_pb2_grpc
    from runhook.v1 import run_pb2, run_pb2_grpc
    from runhook.v1 import trigger_pb2, trigger_pb2_grpc
except ImportError as exc:  # pragma: no cover - exercised when not generated
    print(
        "interop(python): cannot import the generated code or grpcio (%s); "
        "run scripts/generate-clients.sh python and use the interpreter named in "
        "test/interop/python/gen/PYTHON" % exc,
        file=sys.stderr,
    )
    sys.exit(2)

ONGOING_RUN_ID_KEY = "runhook-ongoing-run-id"
RUN_TIMEOUT = 60.0
CALL_TIMEOUT = 15.0
FINISHED = ("SUCCEEDED", "FAILED", "CANCELLED")
ENV = (
    "RUNHOOK_GRPC_ADDR",
    "RUNHOOK_WEBHOOK_URL",
    "RUNHOOK_USER_TOKEN",
    "RUNHOOK_API_TOKEN",
    "RUNHOOK_PROJECT",
    "RUNHOOK_ENVIRONMENT",
    "RUNHOOK_COLLECTION",
    "RUNHOOK_RECORD_ID",
)


class StepError(Exception):
    def __init__(self, step, message):
        super().__init__("%s: %s" % (step, message))


def auth(token):
    """Call metadata carrying the bearer token."""
    return (("authorization", "Bearer " + token),)


def rpc_error(exc):
    return "%s %s" % (exc.code().name, exc.details())


def wait_finished(runs, token, run_id):
    """Follows the run with WatchRun (or GetRun long-polling); returns (run, how)."""
    deadline = time.monotonic() + RUN_TIMEOUT
    last = None
    try:
        for msg in runs.WatchRun(
            run_pb2.WatchRunRequest(run_id=run_id), metadata=auth(token), timeout=RUN_TIMEOUT
        ):
            last = msg.run
            if last.state in FINISHED:
                return last, "WatchRun"
        raise StepError(
            "WatchRun",
            "stream ended before the run finished (last state %r)" % (last.state if last else None),
        )
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            raise StepError(
                "WatchRun",
                "run %s not finished after %ss (last state %r)"
                % (run_id, RUN_TIMEOUT, last.state if last else None),
            )
        if exc.code() != grpc.StatusCode.UNIMPLEMENTED or last is not None:
            raise StepError("WatchRun", rpc_error(exc))

    version = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise StepError("GetRun", "run %s not finished after %ss" % (run_id, RUN_TIMEOUT))
        try:
            resp = runs.GetRun(
                run_pb2.GetRunRequest(run_id=run_id, wait_seconds=10, known_version=version),
                metadata=auth(token),
                timeout=min(remaining, 15.0),
            )
        except grpc.RpcError as exc:
            raise StepError("GetRun", rpc_error(exc))
        if resp.run.state in FINISHED:
            return resp.run, "GetRun"
        if resp.run.version == version:
            time.sleep(0.2)  # server does not long-poll: do not spin
        version = resp.run.version


def run(cfg):
    res = {"client": "python", "ok": False}
    with grpc.insecure_channel(cfg["RUNHOOK_GRPC_ADDR"]) as channel:
        trigger = trigger_pb2_grpc.TriggerServiceStub(channel)
        runs = run_pb2_grpc.RunServiceStub(channel)
        logs = log_pb2_grpc.LogServiceStub(channel)
        notes = note_pb2_grpc.NoteServiceStub(channel)
        user = auth(cfg["RUNHOOK_USER_TOKEN"])
        api = auth(cfg["RUNHOOK_API_TOKEN"])
        req = trigger_pb2.TriggerRunRequest(
            webhook_url=cfg["RUNHOOK_WEBHOOK_URL"], record_id=cfg["RUNHOOK_RECORD_ID"]
        )

        # 1. Trigger a run.
        started = time.monotonic()
        try:
            resp = trigger.TriggerRun(req, metadata=user, timeout=CALL_TIMEOUT)
        except grpc.RpcError as exc:
            raise StepError("TriggerRun", rpc_error(exc))
        if not resp.run_id:
            raise StepError("TriggerRun", "empty run_id")
        res["runId"] = resp.run_id

        # 2. Again while ongoing: ALREADY_EXISTS with the ongoing run id.
        try:
            trigger.TriggerRun(req, metadata=user, timeout=CALL_TIMEOUT)
            raise StepError("TriggerRun (again)", "expected ALREADY_EXISTS, got OK")
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.ALREADY_EXISTS:
                raise StepError("TriggerRun (again)", "expected ALREADY_EXISTS, got " + rpc_error(exc))
            trailing = dict(exc.trailing_metadata() or ())
            initial = dict(exc.initial_metadata() or ())
            if ONGOING_RUN_ID_KEY in trailing:
                res["ongoingRunId"], res["ongoingRunIdIn"] = trailing[ONGOING_RUN_ID_KEY], "trailer"
            elif ONGOING_RUN_ID_KEY in initial:
                # Accepted but reported: the contract puts it in trailing metadata.
                res["ongoingRunId"], res["ongoingRunIdIn"] = initial[ONGOING_RUN_ID_KEY], "header"
            if res.get("ongoingRunId") != res["runId"]:
                raise StepError(
                    "TriggerRun (again)",
                    "metadata %s = %r, want %r (trailing %r, initial %r)"
                    % (ONGOING_RUN_ID_KEY, res.get("ongoingRunId"), res["runId"], trailing, initial),
                )

        # 3. Follow the run until it is finished.
        final, how = wait_finished(runs, cfg["RUNHOOK_USER_TOKEN"], res["runId"])
        res["finalState"], res["watchedWith"] = final.state, how
        res["runSeconds"] = round(time.monotonic() - started, 3)
        if final.state != "SUCCEEDED":
            raise StepError("run", "run %s finished %s: %s" % (res["runId"], final.state, final.error))

        # 4. Activity logs of the run (project API token).
        deadline = time.monotonic() + 10
        while True:
            try:
                lr = logs.ListActivityLogs(
                    log_pb2.ListActivityLogsRequest(
                        project_name=cfg["RUNHOOK_PROJECT"],
                        environment_name=cfg["RUNHOOK_ENVIRONMENT"],
                        filter=log_pb2.ActivityLogFilter(run_id=res["runId"]),
                    ),
                    metadata=api,
                    timeout=CALL_TIMEOUT,
                )
            except grpc.RpcError as exc:
                raise StepError("ListActivityLogs", rpc_error(exc))
            res["activityLogs"] = len(lr.activity_logs)
            triggered = [e for e in lr.activity_logs if e.action == "workflow.run.triggered"]
            if triggered:
                res["triggeredLogId"] = triggered[0].id
                break
            if time.monotonic() > deadline:
                raise StepError(
                    "ListActivityLogs",
                    "no workflow.run.triggered entry for run %s among %d entries"
                    % (res["runId"], len(lr.activity_logs)),
                )
            time.sleep(0.25)

        # 5. Create a note on the record (project API token).
        try:
            nr = notes.CreateNote(
                note_pb2.CreateNoteRequest(
                    scope=note_pb2.NoteScope(
                        project_name=cfg["RUNHOOK_PROJECT"], environment_name=cfg["RUNHOOK_ENVIRONMENT"]
                    ),
                    collection=cfg["RUNHOOK_COLLECTION"],
                    record_id=cfg["RUNHOOK_RECORD_ID"],
                    content="<p>hi</p>",
                ),
                metadata=api,
                timeout=CALL_TIMEOUT,
            )
        except grpc.RpcError as exc:
            raise StepError("CreateNote", rpc_error(exc))
        if not nr.note.id:
            raise StepError("CreateNote", "empty note id")
        res["noteId"] = nr.note.id

        # 6. Find the run again among the runs of its workflow on the record.
        try:
            listed = runs.ListRuns(
                run_pb2.ListRunsRequest(
                    project_name=cfg["RUNHOOK_PROJECT"],
                    environment_name=cfg["RUNHOOK_ENVIRONMENT"],
                    options=log_pb2.ListOptions(limit=10),
                    filter=run_pb2.RunFilter(
                        workflow_id=final.workflow_id,
                        collection=cfg["RUNHOOK_COLLECTION"],
                        record_id=cfg["RUNHOOK_RECORD_ID"],
                        states=["SUCCEEDED"],
                    ),
                ),
                metadata=user,
                timeout=CALL_TIMEOUT,
            )
        except grpc.RpcError as exc:
            raise StepError("ListRuns", rpc_error(exc))
        if not any(r.id == res["runId"] and r.state == "SUCCEEDED" for r in listed.runs):
            raise StepError("ListRuns", "run %s not among the %d runs listed" % (res["runId"], len(listed.runs)))
        res["listedRunId"] = res["runId"]
    res["ok"] = True
    return res


def main():
    missing = [name for name in ENV if not os.environ.get(name)]
    if missing:
        print("interop(python): configuration: missing environment variables: %s" % missing, file=sys.stderr)
        return 2
    cfg = {name: os.environ[name] for name in ENV}
    try:
        res = run(cfg)
    except StepError as exc:
        print("interop(python): FAIL %s" % exc, file=sys.stderr)
        return 1
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
