package workspace

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/testclock"
)

func openProject(t *testing.T) *Project {
	t.Helper()
	p, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func validMesh(t *testing.T, p *Project) *Mesh {
	return &Mesh{
		Server:   "nats://127.0.0.1:4222",
		Mode:     ModeAuth,
		Spaces:   []string{"prod", "dev"},
		StoreDir: p.StoreDir(),
		Root:     p.Root,
		PID:      4242,
		Started:  testclock.Epoch(t).Add(123), // nanoseconds: the round trip keeps them
	}
}

func TestMeshRoundTrip(t *testing.T) {
	p := openProject(t)
	if _, err := p.ReadMesh(); !errors.Is(err, ErrNoMesh) {
		t.Fatalf("ReadMesh before write: %v, want ErrNoMesh", err)
	}
	want := validMesh(t, p)
	if err := p.WriteMesh(want); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p.MeshFile())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mesh.json mode %v, want 0600", fi.Mode().Perm())
	}
	got, err := p.ReadMesh()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read %+v\nwrote %+v", got, want)
	}
	for range 2 { // the second removal finds nothing and is fine
		if err := p.RemoveMesh(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.ReadMesh(); !errors.Is(err, ErrNoMesh) {
		t.Fatalf("ReadMesh after remove: %v, want ErrNoMesh", err)
	}
}

func TestReadMeshInvalid(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []string // substrings of the error, besides the file name
	}{
		{"torn JSON", `{"server":"nats://127.0.0.1:4222","mo`, []string{"decode JSON", "unexpected end of JSON input"}},
		{"empty file", ``, []string{"decode JSON"}},
		{"wrong type", `{"pid":"x"}`, []string{"decode JSON"}},
		{"null", `null`, []string{"missing server, mode, spaces, root, ts"}},
		{"missing fields", `{"server":"nats://127.0.0.1:4222","spaces":[]}`, []string{"missing mode, spaces, root, ts"}},
		{"bad mode and space", `{"server":"s","mode":"user","spaces":["a b"],"root":"/r","ts":"` + testclock.Epoch(t).Format(time.RFC3339) + `"}`,
			[]string{`invalid mode "user"`, `invalid space name "a b"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := openProject(t)
			if err := os.WriteFile(p.MeshFile(), []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			m, err := p.ReadMesh()
			if err == nil || errors.Is(err, ErrNoMesh) {
				t.Fatalf("ReadMesh = %+v, %v; want an invalid-record error", m, err)
			}
			for _, want := range append(tt.want, p.MeshFile()) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

func TestWriteMeshRefusesInvalid(t *testing.T) {
	p := openProject(t)
	good := validMesh(t, p)
	if err := p.WriteMesh(good); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(*Mesh)
		want string
	}{
		{"no server", func(m *Mesh) { m.Server = "" }, "missing server"},
		{"no spaces", func(m *Mesh) { m.Spaces = nil }, "missing spaces"},
		{"bad space", func(m *Mesh) { m.Spaces = []string{"prod", "x.y"} }, `invalid space name "x.y"`},
		{"no ts", func(m *Mesh) { m.Started = time.Time{} }, "missing ts"},
		{"bad mode", func(m *Mesh) { m.Mode = "OPEN" }, `invalid mode "OPEN"`},
		{"negative pid", func(m *Mesh) { m.PID = -1 }, "invalid pid -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := *validMesh(t, p)
			tt.edit(&m)
			err := p.WriteMesh(&m)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("WriteMesh err = %v, want it to contain %q", err, tt.want)
			}
			got, err := p.ReadMesh()
			if err != nil || !reflect.DeepEqual(got, good) {
				t.Fatalf("stored record changed: %+v, %v", got, err)
			}
		})
	}
}
