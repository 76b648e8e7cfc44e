//go:build linux

package workspace

import (
	"errors"
	"fmt"
	"testing"
)

func TestParseStat(t *testing.T) {
	rest := " 1 1 1 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 %s 1000 10"
	tests := []struct {
		name, data, want string
		gone, err        bool
	}{
		{"plain", "123 (nats) S" + fmt.Sprintf(rest, "98765"), "98765", false, false},
		{"comm with spaces and parens", "123 (a) b (c)) R" + fmt.Sprintf(rest, "42"), "42", false, false},
		{"zombie", "123 (x) Z" + fmt.Sprintf(rest, "42"), "", true, false},
		{"dead", "123 (x) X" + fmt.Sprintf(rest, "42"), "", true, false},
		{"no comm", "123 x S 1 2 3", "", false, true},
		{"too short", "123 (x) S 1 2 3", "", false, true},
		{"start not a number", "123 (x) S" + fmt.Sprintf(rest, "-4"), "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat("/proc/123/stat", []byte(tt.data))
			switch {
			case tt.gone:
				if !errors.Is(err, errProcessGone) {
					t.Fatalf("parseStat = %q, %v; want errProcessGone", got, err)
				}
			case tt.err:
				if err == nil || errors.Is(err, errProcessGone) {
					t.Fatalf("parseStat = %q, %v; want a parse error", got, err)
				}
			case err != nil || got != tt.want:
				t.Fatalf("parseStat = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
