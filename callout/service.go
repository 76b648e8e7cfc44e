package callout

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

const (
	// ServiceName is the NATS micro service name a responder registers under with
	// Config.ServiceEndpoints; every space's responder uses it, and the "space" metadata
	// tells them apart.
	ServiceName = "cotal-auth-callout"
	// ServiceVersion is the micro service version.
	ServiceVersion = "1.0.0"
	// EndpointName names the service's one endpoint, on Subject in QueueGroup.
	EndpointName = "authorize"
)

// Stats counts the outcomes of the requests one Run took. With Config.ServiceEndpoints it
// is the "data" of the authorize endpoint in $SRV.STATS.
//
// The endpoint's micro counters keep their micro meaning: num_requests counts every
// request taken, dropped ones included, and num_errors counts replies that failed to send
// (or async errors on the subscription). A refusal is not a micro error: it is a signed,
// sealed authorization response like a grant, so the wire carries no Nats-Service-Error
// header and micro never sees it fail; it is counted here instead, and so is a drop, which
// has no reply at all. Granted + Refused + Dropped equals num_requests.
type Stats struct {
	Granted uint64 `json:"granted"` // answered with a data-account user JWT
	Refused uint64 `json:"refused"` // answered with a signed error
	Dropped uint64 `json:"dropped"` // not answered: the server times out and denies
}

// counters are the live Stats of one Run; the endpoint's stats handler reads them while
// requests are served.
type counters struct {
	granted, refused, dropped atomic.Uint64
}

// stats is a snapshot of c.
func (c *counters) stats() Stats {
	return Stats{Granted: c.granted.Load(), Refused: c.refused.Load(), Dropped: c.dropped.Load()}
}

// serviceConfig is the micro service Run registers; its endpoint is added separately so
// that it can carry EndpointName.
func (r *Responder) serviceConfig(st *counters) micro.Config {
	meta := map[string]string{
		"callout_account": r.cfg.CalloutAccount,
		"data_account":    r.cfg.DataAccount,
	}
	desc := "Cotal auth callout"
	if r.cfg.Space != "" {
		meta["space"] = r.cfg.Space
		desc += " of space " + r.cfg.Space
	}
	return micro.Config{
		Name: ServiceName, Version: ServiceVersion, Description: desc, Metadata: meta,
		QueueGroup:   QueueGroup,
		StatsHandler: func(*micro.Endpoint) any { return st.stats() },
	}
}

// runService is Run as the micro service ServiceName. micro calls the handler from the
// endpoint subscription's goroutine, one request at a time; the handler holds mu while it
// answers, so once Run has stopped the service and taken mu, no request is being answered
// and any still delivered is dropped unanswered.
func (r *Responder) runService(ctx context.Context, nc *nats.Conn, ready func(), closed <-chan nats.Status) error {
	var (
		st      counters
		mu      sync.Mutex
		stopped bool
	)
	handler := micro.HandlerFunc(func(req micro.Request) {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			st.dropped.Add(1)
			return
		}
		r.serve(ctx, req.Headers().Get(XKeyHeader), req.Data(), &st, func(b []byte) error { return req.Respond(b) })
	})
	svc, err := micro.AddService(nc, r.serviceConfig(&st))
	if err != nil {
		return fmt.Errorf("callout: service %s: %w", ServiceName, err)
	}
	defer func() {
		if err := svc.Stop(); err != nil {
			r.log.Warn("callout service stop", "err", err)
		}
		mu.Lock()
		stopped = true
		mu.Unlock()
	}()
	if err := svc.AddEndpoint(EndpointName, handler,
		micro.WithEndpointSubject(Subject), micro.WithEndpointQueueGroup(QueueGroup)); err != nil {
		return fmt.Errorf("callout: service %s: endpoint %s: %w", ServiceName, Subject, err)
	}
	fctx, cancel := context.WithTimeout(ctx, flushTimeout)
	err = nc.FlushWithContext(fctx)
	cancel()
	if err != nil {
		return fmt.Errorf("callout: flush service subscriptions: %w", err)
	}
	if ready != nil {
		ready()
	}
	select {
	case <-ctx.Done():
		return nil
	case <-closed:
		return fmt.Errorf("callout: %w", nats.ErrConnectionClosed)
	}
}
