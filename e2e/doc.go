// Package e2e holds end-to-end tests that run the real coding-agent harnesses (Claude
// Code, Codex, OpenCode) the way cotal runs them: `cotal spawn` on a real mesh started by
// `cotal up`, in a pseudo-terminal, each harness pointed at a scripted stand-in of its
// model API on loopback (internal/fakemodel), with its home and configuration in the
// test's own folders.
//
// A harness is found in the folder named by $COTAL_E2E_BIN (.ci/run installs the pinned
// npm packages and sets it), else on PATH; a test whose harness is absent skips, saying so.
// The package holds tests only.
package e2e
