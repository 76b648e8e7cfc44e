package plane

import (
	"strconv"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/testclock"
	"github.com/cotal-ai/cotal/protocol"
)

const userKey = "UAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

// openedAt is the claim's opening instant as the reference writes it (ISO-8601, ms, Z)
// and as an earlier Go row held it (unix milliseconds).
func openedAt(t testing.TB) (iso, unixMS string) {
	at := testclock.Epoch(t)
	return `"` + at.UTC().Format("2006-01-02T15:04:05.000Z") + `"`, strconv.FormatInt(at.UnixMilli(), 10)
}

func goodRow(t testing.TB) string {
	iso, _ := openedAt(t)
	return `{"v":1,"generation":2,"claimId":"c","state":"held",` +
		`"ledger":{"serverId":"S","cid":7,"userNkey":"` + userKey + `"},` +
		`"records":{"serverId":"S","cid":8,"userNkey":"` + userKey + `"},"openedAt":` + iso + `}`
}

type rowCase struct {
	name string
	in   string
	ok   bool
}

func rows(t testing.TB) []rowCase {
	iso, _ := openedAt(t)
	goodRow := func() string { return goodRow(t) }
	return []rowCase{
		{"held", goodRow(), true},
		{"released", strings.Replace(goodRow(), `"held"`, `"released"`, 1), true},
		{"empty", ``, false},
		{"not an object", `[]`, false},
		{"trailing data", goodRow() + `{}`, false},
		{"unknown key", strings.Replace(goodRow(), `{"v":1`, `{"v":1,"x":0`, 1), true},
		{"version 2", strings.Replace(goodRow(), `"v":1`, `"v":2`, 1), false},
		{"generation 0", strings.Replace(goodRow(), `"generation":2`, `"generation":0`, 1), false},
		{"no claim id", strings.Replace(goodRow(), `"claimId":"c"`, `"claimId":""`, 1), false},
		{"unknown state", strings.Replace(goodRow(), `"held"`, `"HELD"`, 1), false},
		{"no openedAt", strings.Replace(goodRow(), `,"openedAt":`+iso, ``, 1), false},
		{"openedAt not a time", strings.Replace(goodRow(), iso, `"yesterday"`, 1), false},
		{"cid 0", strings.Replace(goodRow(), `"cid":7`, `"cid":0`, 1), false},
		{"bad user key", strings.Replace(goodRow(), `"userNkey":"`+userKey+`"}`, `"userNkey":"U1"}`, 1), false},
		{"no server", strings.Replace(goodRow(), `"serverId":"S","cid":8`, `"serverId":"","cid":8`, 1), false},
		{"unknown tuple key", strings.Replace(goodRow(), `"cid":8,`, `"cid":8,"x":1,`, 1), true},
		{"null", `null`, false},
	}
}

// TestDecodeRow: the v1 schema, unknown keys ignored, and a decoded row encodes to what it
// was read from, without the unknown keys.
func TestDecodeRow(t *testing.T) {
	for _, c := range rows(t) {
		r, err := DecodeRow([]byte(c.in))
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if c.ok && string(r.Encode()) != c.in && string(r.Encode()) != goodRow(t) {
			t.Errorf("%s: encodes to %s", c.name, r.Encode())
		}
	}
	// An earlier Go row holds openedAt in unix milliseconds: read, and written back in
	// the reference's form.
	iso, ms := openedAt(t)
	old := strings.Replace(goodRow(t), iso, ms, 1)
	if r, err := DecodeRow([]byte(old)); err != nil || string(r.Encode()) != goodRow(t) {
		t.Errorf("earlier Go row: %v, encodes to %s", err, r.Encode())
	}
	r, _ := DecodeRow([]byte(goodRow(t)))
	want := protocol.LivenessArgs{Ledger: protocol.ConnTuple{ServerID: "S", CID: 7, UserNkey: userKey},
		Records: protocol.ConnTuple{ServerID: "S", CID: 8, UserNkey: userKey}}
	if r.Tuples() != want {
		t.Errorf("tuples %+v", r.Tuples())
	}
}

// FuzzDecodeRow: decoding never panics, and what decodes encodes to a row that decodes
// to the same value.
func FuzzDecodeRow(f *testing.F) {
	for _, c := range rows(f) {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := DecodeRow([]byte(s))
		if err != nil {
			return
		}
		back, err := DecodeRow(r.Encode())
		if err != nil || back != r {
			t.Fatalf("%q decoded to %+v, which re-decodes to %+v, %v", s, r, back, err)
		}
	})
}
