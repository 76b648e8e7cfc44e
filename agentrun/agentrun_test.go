package agentrun

import (
	"reflect"
	"testing"
)

func TestChildEnv(t *testing.T) {
	got := ChildEnv([]string{"PATH=/bin", "COTAL_CREDS=/op.creds", "CODEX_HOME=/op", "HOME=/h"}, map[string]string{"CODEX_HOME": "/agent", "COTAL_NAME": "dave"})
	want := []string{"PATH=/bin", "HOME=/h", "CODEX_HOME=/agent", "COTAL_NAME=dave"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("child env %q, want %q", got, want)
	}
}
