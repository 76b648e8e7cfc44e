package cli

import (
	"go/ast"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// untestedNext are the next lines no script reaches, by the file that prints them and the
// line's leading text (or, for one built elsewhere, its expression), each with the reason.
var untestedNext = map[string]string{
	// Informational: they list what can be named, and there is nothing else to run.
	"ext/ext.go cotal ext list": "lists the extensions; the lock held by another cotal ext is a race a script cannot pose",
	// Situations a script cannot pose on one machine, or cannot run as printed.
	"actor/actor.go cotal actor revoke ":                                                       "a ledger row broken on the broker needs a writer other than cotal",
	"down/down.go rm ":                                                                         "a pidfile that cannot be told apart from another process needs a foreign process with that pid",
	"ext/dispatch.go cotal update":                                                             "an extension whose file vanished after install; update is the repair, tested in update_repair",
	"up/addspace.go cotal down && cotal up --detach ":                                          "--cluster-name on a running mesh: the restart starts a cluster node, which needs routes to peers (cluster.txtar starts them)",
	"up/addspace.go cotal down && cotal up --detach --external ":                               "--external on a running mesh: the restart needs a second, external nats-server",
	"up/addspace.go cotal down && cotal up --server ":                                          "the restart runs up in the foreground, which a script cannot run as printed",
	"web/detach.go cotal web  # in the foreground, or cd to the project first":                 "runs the dashboard in the foreground",
	"a2a/detach.go cotal a2a --expose ":                                                        "runs the gateway in the foreground",
	"supervise/supervise.go cotal spawn  # runs one agent in this terminal, no manager needed": "the manager is refused on Windows only, where the scripts do not run",
	// Next lines of packages other slices change (mint, spawn, mcp): reported to the lead.
	"spawn/run.go cotal spawn --agent command --name bot -- ./my-agent":   "internal/cli/spawn: another slice",
	"spawn/run.go cotal spawn --help":                                     "internal/cli/spawn: another slice",
	"spawn/spawn.go cotal spawn --role reviewer":                          "internal/cli/spawn: another slice",
	"spawn/spawn.go cotal spawn --prompt 'Start with the open issues'":    "internal/cli/spawn: another slice",
	"spawn/spawn.go cotal spawn --agent command --name bot -- ./my-agent": "internal/cli/spawn: another slice",
	"spawn/run.go expr": "internal/cli/spawn: another slice",
	// Next lines built by a function or passed in: the scripts that print them.
	"cmdutil/outfile.go o.Next":                "mint_out.txtar",
	"clean/clean.go o.again(\" --dry-run\")":   "clean_history.txtar (runnext runs it)",
	"deliver/deliver.go leaseHeldNext(t)":      "deliver.txtar",
	"deliver/deliver.go OpenMeshNext(t)":       "hints_run.txtar",
	"deliver/deliver.go next":                  "deliver.txtar (the --shards refusal; run, it serves in the foreground)",
	"ext/ext.go u.Fix":                         "ext_basic.txtar",
	"ext/ext.go opts.Spec + \" --version\"":    "ext_basic.txtar",
	"meshes/add.go retry":                      "meshes.txtar",
	"personas/new.go opts.commandLine(&fixed)": "personas_errors.txtar",
	"personas/personas.go next":                "personas_errors.txtar",
	"send/send.go strings.Join(args, \" \")":   "a send whose outcome stays unknown needs a broker that stores and never answers; send_retry.txtar runs the printed form (--id) and sees it stored once",
	"service/service.go cmdutil.NewProjectNext(wd, \"cotal service install\"+spaceArg(o.Space))": "hints_run.txtar",
	"supervise/supervise.go cmdutil.NewProjectNext(wd, \"\")":                                    "hints_run.txtar",
	"supervise/supervise.go leaseHeldNext(t)":                                                    "manager_lease.txtar",
	"setup/setup.go cmdutil.NewProjectNext(wd, \"\")":                                            "hints_run.txtar",
	"update/update.go opts.From + \" --version\"":                                                "update_self.txtar",
	"web/web.go fmt.Sprintf(\"cotal web --host 127.0.0.1 --port %d\", port)":                     "web.txtar",
	"web/web.go fmt.Sprintf(\"cotal web --port %d\", opts.Port+1)":                               "web.txtar",
}

// TestEveryNextLineInAScript finds each next line the commands print (as
// TestNextLinesRunAsPrinted reads them) in the scripts: its leading text after "next:
// run `" in some testdata/*.txtar, so the situation that prints it is posed by a script
// (hints_run.txtar runs them as printed). One built by an expression is listed in
// untestedNext with its script, one no script can reach with the reason.
func TestEveryNextLineInAScript(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txtar")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range files {
		s, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(s)
	}
	scripts := strings.ReplaceAll(b.String(), `\`, "") // the scripts' regexps, unescaped
	used := map[string]bool{}
	n := 0
	inspectCommands(t, func(fset *token.FileSet, node ast.Node) bool {
		call, ok := node.(*ast.CallExpr)
		if !ok {
			return true
		}
		var next ast.Expr
		switch name := calleeName(call); {
		case (name == "Refuse" || name == "RefuseUsage") && len(call.Args) == 3:
			next = call.Args[2]
		case name == "WithNext" && len(call.Args) == 2:
			next = call.Args[1]
		default:
			return true
		}
		pos := fset.Position(next.Pos())
		file := filepath.ToSlash(pos.Filename)
		lead := next
		for {
			bin, ok := lead.(*ast.BinaryExpr)
			if !ok {
				break
			}
			lead = bin.X
		}
		var key string
		if lit, ok := lead.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			s, err := strconv.Unquote(lit.Value)
			if err != nil || s == "" {
				return true
			}
			n++
			key = file + " " + s
			if strings.Contains(scripts, "next: run `"+s) {
				return true
			}
		} else {
			var src strings.Builder
			_ = printer.Fprint(&src, fset, next)
			key = file + " " + src.String()
			if strings.HasPrefix(file, "spawn/") {
				key = file + " expr"
			}
		}
		if _, ok := untestedNext[key]; ok {
			used[key] = true
			return true
		}
		t.Errorf("%s: next line %q is in no script: pose its situation in one (runnext runs it), or say in untestedNext why not", pos, strings.TrimPrefix(key, file+" "))
		return true
	})
	for k, why := range untestedNext {
		if !used[k] {
			t.Errorf("untestedNext[%q] (%s) names no next line the commands print: drop it", k, why)
		}
	}
	if n < 50 {
		t.Fatalf("read %d next lines; the CLI prints more than that", n)
	}
}
