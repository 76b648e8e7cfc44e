package mgrclient

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cotal-ai/cotal/protocol"
)

// What a reference caller needs to find and call the manager with its generic invoker
// (packages/core/src/endpoint-invoke.ts resolveService, invokeCommand): the answer to the
// reserved describe command, and the contract artifacts it fetches from the contract store
// (endpoint-contract-store.ts: one canonical JSON artifact per subject
// cotal.<space>.epc.<sha256 hex of its bytes>, stream EPC_<space>).

// EPClusterCommand is one command of a cluster document (endpoint-cluster.ts
// ClusterCommand): its class, whether it is targeted and its modes, its capability, and
// the closure digests of its input and output schemas.
type EPClusterCommand struct {
	Name         string   `json:"name"`
	Class        string   `json:"class"`
	Targeted     bool     `json:"targeted"`
	Modes        []string `json:"modes,omitempty"`
	Capability   string   `json:"capability"`
	InputDigest  string   `json:"inputDigest"`
	OutputDigest string   `json:"outputDigest"`
}

// EPClusterDocument is a cluster document (endpoint-cluster.ts ClusterDocument).
type EPClusterDocument struct {
	URN        string             `json:"urn"`
	Revision   int                `json:"revision"`
	Attributes []any              `json:"attributes"`
	Commands   []EPClusterCommand `json:"commands"`
	Events     []any              `json:"events"`
}

// EPDescribeCluster is one served cluster of a describe answer: its closure digest, the
// commands the caller may see, and the document inline.
type EPDescribeCluster struct {
	Digest   string            `json:"digest"`
	Commands []string          `json:"commands"`
	Document EPClusterDocument `json:"document"`
}

// EPDescriptor is the describe answer's descriptor (endpoint-cluster.ts
// DescribeDescriptor, deriveDescriptor).
type EPDescriptor struct {
	Endpoint string              `json:"endpoint"`
	Owner    string              `json:"owner"`
	Protocol EPProtocol          `json:"protocol"`
	Clusters []EPDescribeCluster `json:"clusters"`
}

// EPProtocol is the discovery protocol version of a descriptor or service record.
type EPProtocol struct {
	V int `json:"v"`
}

// EPDescribeAnswer is the data of a describe reply (what resolveService reads): whether
// the surface is public, and the descriptor.
type EPDescribeAnswer struct {
	Public     bool         `json:"public"`
	Descriptor EPDescriptor `json:"descriptor"`
}

// EPContract is the manager's registered contract over the commands it serves: the
// cluster document, its closure digest, and every artifact a caller fetches to verify it,
// by the hex of its digest.
type EPContract struct {
	Cluster       EPClusterDocument
	ClusterDigest string            // the closure digest of the cluster document
	Artifacts     map[string][]byte // sha256 hex -> canonical bytes
}

// NewEPContract builds the contract of the commands served (names of the manager's
// command table, in its order): each command's input and output schema and their
// one-root closure manifests, the cluster document (cluster ai.cotal.manager at Go's
// revision of the schemas) and its manifest.
func NewEPContract(served []string) (EPContract, error) {
	c := EPContract{Artifacts: map[string][]byte{}}
	c.Cluster = EPClusterDocument{URN: EPClusterURN, Revision: EPClusterRevision, Attributes: []any{}, Events: []any{}}
	add := func(v any) (string, error) {
		b, err := CanonicalJSON(v)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(b)
		h := hex.EncodeToString(sum[:])
		c.Artifacts[h] = b
		return "sha256:" + h, nil
	}
	closure := func(v any) (string, error) {
		root, err := add(v)
		if err != nil {
			return "", err
		}
		return add(map[string]any{"v": 1, "root": root, "members": []any{}})
	}
	for _, row := range epCommands {
		if !slices.Contains(served, row.name) {
			continue
		}
		in, err := closure(json.RawMessage(row.input))
		if err != nil {
			return EPContract{}, fmt.Errorf("contract of %s: input: %w", row.name, err)
		}
		out, err := closure(json.RawMessage(row.output))
		if err != nil {
			return EPContract{}, fmt.Errorf("contract of %s: output: %w", row.name, err)
		}
		c.Cluster.Commands = append(c.Cluster.Commands, EPClusterCommand{Name: row.name, Class: "ephemeral",
			Targeted: len(row.modes) > 0, Modes: row.modes, Capability: row.capability, InputDigest: in, OutputDigest: out})
	}
	if len(c.Cluster.Commands) == 0 {
		return EPContract{}, fmt.Errorf("contract: none of %s is a command of the manager", strings.Join(served, ", "))
	}
	d, err := closure(c.Cluster)
	if err != nil {
		return EPContract{}, fmt.Errorf("contract: cluster document: %w", err)
	}
	c.ClusterDigest = d
	return c, nil
}

// Describe is the answer to describe for a caller who may see every served command.
func (c EPContract) Describe(owner string) EPDescribeAnswer {
	names := make([]string, 0, len(c.Cluster.Commands))
	for _, cmd := range c.Cluster.Commands {
		names = append(names, cmd.Name)
	}
	return EPDescribeAnswer{Descriptor: EPDescriptor{Endpoint: EPEndpoint, Owner: owner, Protocol: EPProtocol{V: 1},
		Clusters: []EPDescribeCluster{{Digest: c.ClusterDigest, Commands: names, Document: c.Cluster}}}}
}

// EPArtifactSubject is the contract-store subject of the artifact whose digest is
// sha256:<hexDigest> (endpoint-subjects.ts epcSubject).
func EPArtifactSubject(space, hexDigest string) string {
	return protocol.Root + "." + space + ".epc." + hexDigest
}
