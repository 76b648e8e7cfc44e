package agentmcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/connector"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// ManagerToolNames are the agent tools listed after ToolNames, only to an agent whose
// persona has the spawn capability (Server.Manager set).
var ManagerToolNames = []string{"cotal_spawn", "cotal_despawn", "cotal_personas", "cotal_persona"}

// MaxPersonaPrompt is the longest prompt cotal_persona writes, in characters.
const MaxPersonaPrompt = 10_000

// Manager gives an agent with the spawn capability the manager tools: cotal_spawn and
// cotal_despawn ask the space's agent manager (its agent rail, where the broker and the
// manager check the capability again); cotal_personas and cotal_persona read and define
// persona files of Project.
type Manager struct {
	// Client asks the manager as the agent (Operator false); required.
	Client *mgrclient.Client
	// Project holds the persona files; nil leaves cotal_personas and cotal_persona
	// refusing (the agent runs outside a project).
	Project *workspace.Project
	// Grant is the caller's own grant: a persona it defines stays within it. nil refuses
	// every cotal_persona (the grant is unknown).
	Grant *workspace.Grant
	// Timeout bounds one request to the manager; 0 means 30 s.
	Timeout time.Duration
	// Reserved are names no persona an agent defines may take, besides every name in the
	// roster: the operator's, the manager's.
	Reserved []string
}

type (
	// spawnArgs are what an agent may ask of a spawn: the persona fixes the rest (the
	// program, its arguments, folder, environment and role).
	spawnArgs struct {
		Name   string `json:"name" jsonschema:"the persona to start (cotal_personas lists them); the teammate's name derives from it"`
		Agent  string `json:"agent,omitempty" jsonschema:"the harness, when the persona pins none: claude, codex or opencode"`
		Model  string `json:"model,omitempty" jsonschema:"the model instead of the persona's"`
		Prompt string `json:"prompt,omitempty" jsonschema:"the teammate's first task"`
		// Role, Cwd, Events, Variant and LaunchOptions are the reference's arguments; see
		// checkLaunch.
		Role          string         `json:"role,omitempty" jsonschema:"the role; the persona fixes it, so only the persona's own role is accepted"`
		Cwd           string         `json:"cwd,omitempty" jsonschema:"not accepted: a teammate runs in the project root"`
		Events        *bool          `json:"events,omitempty" jsonschema:"the reference's event-plane opt-out; this space's connectors publish no event plane, so it changes nothing"`
		Variant       string         `json:"variant,omitempty" jsonschema:"a model variant (e.g. high); not supported by this manager yet: name the model instead"`
		LaunchOptions map[string]any `json:"launchOptions,omitempty" jsonschema:"connector launch options; only an empty object is accepted: how a teammate runs (program, flags, arguments, paths, environment, identity) is fixed by its persona file, never by a request"`
	}
	despawnArgs struct {
		Name     string `json:"name,omitempty" jsonschema:"the teammate to stop (one you spawned); omit to stop yourself"`
		Graceful *bool  `json:"graceful,omitempty" jsonschema:"default true: let the session exit cleanly; false = kill it at once"`
	}
	personasArgs struct {
		Name string `json:"name,omitempty" jsonschema:"one persona to show with its prompt; omit to list them all"`
	}
	personaArgs struct {
		Name           string   `json:"name" jsonschema:"the persona's name: letters, digits and _ (it becomes the agent's name)"`
		Prompt         string   `json:"prompt" jsonschema:"its system prompt, at most 10000 characters"`
		Role           string   `json:"role,omitempty" jsonschema:"a role it serves (anycast address)"`
		Description    string   `json:"description,omitempty" jsonschema:"one line for rosters"`
		Agent          string   `json:"agent,omitempty" jsonschema:"the harness it runs in, e.g. claude"`
		Model          string   `json:"model,omitempty" jsonschema:"the model it runs"`
		Subscribe      []string `json:"subscribe,omitempty" jsonschema:"channels it joins at start, within what you may read"`
		AllowSubscribe []string `json:"allowSubscribe,omitempty" jsonschema:"channel patterns it may read, within what you may read"`
		AllowPublish   []string `json:"allowPublish,omitempty" jsonschema:"channel patterns it may post to, within what you may post to"`
		Capabilities   []string `json:"capabilities,omitempty" jsonschema:"capabilities, within your own (spawn, run, role:<role>)"`
		Announce       string   `json:"announce,omitempty" jsonschema:"a channel to post a one-line note on once the persona is saved; omit to keep it quiet. Name the channel your team works on"`
	}
)

type (
	spawnOut struct {
		Name     string `json:"name"`
		Persona  string `json:"persona"`
		Agent    string `json:"agent"`
		UID      string `json:"uid"`
		WindowMs int64  `json:"readinessDeadlineMs"`
	}
	despawnOut struct {
		Name    string `json:"name"`
		Process string `json:"process"`
		Code    *int   `json:"code,omitempty"`
		Hard    bool   `json:"hard,omitempty"`
	}
	personaInfo struct {
		Name         string   `json:"name"`
		Role         string   `json:"role,omitempty"`
		Description  string   `json:"description,omitempty"`
		Agent        string   `json:"agent,omitempty"`
		Model        string   `json:"model,omitempty"`
		Read         []string `json:"read"`
		Publish      []string `json:"publish"`
		Capabilities []string `json:"capabilities,omitempty"`
		Prompt       string   `json:"prompt,omitempty"`
		Announced    string   `json:"announced,omitempty"`
	}
	personasOut struct {
		Personas []personaInfo `json:"personas"`
	}
)

// Harnesses are the connectors an agent may ask cotal_spawn for: every one but command,
// which runs a program only the operator names.
func Harnesses() []string {
	var out []string
	for _, n := range connector.Names() {
		if n != "command" {
			out = append(out, n)
		}
	}
	return out
}

// maxModel bounds a model name an agent asks for (the manager checks it again).
const maxModel = 128

// spawnSchema is cotal_spawn's input schema: closed, the harness one of Harnesses.
func spawnSchema() *jsonschema.Schema {
	sch, err := jsonschema.For[spawnArgs](nil)
	if err != nil {
		panic(fmt.Sprintf("cotal_spawn schema: %v", err)) // a fixed struct: a programming error
	}
	for _, h := range Harnesses() {
		sch.Properties["agent"].Enum = append(sch.Properties["agent"].Enum, h)
	}
	sch.Properties["model"].MaxLength = jsonschema.Ptr(maxModel)
	sch.Properties["model"].Pattern = `^[A-Za-z0-9._/:@][A-Za-z0-9._/:@-]*$`
	sch.Properties["prompt"].MaxLength = jsonschema.Ptr(MaxPersonaPrompt)
	sch.Properties["variant"].MaxLength = jsonschema.Ptr(maxModel)
	sch.Properties["role"].MaxLength = jsonschema.Ptr(protocol.MaxRoleLength)
	sch.Properties["name"].MaxLength = jsonschema.Ptr(protocol.MaxNameLength)
	sch.Properties["cwd"].MaxLength = jsonschema.Ptr(maxPathLength)
	return sch
}

// checkLaunch refuses, by name, what a spawn request may not choose. The reference hands
// launchOptions to the connector as host flags and config and variant to the connector;
// here how a teammate runs (its program, flags, arguments, paths, environment and
// identity) comes only from its persona file and the operator, so every launch option is
// refused, and a variant too, as this manager has no variant to set.
func checkLaunch(a spawnArgs) error {
	if a.Cwd != "" {
		return fmt.Errorf("cwd %q refused: a spawn request never chooses a folder; a teammate runs in the project root; nothing was started", a.Cwd)
	}
	if len(a.LaunchOptions) > 0 {
		keys := slices.Sorted(maps.Keys(a.LaunchOptions))
		for i, k := range keys {
			keys[i] = strconv.Quote(k)
		}
		return fmt.Errorf("launchOptions %s refused: a spawn request never chooses how a teammate runs (program, flag, argument, path, environment or identity); its persona file fixes that (ask the operator: cotal personas); nothing was started",
			strings.Join(keys, ", "))
	}
	if a.Variant != "" {
		return fmt.Errorf("variant %q refused: this manager sets no model variant; name the model with model, or ask the operator to pin it in the persona; nothing was started", a.Variant)
	}
	return nil
}

// offerManager keeps the manager tools only when they can work: a persona grants the
// agent the spawn capability (its grant is known), and its credential may ask on its
// manager rail, which a request the broker refuses at once shows (a ps: it lists only
// the seats the agent spawned). A manager that refuses the agent outright withdraws them
// too; one not running yet does not (it may start later).
func (s *Server) offerManager(ctx context.Context) {
	m := s.Manager
	if m == nil {
		return
	}
	if m.Grant == nil || !slices.Contains(m.Grant.Capabilities, trust.CapabilitySpawn) {
		s.Logger.Info("manager tools withheld: no persona grants this agent the spawn capability")
		s.Manager = nil
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var ps protocol.PsResult
	err := m.Client.Call(ctx, protocol.MgrPs, protocol.NameArgs{}, &ps)
	var rf *mgrclient.Error
	if errors.As(err, &rf) && rf.Code == mgrclient.CodeDenied {
		s.Logger.Info("manager tools withheld", "why", rf.Message)
		s.Manager = nil
	}
}

// addManagerTools registers the manager tools when the agent has the spawn capability.
func (s *Server) addManagerTools() {
	if s.Manager == nil {
		return
	}
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_spawn", Title: "Cotal: start a teammate", InputSchema: spawnSchema(),
		Description: "Ask the space's agent manager to start a teammate from a persona, with the harness, role and permissions the persona fixes (launchOptions must stay empty). Returns its name at once; it appears in cotal_roster when it has joined."},
		s.spawn)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_despawn", Title: "Cotal: stop a teammate", InputSchema: despawnSchema(),
		Description: "Stop a teammate you spawned (gracefully by default; graceful false kills it at once; its credential is retired). Without a name, stop yourself."},
		s.despawn)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_personas", Title: "Cotal: personas", Annotations: ro, InputSchema: personasSchema(),
		Description: "The personas a teammate can be started from: name, role, harness, what they may read and post. With a name, that one with its prompt."},
		s.personas)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_persona", Title: "Cotal: define a persona", InputSchema: personaSchema(),
		Description: "Write a new persona file a teammate can be started from. What it may read, post and do must stay within your own grant; an existing persona is never replaced. It stays quiet unless you pass announce with a channel."},
		s.definePersona)
}

func (s *Server) mgrCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	d := s.Manager.Timeout
	if d <= 0 {
		d = 30 * time.Second
	}
	return context.WithTimeout(ctx, d)
}

// mgrErr words a manager failure for the model.
func mgrErr(op string, err error) error {
	var rf *mgrclient.Error
	switch {
	case errors.As(err, &rf) && rf.Broker:
		return rf
	case errors.As(err, &rf):
		return fmt.Errorf("the manager refused to %s: %s", op, rf.Message)
	case errors.Is(err, mgrclient.ErrNoManager):
		return fmt.Errorf("%s: no agent manager serves this space (the operator starts one with cotal up or cotal supervise)", op)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func (s *Server) spawn(ctx context.Context, _ *mcp.CallToolRequest, a spawnArgs) (*mcp.CallToolResult, spawnOut, error) {
	if err := workspace.CheckPersonaName(a.Name); err != nil {
		return nil, spawnOut{}, fmt.Errorf("persona %w (cotal_personas lists them)", err)
	}
	if err := checkLaunch(a); err != nil {
		return nil, spawnOut{}, err
	}
	ctx, cancel := s.mgrCtx(ctx)
	defer cancel()
	var res protocol.SpawnResult
	err := s.Manager.Client.Call(ctx, protocol.MgrSpawn, protocol.SpawnArgs{Persona: a.Name, Agent: a.Agent,
		Role: a.Role, Model: a.Model, Prompt: a.Prompt}, &res)
	if err != nil {
		return nil, spawnOut{}, mgrErr("spawn "+a.Name, err)
	}
	out := spawnOut{Name: res.Name, Persona: res.Persona, Agent: res.Agent, UID: res.UID, WindowMs: res.WindowMs}
	return text("Started %s (persona %s, %s). It shows in cotal_roster once it has joined (within %s); DM it by name. Stop it with cotal_despawn.",
		res.Name, res.Persona, res.Agent, time.Duration(res.WindowMs)*time.Millisecond), out, nil
}

func (s *Server) despawn(ctx context.Context, _ *mcp.CallToolRequest, a despawnArgs) (*mcp.CallToolResult, despawnOut, error) {
	name := a.Name
	if name == "" {
		name = s.Endpoint.Principal().Actor
	}
	if !protocol.ValidActor(name) {
		return nil, despawnOut{}, fmt.Errorf("name %q: not an agent name (cotal_roster lists them)", name)
	}
	ctx, cancel := s.mgrCtx(ctx)
	defer cancel()
	hard := a.Graceful != nil && !*a.Graceful
	var info protocol.SeatInfo
	if err := s.Manager.Client.Call(ctx, protocol.MgrStop, protocol.NameArgs{Name: name, Force: hard}, &info); err != nil {
		return nil, despawnOut{}, mgrErr("stop "+name, err)
	}
	out := despawnOut{Name: info.Name, Process: string(info.Process), Code: info.Code, Hard: hard}
	how := ""
	if hard {
		how = ", killed at once"
	}
	return text("Stopped %s (%s%s); its credential is retired.", info.Name, info.Process, how), out, nil
}

func (s *Server) project() (*workspace.Project, error) {
	if s.Manager.Project == nil {
		return nil, errors.New("you run outside a project: there are no persona files here (ask the operator: cotal personas list)")
	}
	return s.Manager.Project, nil
}

func infoOf(per *workspace.Persona, withPrompt bool) personaInfo {
	pi := personaInfo{Name: per.Name, Role: per.Role, Description: per.Description, Agent: per.Agent, Model: per.Model,
		Read: nonNil(per.ReadACL()), Publish: nonNil(per.AllowPublish), Capabilities: per.Capabilities}
	if withPrompt {
		pi.Prompt = per.Prompt
	}
	return pi
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func personaLine(p personaInfo) string {
	var b strings.Builder
	b.WriteString(p.Name)
	if p.Role != "" {
		b.WriteString(" (" + p.Role + ")")
	}
	if p.Agent != "" {
		b.WriteString(" [" + p.Agent + "]")
	}
	if p.Description != "" {
		b.WriteString(": " + p.Description)
	}
	fmt.Fprintf(&b, "; reads %s; posts %s", orNone(p.Read), orNone(p.Publish))
	if len(p.Capabilities) > 0 {
		b.WriteString("; capabilities " + strings.Join(p.Capabilities, ", "))
	}
	return b.String()
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "nothing"
	}
	return strings.Join(l, ", ")
}

func (s *Server) personas(_ context.Context, _ *mcp.CallToolRequest, a personasArgs) (*mcp.CallToolResult, personasOut, error) {
	proj, err := s.project()
	if err != nil {
		return nil, personasOut{}, err
	}
	out := personasOut{Personas: []personaInfo{}}
	if a.Name != "" {
		per, err := proj.Persona(a.Name)
		if errors.Is(err, workspace.ErrNoPersona) {
			return nil, personasOut{}, fmt.Errorf("no persona %q: cotal_personas without a name lists them; cotal_persona defines one", a.Name)
		}
		if err != nil {
			return nil, personasOut{}, err
		}
		pi := infoOf(per, true)
		out.Personas = append(out.Personas, pi)
		return text("%s\nPrompt:\n%s", personaLine(pi), per.Prompt), out, nil
	}
	files, err := proj.PersonaFiles()
	if err != nil {
		return nil, personasOut{}, err
	}
	var lines []string
	for _, f := range files {
		if f.Err != nil {
			lines = append(lines, f.Name+": invalid, cannot be spawned ("+f.Err.Error()+")")
			continue
		}
		pi := infoOf(f.Persona, false)
		out.Personas = append(out.Personas, pi)
		lines = append(lines, personaLine(pi))
	}
	if len(lines) == 0 {
		return text("There are no personas yet: define one with cotal_persona."), out, nil
	}
	return text("%s", strings.Join(lines, "\n")), out, nil
}

// identityOf says whose identity name is ("" when none is known): a reserved name (the
// operator's, the manager's), or a local peer in the roster, online or not.
func (s *Server) identityOf(ctx context.Context, name string) (string, error) {
	if slices.Contains(s.Manager.Reserved, name) {
		return "reserved (the operator's or the manager's)", nil
	}
	peers, err := s.Endpoint.Roster(ctx)
	if err != nil {
		return "", err
	}
	for _, p := range peers {
		if p.Card.ID == (protocol.Principal{Owner: protocol.OwnerLocal, Actor: name}).String() {
			return "a peer's in the roster", nil
		}
	}
	return "", nil
}

func (s *Server) definePersona(ctx context.Context, _ *mcp.CallToolRequest, a personaArgs) (*mcp.CallToolResult, personaInfo, error) {
	proj, err := s.project()
	if err != nil {
		return nil, personaInfo{}, err
	}
	if n := len([]rune(a.Prompt)); n > MaxPersonaPrompt {
		return nil, personaInfo{}, fmt.Errorf("prompt is %d characters: at most %d; nothing was written", n, MaxPersonaPrompt)
	}
	if strings.TrimSpace(a.Prompt) == "" {
		return nil, personaInfo{}, errors.New("prompt is empty: write the persona's system prompt; nothing was written")
	}
	if a.Announce != "" {
		if err := protocol.CheckConcreteChannel(a.Announce); err != nil {
			return nil, personaInfo{}, fmt.Errorf("announce %q: %w; nothing was written", a.Announce, err)
		}
	}
	per := &workspace.Persona{Name: a.Name, Role: a.Role, Kind: workspace.KindAgent, Description: a.Description,
		Agent: a.Agent, Model: a.Model, Subscribe: a.Subscribe, AllowSubscribe: a.AllowSubscribe,
		AllowPublish: a.AllowPublish, Capabilities: a.Capabilities, Prompt: strings.TrimRight(a.Prompt, "\n") + "\n"}
	if err := per.Validate(); err != nil {
		return nil, personaInfo{}, fmt.Errorf("persona %v; nothing was written", err)
	}
	if per.Agent != "" && !slices.Contains(Harnesses(), per.Agent) {
		return nil, personaInfo{}, fmt.Errorf("persona %s: agent %q: want one of %s (a program of your choosing is the operator's to run); nothing was written", per.Name, per.Agent, strings.Join(Harnesses(), ", "))
	}
	if _, err := os.Stat(proj.PersonaPath(per.Name)); err == nil {
		return nil, personaInfo{}, fmt.Errorf("persona %s exists already and is never replaced by an agent: pick another name (cotal_personas lists them)", per.Name)
	}
	if why, err := s.identityOf(ctx, per.Name); err != nil {
		return nil, personaInfo{}, fmt.Errorf("persona %s: cannot tell whether the name is an identity's: %w; nothing was written", per.Name, err)
	} else if why != "" {
		return nil, personaInfo{}, fmt.Errorf("persona %s: the name is %s, and a persona never takes over an identity: pick another name; nothing was written", per.Name, why)
	}
	if s.Manager.Grant == nil {
		return nil, personaInfo{}, errors.New("your own grant is unknown (you run without a persona file of your name), so you cannot define personas; ask the operator: cotal personas new")
	}
	if err := s.Manager.Grant.Covers(per); err != nil {
		return nil, personaInfo{}, fmt.Errorf("persona %s: %w; nothing was written", per.Name, err)
	}
	if err := proj.WritePersona(per); err != nil {
		if errors.Is(err, workspace.ErrPersonaExists) {
			return nil, personaInfo{}, fmt.Errorf("persona %s exists already and is never replaced by an agent: pick another name (cotal_personas lists them)", per.Name)
		}
		return nil, personaInfo{}, err
	}
	pi := infoOf(per, false)
	if a.Announce == "" {
		return text("Defined persona %s: %s. Start it with cotal_spawn.", per.Name, personaLine(pi)), pi, nil
	}
	note := fmt.Sprintf("New persona %s defined by %s; a teammate can be started from it with cotal_spawn(name=%q).",
		per.Name, s.Endpoint.Card().Name, per.Name)
	if _, err := s.Endpoint.Post(ctx, a.Announce, client.Text(note)); err != nil {
		// The persona is saved: a failed note is a partial success, and a retry would
		// define nothing new.
		return text("Defined persona %s: %s. But the note on %s could not be confirmed (%v): it may or may not have gone out; read %s before posting it yourself. Do not define the persona again. Start it with cotal_spawn.",
			per.Name, personaLine(pi), a.Announce, err, a.Announce), pi, nil
	}
	pi.Announced = a.Announce
	return text("Defined persona %s and announced it on %s: %s. Start it with cotal_spawn.", per.Name, a.Announce, personaLine(pi)), pi, nil
}
