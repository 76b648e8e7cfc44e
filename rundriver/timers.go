package rundriver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// A pause (a sleep, a checkpoint's timeout, a wait's timeout, a turn's deadline, an ask
// attempt's) is timed twice. The driver arms it on the timer plane: it publishes a
// schedule request on cotal.<space>.ept.<endpoint>.<instance>.<epoch>.<timerId>.schedule
// (the timer id is the step's request id, the wait's timeout token or the ask attempt's
// token; the instance is this driver's holder and
// the epoch its lease's), which the delivery daemon's timer writer arms on EPT and the
// broker fires at the deadline, on the sibling .fire subject, whether or not a driver
// still runs. And the driver keeps its own clock as a fallback, so a run with no daemon
// still expires. Whichever comes first ends the wait; the journal's settle (and a
// checkpoint's create-only settle fact) is written once, by the driver holding the run.
//
// A resumed driver reaches each pending pause again as it replays the program (a pending
// pause's branch has settled every step before it), so it re-arms the pause under its
// own instance and epoch, and it finds a fire recorded while no driver ran: the pause is
// over, even if its own clock says otherwise.

// firePoll is how often a waiting pause looks for its fire, as the reference's
// FIRE_POLL_MS.
const firePoll = 2 * time.Second

// timerBody is a schedule request's body, and an armed schedule's and its fire's.
type timerBody struct {
	V          int    `json:"v"`
	TimerID    string `json:"timerId"`
	Generation int64  `json:"generation"`
	Deadline   int64  `json:"deadline"`
}

var timerToken = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// timerInstance is the instance token of this driver's timers: its holder when that is a
// subject token, else a digest of it.
func (d *drive) timerInstance() string {
	if timerToken.MatchString(d.lease.Holder) {
		return d.lease.Holder
	}
	sum := sha256.Sum256([]byte(d.lease.Holder))
	return "h" + hex.EncodeToString(sum[:16])
}

// arm publishes the schedule request of timer (generation 1: a pause's deadline never
// moves) and says whether the timer plane took it. A space without the plane, or one
// whose broker does not answer, leaves the pause to the driver's own clock.
func (d *drive) arm(ctx context.Context, timer string, deadline int64) bool {
	if !timerToken.MatchString(timer) {
		return false
	}
	b, err := json.Marshal(timerBody{V: 1, TimerID: timer, Generation: 1, Deadline: deadline})
	if err != nil {
		return false
	}
	subject := protocol.TimerSubject(d.cfg.Space, d.cfg.endpoint(), d.timerInstance(), strconv.FormatInt(d.lease.Epoch, 10), timer, protocol.TimerSchedule)
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := d.cfg.JS.Publish(actx, subject, b); err != nil {
		d.log.Info("pause timed by the driver's clock alone: the timer plane did not take its schedule request", "run", d.run, "timer", timer, "err", err)
		return false
	}
	return true
}

// fired says whether the broker fired timer's schedule for deadline, under any instance
// and epoch: a fire whose Nats-Scheduler header (which only the broker's scheduler
// writes) names its sibling .armed subject and whose body names the timer and deadline.
func (d *drive) fired(ctx context.Context, timer string, deadline int64) (bool, error) {
	filter := protocol.TimerSubject(d.cfg.Space, d.cfg.endpoint(), "*", "*", timer, protocol.TimerFire)
	req, _ := json.Marshal(map[string]string{"last_by_subj": filter})
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	reply, err := d.cfg.JS.Conn().RequestWithContext(gctx, jetstream.DefaultAPIPrefix+"STREAM.MSG.GET."+provision.StreamEPT(d.cfg.Space), req)
	if err != nil {
		return false, fmt.Errorf("read fire of timer %s: %w", timer, err)
	}
	var resp struct {
		Message *struct {
			Subject string `json:"subject"`
			Header  []byte `json:"hdrs"`
			Data    []byte `json:"data"`
		} `json:"message"`
		Error *struct {
			Code    int    `json:"err_code"`
			Message string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return false, fmt.Errorf("read fire of timer %s: %w", timer, err)
	}
	if resp.Error != nil {
		if resp.Error.Code == 10037 { // no message found
			return false, nil
		}
		return false, fmt.Errorf("read fire of timer %s: %s (%d)", timer, resp.Error.Message, resp.Error.Code)
	}
	if resp.Message == nil {
		return false, nil
	}
	hdr := nats.Header{}
	if len(resp.Message.Header) > 0 {
		if hdr, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return false, fmt.Errorf("read fire of timer %s: %w", timer, err)
		}
	}
	armed := resp.Message.Subject[:len(resp.Message.Subject)-len(protocol.TimerFire)] + protocol.TimerArmed
	var body timerBody
	if hdr.Get(jetstream.SchedulerHeader) != armed || json.Unmarshal(resp.Message.Data, &body) != nil ||
		body.TimerID != timer || body.Deadline != deadline {
		d.log.Warn("timer fire ignored: not the broker's fire of this pause", "run", d.run, "subject", resp.Message.Subject)
		return false, nil
	}
	return true, nil
}

// pause waits until the pause timer ends at (ms on the host clock), its fire arrives, or
// ready closes; fired says the broker's fire ended it. The host clock is read every
// second (as waitUntil does), the fire looked for every firePoll.
func (d *drive) pause(ctx context.Context, timer string, at int64, ready <-chan struct{}) (fired bool, err error) {
	if !d.arm(ctx, timer, at) {
		return false, d.waitUntil(ctx, at, ready)
	}
	var polled time.Time
	for {
		left := at - d.cfg.now()
		if left <= 0 {
			return false, nil
		}
		if time.Since(polled) >= firePoll {
			polled = time.Now()
			ok, err := d.fired(ctx, timer, at)
			if err != nil {
				if ctx.Err() != nil {
					return false, ctx.Err()
				}
				d.log.Warn("timer plane", "run", d.run, "err", err)
			}
			if ok {
				return true, nil
			}
		}
		t := time.NewTimer(min(time.Duration(left)*time.Millisecond, time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-ready:
			t.Stop()
			return false, nil
		case <-t.C:
		}
	}
}
