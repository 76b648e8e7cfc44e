package trust

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
)

// claimsUpdateSubject is where the system account pushes an account JWT to a running
// broker's full resolver.
const claimsUpdateSubject = "$SYS.REQ.CLAIMS.UPDATE"

// PushAccount hands an account JWT to a running broker over sys, a connection made with
// SystemCreds, so the broker serves the account (a new space) without a restart.
func PushAccount(ctx context.Context, sys *nats.Conn, accountJWT string) error {
	msg, err := sys.RequestWithContext(ctx, claimsUpdateSubject, []byte(accountJWT))
	if err != nil {
		return fmt.Errorf("push account to the broker: %w", err)
	}
	var reply struct {
		Data *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"data"`
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return fmt.Errorf("push account to the broker: reply %q: %w", msg.Data, err)
	}
	if reply.Error != nil {
		return fmt.Errorf("push account to the broker: refused (%d): %s", reply.Error.Code, reply.Error.Description)
	}
	return nil
}
