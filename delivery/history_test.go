package delivery

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestHistoryLimit: readHistory's limit as the reference reads it (endpoint.ts
// deliveryReadHistory): absent is 100, more than 200 is 200, anything but a positive
// integer is refused and echoed as JSON.stringify writes it.
func TestHistoryLimit(t *testing.T) {
	for raw, want := range map[string]int{"": 100, "1": 1, "200": 200, "201": 200, "1e300": 200, "1.5e21": 200, "2.0": 2, "1E2": 100} {
		got, err := historyLimit(json.RawMessage(raw))
		if err != nil || got != want {
			t.Errorf("limit %q: %d, %v; want %d", raw, got, err, want)
		}
	}
	for raw, echo := range map[string]string{
		"0": "0", "-1": "-1", "1.5": "1.5", "-0": "0", "1e-7": "1e-7", "0.000001": "0.000001", "1e400": "null",
		"-123.456e20": "-1.23456e+22", "-1.2e20": "-120000000000000000000", "-1.5e21": "-1.5e+21", "-2.5e-9": "-2.5e-9", `"5"`: `"5"`, "null": "null", "true": "true",
		`{ "a" : [1, 2] }`: `{"a":[1,2]}`, `"<&>"`: `"<&>"`,
	} {
		_, err := historyLimit(json.RawMessage(raw))
		if err == nil || err.Error() != "readHistory: limit must be a positive integer (got "+echo+")" {
			t.Errorf("limit %s: %v; want echo %s", raw, err, echo)
		}
	}
}

// TestFitHistory: the newest items whose page fits the budget are kept (the reference's
// fitHistoryPage: brackets, and each item with its comma).
func TestFitHistory(t *testing.T) {
	items := []json.RawMessage{json.RawMessage(`{"id":"a"}`), json.RawMessage(`{"id":"b"}`), json.RawMessage(`{"id":"cc"}`)}
	for budget, want := range map[int]string{2 + 12: "cc", 2 + 12 + 11: "b,cc", 2 + 12 + 11 + 10: "b,cc", 2 + 12 + 11 + 11: "a,b,cc", 13: ""} {
		var ids []string
		for _, it := range fitHistory(items, budget) {
			var v struct{ ID string }
			_ = json.Unmarshal(it, &v)
			ids = append(ids, v.ID)
		}
		if got := strings.Join(ids, ","); got != want {
			t.Errorf("budget %d: %q, want %q", budget, got, want)
		}
	}
}

// TestHistoryItem: what a history read serves of a CHAT message (the reference's
// historyMessageFromDelivery): an object with a string id and an object from naming the
// subject's sender, authenticated for the subject's channel; anything else is skipped.
func TestHistoryItem(t *testing.T) {
	const subj = "cotal.s.chat.local.alice.team.backend"
	for data, ok := range map[string]bool{
		`{"id":"1","from":{"id":"local.alice"}}`:                 true,
		`{"id":"","from":{"id":"local.alice"},"to":"local.bob"}`: true,
		`{"id":"1","from":{"id":"local.bob"}}`:                   false,
		`{"id":1,"from":{"id":"local.alice"}}`:                   false,
		`{"from":{"id":"local.alice"}}`:                          false,
		`{"id":"1","from":"local.alice"}`:                        false,
		`{"id":"1","from":{"id":5}}`:                             false,
		`{"id":"1"}`:                                             false,
		`null`:                                                   false,
		`[1]`:                                                    false,
		`not json`:                                               false,
		`{"id":"1","from":{"id":"local.alice"},"channel":"elsewhere"}`: true,
	} {
		item, got := historyItem(subj, []byte(data))
		if got != ok {
			t.Errorf("%s: served %v, want %v", data, got, ok)
			continue
		}
		if !ok {
			continue
		}
		var m map[string]any
		_ = json.Unmarshal(item, &m)
		if _, has := m["to"]; has || m["channel"] != "team.backend" {
			t.Errorf("%s: served %s", data, item)
		}
	}
	if _, ok := historyItem("cotal.s.chat.x_ab.alice.general", []byte(`{"id":"1","from":{"id":"x_ab.alice"}}`)); ok {
		t.Error("a post from a non-principal owner was served")
	}
	if _, ok := historyItem("cotal.s.inst.local.bob.local.alice", []byte(`{"id":"1","from":{"id":"local.alice"}}`)); ok {
		t.Error("a DM was served")
	}
}
