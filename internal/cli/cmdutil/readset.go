package cmdutil

import (
	"fmt"
	"slices"
)

// ReadSetFlag turns the values of a repeatable channel flag of an agent's read set
// (--allow-subscribe, --subscribe) into the list protocol.ReadSet takes: nil when the flag
// was not given (the default, [general], applies), an empty non-nil list for one empty
// value (an empty --allow-subscribe: reads nothing), else the values. An empty value among
// channels is an error, for the caller to report as a usage error.
func ReadSetFlag(flag string, vals []string) ([]string, error) {
	if len(vals) == 1 && vals[0] == "" {
		return []string{}, nil
	}
	if slices.Contains(vals, "") {
		return nil, fmt.Errorf("%s '': an empty value means no channel at all, so it cannot be given with channels: drop it, or give it alone", flag)
	}
	return vals, nil
}
