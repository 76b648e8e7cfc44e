package userauth_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClientLinksNoServer checks that the client side of user auth links no server: the
// dependencies of userauth and meshreg (what an embedder signing in with the SDK, or the
// CLI, builds in) hold neither the exchange server nor the ledger nor the bearer issuer.
// They share only the wire (exchangewire) with the server.
func TestClientLinksNoServer(t *testing.T) {
	// go test puts its own GOROOT/bin first on the PATH of the test binary.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool to list dependencies with: %v", err)
	}
	const mod = "github.com/cotal-ai/cotal/"
	forbidden := []string{mod + "exchange", mod + "ledger", mod + "bearer"}
	for _, pkg := range []string{mod + "userauth", mod + "meshreg"} {
		out, err := exec.CommandContext(t.Context(), goTool, "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) == 0 {
			t.Fatalf("go list -deps %s listed nothing", pkg)
		}
		for _, dep := range deps {
			for _, f := range forbidden {
				if dep == f {
					t.Errorf("%s depends on %s, a server package", pkg, dep)
				}
			}
		}
	}
}
