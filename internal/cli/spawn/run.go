package spawn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cotal-ai/cotal/agentrun"
	"github.com/cotal-ai/cotal/connector"
	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// plan is one resolved spawn: who, with which harness, and how it is launched.
type plan struct {
	target  cmdutil.Target
	persona *workspace.Persona
	con     connector.Connector
	launch  connector.Launch
	spec    connector.Spec
	program string // the harness found on PATH; "" when it is not installed (dry run only)
	cwd     string
}

func runSpawn(ctx context.Context, opts *Options) error {
	p, err := resolve(opts)
	if err != nil {
		return err
	}
	if opts.DryRun {
		return printPlan(opts.IO.Out, opts.IO.ErrOut, p)
	}
	return launch(ctx, opts, p)
}

// resolve checks everything a spawn needs before anything is minted or written: the
// mesh, the persona, the harness and that it is installed, the working folder.
func resolve(opts *Options) (*plan, error) {
	target, err := opts.Resolve(cmdutil.MeshFlags{Space: opts.Space, Server: opts.Server, TLSCA: opts.TLSCA})
	if err != nil {
		return nil, err
	}
	if target.Project == nil {
		return nil, cmdutil.Refuse("a spawn outside a project", "personas and the agent's run files live in a project's .cotal/", "cotal up --detach")
	}
	name := opts.Persona
	if name == "" {
		name = getenv(opts.Getenv, "COTAL_DEFAULT_PERSONA")
	}
	if name == "" {
		name = "default"
	}
	per, err := target.Project.Persona(name)
	switch {
	case errors.Is(err, workspace.ErrNoPersona):
		next := "cotal personas new " + cmdutil.ShellQuote(name) + " --prompt " + cmdutil.ShellQuote(cmdutil.StarterPrompt)
		if name == "default" {
			next = "cotal setup --yes" // it writes the default persona
		}
		return nil, cmdutil.RefuseUsage(fmt.Sprintf("persona %q", name), "there is no "+target.Project.PersonaPath(name), next)
	case err != nil:
		return nil, err
	}
	p := &plan{target: target, persona: per}

	agent, from := agentrun.PickAgent(opts.Agent, per, opts.Getenv)
	con, ok := connector.Lookup(agent)
	if !ok {
		return nil, unknownAgent(from)
	}
	if agent == "command" && len(opts.Args) == 0 {
		return nil, cmdutil.RefuseUsage("agent command without a program", "the program to run goes after --", "cotal spawn --agent command --name bot -- ./my-agent")
	}
	p.con = con

	exe, err := opts.Self()
	if err != nil {
		return nil, fmt.Errorf("find the cotal executable for the MCP server: %w", err)
	}
	l := agentrun.NewLaunch(agentrun.Target{Project: target.Project, Space: target.Space, Servers: target.Server,
		Auth: target.Auth(), Exe: exe, Getenv: opts.Getenv},
		per, agentrun.Overrides{Name: opts.Name, Role: opts.Role, Model: opts.Model, Prompt: opts.Prompt, HasPrompt: opts.HasPrompt, Args: opts.Args})
	p.launch = l
	if _, op := cmdutil.OperatorIdentity(); l.Name == op || l.Name == managerName {
		whose := "the operator's (yours: cotal send, ps and the manager's operator rail act as it)"
		if l.Name == managerName {
			whose = "the agent manager's"
		}
		return nil, cmdutil.RefuseUsage("an agent named "+l.Name, "the name is "+whose+", and an agent never takes over an identity",
			"cotal spawn "+per.Name+" --name "+suggestName(l.Name+"_agent"))
	}
	if p.spec, err = con.Build(l); err != nil {
		return nil, cmdutil.RefuseUsage("a spawn of "+l.Name+" with "+agent, err.Error(), "cotal spawn --help")
	}

	p.cwd = opts.Cwd
	if p.cwd != "" {
		if err := checkCwd(p.cwd); err != nil {
			return nil, err
		}
		if p.cwd, err = filepath.Abs(p.cwd); err != nil {
			return nil, fmt.Errorf("--cwd: %w", err)
		}
	}
	if path, err := opts.LookPath(p.spec.Command); err == nil {
		p.program = path
	} else if !opts.DryRun {
		return nil, notInstalled(con, p.spec.Command)
	}

	return p, nil
}

// managerName is the agent manager's actor (cotal supervise).
const managerName = "manager"

// notInstalled refuses a harness that is not on PATH, saying how to install it.
func notInstalled(con connector.Connector, program string) error {
	if con.Name == "command" {
		return cmdutil.Refuse("the program "+program, "there is no such program on PATH or at that path: give the program's path after --", "")
	}
	return cmdutil.Refuse("a spawn with "+con.Name, program+" is not installed (not found on PATH)", con.Install)
}

func getenv(get func(string) string, k string) string {
	if get == nil {
		return ""
	}
	return get(k)
}

// printPlan shows what spawn would run and write. Secrets are never in it: the credential
// shows as the path it would be minted to.
func printPlan(w, errOut io.Writer, p *plan) error {
	l, s := p.launch, p.spec
	if p.program == "" {
		fmt.Fprintf(errOut, "! %s is not installed (not found on PATH); install it with: %s\n", s.Command, p.con.Install)
	}
	fmt.Fprintf(w, "agent %s (persona %s, role %s) with %s on space %s at %s\n", l.Name, p.persona.Name, orNone(l.Role), p.con.Name, l.Space, l.Servers)
	if l.CredsPath != "" {
		fmt.Fprintf(w, "credential: %s (0600, minted at launch, removed at exit)\n", l.CredsPath)
	} else {
		fmt.Fprintln(w, "credential: none (open mesh)")
	}
	cwd := p.cwd
	if cwd == "" {
		cwd = "."
	}
	fmt.Fprintf(w, "run in %s:\n  %s\n", cwd, commandLine(s))
	if len(s.Env) > 0 {
		fmt.Fprintln(w, "environment:")
		for _, k := range agentrun.SortedKeys(s.Env) {
			fmt.Fprintf(w, "  %s=%s\n", k, cmdutil.ShellQuote(s.Env[k]))
		}
	}
	for _, f := range s.Files {
		if f.Link != "" {
			fmt.Fprintf(w, "link %s -> %s (when it exists)\n", f.Path, f.Link)
			continue
		}
		fmt.Fprintf(w, "write %s (0600):\n", f.Path)
		for _, line := range strings.SplitAfter(strings.TrimRight(string(f.Data), "\n"), "\n") {
			fmt.Fprintf(w, "  %s", strings.TrimRight(line, "\n")+"\n")
		}
	}
	fmt.Fprintln(w, "dry run: nothing minted, nothing written")
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// commandLine is the spec's command as a shell would read it.
func commandLine(s connector.Spec) string {
	parts := []string{cmdutil.ShellQuote(s.Command)}
	for _, a := range s.Args {
		parts = append(parts, cmdutil.ShellQuote(a))
	}
	return strings.Join(parts, " ")
}

// launch claims the agent's run folder, mints its credential, writes the harness's files,
// runs the harness in the foreground and, once it has exited, removes what it wrote.
func launch(ctx context.Context, opts *Options, p *plan) (err error) {
	l, s := p.launch, p.spec
	release, err := claimRunDir(p.target.Project, l.Name, l.RunDir)
	if err != nil {
		return err
	}
	defer func() {
		errs := []error{agentrun.Cleanup(s)}
		if rerr := release(); rerr != nil {
			errs = append(errs, rerr)
		}
		if cerr := errors.Join(errs...); cerr != nil {
			cerr = fmt.Errorf("clean up after %s: %w", l.Name, cerr)
			if err == nil {
				err = cerr
			} else {
				fmt.Fprintf(opts.IO.ErrOut, "! %v\n", cerr)
			}
		}
	}()
	if l.CredsPath != "" {
		if err := mint(ctx, opts, p); err != nil {
			return err
		}
		l, s = p.launch, p.spec // now naming the credential's lifecycle uid
	}
	if err := agentrun.WriteFiles(s); err != nil {
		return err
	}
	if note := p.persona.DMOnlyNote(); note != "" {
		fmt.Fprintln(opts.IO.ErrOut, note)
	}
	fmt.Fprintf(opts.IO.ErrOut, "spawning %s (role %s) with %s on space %s\n", l.Name, orNone(l.Role), p.con.Name, l.Space)
	code, err := run(ctx, opts, p)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "%s exited (%s status %d); its credential and configuration are removed\n", l.Name, p.con.Name, code)
	if code != 0 {
		return &cmdutil.ExitError{Code: code}
	}
	return nil
}

// claimRunDir makes the agent's private run folder, refusing while another spawn (or the
// manager) runs an agent of that name from this project.
func claimRunDir(_ *workspace.Project, name, dir string) (release func() error, err error) {
	release, err = agentrun.Claim(dir, name, os.Getpid())
	var running *agentrun.ErrRunning
	if errors.As(err, &running) {
		return nil, cmdutil.Refuse(fmt.Sprintf("a spawn of %s", name),
			fmt.Sprintf("%s is already running from this project (cotal spawn pid %d)", name, running.PID),
			"cotal spawn --name "+suggestName(name+"_2"))
	}
	return release, err
}

// mint mints the persona's least-privilege credential, as `cotal join --persona` does,
// under the spawn's name and role, into the 0600 creds file.
func mint(ctx context.Context, opts *Options, p *plan) error {
	l, per := p.launch, p.persona
	creds, err := opts.AgentCreds(ctx, p.target, agentrun.UserSpec(l, per))
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(l.CredsPath, creds, 0o600); err != nil {
		return fmt.Errorf("write creds: %w", err)
	}
	// The agent's environment names the uid the credential was minted for
	// (COTAL_LIFECYCLE_UID, which the reference's connectors need beside creds): the spec
	// is built again now that it is known. Build is pure; the paths do not change.
	c, err := trust.ReadCreds(creds)
	if err != nil {
		return fmt.Errorf("mint %s: %w", l.Name, err)
	}
	p.launch.LifecycleUID = c.LifecycleUID
	spec, err := p.con.Build(p.launch)
	if err != nil {
		return fmt.Errorf("spawning %s: %w", l.Name, err)
	}
	p.spec = spec
	return nil
}

// run starts the harness on this terminal and waits for it. SIGTERM, SIGHUP and SIGQUIT
// are passed on; SIGINT too when stdin is not a terminal (on a terminal, Ctrl-C already
// reaches the harness, which shares the foreground process group). It returns the
// harness's exit code, 128+signal when a signal ended it.
func run(ctx context.Context, opts *Options, p *plan) (int, error) {
	cmd := exec.Command(p.program, p.spec.Args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = opts.IO.In, opts.IO.Out, opts.IO.ErrOut
	cmd.Env = agentrun.ChildEnv(opts.Environ(), p.spec.Env)
	cmd.Dir = p.cwd
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", p.spec.Command, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			if sig == os.Interrupt && opts.IO.IsStdinTTY() {
				continue
			}
			_ = cmd.Process.Signal(sig) // it may have just exited; Wait reports that
		case err := <-done:
			var exitErr *exec.ExitError
			switch {
			case err == nil:
				return 0, nil
			case errors.As(err, &exitErr):
				if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return 128 + int(ws.Signal()), nil
				}
				return exitErr.ExitCode(), nil
			default:
				return 0, fmt.Errorf("%s: %w", p.spec.Command, err)
			}
		}
	}
}

// checkCwd refuses a --cwd that is not a folder: a missing one with the mkdir that makes
// it, a file (or anything else) with no command, since only the person knows which folder
// was meant.
func checkCwd(cwd string) error {
	st, err := os.Stat(cwd)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return cmdutil.RefuseUsage("--cwd "+cwd, "there is no such folder", "mkdir -p "+cmdutil.ShellQuote(cwd))
	case err != nil:
		return cmdutil.RefuseUsage("--cwd "+cwd, err.Error(), "")
	case !st.IsDir():
		dir := filepath.Dir(cwd)
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		return cmdutil.RefuseUsage("--cwd "+cwd, "it is a file, not a folder: --cwd names the folder the agent works in; give a folder, such as "+dir+", which holds that file", "")
	}
	return nil
}
