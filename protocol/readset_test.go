package protocol

import (
	"slices"
	"testing"
)

func TestReadSet(t *testing.T) {
	none := []string{}
	for _, tc := range []struct {
		name               string
		sub, allow         []string
		wantSub, wantAllow []string
	}{
		{"omitted reads nothing (DM-only)", nil, nil, none, none},
		{"explicit empty subscribe", none, nil, none, none},
		{"explicit empty allowSubscribe", nil, none, none, none},
		{"allowSubscribe defaults to subscribe", []string{"a"}, nil, []string{"a"}, []string{"a"}},
		{"empty allowSubscribe means subscribe", []string{"a"}, none, []string{"a"}, []string{"a"}},
		{"allowSubscribe alone joins nothing", nil, []string{"t.>"}, none, []string{"t.>"}},
		{"both given", []string{"t.a"}, []string{"t.>"}, []string{"t.a"}, []string{"t.>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub, allow := ReadSet(tc.sub, tc.allow)
			if sub == nil || allow == nil || !slices.Equal(sub, tc.wantSub) || !slices.Equal(allow, tc.wantAllow) {
				t.Fatalf("ReadSet(%#v, %#v) = %#v, %#v; want %v, %v", tc.sub, tc.allow, sub, allow, tc.wantSub, tc.wantAllow)
			}
			// Resolving a resolved pair changes nothing.
			if s2, a2 := ReadSet(sub, allow); !slices.Equal(s2, sub) || !slices.Equal(a2, allow) {
				t.Fatalf("not idempotent: %v, %v then %v, %v", sub, allow, s2, a2)
			}
		})
	}
}
