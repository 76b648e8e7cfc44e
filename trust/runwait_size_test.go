package trust

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

// TestManagerPermissionsFitALongSpace: the manager's permissions, with the run host's
// channel-wait grants, stay under the policy limit with a 64-character space name.
func TestManagerPermissionsFitALongSpace(t *testing.T) {
	acct := &Account{space: strings.Repeat("s", 64)}
	spec := UserSpec{Name: "manager", Profile: ProfileManager, Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "manager"},
		LifecycleUID: strings.Repeat("u", 26)}
	perms, err := acct.Permissions(spec, newUserKey(t))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(perms)
	t.Logf("manager permissions with a 64-character space: %d bytes of %d", len(b), MaxPolicySize)
}
