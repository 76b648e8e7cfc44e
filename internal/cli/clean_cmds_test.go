package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/creack/pty"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdTTYAnswer runs `cotal ARGS...` on a terminal (a pseudo terminal for its stdin and
// stdout), types ANSWER and Enter, as a person answering its question does, and checks
// its exit code; what the terminal showed is stdout, its stderr is stderr:
//
//	ttyanswer CODE ANSWER ARGS...  (ARGS without the leading cotal)
func cmdTTYAnswer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 {
		ts.Fatalf("usage: ttyanswer CODE ANSWER ARGS...")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("ttyanswer: code %q: %v", args[0], err)
	}
	exe, err := exec.LookPath("cotal")
	if err != nil {
		ts.Fatalf("find cotal: %v", err)
	}
	ptm, tty, err := pty.Open()
	if err != nil {
		ts.Fatalf("open a pseudo terminal: %v", err)
	}
	defer ptm.Close()
	cmd := exec.Command(exe, args[2:]...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = scriptEnv(ts)
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, &stderr
	if err := cmd.Start(); err != nil {
		ts.Fatalf("start cotal: %v", err)
	}
	tty.Close() // the child holds its own copy
	if _, err := io.WriteString(ptm, args[1]+"\n"); err != nil {
		ts.Fatalf("type the answer: %v", err)
	}
	var shown bytes.Buffer
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(&shown, ptm) // ends with EIO once the child has closed the terminal
		close(copied)
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-waited:
	case <-time.After(30 * time.Second): // a hang guard
		_ = cmd.Process.Kill()
		ts.Fatalf("cotal %v did not exit within 30s", args[2:])
	}
	<-copied
	got := 0
	var exitErr *exec.ExitError
	if errors.As(werr, &exitErr) {
		got = exitErr.ExitCode()
	} else if werr != nil {
		ts.Fatalf("cotal: %v", werr)
	}
	fmt.Fprint(ts.Stdout(), shown.String())
	fmt.Fprint(ts.Stderr(), stderr.String())
	if got != want {
		ts.Fatalf("cotal exited %d, want %d\nstderr:\n%s", got, want, stderr.String())
	}
}

// cmdRefSession asks the reference IdP at URL whether the session kept for it in FILE (a
// copy of idp-sessions.json) is still live: GET <URL>/token with it, printing the status
// code, so a script can tell a session ended at the IdP from one only forgotten here:
//
//	refsession URL FILE
func cmdRefSession(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: refsession URL FILE")
	}
	var f struct {
		Sessions map[string]struct {
			Token string `json:"token"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(ts.ReadFile(args[1])), &f); err != nil {
		ts.Fatalf("refsession: %s: %v", args[1], err)
	}
	s, ok := f.Sessions[strings.TrimSuffix(args[0], "/")]
	if !ok || s.Token == "" {
		ts.Fatalf("refsession: no session of %s in %s", args[0], args[1])
	}
	req, err := http.NewRequest(http.MethodGet, args[0]+"/token", nil)
	if err != nil {
		ts.Fatalf("refsession: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		ts.Fatalf("refsession: %v", err)
	}
	_ = resp.Body.Close()
	fmt.Fprintln(ts.Stdout(), resp.StatusCode)
}
