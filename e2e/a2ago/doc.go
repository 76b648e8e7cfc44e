// Package a2ago tests the A2A gateway (package a2agw) with the official A2A Go SDK
// (github.com/a2aproject/a2a-go) as the outside caller. It is a module of its own so the
// SDK's dependencies (gRPC, protobuf) stay out of cotal's go.mod; run it with
// `cd e2e/a2ago && go test -race ./...`.
package a2ago
