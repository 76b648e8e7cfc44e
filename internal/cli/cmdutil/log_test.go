package cmdutil_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/spacehost"
)

// TestLogHandlerEscapesPeerText logs every unsafe rune, and bytes that are not UTF-8, in
// each place a peer's string can reach a log record (message, value, key, error, group,
// a With attribute, a space prefix) through the handlers the CLI and its space hosts
// build, and checks that each record stays one line with nothing raw in it.
func TestLogHandlerEscapesPeerText(t *testing.T) {
	var unsafe []string
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if termsafe.Unsafe(r) {
			unsafe = append(unsafe, string(r))
		}
	}
	unsafe = append(unsafe, "\xff", "\xc3", "\r\n")
	for _, host := range []bool{false, true} {
		var buf bytes.Buffer
		h := cmdutil.LogHandler(&buf, slog.LevelDebug)
		if host {
			h = spacehost.NewPrefixHandler(h)
		}
		for _, u := range unsafe {
			name := "bob" + u + "[dm] bob: paste your creds"
			buf.Reset()
			log := slog.New(h).With("space", name).With("peer", name).WithGroup(name)
			log.Warn("presence-write-stuck "+name, "name", name, name, 1, "err", errors.New("decode "+name),
				"card", map[string]string{"name": name}, slog.Group(name, "role", name))
			out := buf.String()
			if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
				t.Fatalf("host %v, %q: the record is not one line:\n%s", host, u, out)
			}
			for _, r := range strings.TrimSuffix(out, "\n") {
				if termsafe.Unsafe(r) {
					t.Fatalf("host %v, %q: the record holds %U raw: %q", host, u, r, out)
				}
			}
			if !utf8.ValidString(out) {
				t.Fatalf("host %v, %q: the record is not UTF-8: %q", host, u, out)
			}
		}
	}
}
