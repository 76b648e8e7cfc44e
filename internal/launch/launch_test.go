package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// roleEnv makes the test binary play a child: TestMain runs the role instead of tests.
const roleEnv = "LAUNCH_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "":
		os.Exit(m.Run())
	case "ready": // reports ready, then serves until its lifeline ends
		ctx, stop, err := Lifeline(context.Background(), os.Getenv)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		defer stop()
		if err := SignalReady(os.Getenv, "at somewhere"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if os.Getenv(LifelineEnv) == "" {
			os.Exit(0)
		}
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), ErrParentGone) {
			os.Exit(4)
		}
		os.Exit(0)
	case "fail": // fails before it is ready
		fmt.Fprintln(os.Stderr, "cannot serve")
		os.Exit(3)
	case "quiet": // ends cleanly without a word
		os.Exit(0)
	case "hang": // never ready, never ends by itself
		time.Sleep(time.Hour)
	}
	os.Exit(5)
}

// child is a command running this test binary as role.
func child(t *testing.T, role string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), roleEnv+"="+role, ReadyEnv+"=99") // a stale value Start replaces
	return cmd
}

// TestReady: the child's ready line reaches the parent, and a child holding the lifeline
// ends once the parent's end of it closes.
func TestReady(t *testing.T) {
	lr, lw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(child(t, "ready"), Options{Lifeline: lr})
	lr.Close()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	got, err := c.Ready(ctx, time.Second)
	if err != nil || got != "at somewhere" {
		t.Fatalf("Ready = %q, %v; want \"at somewhere\"", got, err)
	}
	select {
	case <-c.Exited():
		t.Fatal("the child ended while its parent lives")
	default:
	}
	lw.Close() // the parent is gone, as far as the child can tell
	select {
	case <-c.Exited():
	case <-ctx.Done():
		t.Fatal("the child outlived its lifeline")
	}
	if err := c.Err(); err != nil {
		t.Fatalf("the child saw its lifeline end other than as ErrParentGone: %v", err)
	}
}

// TestNotReady: a child that fails, or ends cleanly, without a ready line is reported as
// not ready with its exit status.
func TestNotReady(t *testing.T) {
	for role, status := range map[string]string{"fail": "exit status 3", "quiet": "exit status 0"} {
		c, err := Start(child(t, role), Options{Session: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		_, err = c.Ready(ctx, time.Second)
		cancel()
		if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), status) {
			t.Fatalf("%s: Ready error %v; want ErrNotReady with %q", role, err, status)
		}
	}
}

// TestInterrupted: a ctx that ends before the child is ready stops the child (asked, then
// killed after the grace) and reports ctx's error.
func TestInterrupted(t *testing.T) {
	c, err := Start(child(t, "hang"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Ready(ctx, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ready error %v; want context.Canceled", err)
	}
	select {
	case <-c.Exited():
	default:
		t.Fatal("Ready returned while the child still runs")
	}
}

// TestSelf: the binary as the shell named it, made absolute; the running executable when
// that names no file.
func TestSelf(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "cotal")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := os.Args[0]
	defer func() { os.Args[0] = saved }()
	t.Chdir(dir)
	exe := func() (string, error) { return "/from/executable", nil }
	for arg0, want := range map[string]string{
		"./cotal":          bin,
		bin:                bin,
		"./no-such-binary": "/from/executable",
	} {
		os.Args[0] = arg0
		if got, err := Self(exe); err != nil || !samePath(got, want) {
			t.Errorf("Self with os.Args[0] %q = %q, %v; want %q", arg0, got, err, want)
		}
	}
	os.Args[0] = "./no-such-binary"
	if _, err := Self(func() (string, error) { return "", errors.New("no") }); err == nil {
		t.Error("Self without any path gave no error")
	}
}

// samePath compares paths through symbolic links (a temporary folder may be behind one).
func samePath(a, b string) bool {
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return ra == rb
}
