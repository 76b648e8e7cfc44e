package interop

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/provision"
)

// refTimerStreams are EPT_REQ_<s> and EPT_<s> as the reference's createEndpointStreams
// (packages/core/src/endpoint-binding.ts) adds them: the raw STREAM.CREATE bodies, with
// only the fields it sets.
func refTimerStreams(space string) map[string]string {
	day, month := (24 * time.Hour).Nanoseconds(), (31 * 24 * time.Hour).Nanoseconds()
	return map[string]string{
		"EPT_REQ_" + space: fmt.Sprintf(`{"name":"EPT_REQ_%[1]s","subjects":["cotal.%[1]s.ept.*.*.*.*.schedule"],"retention":"limits","storage":"file","max_age":%[2]d}`, space, day),
		"EPT_" + space:     fmt.Sprintf(`{"name":"EPT_%[1]s","subjects":["cotal.%[1]s.ept.*.*.*.*.armed","cotal.%[1]s.ept.*.*.*.*.fire"],"retention":"limits","storage":"file","allow_msg_schedules":true,"max_age":%[2]d}`, space, month),
	}
}

// TestTimerStreamsOfTheReference: the timer plane's streams as the reference makes them
// are taken by Go's provisioning as they are, and the reference's own add (which fails on
// an existing stream of another config) accepts the ones Go made.
func TestTimerStreamsOfTheReference(t *testing.T) {
	js := epStreamsJS(t)
	add := func(name, body string) error {
		msg, err := js.Conn().Request("$JS.API.STREAM.CREATE."+name, []byte(body), 5*time.Second)
		if err != nil {
			return err
		}
		var resp struct {
			Error *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		if err := json.Unmarshal(msg.Data, &resp); err != nil {
			return err
		}
		if resp.Error != nil {
			return fmt.Errorf("%s: %s", name, resp.Error.Description)
		}
		return nil
	}
	for name, body := range refTimerStreams("main") {
		if err := add(name, body); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := provision.Space(t.Context(), js, "main", provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"EPT_REQ_main", "EPT_main"} {
		if !slices.Contains(rep.Existing, s) {
			t.Fatalf("report %+v: the reference's %s should be taken as it is", rep, s)
		}
	}
	if _, err := provision.Space(t.Context(), js, "other", provision.Options{}); err != nil {
		t.Fatal(err)
	}
	for name, body := range refTimerStreams("other") {
		if err := add(name, body); err != nil {
			t.Fatalf("the reference's add on Go's stream: %v", err)
		}
	}
}
