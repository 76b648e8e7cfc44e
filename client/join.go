package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/cotal-ai/cotal/protocol"
)

// Join makes the endpoint a live member of its space: it binds (or in open mode
// creates) its DM durable, binds the role's anycast durable when it has a role, writes
// its presence and keeps it fresh, and joins channels (see JoinChannel: history streams
// into Messages() after Join returns, so read Messages() to receive it). It may be called
// once. With Config.SoleSession it fails with ErrSessionLive, and changes nothing, while another
// connection consumes this principal's direct messages (another live session of the name).
func (e *Endpoint) Join(ctx context.Context, channels ...string) (err error) {
	e.mu.Lock()
	if e.joined || e.closed {
		e.mu.Unlock()
		return errors.New("join: the endpoint has already joined or closed")
	}
	e.joined = true
	e.mu.Unlock()
	defer func() {
		if err != nil {
			err = fmt.Errorf("join space %q as %s: %w", e.cfg.Space, e.me, err)
		}
	}()

	// The channels' history goes ahead of durable copies bound before them.
	release := e.reserveGates(channels)
	defer release()
	if err := e.bindDM(ctx); err != nil {
		return err
	}
	e.bindExistingHandoff(ctx)
	if e.cfg.Role != "" {
		if err := e.bindRole(ctx); err != nil {
			return err
		}
	}
	if err := e.writePresence(ctx, e.currentStatus()); err != nil {
		return err
	}
	e.mu.Lock()
	e.present = true
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.heartbeat(e.ctx)
	}()
	for _, ch := range channels {
		if err := e.JoinChannel(ctx, ch); err != nil {
			return err
		}
	}
	return nil
}

func (e *Endpoint) currentStatus() protocol.Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.status
}
