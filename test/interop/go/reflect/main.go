// Command reflect is a gRPC client that knows nothing of runhook's protos: like
// grpcurl, it learns the API from server reflection on ONE stream that it keeps
// open (it never half-closes between requests), then calls the API with dynamic
// messages. Over native gRPC (HTTP/2, plaintext):
//
//  1. grpc.reflection.v1: list_services; file_containing_symbol for
//     runhook.v1.TriggerService and runhook.v1.RunService (with dependencies);
//     the same list_services over grpc.reflection.v1alpha
//  2. describes TriggerService.TriggerRun and RunService.WatchRun (types,
//     streaming, request fields), as `grpcurl describe` does
//  3. TriggerRun(webhook_url, record_id) with a request built from JSON
//  4. WatchRun(run_id) until the run is finished
//  5. the reflection stream, still open, answers once more
//  6. grpc.health.v1.Health Check("") and the first message of Watch("")
//
// Configuration (environment): RUNHOOK_GRPC_ADDR, RUNHOOK_WEBHOOK_URL,
// RUNHOOK_USER_TOKEN, RUNHOOK_RECORD_ID. Prints one JSON line and exits 0, or
// "reflect(go): FAIL <step>: <reason>" on stderr and exits 1.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionalphapb "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

type methodInfo struct {
	Name         string   `json:"name"`
	Input        string   `json:"input"`
	Output       string   `json:"output"`
	ServerStream bool     `json:"serverStream"`
	ClientStream bool     `json:"clientStream"`
	InputFields  []string `json:"inputFields"`
}

type result struct {
	Client        string       `json:"client"`
	Services      []string     `json:"services"`
	AlphaServices []string     `json:"alphaServices"`
	Methods       []methodInfo `json:"methods"`
	RunID         string       `json:"runId"`
	States        []string     `json:"states"`
	StillOpen     bool         `json:"reflectionStillOpen"`
	Health        string       `json:"health"`
	HealthWatch   string       `json:"healthWatch"`
}

func fail(step string, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "reflect(go): FAIL %s: %s\n", step, fmt.Sprintf(format, args...))
	os.Exit(1)
}

// reflector asks questions on one open ServerReflectionInfo stream.
type reflector struct {
	stream reflectionpb.ServerReflection_ServerReflectionInfoClient
}

func (r *reflector) ask(req *reflectionpb.ServerReflectionRequest) *reflectionpb.ServerReflectionResponse {
	if err := r.stream.Send(req); err != nil {
		fail("reflection", "send: %v", err)
	}
	res, err := r.stream.Recv()
	if err != nil {
		fail("reflection", "receive: %v", err)
	}
	if e := res.GetErrorResponse(); e != nil {
		fail("reflection", "error %d: %s", e.GetErrorCode(), e.GetErrorMessage())
	}
	return res
}

func (r *reflector) listServices() []string {
	res := r.ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	var names []string
	for _, s := range res.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	return names
}

// files resolves the files that define `symbols`, with their dependencies.
func (r *reflector) files(symbols ...string) *protoregistry.Files {
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	for _, sym := range symbols {
		res := r.ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: sym}})
		for _, raw := range res.GetFileDescriptorResponse().GetFileDescriptorProto() {
			fd := &descriptorpb.FileDescriptorProto{}
			if err := proto.Unmarshal(raw, fd); err != nil {
				fail("reflection", "file descriptor: %v", err)
			}
			if !seen[fd.GetName()] {
				seen[fd.GetName()] = true
				set.File = append(set.File, fd)
			}
		}
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		fail("reflection", "descriptors: %v", err)
	}
	return files
}

func method(files *protoregistry.Files, name string) protoreflect.MethodDescriptor {
	d, err := files.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		fail("describe", "%s: %v", name, err)
	}
	m, ok := d.(protoreflect.MethodDescriptor)
	if !ok {
		fail("describe", "%s is not a method", name)
	}
	return m
}

func describe(m protoreflect.MethodDescriptor) methodInfo {
	info := methodInfo{Name: string(m.FullName()), Input: string(m.Input().FullName()), Output: string(m.Output().FullName()), ServerStream: m.IsStreamingServer(), ClientStream: m.IsStreamingClient()}
	fields := m.Input().Fields()
	for i := 0; i < fields.Len(); i++ {
		info.InputFields = append(info.InputFields, fmt.Sprintf("%s %s = %d", fields.Get(i).Kind(), fields.Get(i).Name(), fields.Get(i).Number()))
	}
	return info
}

// request builds the input message of `m` from JSON, knowing only its descriptor.
func request(m protoreflect.MethodDescriptor, jsonText string) *dynamicpb.Message {
	msg := dynamicpb.NewMessage(m.Input())
	if err := protojson.Unmarshal([]byte(jsonText), msg); err != nil {
		fail("request", "%s: %v", m.FullName(), err)
	}
	return msg
}

func path(m protoreflect.MethodDescriptor) string {
	return fmt.Sprintf("/%s/%s", m.Parent().FullName(), m.Name())
}

func env(name string) string {
	v := os.Getenv(name)
	if v == "" {
		fmt.Fprintf(os.Stderr, "reflect(go): %s is not set\n", name)
		os.Exit(2)
	}
	return v
}

func main() {
	addr, webhookURL, token, recordID := env("RUNHOOK_GRPC_ADDR"), env("RUNHOOK_WEBHOOK_URL"), env("RUNHOOK_USER_TOKEN"), env("RUNHOOK_RECORD_ID")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail("connect", "%v", err)
	}
	defer conn.Close()
	out := result{Client: "go-reflect"}

	// 1. One reflection stream, kept open.
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		fail("reflection", "open: %v", err)
	}
	r := &reflector{stream}
	out.Services = r.listServices()
	files := r.files("runhook.v1.TriggerService", "runhook.v1.RunService")
	out.AlphaServices = alphaServices(ctx, conn)

	// 2. Describe.
	trigger, watch := method(files, "runhook.v1.TriggerService.TriggerRun"), method(files, "runhook.v1.RunService.WatchRun")
	out.Methods = []methodInfo{describe(trigger), describe(watch)}

	// 3. TriggerRun with a dynamic message.
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	reqJSON, _ := json.Marshal(map[string]string{"webhookUrl": webhookURL, "recordId": recordID})
	res := dynamicpb.NewMessage(trigger.Output())
	if err := conn.Invoke(authed, path(trigger), request(trigger, string(reqJSON)), res); err != nil {
		fail("TriggerRun", "%v", err)
	}
	out.RunID = res.Get(trigger.Output().Fields().ByName("run_id")).String()

	// 4. WatchRun until the run is finished.
	out.States = watchRun(authed, conn, watch, out.RunID)

	// 5. The reflection stream is still open and answers.
	out.StillOpen = len(r.listServices()) == len(out.Services)
	if err := stream.CloseSend(); err != nil {
		fail("reflection", "close: %v", err)
	}

	// 6. Health.
	out.Health, out.HealthWatch = health(ctx, conn)
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}

func alphaServices(ctx context.Context, conn *grpc.ClientConn) []string {
	s, err := reflectionalphapb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		fail("reflection v1alpha", "open: %v", err)
	}
	defer s.CloseSend()
	if err := s.Send(&reflectionalphapb.ServerReflectionRequest{MessageRequest: &reflectionalphapb.ServerReflectionRequest_ListServices{}}); err != nil {
		fail("reflection v1alpha", "send: %v", err)
	}
	res, err := s.Recv()
	if err != nil {
		fail("reflection v1alpha", "receive: %v", err)
	}
	var names []string
	for _, svc := range res.GetListServicesResponse().GetService() {
		names = append(names, svc.GetName())
	}
	return names
}

func watchRun(ctx context.Context, conn *grpc.ClientConn, m protoreflect.MethodDescriptor, runID string) []string {
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, path(m))
	if err != nil {
		fail("WatchRun", "open: %v", err)
	}
	if err := s.SendMsg(request(m, fmt.Sprintf(`{"runId": %q}`, runID))); err != nil {
		fail("WatchRun", "send: %v", err)
	}
	if err := s.CloseSend(); err != nil {
		fail("WatchRun", "close: %v", err)
	}
	runField := m.Output().Fields().ByName("run")
	var states []string
	for {
		msg := dynamicpb.NewMessage(m.Output())
		if err := s.RecvMsg(msg); err != nil {
			fail("WatchRun", "stream ended before the run finished (states %v): %v", states, err)
		}
		run := msg.Get(runField).Message()
		state := run.Get(run.Descriptor().Fields().ByName("state")).String()
		states = append(states, state)
		if state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED" {
			return states
		}
	}
}

func health(ctx context.Context, conn *grpc.ClientConn) (string, string) {
	client := healthpb.NewHealthClient(conn)
	check, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		fail("Health/Check", "%v", err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w, err := client.Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		fail("Health/Watch", "%v", err)
	}
	first, err := w.Recv()
	if err != nil {
		fail("Health/Watch", "%v", err)
	}
	return check.GetStatus().String(), first.GetStatus().String()
}
