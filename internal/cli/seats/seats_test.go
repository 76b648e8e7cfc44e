package seats

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdtest"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

const space = "main"

// fakeManager answers the manager's operator rail of space on a real broker with the
// answers given per op (a MgrReply's data, or a refusal), and reports every input typed.
type fakeManager struct {
	nc    *nats.Conn
	typed chan []byte
}

func startFake(t *testing.T, url string, answer func(op string, body []byte) protocol.MgrReply) *fakeManager {
	t.Helper()
	nc := dial(t, url)
	f := &fakeManager{nc: nc, typed: make(chan []byte, 16)}
	for _, op := range protocol.MgrOps {
		_, err := nc.Subscribe(protocol.MgrFilter(space, protocol.ServiceManager, op), func(m *nats.Msg) {
			if op == protocol.MgrInput {
				var a protocol.InputArgs
				if json.Unmarshal(m.Data, &a) == nil {
					f.typed <- a.Data
				}
			}
			if m.Reply == "" {
				return
			}
			b, _ := json.Marshal(answer(op, m.Data))
			_ = m.Respond(b)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

func dial(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// deps are what a command's Options take from the Factory, on the test's broker.
type deps struct {
	io      *iostreams.IOStreams
	resolve cmdutil.ResolveFunc
	connect cmdutil.ConnectAsFunc
}

// mesh provisions space on a new open broker and returns its URL and the dependencies of
// a command whose operator connects to it.
func mesh(t *testing.T) (string, deps, *iostreams.IOStreams) {
	t.Helper()
	srv := brokertest.Start(t)
	url := srv.ClientURL()
	js, err := jetstream.New(dial(t, url))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provision.Space(t.Context(), js, space, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	ios, _, _, _ := iostreams.Test()
	d := deps{io: ios,
		resolve: func(cmdutil.MeshFlags) (cmdutil.Target, error) {
			return cmdutil.Target{Server: url, Space: space}, nil
		},
		connect: func(ctx context.Context, tg cmdutil.Target, _ trust.Profile) (*client.Endpoint, error) {
			return client.Connect(ctx, tg.Server, client.Config{Space: tg.Space, Name: "root"})
		},
	}
	return url, d, ios
}

func ok(v any) protocol.MgrReply {
	b, _ := json.Marshal(v)
	return protocol.MgrReply{OK: true, Data: b}
}

// TestAttachTakesAnyTTL: a manager that answers an attach with a TTL of 0, a negative or
// a huge one does not crash attach: it repaints the screen, types the piped input and
// detaches.
func TestAttachTakesAnyTTL(t *testing.T) {
	for _, ttl := range []int64{0, -1, math.MinInt64, 1, math.MaxInt64, 15000} {
		url, f, ios := mesh(t)
		fake := startFake(t, url, func(op string, _ []byte) protocol.MgrReply {
			if op == protocol.MgrAttach {
				return ok(protocol.AttachResult{Screen: []byte("the screen so far\n"), TTLMs: ttl})
			}
			return ok(map[string]int{"bytes": 1})
		})
		ios.In.(interface{ WriteString(string) (int, error) }).WriteString("typed line\n")
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		err := runAttach(ctx, &AttachOptions{IO: f.io, Resolve: f.resolve, ConnectOperator: f.connect, Name: "w"})
		cancel()
		if err != nil {
			t.Fatalf("ttl %d: attach: %v", ttl, err)
		}
		if out := ios.Out.(interface{ String() string }).String(); !strings.Contains(out, "the screen so far") {
			t.Fatalf("ttl %d: attach printed %q", ttl, out)
		}
		select {
		case b := <-fake.typed:
			if string(b) != "typed line\n" {
				t.Fatalf("ttl %d: typed %q", ttl, b)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("ttl %d: nothing was typed", ttl)
		}
	}
}

func TestRenewEvery(t *testing.T) {
	for _, c := range []struct {
		ttlMs int64
		want  time.Duration
	}{
		{0, 5 * time.Second}, {-7, 5 * time.Second}, {math.MinInt64, 5 * time.Second},
		{1, time.Second / 3}, {15000, 5 * time.Second},
		{math.MaxInt64, 10 * time.Minute / 3}, {int64(time.Hour / time.Millisecond), 10 * time.Minute / 3},
	} {
		if got := RenewEvery(c.ttlMs); got != c.want {
			t.Errorf("RenewEvery(%d) = %s, want %s", c.ttlMs, got, c.want)
		}
	}
}

// TestPsStopExplain: ps prints the manager's seats (escaping what a peer named), stop
// reports the stopped seat, and a refusal becomes what to do next.
func TestPsStopExplain(t *testing.T) {
	url, f, ios := mesh(t)
	code := 143
	startFake(t, url, func(op string, body []byte) protocol.MgrReply {
		switch op {
		case protocol.MgrPs:
			return ok(protocol.PsResult{Seats: []protocol.SeatInfo{
				{Name: "w", Persona: "de\x1b[2Jfault", Agent: "command", Process: protocol.SeatRunning, Mesh: "idle", Started: time.Now().UnixMilli()},
				{Name: "x", Persona: "p", Agent: "codex", Process: protocol.SeatExited, Code: &code, Mesh: "offline"},
			}})
		case protocol.MgrStop:
			var a protocol.NameArgs
			_ = json.Unmarshal(body, &a)
			if a.Name != "w" {
				return protocol.MgrReply{Error: `no seat "` + a.Name + `" on this manager`, Code: protocol.MgrCodeNotFound}
			}
			return ok(protocol.SeatInfo{Name: "w", Process: protocol.SeatExited, Code: &code})
		}
		return protocol.MgrReply{Error: "nope", Code: protocol.MgrCodeDenied}
	})
	out := ios.Out.(interface {
		String() string
		Reset()
	})
	if err := runPs(t.Context(), &PsOptions{IO: f.io, Resolve: f.resolve, ConnectOperator: f.connect, Now: time.Now}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.Contains(got, "\x1b") || !strings.Contains(got, "exited 143") || !strings.Contains(got, "running") {
		t.Fatalf("ps printed %q", got)
	}
	out.Reset()
	stop := func(name string) error {
		return runStop(t.Context(), &StopOptions{IO: f.io, Resolve: f.resolve, ConnectOperator: f.connect, Name: name})
	}
	if err := stop("w"); err != nil || !strings.Contains(out.String(), "stopped w (exited 143)") {
		t.Fatalf("stop: %q %v", out.String(), err)
	}
	if err := stop("nobody"); err == nil || !strings.Contains(err.Error(), `no seat "nobody"`) || !strings.Contains(err.Error(), "cotal ps") {
		t.Fatalf("stop nobody: %v", err)
	}
}

// TestNoManager: with nobody serving, ps says so and names the command that starts one.
func TestNoManager(t *testing.T) {
	_, f, _ := mesh(t)
	err := runPs(t.Context(), &PsOptions{IO: f.io, Resolve: f.resolve, ConnectOperator: f.connect, Now: time.Now})
	if err == nil || !strings.Contains(err.Error(), "no manager serves it") || !strings.Contains(err.Error(), "cotal supervise --space main") {
		t.Fatalf("ps with no manager: %v", err)
	}
}

// TestNameArgOrFlag: stop, attach and input take the agent as their argument or as
// --name, the same name twice is one, and two different names are a usage error.
func TestNameArgOrFlag(t *testing.T) {
	stop := func(args ...string) (string, error) {
		o, err := cmdtest.Capture(NewCmdStop, args)
		if o == nil {
			return "", err
		}
		return o.Name, err
	}
	attach := func(args ...string) (string, error) {
		o, err := cmdtest.Capture(NewCmdAttach, args)
		if o == nil {
			return "", err
		}
		return o.Name, err
	}
	input := func(args ...string) (string, error) {
		o, err := cmdtest.Capture(NewCmdInput, append(args, "--text", "y"))
		if o == nil {
			return "", err
		}
		return o.Name, err
	}
	for cmd, run := range map[string]func(...string) (string, error){"stop": stop, "attach": attach, "input": input} {
		for _, args := range [][]string{{"coder"}, {"--name", "coder"}, {"coder", "--name", "coder"}} {
			if got, err := run(args...); err != nil || got != "coder" {
				t.Errorf("%s %q: name %q, err %v", cmd, args, got, err)
			}
		}
		for args, want := range map[string][]string{
			"given twice":       {"coder", "--name", "other"},
			"accepts at most 1": {"coder", "other"},
			"give the agent":    {},
			`agent name "a.b"`:  {"a.b"},
		} {
			_, err := run(want...)
			var fe *cmdutil.FlagError
			if err == nil || !strings.Contains(err.Error(), args) {
				t.Errorf("%s %q: err %v, want %q", cmd, want, err, args)
			} else if !errors.As(err, &fe) && !strings.Contains(err.Error(), "accepts") {
				t.Errorf("%s %q: err %T is no usage error", cmd, want, err)
			}
		}
	}
}
