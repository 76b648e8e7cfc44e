// Package bytesize writes byte counts as a person reads them: 1GiB, 512MiB, 1500B.
package bytesize

import "strconv"

// units are the binary units, largest first.
var units = [...]struct {
	suffix string
	factor int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}

// Format writes n in the largest binary unit that divides it: 1GiB, 250KiB, 1500B.
func Format(n int64) string {
	for _, u := range units {
		if n >= u.factor && n%u.factor == 0 {
			return strconv.FormatInt(n/u.factor, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
