package personas

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdtest"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/workspace"
)

func TestNewCmdNew(t *testing.T) {
	tests := []struct {
		args    []string
		want    NewOptions
		wantErr string
		refusal bool // the error is a *cmdutil.Refusal, not a usage error
	}{
		{args: []string{"dave", "--prompt", "Build."}, want: NewOptions{Name: "dave", Prompt: "Build."}},
		{args: []string{"dave", "--from", "p.txt", "--role", "builder", "--model", "opus", "--subscribe", "general", "--subscribe", "team.x",
			"--allow-subscribe", "team.>", "--allow-subscribe", "general", "--allow-publish", "general"},
			want: NewOptions{Name: "dave", From: "p.txt", Role: "builder", Model: "opus", Subscribe: []string{"general", "team.x"},
				AllowSubscribe: []string{"team.>", "general"}, AllowPublish: []string{"general"}}},
		{args: []string{"dave"}, wantErr: "a persona needs a prompt"},
		{args: []string{"dave", "--prompt", ""}, wantErr: "--prompt is empty"},
		{args: []string{"dave", "--prompt", "x", "--from", "f"}, wantErr: "use one"},
		{args: []string{"bob-1", "--prompt", "x"}, wantErr: `refusing persona name "bob-1"`, refusal: true},
		{args: []string{"dave", "--prompt", "x", "--role", "a b"}, wantErr: `--role: invalid role "a b"`},
		{args: []string{"dave", "--prompt", "x", "--subscribe", "team/x"}, wantErr: `--subscribe: invalid channel "team/x"`},
		{args: []string{"dave", "--prompt", "x", "--allow-publish", "a.>.b"}, wantErr: `--allow-publish: invalid channel "a.>.b"`},
		{args: []string{"--prompt", "x"}, wantErr: "no persona named"},
		{args: []string{"--name", "dave", "--prompt", "x"}, want: NewOptions{Name: "dave", Prompt: "x"}},
		{args: []string{"dave", "--name", "dave", "--prompt", "x"}, want: NewOptions{Name: "dave", Prompt: "x"}},
		{args: []string{"dave", "--name", "erin", "--prompt", "x"}, wantErr: `the name is given twice, as the argument "dave" and as --name "erin"`},
		{args: []string{"--name", "bob-1", "--prompt", "x"}, wantErr: `refusing persona name "bob-1"`, refusal: true},
		{args: []string{"dave", "erin", "--prompt", "x"}, wantErr: "accepts at most 1 arg"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := cmdtest.Capture(NewCmdNew, tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				var r *cmdutil.Refusal
				if errors.As(err, &r) != tt.refusal {
					t.Fatalf("err %T: refusal %v, want %v", err, !tt.refusal, tt.refusal)
				}
				if got != nil {
					t.Fatal("run was reached despite the error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tt.want.Name || got.Prompt != tt.want.Prompt || got.From != tt.want.From || got.Role != tt.want.Role ||
				got.Model != tt.want.Model || !reflect.DeepEqual(got.Subscribe, tt.want.Subscribe) ||
				!reflect.DeepEqual(got.AllowSubscribe, tt.want.AllowSubscribe) || !reflect.DeepEqual(got.AllowPublish, tt.want.AllowPublish) {
				t.Fatalf("opts %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNewCmdListShowRm(t *testing.T) {
	if o, err := cmdtest.Capture(NewCmdList, []string{"-v", "--json"}); err != nil || !o.Verbose || !o.JSON {
		t.Fatalf("list: %+v %v", o, err)
	}
	if _, err := cmdtest.Capture(NewCmdList, []string{"x"}); err == nil {
		t.Fatal("list took an argument")
	}
	if o, err := cmdtest.Capture(NewCmdShow, []string{"dave", "--json"}); err != nil || o.Name != "dave" || !o.JSON {
		t.Fatalf("show: %+v %v", o, err)
	}
	var r *cmdutil.Refusal
	if o, err := cmdtest.Capture(NewCmdShow, []string{"../x"}); !errors.As(err, &r) || o != nil || r.Next != "cotal personas list" {
		t.Fatalf("show ../x: %v", err)
	}
	if o, err := cmdtest.Capture(NewCmdRm, []string{"dave"}); err != nil || o.Name != "dave" || o.Force {
		t.Fatalf("rm: %+v %v", o, err)
	}
	if o, err := cmdtest.Capture(NewCmdRm, []string{"dave", "--force"}); err != nil || !o.Force {
		t.Fatalf("rm --force: %+v %v", o, err)
	}
	if _, err := cmdtest.Capture(NewCmdRm, nil); err == nil {
		t.Fatal("rm without a name")
	}
}

// env is a project-less folder with a machine home beside it, as the commands see them.
type env struct {
	dir, home string
	in        *strings.Reader
	ios       *iostreams.IOStreams
	out, errs *strings.Builder
}

func newEnv(t *testing.T) *env {
	t.Helper()
	root := t.TempDir()
	e := &env{dir: filepath.Join(root, "proj"), home: filepath.Join(root, "home", ".cotal")}
	if err := os.MkdirAll(e.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	e.reset("")
	return e
}

func (e *env) reset(stdin string) {
	e.in, e.out, e.errs = strings.NewReader(stdin), &strings.Builder{}, &strings.Builder{}
	e.ios = &iostreams.IOStreams{In: e.in, Out: e.out, ErrOut: e.errs}
}

func (e *env) getwd() (string, error) { return e.dir, nil }

func (e *env) getenv(k string) string {
	if k == "COTAL_HOME" {
		return e.home
	}
	return ""
}

func (e *env) newOpts(name string) *NewOptions {
	return &NewOptions{IO: e.ios, Getwd: e.getwd, Getenv: e.getenv, MachineHome: func() (string, error) { return e.home, nil }, Name: name}
}

func TestRunNewListShowRm(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	var r *cmdutil.Refusal

	// Outside a project: list shows nothing, show and rm refuse, nothing is created.
	if err := runList(ctx, &ListOptions{IO: e.ios, Getwd: e.getwd, Getenv: e.getenv}); err != nil || e.out.Len() != 0 ||
		!strings.Contains(e.errs.String(), "no personas: no .cotal/ found") {
		t.Fatalf("list: %v %q %q", err, e.out, e.errs)
	}
	if err := runShow(ctx, &ShowOptions{IO: e.ios, Getwd: e.getwd, Getenv: e.getenv, Name: "dave"}); !errors.As(err, &r) {
		t.Fatalf("show: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.dir, ".cotal")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("show created .cotal: %v", err)
	}

	// A join outside the read ACL is refused, with the command that fixes it.
	o := e.newOpts("dave")
	o.Prompt, o.Subscribe, o.AllowSubscribe = "Build.", []string{"general", "team.x"}, []string{"general"}
	if err := runNew(ctx, o); !errors.As(err, &r) ||
		r.Next != "cotal personas new dave --prompt Build. --subscribe general --subscribe team.x --allow-subscribe general --allow-subscribe team.x" {
		t.Fatalf("uncovered: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.dir, ".cotal")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused new created .cotal: %v", err)
	}

	// new creates the project and the file.
	o.AllowSubscribe = []string{"general", "team.>"}
	o.AllowPublish = []string{"general"}
	o.Role = "builder"
	if err := runNew(ctx, o); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.dir, ".cotal", "agents", "dave.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "---\nname: dave\nrole: builder\nkind: agent\nsubscribe: [general, team.x]\nallowSubscribe: [general, team.>]\nallowPublish: [general]\n---\nBuild.\n"
	if string(data) != want {
		t.Fatalf("file\n%s\nwant\n%s", data, want)
	}
	if !strings.Contains(e.out.String(), "created persona dave: "+path) || !strings.Contains(e.errs.String(), "created "+filepath.Join(e.dir, ".cotal")) {
		t.Fatalf("out %q err %q", e.out, e.errs)
	}

	// A second new refuses and leaves the file alone.
	o2 := e.newOpts("dave")
	o2.Prompt = "Other."
	if err := runNew(ctx, o2); !errors.As(err, &r) || r.Next != "cotal personas rm dave --force" {
		t.Fatalf("exists: %v", err)
	}
	if again, _ := os.ReadFile(path); string(again) != want {
		t.Fatal("the refused new changed the file")
	}

	// --from a persona file copies it under the new name; --from - reads a prompt.
	e.reset("Review carefully.")
	cp := e.newOpts("dave2")
	cp.From, cp.Role = ".cotal/agents/dave.md", "reviewer"
	if err := runNew(ctx, cp); err != nil {
		t.Fatal(err)
	}
	st := e.newOpts("rev")
	st.From = "-"
	if err := runNew(ctx, st); err != nil {
		t.Fatal(err)
	}
	proj := &workspace.Project{Root: e.dir}
	d2, err := proj.Persona("dave2")
	if err != nil || d2.Role != "reviewer" || d2.Prompt != "Build.\n" || !reflect.DeepEqual(d2.AllowSubscribe, []string{"general", "team.>"}) {
		t.Fatalf("copy: %+v %v", d2, err)
	}
	if rev, err := proj.Persona("rev"); err != nil || rev.Prompt != "Review carefully.\n" || !rev.ReadSetOmitted() || len(rev.ReadACL()) != 0 {
		t.Fatalf("stdin: %+v %v", rev, err)
	}

	// list marks an invalid file; --json carries its error.
	if err := os.WriteFile(filepath.Join(e.dir, ".cotal", "agents", "broken.md"), []byte("---\nname: broken\nrole: [x]\n---\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.reset("")
	if err := runList(ctx, &ListOptions{IO: e.ios, Getwd: e.getwd, Getenv: e.getenv}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(e.out.String()), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[1], "dave   builder   general, team.>  general") ||
		!strings.HasPrefix(lines[4], "broken  invalid: ") || !strings.Contains(lines[4], "broken.md:3: role: want a string, not a list") ||
		!strings.Contains(e.errs.String(), "1 invalid persona file") {
		t.Fatalf("list:\n%s\nstderr %s", e.out, e.errs)
	}
	e.reset("")
	if err := runList(ctx, &ListOptions{IO: e.ios, Getwd: e.getwd, Getenv: e.getenv, JSON: true}); err != nil {
		t.Fatal(err)
	}
	var items []map[string]any
	if err := json.Unmarshal([]byte(e.out.String()), &items); err != nil || len(items) != 4 || items[0]["name"] != "broken" ||
		!strings.Contains(items[0]["error"].(string), "broken.md:3:") || items[1]["role"] != "builder" {
		t.Fatalf("list --json: %v\n%s", err, e.out)
	}

	// show prints the card and the prompt; an invalid file is an error with its line.
	e.reset("")
	if err := runShow(ctx, &ShowOptions{IO: e.ios, Getwd: e.getwd, Getenv: e.getenv, Name: "dave"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name:         dave\n", "read:         general, team.>  (allowSubscribe)\n", "post:         general  (allowPublish)\n", "---\nBuild.\n"} {
		if !strings.Contains(e.out.String(), want) {
			t.Fatalf("show lacks %q:\n%s", want, e.out)
		}
	}
	if err := runShow(ctx, &ShowOptions{IO: e.ios, Getwd: e.getwd, Getenv: e.getenv, Name: "broken"}); err == nil || !strings.Contains(err.Error(), "broken.md:3:") {
		t.Fatalf("show broken: %v", err)
	}
	if err := runShow(ctx, &ShowOptions{IO: e.ios, Getwd: e.getwd, Getenv: e.getenv, Name: "nobody"}); !errors.As(err, &r) || r.Next != "cotal personas list" {
		t.Fatalf("show nobody: %v", err)
	}

	// rm needs --force, removes invalid files too, and refuses unknown names.
	rm := &RmOptions{IO: e.ios, Getwd: e.getwd, Getenv: e.getenv, Name: "broken"}
	if err := runRm(ctx, rm); !errors.As(err, &r) || r.Next != "cotal personas rm broken --force" {
		t.Fatalf("rm without --force: %v", err)
	}
	rm.Force = true
	if err := runRm(ctx, rm); err != nil {
		t.Fatal(err)
	}
	if err := runRm(ctx, rm); !errors.As(err, &r) || !strings.Contains(r.Why, "there is no") {
		t.Fatalf("rm again: %v", err)
	}
}

func TestRunNewMachineHome(t *testing.T) {
	e := newEnv(t)
	e.home = filepath.Join(e.dir, ".cotal") // the current folder holds the machine home
	if err := os.MkdirAll(e.home, 0o700); err != nil {
		t.Fatal(err)
	}
	o := e.newOpts("dave")
	o.Prompt = "x"
	var r *cmdutil.Refusal
	if err := runNew(context.Background(), o); !errors.As(err, &r) || !strings.Contains(r.Why, "machine home") {
		t.Fatalf("new in the machine home's folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.home, "agents")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a persona was written into the machine home: %v", err)
	}
}

func TestSuggestName(t *testing.T) {
	if got := suggestName("bob-the.builder"); got != "bob_the_builder" {
		t.Errorf("suggestName: %s", got)
	}
}
