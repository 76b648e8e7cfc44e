package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/protocol"
)

// Mesh modes: how clients of the broker authenticate.
const (
	ModeOpen = "open" // no credentials; loopback development meshes
	ModeAuth = "auth" // operator-mode JWTs, one account per space
)

// ErrNoMesh reports that a project has no mesh record: nothing was started with `cotal up`
// there, or it was stopped.
var ErrNoMesh = errors.New("no mesh recorded")

// Mesh records what `cotal up` serves from this project, so later commands find it.
type Mesh struct {
	Server   string    `json:"server"`        // client URL, e.g. nats://127.0.0.1:4222
	Mode     string    `json:"mode"`          // ModeOpen or ModeAuth
	Spaces   []string  `json:"spaces"`        // spaces provisioned on this broker, first = default
	StoreDir string    `json:"storeDir"`      // JetStream store of the broker
	Root     string    `json:"root"`          // project folder that started the broker
	PID      int       `json:"pid,omitempty"` // broker process, when it runs detached
	Started  time.Time `json:"ts"`            // when the broker started
	// TLSCA is the CA file (PEM) clients check the broker's TLS certificate against, when
	// it serves TLS and was started with --tls-ca; "" means the system's roots.
	TLSCA string `json:"tlsCA,omitempty"`
}

// Validate checks that m names a server, a known mode, at least one valid space, a root and
// a start time, and lists everything missing or wrong in one error.
func (m *Mesh) Validate() error {
	var missing, bad []string
	if m.Server == "" {
		missing = append(missing, "server")
	}
	switch m.Mode {
	case "":
		missing = append(missing, "mode")
	case ModeOpen, ModeAuth:
	default:
		bad = append(bad, fmt.Sprintf("mode %q (want %q or %q)", m.Mode, ModeOpen, ModeAuth))
	}
	if len(m.Spaces) == 0 {
		missing = append(missing, "spaces")
	}
	for _, s := range m.Spaces {
		if err := protocol.CheckSpace(s); err != nil {
			bad = append(bad, err.Error())
		}
	}
	if m.Root == "" {
		missing = append(missing, "root")
	}
	if m.Started.IsZero() {
		missing = append(missing, "ts")
	}
	if m.PID < 0 {
		bad = append(bad, fmt.Sprintf("pid %d", m.PID))
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "missing "+strings.Join(missing, ", "))
	}
	if len(bad) > 0 {
		parts = append(parts, "invalid "+strings.Join(bad, "; "))
	}
	if len(parts) > 0 {
		return errors.New(strings.Join(parts, "; "))
	}
	return nil
}

// ReadMesh reads the project's mesh record. It wraps ErrNoMesh when there is none; a torn
// or invalid file is an error naming the file and what is wrong with it (for missing
// fields, each one). The record's Root is returned as stored, even if the project moved.
func (p *Project) ReadMesh() (*Mesh, error) {
	path := p.MeshFile()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s (no %s); run `cotal up` there", ErrNoMesh, p.Root, path)
	}
	if err != nil {
		return nil, fmt.Errorf("read mesh record: %w", err)
	}
	var m Mesh
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("mesh record %s: decode JSON (torn or hand-edited?): %w", path, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("mesh record %s: %w", path, err)
	}
	return &m, nil
}

// WriteMesh validates m and writes it as the project's mesh record, atomically, mode 0600.
// An invalid record is refused and the stored one is left as it was.
func (p *Project) WriteMesh(m *Mesh) error {
	path := p.MeshFile()
	if err := m.Validate(); err != nil {
		return fmt.Errorf("write mesh record %s: %w", path, err)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("write mesh record %s: encode: %w", path, err)
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o600)
}

// RemoveMesh deletes the project's mesh record; a record already gone is not an error.
func (p *Project) RemoveMesh() error {
	if err := os.Remove(p.MeshFile()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove mesh record: %w", err)
	}
	return nil
}
