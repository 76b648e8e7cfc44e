package cmdutil

import "strings"

// ShellQuote quotes s for a POSIX shell when it holds anything but letters, digits and
// -_./:@=+, (so a command named in a refusal can be pasted as it reads).
func ShellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@=+,", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
