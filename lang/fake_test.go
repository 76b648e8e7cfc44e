package lang

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
)

// fakeEffects answers effects from a script keyed by step key (or a default
// per kind), records every call, and replays recorded results when replay is
// set: an effect it has a recording for is returned without being performed.
type fakeEffects struct {
	mu        sync.Mutex
	answers   map[string]Result // by step key
	failures  map[string]error  // by step key
	calls     []Call
	scopes    []Call
	logs      []string
	performed int
	recorded  map[string]Result // what a previous run recorded
	clock     int64
}

func newFake() *fakeEffects {
	return &fakeEffects{answers: map[string]Result{}, failures: map[string]error{}, recorded: map[string]Result{}}
}

func (f *fakeEffects) Perform(ctx context.Context, c Call) (Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
	recKey := fmt.Sprintf("%s@%d", c.Key, c.Attempt)
	if r, ok := f.recorded[recKey]; ok {
		return r, nil
	}
	f.performed++
	if err, ok := f.failures[c.Key]; ok {
		return Result{}, err
	}
	if c.Kind == "waitUntil" {
		f.mu.Unlock()
		var last any
		for n := 0; n < 5; n++ {
			ob, done, err := c.Observe(ctx, n)
			if err != nil {
				f.mu.Lock()
				return Result{}, err
			}
			last = ob
			if done {
				break
			}
		}
		f.mu.Lock()
		f.recorded[recKey] = Result{Value: last, EndedAt: f.clock}
		return Result{Value: last, EndedAt: f.clock}, nil
	}
	r, ok := f.answers[c.Key]
	if !ok {
		r = f.defaultFor(c)
	}
	f.recorded[recKey] = r
	return r, nil
}

func (f *fakeEffects) defaultFor(c Call) Result {
	f.clock += 1000
	switch c.Kind {
	case "spawn":
		persona, _ := c.Input["persona"].(string)
		return Result{Value: map[string]any{"agent": "agent-" + persona, "persona": persona}, EndedAt: f.clock}
	case "turn":
		return Result{Value: map[string]any{"status": "done", "at": float64(f.clock)}, EndedAt: f.clock}
	case "checkpoint":
		return Result{Value: map[string]any{"outcome": "resolved", "value": "yes", "by": "ops", "answerId": "a1", "at": float64(f.clock)}, EndedAt: f.clock}
	case "ask":
		return Result{Value: map[string]any{"ok": true}, EndedAt: f.clock}
	}
	return Result{Value: nil, EndedAt: f.clock}
}

func (f *fakeEffects) Scope(ctx context.Context, c Call, run func(context.Context, any) (Result, error)) (Result, error) {
	f.mu.Lock()
	f.scopes = append(f.scopes, c)
	if r, ok := f.recorded[c.Key+"@scope"]; ok {
		f.mu.Unlock()
		return r, nil
	}
	var opened any
	if c.Kind == "conclave" {
		opened = map[string]any{"channel": "conclave-" + c.Name}
	}
	f.mu.Unlock()
	r, err := run(ctx, opened)
	if err == nil {
		f.mu.Lock()
		f.recorded[c.Key+"@scope"] = r
		f.mu.Unlock()
	}
	return r, err
}

func (f *fakeEffects) Log(scope, line string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, scope+"|"+line)
}

func (f *fakeEffects) keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		out = append(out, c.Key)
	}
	return out
}

func (f *fakeEffects) sortedKeys() []string {
	k := f.keys()
	sort.Strings(k)
	return k
}

func mustCompile(t *testing.T, src string) *Program {
	t.Helper()
	p, err := Compile(src)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return p
}

func run(t *testing.T, src string, f *fakeEffects) error {
	t.Helper()
	return mustCompile(t, src).Run(context.Background(), Options{RunID: "run-1", StartedAt: 1000, Effects: f})
}

func joinLogs(f *fakeEffects) string { return strings.Join(f.logs, "\n") }
