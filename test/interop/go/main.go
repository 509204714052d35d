// Command interop is a Go gRPC client of runhook, built from code generated
// by scripts/generate-clients.sh (test/interop/go/gen). It exercises the API
// as an external Go consumer would, over native gRPC (HTTP/2, plaintext):
//
//  1. TriggerService.TriggerRun(webhook_url, record_id)           -> run_id
//  2. TriggerRun again at once -> ALREADY_EXISTS, trailing metadata
//     runhook-ongoing-run-id == run_id
//  3. RunService.WatchRun (GetRun long-polling if WatchRun is unimplemented)
//     until the run is finished; it must be SUCCEEDED (60 s timeout)
//  4. LogService.ListActivityLogs(project, environment, filter.run_id) with
//     the project API token -> an entry with action workflow.run.triggered
//  5. NoteService.CreateNote(scope, collection, record_id, "<p>hi</p>")
//     with the project API token -> a note id
//  6. RunService.ListRuns(project, environment, filter workflow_id +
//     collection + record_id + states SUCCEEDED) with the application token
//     (a user sees its own runs) -> the run triggered in step 1
//
// Configuration (environment): RUNHOOK_GRPC_ADDR (host:port),
// RUNHOOK_WEBHOOK_URL, RUNHOOK_USER_TOKEN (application token),
// RUNHOOK_API_TOKEN (project API token), RUNHOOK_PROJECT,
// RUNHOOK_ENVIRONMENT, RUNHOOK_COLLECTION, RUNHOOK_RECORD_ID.
//
// On success it prints one JSON line and exits 0; otherwise it prints
// "interop(go): FAIL <step>: <reason>" on stderr and exits 1 (2 for a
// configuration error).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	runhookv1 "runhook.local/interop/gen/runhook/v1"
)

const (
	ongoingRunIDKey = "runhook-ongoing-run-id"
	runTimeout      = 60 * time.Second
	callTimeout     = 15 * time.Second
)

type config struct {
	addr, webhookURL, userToken, apiToken, project, environment, collection, recordID string
}

type result struct {
	Client           string  `json:"client"`
	OK               bool    `json:"ok"`
	RunID            string  `json:"runId"`
	OngoingRunID     string  `json:"ongoingRunId"`
	OngoingRunIDIn   string  `json:"ongoingRunIdIn"`
	OngoingRunDetail bool    `json:"ongoingRunDetail"`
	FinalState       string  `json:"finalState"`
	Watched          string  `json:"watchedWith"`
	RunSeconds       float64 `json:"runSeconds"`
	ActivityLogs     int     `json:"activityLogs"`
	TriggeredLogID   string  `json:"triggeredLogId"`
	NoteID           string  `json:"noteId"`
	ListedRunID      string  `json:"listedRunId"`
}

type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.step + ": " + e.err.Error() }

func fail(step string, format string, args ...any) error {
	return &stepError{step: step, err: fmt.Errorf(format, args...)}
}

func main() {
	cfg, err := loadConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "interop(go): configuration: %v\n", err)
		os.Exit(2)
	}
	res, err := run(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "interop(go): FAIL %v\n", err)
		os.Exit(1)
	}
	line, _ := json.Marshal(res)
	fmt.Println(string(line))
}

func loadConfig() (config, error) {
	var missing []string
	get := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			missing = append(missing, name)
		}
		return v
	}
	cfg := config{
		addr:        get("RUNHOOK_GRPC_ADDR"),
		webhookURL:  get("RUNHOOK_WEBHOOK_URL"),
		userToken:   get("RUNHOOK_USER_TOKEN"),
		apiToken:    get("RUNHOOK_API_TOKEN"),
		project:     get("RUNHOOK_PROJECT"),
		environment: get("RUNHOOK_ENVIRONMENT"),
		collection:  get("RUNHOOK_COLLECTION"),
		recordID:    get("RUNHOOK_RECORD_ID"),
	}
	if len(missing) > 0 {
		return cfg, fmt.Errorf("missing environment variables: %v", missing)
	}
	return cfg, nil
}

// withToken returns a context that sends `authorization: Bearer <token>`.
func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func run(cfg config) (*result, error) {
	conn, err := grpc.NewClient(cfg.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fail("connect", "%v", err)
	}
	defer conn.Close()

	trigger := runhookv1.NewTriggerServiceClient(conn)
	runs := runhookv1.NewRunServiceClient(conn)
	logs := runhookv1.NewLogServiceClient(conn)
	notes := runhookv1.NewNoteServiceClient(conn)
	res := &result{Client: "go"}
	bg := context.Background()

	// 1. Trigger a run.
	ctx, cancel := context.WithTimeout(withToken(bg, cfg.userToken), callTimeout)
	started := time.Now()
	tr, err := trigger.TriggerRun(ctx, &runhookv1.TriggerRunRequest{WebhookUrl: cfg.webhookURL, RecordId: cfg.recordID})
	cancel()
	if err != nil {
		return nil, fail("TriggerRun", "%v", err)
	}
	if tr.GetRunId() == "" {
		return nil, fail("TriggerRun", "empty run_id")
	}
	res.RunID = tr.GetRunId()

	// 2. Trigger again while the run is ongoing: ALREADY_EXISTS with the ongoing run id.
	var header, trailer metadata.MD
	ctx, cancel = context.WithTimeout(withToken(bg, cfg.userToken), callTimeout)
	_, err = trigger.TriggerRun(ctx, &runhookv1.TriggerRunRequest{WebhookUrl: cfg.webhookURL, RecordId: cfg.recordID},
		grpc.Header(&header), grpc.Trailer(&trailer))
	cancel()
	if err == nil {
		return nil, fail("TriggerRun (again)", "expected ALREADY_EXISTS, got OK")
	}
	st, _ := status.FromError(err)
	if st.Code() != codes.AlreadyExists {
		return nil, fail("TriggerRun (again)", "expected ALREADY_EXISTS, got %v", err)
	}
	if v := trailer.Get(ongoingRunIDKey); len(v) > 0 {
		res.OngoingRunID, res.OngoingRunIDIn = v[0], "trailer"
	} else if v := header.Get(ongoingRunIDKey); len(v) > 0 {
		// Accepted but reported: the contract puts it in trailing metadata.
		res.OngoingRunID, res.OngoingRunIDIn = v[0], "header"
	}
	if res.OngoingRunID != res.RunID {
		return nil, fail("TriggerRun (again)", "metadata %s = %q, want %q (trailer %v, header %v)",
			ongoingRunIDKey, res.OngoingRunID, res.RunID, trailer, header)
	}
	for _, d := range st.Details() {
		if o, ok := d.(*runhookv1.OngoingRun); ok && o.GetRunId() == res.RunID {
			res.OngoingRunDetail = true
		}
	}

	// 3. Follow the run until it is finished.
	final, how, err := waitFinished(runs, cfg.userToken, res.RunID)
	if err != nil {
		return nil, err
	}
	res.FinalState, res.Watched = final.GetState(), how
	res.RunSeconds = time.Since(started).Seconds()
	if final.GetState() != "SUCCEEDED" {
		return nil, fail("run", "run %s finished %s: %s", res.RunID, final.GetState(), final.GetError())
	}

	// 4. Activity logs of the run (project API token).
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel = context.WithTimeout(withToken(bg, cfg.apiToken), callTimeout)
		lr, err := logs.ListActivityLogs(ctx, &runhookv1.ListActivityLogsRequest{
			ProjectName:     cfg.project,
			EnvironmentName: cfg.environment,
			Filter:          &runhookv1.ActivityLogFilter{RunId: res.RunID},
		})
		cancel()
		if err != nil {
			return nil, fail("ListActivityLogs", "%v", err)
		}
		res.ActivityLogs = len(lr.GetActivityLogs())
		for _, e := range lr.GetActivityLogs() {
			if e.GetAction() == "workflow.run.triggered" {
				res.TriggeredLogID = e.GetId()
			}
		}
		if res.TriggeredLogID != "" {
			break
		}
		if time.Now().After(deadline) {
			return nil, fail("ListActivityLogs", "no workflow.run.triggered entry for run %s among %d entries", res.RunID, res.ActivityLogs)
		}
		time.Sleep(250 * time.Millisecond)
	}

	// 5. Create a note on the record (project API token).
	ctx, cancel = context.WithTimeout(withToken(bg, cfg.apiToken), callTimeout)
	nr, err := notes.CreateNote(ctx, &runhookv1.CreateNoteRequest{
		Scope:      &runhookv1.NoteScope{ProjectName: cfg.project, EnvironmentName: cfg.environment},
		Collection: cfg.collection,
		RecordId:   cfg.recordID,
		Content:    "<p>hi</p>",
	})
	cancel()
	if err != nil {
		return nil, fail("CreateNote", "%v", err)
	}
	if nr.GetNote().GetId() == "" {
		return nil, fail("CreateNote", "empty note id")
	}
	res.NoteID = nr.GetNote().GetId()

	// 6. Find the run again among the runs of its workflow on the record.
	ctx, cancel = context.WithTimeout(withToken(bg, cfg.userToken), callTimeout)
	lr, err := runs.ListRuns(ctx, &runhookv1.ListRunsRequest{
		ProjectName:     cfg.project,
		EnvironmentName: cfg.environment,
		Options:         &runhookv1.ListOptions{Limit: 10},
		Filter: &runhookv1.RunFilter{
			WorkflowId: final.GetWorkflowId(),
			Collection: cfg.collection,
			RecordId:   cfg.recordID,
			States:     []string{"SUCCEEDED"},
		},
	})
	cancel()
	if err != nil {
		return nil, fail("ListRuns", "%v", err)
	}
	for _, r := range lr.GetRuns() {
		if r.GetId() == res.RunID && r.GetState() == "SUCCEEDED" {
			res.ListedRunID = r.GetId()
		}
	}
	if res.ListedRunID == "" {
		return nil, fail("ListRuns", "run %s not among the %d runs listed", res.RunID, len(lr.GetRuns()))
	}
	res.OK = true
	return res, nil
}

func finished(state string) bool {
	return state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED"
}

// waitFinished follows the run with WatchRun; if the server does not implement
// it, with GetRun long-polling. It gives up after runTimeout.
func waitFinished(runs runhookv1.RunServiceClient, token, runID string) (*runhookv1.Run, string, error) {
	ctx, cancel := context.WithTimeout(withToken(context.Background(), token), runTimeout)
	defer cancel()

	stream, err := runs.WatchRun(ctx, &runhookv1.WatchRunRequest{RunId: runID})
	if err == nil {
		var last *runhookv1.Run
		for {
			msg, err := stream.Recv()
			if err == nil {
				last = msg.GetRun()
				if finished(last.GetState()) {
					return last, "WatchRun", nil
				}
				continue
			}
			if errors.Is(err, io.EOF) {
				if last != nil && finished(last.GetState()) {
					return last, "WatchRun", nil
				}
				return nil, "", fail("WatchRun", "stream ended before the run finished (last state %q)", last.GetState())
			}
			if status.Code(err) == codes.Unimplemented && last == nil {
				break // fall back to GetRun
			}
			if status.Code(err) == codes.DeadlineExceeded {
				return nil, "", fail("WatchRun", "run %s not finished after %v (last state %q)", runID, runTimeout, last.GetState())
			}
			return nil, "", fail("WatchRun", "%v", err)
		}
	} else if status.Code(err) != codes.Unimplemented {
		return nil, "", fail("WatchRun", "%v", err)
	}

	var version uint64
	for {
		gr, err := runs.GetRun(ctx, &runhookv1.GetRunRequest{RunId: runID, WaitSeconds: 10, KnownVersion: version})
		if err != nil {
			return nil, "", fail("GetRun", "%v", err)
		}
		if finished(gr.GetRun().GetState()) {
			return gr.GetRun(), "GetRun", nil
		}
		if gr.GetRun().GetVersion() == version {
			time.Sleep(200 * time.Millisecond) // server does not long-poll: do not spin
		}
		version = gr.GetRun().GetVersion()
	}
}
