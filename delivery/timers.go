package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// The timer writer arms the timer plane, as the reference's delivery daemon does: a host
// that pauses (a workflow run's sleep or checkpoint) publishes a schedule request on
// cotal.<space>.ept.<endpoint>.<instanceId>.<epoch>.<timerId>.schedule (EPT_REQ_<space>,
// where message schedules are off, so a header a requester sets arms nothing). The writer
// reads the requests through its durable timerw_<space>, checks each, and publishes the
// authoritative schedule on the sibling .armed subject of EPT_<space>, targeting the
// sibling .fire: the broker publishes the fire at the deadline. Every subject is derived
// from the request's own subject, which the broker authenticated, never from its body.
//
// The writer keeps nothing in memory: requests wait in EPT_REQ until it acknowledges them,
// and an armed schedule lives in EPT, so a writer restarted between arm and fire loses no
// timer and the fire comes while no host runs.

// TimerRequest is the body of a schedule request, of an armed schedule and of its fire:
// which timer (the subject's timerId), its generation (a later one supersedes an earlier
// one on the same subject) and its deadline in ms since the epoch.
type TimerRequest struct {
	V          int    `json:"v"`
	TimerID    string `json:"timerId"`
	Generation int64  `json:"generation"`
	Deadline   int64  `json:"deadline"`
}

// errTimerRefused marks a request that can never be armed: it is terminated, not retried.
var errTimerRefused = errors.New("schedule request refused")

var timerIDToken = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// TimerWriter arms the schedule requests of one space until its context ends.
type TimerWriter struct {
	Space   string
	JS      jetstream.JetStream
	AckWait time.Duration // the durable's ack wait; 0 means 60 s, as the reference's
	Logger  *slog.Logger  // nil means discard
}

// Run binds (creating when missing) the writer's durable and arms each request it reads,
// until ctx ends. A request that can never be armed is terminated and logged.
func (w *TimerWriter) Run(ctx context.Context) error {
	log := w.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ackWait := w.AckWait
	if ackWait <= 0 {
		ackWait = 60 * time.Second
	}
	all := protocol.TimerSubject(w.Space, "*", "*", "*", "*", protocol.TimerSchedule)
	cons, err := w.JS.CreateOrUpdateConsumer(ctx, provision.StreamEPTReq(w.Space), jetstream.ConsumerConfig{
		Durable: protocol.TimerWriterDurable(w.Space), FilterSubject: all, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: ackWait, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("timer writer %s: durable %s: %w", w.Space, protocol.TimerWriterDurable(w.Space), err)
	}
	ept, err := w.JS.Stream(ctx, provision.StreamEPT(w.Space))
	if err != nil {
		return fmt.Errorf("timer writer %s: stream %s: %w", w.Space, provision.StreamEPT(w.Space), err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("timer writer %s: %w", w.Space, err)
	}
	log.Info("timer writer up", "durable", protocol.TimerWriterDurable(w.Space))
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("timer writer %s: %w", w.Space, err)
		}
		err = w.arm(ctx, ept, m.Subject(), m.Headers(), m.Data())
		switch {
		case err == nil:
			_ = m.Ack()
		case errors.Is(err, errTimerRefused):
			log.Warn("timer writer: schedule request refused", "subject", m.Subject(), "err", err)
			_ = m.Term()
		default:
			log.Warn("timer writer: arm failed, retrying", "subject", m.Subject(), "err", err)
			_ = m.NakWithDelay(time.Second)
		}
	}
}

// arm checks one request and publishes its armed schedule, unless a later generation is
// armed on the same subject already.
func (w *TimerWriter) arm(ctx context.Context, ept jetstream.Stream, subject string, h nats.Header, data []byte) error {
	for k := range h {
		if strings.HasPrefix(strings.ToLower(k), "nats-schedule") {
			return fmt.Errorf("%w: it carries the scheduling header %s; only the timer writer schedules", errTimerRefused, k)
		}
	}
	t := strings.Split(subject, ".")
	if len(t) != 8 || t[0] != protocol.Root || t[1] != w.Space || t[2] != "ept" || t[7] != protocol.TimerSchedule {
		return fmt.Errorf("%w: %s is not a schedule request of space %s", errTimerRefused, subject, w.Space)
	}
	ep, inst, epoch, timer := t[3], t[4], t[5], t[6]
	for _, tok := range []string{ep, inst, timer} {
		if !timerIDToken.MatchString(tok) {
			return fmt.Errorf("%w: token %q of %s: want 1 to 64 of A-Z a-z 0-9 _ -", errTimerRefused, tok, subject)
		}
	}
	if n, err := strconv.ParseUint(epoch, 10, 53); err != nil || strconv.FormatUint(n, 10) != epoch {
		return fmt.Errorf("%w: epoch %q of %s: want a decimal integer", errTimerRefused, epoch, subject)
	}
	var req TimerRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return fmt.Errorf("%w: body: %v", errTimerRefused, err)
	}
	if req.V != 1 || req.TimerID != timer || req.Generation < 1 || req.Deadline < 0 {
		return fmt.Errorf("%w: body %s: want {v:1, timerId:%q, generation>=1, deadline>=0}", errTimerRefused, data, timer)
	}
	armed := protocol.TimerSubject(w.Space, ep, inst, epoch, timer, protocol.TimerArmed)
	fire := protocol.TimerSubject(w.Space, ep, inst, epoch, timer, protocol.TimerFire)
	// A later generation armed or fired supersedes this request; this generation fired
	// already means the request is read again (its ack was lost) and must not fire twice.
	// Its arm is repeated, so a fire still due comes once (the new schedule replaces the
	// old on its subject).
	for _, subj := range []string{armed, fire} {
		cur, err := ept.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", subj, err)
		}
		var prev TimerRequest
		if json.Unmarshal(cur.Data, &prev) != nil {
			continue
		}
		if prev.Generation > req.Generation || (subj == fire && prev.Generation == req.Generation) {
			return nil
		}
	}
	body, err := json.Marshal(TimerRequest{V: 1, TimerID: timer, Generation: req.Generation, Deadline: req.Deadline})
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: armed, Data: body, Header: nats.Header{}}
	msg.Header.Set(jetstream.ScheduleHeader, "@at "+time.UnixMilli(req.Deadline).UTC().Format(time.RFC3339Nano))
	msg.Header.Set(jetstream.ScheduleTargetHeader, fire)
	if _, err := w.JS.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publish %s: %w", armed, err)
	}
	return nil
}

// superviseTimerWriter runs w until ctx ends, starting it again after a failure (a space
// provisioned before the timer plane existed, a lost connection) after a pause of 5 s
// that doubles up to 5 min, as the reference's daemon does.
func superviseTimerWriter(ctx context.Context, w *TimerWriter) {
	log := w.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	backoff := 5 * time.Second
	for {
		err := w.Run(ctx)
		if ctx.Err() != nil {
			return
		}
		log.Warn("timer writer down; pauses expire by their hosts' own clocks meanwhile", "err", err, "retry in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Minute)
	}
}
