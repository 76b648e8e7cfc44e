package peers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/workspace"
)

// maxToken bounds a bearer token read from --token-file.
const maxToken = 8 << 10

// tokenDir is where a space's A2A peer tokens are kept: .cotal/a2a/space.<hex>/ (0700).
// A token stays on the operator's disk: the registry row only says there is one.
func tokenDir(proj *workspace.Project, space string) string {
	return filepath.Join(proj.Dir(), "a2a", "space."+protocol.SpaceKey(space))
}

func tokenPath(proj *workspace.Project, space, name string) string {
	return filepath.Join(tokenDir(proj, space), name+".token")
}

// checkToken accepts the content of a token file: one line of printable ASCII without
// spaces (a trailing line break is dropped), as an HTTP bearer token is.
func checkToken(b []byte) (string, error) {
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", errors.New("the file is empty: put the agent's bearer token in it, on one line")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' {
			return "", fmt.Errorf("byte %d is not a printable ASCII character: a bearer token is one line of printable ASCII without spaces", i+1)
		}
	}
	return s, nil
}

// writeToken keeps token for name (0600, in a 0700 folder).
func writeToken(proj *workspace.Project, space, name, token string) error {
	dir := tokenDir(proj, space)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("a2a token of %s: %w", name, err)
	}
	return atomicfile.WriteFile(tokenPath(proj, space, name), []byte(token+"\n"), 0o600)
}

// removeToken forgets name's token; none kept is not an error.
func removeToken(proj *workspace.Project, space, name string) error {
	if err := os.Remove(tokenPath(proj, space, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("a2a token of %s: %w", name, err)
	}
	return nil
}

// Tokens reads the tokens `cotal a2a add --token-file` kept for the space's peers: the
// bridge's Token.
func Tokens(proj *workspace.Project, space string) func(name string) (string, error) {
	return func(name string) (string, error) {
		if proj == nil {
			return "", errors.New("no project: the token is kept in the project's .cotal/ folder")
		}
		b, err := os.ReadFile(tokenPath(proj, space, name))
		if err != nil {
			return "", fmt.Errorf("a2a token of %s: %w (register it again with cotal a2a add --replace --token-file)", name, err)
		}
		return checkToken(b)
	}
}
