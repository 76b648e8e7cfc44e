package cli

import (
	"testing"

	"github.com/spf13/cobra"
)

// noCreds are the commands with --server that connect, yet take no --creds (or no
// --tls-ca), and why.
var noCreds = map[string]string{
	// --server is the URL the mesh it starts listens on; it dials only its own broker.
	"cotal up": "starts the mesh",
	// The auth service connects with the space's callout keys from the project's trust
	// chain: no user credential stands in for them.
	"cotal auth-service": "connects with the project's callout keys",
	// The manager mints its seats' credentials from the project's keys, so a foreign
	// credential could not run a seat; --tls-ca it takes.
	"cotal supervise": "connects with the project's keys",
	// It writes a unit file; the manager that unit runs is cotal supervise (see above),
	// reading the CA from the project's mesh record.
	"cotal service install": "writes a unit, connects to nothing",
	// It mints the agent's credential from the project's keys (a seat of the manager, with
	// --detach, is minted by the manager the same way); --tls-ca it takes.
	"cotal spawn": "mints with the project's keys",
}

// TestConnectingCommandsTakeCredsAndTLSCA walks the command tree: every command that
// talks to a mesh (it takes --server) also takes --creds and --tls-ca, so it reaches a
// mesh this project did not start, on TLS with a private CA, as any other command does.
func TestConnectingCommandsTakeCredsAndTLSCA(t *testing.T) {
	n := 0
	seen := map[string]bool{}
	walk(testRoot(), func(c *cobra.Command) {
		if c.Flags().Lookup("server") == nil {
			return
		}
		n++
		path := c.CommandPath()
		if _, ok := noCreds[path]; ok {
			seen[path] = true
			if (path == "cotal supervise" || path == "cotal spawn") && c.Flags().Lookup("tls-ca") == nil {
				t.Errorf("%s: no --tls-ca", path)
			}
			return
		}
		for _, name := range []string{"creds", "tls-ca"} {
			if c.Flags().Lookup(name) == nil {
				t.Errorf("%s connects (--server) but takes no --%s", path, name)
			}
		}
	})
	for path := range noCreds {
		if !seen[path] {
			t.Errorf("%s is excused from --creds but takes no --server (any more): drop it from noCreds", path)
		}
	}
	if n < 20 {
		t.Fatalf("walked %d commands with --server; the CLI has more", n)
	}
}
