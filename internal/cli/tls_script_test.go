package cli_test

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cotal-ai/cotal/internal/tlstest"
)

// cmdTLSCerts writes a throwaway CA and a loopback server certificate into a folder:
// tlscerts DIR makes DIR/ca.pem, DIR/cert.pem and DIR/key.pem.
func cmdTLSCerts(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: tlscerts DIR")
	}
	if _, err := tlstest.Write(ts.MkAbs(args[0]), time.Now()); err != nil {
		ts.Fatalf("tlscerts: %v", err)
	}
}

// cmdMeshURL sets $VAR to the server URL the project's mesh record (.cotal/mesh.json in
// the current folder) names, and $VAR_PORT to its port:
//
//	meshurl VAR
func cmdMeshURL(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: meshurl VAR")
	}
	var m struct {
		Server string `json:"server"`
	}
	if err := json.Unmarshal([]byte(ts.ReadFile(".cotal/mesh.json")), &m); err != nil || m.Server == "" {
		ts.Fatalf("meshurl: .cotal/mesh.json: %v", err)
	}
	ts.Setenv(args[0], m.Server)
	ts.Setenv(args[0]+"_PORT", m.Server[strings.LastIndex(m.Server, ":")+1:])
}
