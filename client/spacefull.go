package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/bytesize"
)

// SpaceFullError reports a message the broker did not store because its space reached
// the storage limit of its account: nothing of the message was stored, and nothing stored
// before was lost. Err is the broker's refusal.
type SpaceFullError struct {
	Space string
	Limit int64 // the account's storage limit in bytes; 0 when the broker did not say
	Err   error
}

// Error says what happened and what to do.
func (e *SpaceFullError) Error() string {
	limit := ""
	if e.Limit > 0 {
		limit = " " + bytesize.Format(e.Limit)
	}
	return fmt.Sprintf("space %s is full: its storage limit%s is reached, so this message was not stored "+
		"(nothing stored before is lost); next: the operator raises the limit (cotal up --space %s --max-storage <larger>) "+
		"or frees room in the space (%v)", e.Space, limit, e.Space, e.Err)
}

// Unwrap is the broker's refusal.
func (e *SpaceFullError) Unwrap() error { return e.Err }

// sendFailed is the error of a send the broker answered with err: a *SpaceFullError
// naming the space's storage limit when that is why.
func (e *Endpoint) sendFailed(ctx context.Context, subject string, err error) error {
	if !IsSpaceFull(err) {
		return fmt.Errorf("send %s: %w", subject, err)
	}
	full := &SpaceFullError{Space: e.cfg.Space, Err: err}
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if info, ierr := e.js.AccountInfo(ictx); ierr == nil {
		full.Limit = info.Limits.MaxStore
	}
	return full
}

// IsSpaceFull reports whether err is the broker's refusal of a write because the space's
// account reached its storage or memory limit (JetStream errors 10002, 10028 and 10047).
func IsSpaceFull(err error) bool {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode {
	case 10002, 10028, 10047: // account resource limits exceeded; insufficient memory; insufficient storage
		return true
	}
	return false
}
