package mgrclient

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/protocol"
)

// A space whose manager is the reference's answers nobody on Go's ctl.manager rails, only
// on the endpoint rails ep.*.manager. Client then asks there (the way the reference's own
// CLI does: spawn, ps, despawn and input of the manager's contract, cluster
// ai.cotal.manager), turning Go's requests into the contract's commands and its answers
// back into Go's types, so `cotal ps/spawn/stop/input` drive either manager unchanged.

// refPollEvery is how often a settle wait asks a reference manager's ps again (the
// reference's contract has no wait of its own).
const refPollEvery = 250 * time.Millisecond

// refDefaultWindow is the settle window assumed when the spawn that named it was asked
// by another client.
const refDefaultWindow = 30 * time.Second

// refUID is the caller's lifecycle uid on the ep rails (the third token of its reply
// rail): one per client, 26 lowercase base32 characters.
func (c *Client) refUID() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.uid == "" {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return "", fmt.Errorf("lifecycle uid: %w", err)
		}
		c.uid = strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
	}
	return c.uid, nil
}

func (c *Client) refCaller() (*EPCaller, error) {
	uid, err := c.refUID()
	if err != nil {
		return nil, err
	}
	return &EPCaller{NC: c.NC, Space: c.Space, Caller: c.Caller, UID: uid}, nil
}

// callRef asks op of a reference manager. answered is false when nobody serves the ep
// rails either, or the broker refused the caller there (it may not ask a reference
// manager): the space has no manager this caller can reach.
func (c *Client) callRef(ctx context.Context, op string, args, out any) (answered bool, err error) {
	ep, err := c.refCaller()
	if err != nil {
		return false, err
	}
	in, err := json.Marshal(args)
	if err != nil {
		return false, fmt.Errorf("manager %s: encode: %w", op, err)
	}
	var res any
	switch op {
	case protocol.MgrPs:
		var a protocol.NameArgs
		if err := json.Unmarshal(in, &a); err != nil {
			return false, fmt.Errorf("manager %s: %w", op, err)
		}
		res, err = c.refPs(ctx, ep, a)
	case protocol.MgrSpawn:
		var a protocol.SpawnArgs
		if err := json.Unmarshal(in, &a); err != nil {
			return false, fmt.Errorf("manager %s: %w", op, err)
		}
		res, err = c.refSpawn(ctx, ep, a)
	case protocol.MgrStop:
		var a protocol.NameArgs
		if err := json.Unmarshal(in, &a); err != nil {
			return false, fmt.Errorf("manager %s: %w", op, err)
		}
		res, err = c.refStop(ctx, ep, a)
	case protocol.MgrInput:
		var a protocol.InputArgs
		if err := json.Unmarshal(in, &a); err != nil {
			return false, fmt.Errorf("manager %s: %w", op, err)
		}
		res, err = c.refInput(ctx, ep, a)
	case protocol.MgrAttach:
		// Probe that a reference manager serves before saying what it cannot do.
		if _, err = ep.Call(ctx, EPCall{Command: "status"}, nil); err == nil {
			err = &Error{Code: EPUnimplemented, Message: "the space's manager is the reference's (TypeScript) manager, whose terminal sessions Go's cotal attach cannot open: use the reference's CLI to attach, or cotal input to type into the agent"}
		}
	default:
		return false, fmt.Errorf("manager %s: not an operation of the manager", op)
	}
	if err != nil {
		var me *Error
		if errors.Is(err, ErrNoManager) || (errors.As(err, &me) && me.Broker) {
			return false, err
		}
		return true, err
	}
	if out == nil {
		return true, nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return true, fmt.Errorf("manager %s: answer: %w", op, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return true, fmt.Errorf("manager %s: answer data: %w", op, err)
	}
	return true, nil
}

// refError makes a reference manager's refusal safe for a terminal and says whose it is.
func refError(err error) error {
	var me *Error
	if errors.As(err, &me) && !me.Broker {
		return &Error{Code: me.Code, Message: "the reference manager: " + termsafe.Escape(me.Message)}
	}
	return err
}

// refRows asks a reference manager's ps.
func (c *Client) refRows(ctx context.Context, ep *EPCaller) ([]EPAgentRow, error) {
	var rows []EPAgentRow
	if _, err := ep.Call(ctx, EPCall{Command: "ps"}, &rows); err != nil {
		return nil, refError(err)
	}
	return rows, nil
}

// refRow is the row of the agent name, a not-found *Error when none.
func (c *Client) refRow(ctx context.Context, ep *EPCaller, name string) (EPAgentRow, error) {
	rows, err := c.refRows(ctx, ep)
	if err != nil {
		return EPAgentRow{}, err
	}
	for _, r := range rows {
		if r.Name == name {
			return r, nil
		}
	}
	return EPAgentRow{}, &Error{Code: protocol.MgrCodeNotFound, Message: fmt.Sprintf("the reference manager of space %s runs no agent %q", c.Space, name)}
}

// refSeat is a reference agent row as Go's seat row.
func refSeat(r EPAgentRow, now time.Time) protocol.SeatInfo {
	s := protocol.SeatInfo{Name: r.Name, Agent: r.Agent, Model: r.Model, Role: r.Role, UID: r.LifecycleUID,
		PID: r.PID, Process: refProcess(r.Status), Mesh: r.Mesh, Spawner: r.Spawner, Cwd: r.Cwd, Host: r.Host,
		Instance: r.InstanceID}
	if r.UptimeMs > 0 {
		s.Started = now.Add(-time.Duration(r.UptimeMs) * time.Millisecond).UnixMilli()
	}
	return s
}

// refProcess is a reference row's status as Go's process state; a status Go has no name
// for is shown as the reference says it.
func refProcess(status string) protocol.SeatState {
	switch status {
	case "running", "ready", "alive":
		return protocol.SeatRunning
	case "starting", "spawning", "provisioning", "launching":
		return protocol.SeatStarting
	case "stopping", "terminating":
		return protocol.SeatStopping
	case "exited", "stopped", "dead", "crashed", "failed":
		return protocol.SeatExited
	}
	return protocol.SeatState(status)
}

// refInRoster reports whether a row's mesh state says the agent is on the mesh: idle,
// working or waiting (the reference's other states are "mesh offline", "not in roster"
// and "mesh unknown").
func refInRoster(mesh string) bool {
	switch mesh {
	case "idle", "working", "waiting":
		return true
	}
	return false
}

func (c *Client) refPs(ctx context.Context, ep *EPCaller, a protocol.NameArgs) (protocol.PsResult, error) {
	if !a.Wait {
		rows, err := c.refRows(ctx, ep)
		if err != nil {
			return protocol.PsResult{}, err
		}
		res := protocol.PsResult{Seats: make([]protocol.SeatInfo, 0, len(rows))}
		now := time.Now()
		for _, r := range rows {
			if a.Name == "" || r.Name == a.Name {
				res.Seats = append(res.Seats, refSeat(r, now))
			}
		}
		return res, nil
	}
	// The reference's contract has no settle wait: ask its ps until the agent is on the
	// mesh (succeeded) or has ended (failed), or its readiness window passes (uncertain).
	c.mu.Lock()
	due, ok := c.due[a.Name]
	c.mu.Unlock()
	if !ok {
		due = time.Now().Add(refDefaultWindow)
	}
	if d, ok := ctx.Deadline(); ok && d.Before(due) {
		due = d.Add(-refPollEvery)
	}
	for {
		r, err := c.refRow(ctx, ep, a.Name)
		if err != nil {
			var me *Error
			if errors.As(err, &me) && me.Code == protocol.MgrCodeNotFound {
				return protocol.PsResult{}, nil
			}
			return protocol.PsResult{}, err
		}
		s := refSeat(r, time.Now())
		switch {
		case s.Process == protocol.SeatExited:
			s.Outcome = protocol.SettleFailed
		case refInRoster(r.Mesh):
			s.Outcome = protocol.SettleSucceeded
		case !time.Now().Before(due):
			s.Outcome = protocol.SettleUncertain
		}
		if s.Outcome != "" {
			return protocol.PsResult{Seats: []protocol.SeatInfo{s}}, nil
		}
		t := time.NewTimer(refPollEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			s.Outcome = protocol.SettleUncertain
			return protocol.PsResult{Seats: []protocol.SeatInfo{s}}, nil
		case <-t.C:
		}
	}
}

func (c *Client) refSpawn(ctx context.Context, ep *EPCaller, a protocol.SpawnArgs) (protocol.SpawnResult, error) {
	// The reference spawns the agent file of a name: Go's persona of that name.
	name := a.Name
	var bad string
	switch {
	case name == "" && a.Persona == "":
		bad = "the space's manager is the reference's, which spawns an agent by name: give the agent's name (--name)"
	case name == "":
		name = a.Persona
	case a.Persona != "" && a.Persona != name:
		bad = fmt.Sprintf("the space's manager is the reference's, which spawns the agent file of the name: persona %q cannot run under the name %q there; name the agent %q, or leave out the persona", a.Persona, name, a.Persona)
	}
	if bad == "" && len(a.Args) > 0 {
		bad = "the space's manager is the reference's, which takes no harness arguments on a spawn: leave them out"
	}
	if bad != "" {
		return protocol.SpawnResult{}, refused(ctx, ep, bad)
	}
	args := EPSpawnArgs{Name: &name, Agent: nonEmpty(a.Agent), Role: nonEmpty(a.Role), Model: nonEmpty(a.Model),
		Prompt: nonEmpty(a.Prompt), Cwd: nonEmpty(a.Cwd)}
	var r EPSpawnResult
	if _, err := ep.Call(ctx, EPCall{Command: "spawn", Args: args}, &r); err != nil {
		return protocol.SpawnResult{}, refError(err)
	}
	window := r.ReadinessDeadlineMs
	if window <= 0 {
		window = refDefaultWindow.Milliseconds()
	}
	c.mu.Lock()
	if c.due == nil {
		c.due = map[string]time.Time{}
	}
	c.due[r.Name] = time.Now().Add(time.Duration(window) * time.Millisecond)
	c.mu.Unlock()
	return protocol.SpawnResult{Name: r.Name, Persona: name, Agent: a.Agent, UID: r.UID, WindowMs: window}, nil
}

// refTarget is the despawn/input target of a row: the agent's principal and incarnation,
// and the manager instance that runs it.
func refTarget(r EPAgentRow) (EPCall, error) {
	p, err := protocol.ParsePrincipal(r.ID)
	if err != nil || !epLifecycle.MatchString(r.LifecycleUID) {
		return EPCall{}, &Error{Code: protocol.MgrCodeInternal, Message: fmt.Sprintf("the reference manager lists agent %q without a principal and lifecycle uid to address it", termsafe.Escape(r.Name))}
	}
	c := EPCall{Mode: "any", Target: &EPTarget{Owner: p.Owner, Actor: p.Actor, LifecycleUID: r.LifecycleUID}}
	if epLifecycle.MatchString(r.InstanceID) {
		c.Route, c.Instance = EPRouteInst, r.InstanceID
	}
	return c, nil
}

func (c *Client) refStop(ctx context.Context, ep *EPCaller, a protocol.NameArgs) (protocol.SeatInfo, error) {
	row, err := c.refRow(ctx, ep, a.Name)
	if err != nil {
		return protocol.SeatInfo{}, err
	}
	call, err := refTarget(row)
	if err != nil {
		return protocol.SeatInfo{}, err
	}
	graceful := !a.Force
	call.Command, call.Args = "despawn", map[string]bool{"graceful": graceful}
	var r EPStopResult
	if _, err := ep.Call(ctx, call, &r); err != nil {
		return protocol.SeatInfo{}, refError(err)
	}
	s := refSeat(row, time.Now())
	s.Process = protocol.SeatStopping
	if r.Stopped {
		s.Process = protocol.SeatExited
	}
	return s, nil
}

func (c *Client) refInput(ctx context.Context, ep *EPCaller, a protocol.InputArgs) (map[string]int, error) {
	// The reference's input is text and whether Enter follows: Go's trailing carriage
	// return is that Enter.
	text, enter := strings.CutSuffix(string(a.Data), "\r")
	if text == "" || len(text) > 65536 || !utf8.ValidString(text) {
		return nil, refused(ctx, ep, "the space's manager is the reference's, which types 1 to 65536 bytes of UTF-8 text (and Enter): give some text")
	}
	row, err := c.refRow(ctx, ep, a.Name)
	if err != nil {
		return nil, err
	}
	call, err := refTarget(row)
	if err != nil {
		return nil, err
	}
	call.Command, call.Args = "input", map[string]any{"text": text, "enter": enter}
	var r struct {
		Bytes int `json:"bytes"`
	}
	if _, err := ep.Call(ctx, call, &r); err != nil {
		return nil, refError(err)
	}
	return map[string]int{"bytes": r.Bytes}, nil
}

// refused is a request Go cannot put in the reference's contract, refused bad-request
// once a reference manager is seen to serve (else ErrNoManager: there is none).
func refused(ctx context.Context, ep *EPCaller, why string) error {
	if _, err := ep.Call(ctx, EPCall{Command: "status"}, nil); err != nil {
		var me *Error
		if errors.Is(err, ErrNoManager) || (errors.As(err, &me) && me.Broker) {
			return err
		}
	}
	return &Error{Code: protocol.MgrCodeBad, Message: why}
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
