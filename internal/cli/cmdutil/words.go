package cmdutil

import "fmt"

// Number is any integer a count is kept in.
type Number interface {
	~int | ~int32 | ~int64 | ~uint | ~uint32 | ~uint64
}

// Noun is noun in the plural unless n is 1: Noun(1, "message") is "message", Noun(3,
// "message") "messages". A noun whose plural is not noun+"s" passes it as plural.
func Noun[N Number](n N, noun string, plural ...string) string {
	if n == 1 {
		return noun
	}
	if len(plural) > 0 {
		return plural[0]
	}
	return noun + "s"
}

// Count is n followed by noun in the right number: "1 message", "3 messages".
func Count[N Number](n N, noun string, plural ...string) string {
	return fmt.Sprintf("%d %s", n, Noun(n, noun, plural...))
}
