package interop

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/cotal-ai/cotal/manager"
	"github.com/cotal-ai/cotal/mgrclient"
)

// The commands Go's manager serves on the ep rails (what its cluster document lists).
var goServed = []string{"status", "ps", "inspect", "spawn", "despawn", "input", "stop", "resolve-cwd", "list-personas", "show-persona"}

// TestManagerDescribeShapes: Go reads the reference's describe request, its describe
// answer encodes to the fixture's bytes and holds to the reference's cluster-document
// rules (parseClusterDocument) with the reference's pinned digest for every command, and
// the service record's two halves decode and encode as the fixtures.
func TestManagerDescribeShapes(t *testing.T) {
	r, perr := mgrclient.ParseEPRequest(mgrFixture(t, "describe.request.json"))
	if perr != nil || r.Op.Command != "describe" || r.Op.InputDigest != "" {
		t.Fatalf("describe request: %+v %v", r, perr)
	}

	c, err := mgrclient.NewEPContract(goServed)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(c.Describe("local"))
	got, _ := json.Marshal(map[string]any{"v": 1, "id": "req-4", "ok": true, "data": json.RawMessage(data)})
	if canonical(t, got) != canonical(t, mgrFixture(t, "describe.reply.json")) {
		t.Errorf("Go's describe answer\n got %s\nwant %s", canonical(t, got), mgrFixture(t, "describe.reply.json"))
	}

	var reply struct {
		V    int  `json:"v"`
		OK   bool `json:"ok"`
		Data struct {
			Public     *bool `json:"public"`
			Descriptor struct {
				Endpoint string `json:"endpoint"`
				Owner    string `json:"owner"`
				Protocol struct {
					V int `json:"v"`
				} `json:"protocol"`
				Clusters []struct {
					Digest   string          `json:"digest"`
					Commands []string        `json:"commands"`
					Document json.RawMessage `json:"document"`
				} `json:"clusters"`
			} `json:"descriptor"`
		} `json:"data"`
	}
	if err := json.Unmarshal(mgrFixture(t, "describe.reply.json"), &reply); err != nil || !reply.OK || reply.Data.Public == nil ||
		reply.Data.Descriptor.Endpoint != "manager" || reply.Data.Descriptor.Protocol.V != 1 || len(reply.Data.Descriptor.Clusters) != 1 {
		t.Fatalf("describe reply %+v (%v)", reply, err)
	}
	cl := reply.Data.Descriptor.Clusters[0]
	// The cluster digest is the closure over the inline document.
	var doc any
	if err := json.Unmarshal(cl.Document, &doc); err != nil {
		t.Fatal(err)
	}
	if mgrclient.ClosureDigest(cl.Document) != cl.Digest {
		t.Errorf("cluster digest %s is not the closure of the document", cl.Digest)
	}
	checkClusterDocument(t, cl.Document, cl.Commands)

	spec := mgrFixture(t, "service.spec.json")
	var s manager.ServiceSpec
	if err := json.Unmarshal(spec, &s); err != nil || s.Endpoint != "manager" || len(s.ClusterDigests) != 1 || s.ClusterDigests[0] != c.ClusterDigest || s.Protocol.V != 1 {
		t.Fatalf("service spec %+v (%v)", s, err)
	}
	if b, _ := json.Marshal(s); canonical(t, b) != canonical(t, spec) {
		t.Errorf("Go encodes the spec as %s", b)
	}
	status := mgrFixture(t, "service.status.json")
	var st manager.ServiceStatus
	if err := json.Unmarshal(status, &st); err != nil || st.Epoch != 7 || st.State != "ready" || st.ObservedSpecRevision != 3 {
		t.Fatalf("service status %+v (%v)", st, err)
	}
	if b, _ := json.Marshal(st); canonical(t, b) != canonical(t, status) {
		t.Errorf("Go encodes the status as %s", b)
	}
}

var (
	clusterURN = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}(\.[a-z0-9][a-z0-9-]{0,62}){1,15}$`)
	capToken   = regexp.MustCompile(`^[a-z][a-z0-9._-]{0,63}$`)
	digestRe   = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// checkClusterDocument holds a cluster document to the reference's parseClusterDocument
// (endpoint-cluster.ts) and each command's digests to the reference's pins.
func checkClusterDocument(t *testing.T, raw json.RawMessage, listed []string) {
	t.Helper()
	var d struct {
		URN        string            `json:"urn"`
		Revision   *int              `json:"revision"`
		Attributes []any             `json:"attributes"`
		Events     []any             `json:"events"`
		Commands   []json.RawMessage `json:"commands"`
	}
	if err := json.Unmarshal(raw, &d); err != nil || !clusterURN.MatchString(d.URN) || d.Revision == nil || *d.Revision < 0 ||
		d.Attributes == nil || d.Events == nil || len(d.Commands) == 0 {
		t.Fatalf("cluster document %s (%v)", raw, err)
	}
	seen := map[string]bool{}
	for i, rc := range d.Commands {
		var c map[string]any
		if err := json.Unmarshal(rc, &c); err != nil {
			t.Fatal(err)
		}
		name, _ := c["name"].(string)
		targeted, isBool := c["targeted"].(bool)
		modes, hasModes := c["modes"].([]any)
		capability, _ := c["capability"].(string)
		in, _ := c["inputDigest"].(string)
		out, _ := c["outputDigest"].(string)
		switch {
		case name == "" || name == "describe" || seen[name] || name != listed[i]:
			t.Errorf("command %d name %q", i, name)
		case c["class"] != "ephemeral" && c["class"] != "journal":
			t.Errorf("%s: class %v", name, c["class"])
		case !isBool || targeted != (hasModes && len(modes) > 0) || (!targeted && c["modes"] != nil):
			t.Errorf("%s: targeted %v with modes %v", name, c["targeted"], c["modes"])
		case !capToken.MatchString(capability) || !digestRe.MatchString(in) || !digestRe.MatchString(out):
			t.Errorf("%s: capability %q, digests %q %q", name, capability, in, out)
		}
		if pin, ok := refPins[name]; ok && (pin[0] != in || pin[1] != out) {
			t.Errorf("%s: digests %s %s, the reference pins %s %s", name, in, out, pin[0], pin[1])
		}
		seen[name] = true
	}
}
