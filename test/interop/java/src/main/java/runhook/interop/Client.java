// A Java gRPC client of runhook, built from stubs that protoc and protoc-gen-grpc-java generate
// from proto/runhook (see pom.xml). It uses the API as an internal Java service would, over
// native gRPC (HTTP/2, plaintext, grpc-netty-shaded):
//
//  1. TriggerService.TriggerRun(webhook_url, record_id)                  -> run_id
//  2. TriggerRun again at once, sending x-request-id: ALREADY_EXISTS, with the trailers
//     runhook-ongoing-run-id == run_id and x-request-id == the id sent
//  3. a call with a wrong token: UNAUTHENTICATED, with a server-made x-request-id trailer
//  4. RunService.WatchRun until the run is finished; it must be SUCCEEDED
//  5. LogService.ListActivityLogs of the run with the project API token, one entry a page,
//     following next_cursor until workflow.run.triggered and workflow.run.succeeded were seen
//  6. RunService.ListRuns of the run's workflow on the record with the project API token, one run
//     a page (newest first), following next_cursor until the run is found
//
// Configuration (environment): RUNHOOK_GRPC_ADDR (host:port), RUNHOOK_WEBHOOK_URL,
// RUNHOOK_USER_TOKEN, RUNHOOK_API_TOKEN, RUNHOOK_PROJECT, RUNHOOK_ENVIRONMENT, RUNHOOK_COLLECTION,
// RUNHOOK_RECORD_ID.
// On success it prints one JSON line and exits 0; otherwise "interop(java): FAIL <step>: <reason>"
// on stderr and exit code 1 (2 for a configuration error).
package runhook.interop;

import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.AbstractStub;
import io.grpc.stub.MetadataUtils;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import runhook.v1.Log.ActivityLogEntry;
import runhook.v1.Log.ActivityLogFilter;
import runhook.v1.Log.ListActivityLogsRequest;
import runhook.v1.Log.ListActivityLogsResponse;
import runhook.v1.Log.ListOptions;
import runhook.v1.LogServiceGrpc;
import runhook.v1.RunOuterClass.ListRunsRequest;
import runhook.v1.RunOuterClass.ListRunsResponse;
import runhook.v1.RunOuterClass.Run;
import runhook.v1.RunOuterClass.RunFilter;
import runhook.v1.RunOuterClass.WatchRunRequest;
import runhook.v1.RunOuterClass.WatchRunResponse;
import runhook.v1.RunServiceGrpc;
import runhook.v1.Trigger.TriggerRunRequest;
import runhook.v1.TriggerServiceGrpc;

public final class Client {
  private static final Metadata.Key<String> AUTHORIZATION = Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
  private static final Metadata.Key<String> REQUEST_ID = Metadata.Key.of("x-request-id", Metadata.ASCII_STRING_MARSHALLER);
  private static final Metadata.Key<String> ONGOING_RUN_ID = Metadata.Key.of("runhook-ongoing-run-id", Metadata.ASCII_STRING_MARSHALLER);
  private static final long CALL_SECONDS = 15;
  private static final long RUN_SECONDS = 60;

  /** A failed step: its name and why. */
  static final class StepFailure extends Exception {
    StepFailure(String step, String reason) {
      super(step + ": " + reason);
    }
  }

  private final Map<String, String> env;
  private final Map<String, Object> result = new TreeMap<>();

  private Client(Map<String, String> env) {
    this.env = env;
  }

  public static void main(String[] args) {
    Map<String, String> env = System.getenv();
    List<String> missing = new ArrayList<>();
    for (String name : List.of("RUNHOOK_GRPC_ADDR", "RUNHOOK_WEBHOOK_URL", "RUNHOOK_USER_TOKEN", "RUNHOOK_API_TOKEN", "RUNHOOK_PROJECT", "RUNHOOK_ENVIRONMENT", "RUNHOOK_RECORD_ID")) {
      if (env.getOrDefault(name, "").isEmpty()) missing.add(name);
    }
    if (!missing.isEmpty()) {
      System.err.println("interop(java): configuration: missing environment variables: " + missing);
      System.exit(2);
    }
    ManagedChannel channel = ManagedChannelBuilder.forTarget(env.get("RUNHOOK_GRPC_ADDR")).usePlaintext().build();
    int code = 0;
    try {
      System.out.println(new Client(env).run(channel));
    } catch (StepFailure e) {
      System.err.println("interop(java): FAIL " + e.getMessage());
      code = 1;
    } finally {
      channel.shutdownNow();
    }
    System.exit(code);
  }

  /** The stub sending these headers, with the per-call deadline. */
  private static <S extends AbstractStub<S>> S with(S stub, String token, String requestId) {
    Metadata headers = new Metadata();
    headers.put(AUTHORIZATION, "Bearer " + token);
    if (requestId != null) headers.put(REQUEST_ID, requestId);
    return stub.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(headers)).withDeadlineAfter(CALL_SECONDS, TimeUnit.SECONDS);
  }

  private String run(ManagedChannel channel) throws StepFailure {
    String userToken = env.get("RUNHOOK_USER_TOKEN");
    TriggerRunRequest trigger = TriggerRunRequest.newBuilder().setWebhookUrl(env.get("RUNHOOK_WEBHOOK_URL")).setRecordId(env.get("RUNHOOK_RECORD_ID")).build();
    result.put("client", "java");

    long started = System.nanoTime();
    String runId;
    try {
      runId = with(TriggerServiceGrpc.newBlockingStub(channel), userToken, null).triggerRun(trigger).getRunId();
    } catch (StatusRuntimeException e) {
      throw new StepFailure("TriggerRun", e.getStatus().toString());
    }
    if (runId.isEmpty()) throw new StepFailure("TriggerRun", "empty run_id");
    result.put("runId", runId);

    checkAlreadyExists(channel, trigger, userToken, runId);
    checkUnauthenticated(channel, trigger);

    Run finished = watch(channel, userToken, runId);
    result.put("runSeconds", (System.nanoTime() - started) / 1e9);
    result.put("finalState", finished.getState());
    if (!finished.getState().equals("SUCCEEDED")) throw new StepFailure("run", "run " + runId + " finished " + finished.getState() + ": " + finished.getError());

    pageActivityLogs(channel, runId);
    findRun(channel, finished);
    result.put("ok", true);
    return toJson(result);
  }

  /** The same call again while the run is ongoing: ALREADY_EXISTS, the ongoing run and our request id in the trailers. */
  private void checkAlreadyExists(ManagedChannel channel, TriggerRunRequest trigger, String userToken, String runId) throws StepFailure {
    String sentRequestId = "java-interop-" + runId;
    Metadata trailers = expectError("TriggerRun (again)", Status.Code.ALREADY_EXISTS,
        () -> with(TriggerServiceGrpc.newBlockingStub(channel), userToken, sentRequestId).triggerRun(trigger));
    result.put("ongoingRunId", String.valueOf(trailers.get(ONGOING_RUN_ID)));
    result.put("ongoingRunIdIn", "trailer");
    result.put("alreadyExistsRequestId", String.valueOf(trailers.get(REQUEST_ID)));
    result.put("sentRequestId", sentRequestId);
  }

  /** A wrong token: UNAUTHENTICATED, with the request id the server made in the trailers. */
  private void checkUnauthenticated(ManagedChannel channel, TriggerRunRequest trigger) throws StepFailure {
    Metadata trailers = expectError("TriggerRun (wrong token)", Status.Code.UNAUTHENTICATED,
        () -> with(TriggerServiceGrpc.newBlockingStub(channel), "not-a-token", null).triggerRun(trigger));
    result.put("unauthenticatedRequestId", String.valueOf(trailers.get(REQUEST_ID)));
  }

  private interface Call {
    void run();
  }

  /** Runs `call`, which must fail with `code`; returns the error's trailers. */
  private static Metadata expectError(String step, Status.Code code, Call call) throws StepFailure {
    try {
      call.run();
    } catch (StatusRuntimeException e) {
      if (e.getStatus().getCode() != code) throw new StepFailure(step, "expected " + code + ", got " + e.getStatus());
      Metadata trailers = Status.trailersFromThrowable(e);
      if (trailers == null) throw new StepFailure(step, "no trailers");
      return trailers;
    }
    throw new StepFailure(step, "expected " + code + ", got OK");
  }

  /** Follows the run with the WatchRun stream until it is finished. */
  private Run watch(ManagedChannel channel, String userToken, String runId) throws StepFailure {
    RunServiceGrpc.RunServiceBlockingStub runs = with(RunServiceGrpc.newBlockingStub(channel), userToken, null).withDeadlineAfter(RUN_SECONDS, TimeUnit.SECONDS);
    List<String> states = new ArrayList<>();
    try {
      Iterator<WatchRunResponse> stream = runs.watchRun(WatchRunRequest.newBuilder().setRunId(runId).build());
      while (stream.hasNext()) {
        Run run = stream.next().getRun();
        if (states.isEmpty() || !states.get(states.size() - 1).equals(run.getState())) states.add(run.getState());
        if (Set.of("SUCCEEDED", "FAILED", "CANCELLED").contains(run.getState())) {
          result.put("watchedWith", "WatchRun");
          result.put("watchedStates", states);
          return run;
        }
      }
    } catch (StatusRuntimeException e) {
      throw new StepFailure("WatchRun", e.getStatus() + " (states seen " + states + ")");
    }
    throw new StepFailure("WatchRun", "stream ended before the run finished (states seen " + states + ")");
  }

  /**
   * Pages the run's activity log one entry at a time, following next_cursor (always set with
   * order asc) until the run's triggered and succeeded entries were seen; each id once.
   */
  private void pageActivityLogs(ManagedChannel channel, String runId) throws StepFailure {
    LogServiceGrpc.LogServiceBlockingStub logs = LogServiceGrpc.newBlockingStub(channel);
    List<String> actions = new ArrayList<>();
    Set<String> ids = new HashSet<>();
    String cursor = "";
    int pages = 0;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (!(actions.contains("workflow.run.triggered") && actions.contains("workflow.run.succeeded"))) {
      if (System.nanoTime() > deadline) throw new StepFailure("ListActivityLogs", "after " + pages + " pages, actions " + actions);
      ListActivityLogsRequest req = ListActivityLogsRequest.newBuilder()
          .setProjectName(env.get("RUNHOOK_PROJECT"))
          .setEnvironmentName(env.get("RUNHOOK_ENVIRONMENT"))
          .setOptions(ListOptions.newBuilder().setLimit(1).setOrder("asc").setCursor(cursor))
          .setFilter(ActivityLogFilter.newBuilder().setRunId(runId))
          .build();
      ListActivityLogsResponse page;
      try {
        page = with(logs, env.get("RUNHOOK_API_TOKEN"), null).listActivityLogs(req);
      } catch (StatusRuntimeException e) {
        throw new StepFailure("ListActivityLogs", e.getStatus().toString());
      }
      pages++;
      if (page.getActivityLogsCount() > 1) throw new StepFailure("ListActivityLogs", "limit 1 answered " + page.getActivityLogsCount() + " entries");
      for (ActivityLogEntry entry : page.getActivityLogsList()) {
        if (!ids.add(entry.getId())) throw new StepFailure("ListActivityLogs", "entry " + entry.getId() + " seen twice");
        if (!entry.getRunId().equals(runId)) throw new StepFailure("ListActivityLogs", "entry of run " + entry.getRunId());
        actions.add(entry.getAction());
        if (entry.getAction().equals("workflow.run.triggered")) result.put("triggeredLogId", entry.getId());
      }
      if (!page.hasNextCursor()) throw new StepFailure("ListActivityLogs", "no next_cursor with order asc");
      cursor = page.getNextCursor();
      if (!page.getHasMore() && page.getActivityLogsCount() == 0) sleepQuietly(200); // caught up: poll again
    }
    result.put("activityLogs", actions.size());
    result.put("activityLogPages", pages);
    result.put("activityLogActions", actions);
  }

  /** Pages the runs of the run's workflow on its record, one a page, until the run is found. */
  private void findRun(ManagedChannel channel, Run run) throws StepFailure {
    RunServiceGrpc.RunServiceBlockingStub runs = RunServiceGrpc.newBlockingStub(channel);
    String cursor = "";
    for (int pages = 1; pages <= 50; pages++) {
      ListRunsRequest req = ListRunsRequest.newBuilder()
          .setProjectName(env.get("RUNHOOK_PROJECT"))
          .setEnvironmentName(env.get("RUNHOOK_ENVIRONMENT"))
          .setOptions(ListOptions.newBuilder().setLimit(1).setCursor(cursor))
          .setFilter(RunFilter.newBuilder().setWorkflowId(run.getWorkflowId()).setCollection(run.getCollection()).setRecordId(run.getRecordId()))
          .build();
      ListRunsResponse page;
      try {
        page = with(runs, env.get("RUNHOOK_API_TOKEN"), null).listRuns(req);
      } catch (StatusRuntimeException e) {
        throw new StepFailure("ListRuns", e.getStatus().toString());
      }
      for (Run listed : page.getRunsList()) {
        if (listed.getId().equals(run.getId())) {
          if (!listed.getState().equals(run.getState())) throw new StepFailure("ListRuns", "listed as " + listed.getState());
          result.put("listedRunId", listed.getId());
          result.put("listedRunPages", pages);
          return;
        }
      }
      if (!page.getHasMore()) break;
      cursor = page.getNextCursor();
    }
    throw new StepFailure("ListRuns", "run " + run.getId() + " not listed");
  }

  private static void sleepQuietly(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** The result as one JSON line (strings, numbers, booleans and lists of strings). */
  private static String toJson(Object value) {
    if (value instanceof Map<?, ?> map) {
      List<String> fields = new ArrayList<>();
      for (Map.Entry<?, ?> e : map.entrySet()) fields.add(toJson(e.getKey().toString()) + ":" + toJson(e.getValue()));
      return "{" + String.join(",", fields) + "}";
    }
    if (value instanceof List<?> list) {
      List<String> items = new ArrayList<>();
      for (Object o : list) items.add(toJson(o));
      return "[" + String.join(",", items) + "]";
    }
    if (value instanceof Number || value instanceof Boolean) return value.toString();
    StringBuilder s = new StringBuilder("\"");
    for (char c : value.toString().toCharArray()) {
      if (c == '"' || c == '\\') s.append('\\').append(c);
      else if (c < 0x20) s.append(String.format("\\u%04x", (int) c));
      else s.append(c);
    }
    return s.append('"').toString();
  }
}
