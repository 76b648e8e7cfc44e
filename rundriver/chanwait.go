package rundriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/lang"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/runstore"
)

// Channel effects: wait(message(channel, {from?, matches?})), wait(idle(channel, dur))
// and monitor(agent), as the reference's mesh handler performs them.
//
// A channel wait holds its position on the channel in a durable consumer of the chat
// stream named wfw_<requestId>, filtered to cotal.<space>.chat.*.*.<channel>, acked
// explicitly and delivering only messages published after it was first made. The name
// is the step's request id, so a resumed driver re-attaches to the consumer its
// predecessor made and sees what was posted while no driver ran. A matched message's
// stream sequence is bound on the pending entry before the message is acked: a resume
// answers that message again from the stream, never a second one. The consumer is
// deleted once the wait is over (matched, timed out, idle, or its branch cancelled),
// never when the driver itself stops.
//
// Before each channel read the run's admission is read again: a run with none, or one
// revoked, or one whose read ceiling does not cover the channel, is refused.

// MaxMatchPattern bounds a wait's matches pattern, as the reference does.
const MaxMatchPattern = 256

// waitPoll is how long one fetch of a wait's consumer blocks: how late a deadline, an
// idle window or a revocation is noticed at most.
const waitPoll = time.Second

// chanExternal is what a channel wait binds on its pending entry once its consumer is
// made: the channel it reads, when it began, its one absolute deadline (0: none), and,
// once matched, the stream sequence of the message it took.
type chanExternal struct {
	WaitChannel string `json:"waitChannel"`
	Since       int64  `json:"since"`
	Deadline    int64  `json:"deadline,omitempty"`
	ChatSeq     uint64 `json:"chatSeq,omitempty"`
}

// chanEvent is a wait's channel event as the program built it.
type chanEvent struct {
	kind    string // message or idle
	channel string
	from    string
	matches *regexp.Regexp
	idle    int64 // ms, for idle
}

func badEvent(format string, args ...any) *lang.EffectError {
	return &lang.EffectError{Code: "L4016", Kind: "bad-event", Message: fmt.Sprintf(format, args...)}
}

// readChanEvent checks a message or idle event: one concrete channel, a from that is a
// name, a matches pattern that is anchored and bounded, an idle window.
func readChanEvent(ev map[string]any) (chanEvent, *lang.EffectError) {
	e := chanEvent{}
	e.kind, _ = ev["event"].(string)
	e.channel, _ = ev["channel"].(string)
	if err := protocol.CheckConcreteChannel(e.channel); err != nil {
		return e, badEvent("wait() awaits one channel, not a wildcard or a malformed name: %v", err)
	}
	if e.kind == "idle" {
		ms, err := lang.ParseDuration(fmt.Sprint(ev["duration"]))
		if err != nil || ms <= 0 {
			return e, badEvent("idle needs a window such as \"10m\"")
		}
		e.idle = ms
		return e, nil
	}
	if v, ok := ev["from"]; ok && v != nil {
		s, ok := v.(string)
		if !ok || s == "" {
			return e, badEvent("message's from is an agent's name or handle")
		}
		e.from = s
	}
	if v, ok := ev["matches"]; ok && v != nil {
		s, ok := v.(string)
		if !ok {
			return e, badEvent("message's matches is a regular expression as a string")
		}
		re, err := compileMatch(s)
		if err != nil {
			return e, badEvent("wait()'s matches is a bounded regular expression, anchored at its start (^): %v", err)
		}
		e.matches = re
	}
	return e, nil
}

// compileMatch admits a matches pattern: at most MaxMatchPattern characters, anchored at
// the start, in the linear-time syntax (no back-references or look-arounds).
func compileMatch(s string) (*regexp.Regexp, error) {
	if len(s) > MaxMatchPattern {
		return nil, fmt.Errorf("the pattern has %d characters, more than %d", len(s), MaxMatchPattern)
	}
	if !strings.HasPrefix(s, "^") {
		return nil, errors.New("the pattern must start with ^ (write ^.* to match anywhere)")
	}
	return regexp.Compile(s)
}

// answers reports whether msg (a decoded chat message) answers the event: from is the
// sender's name (case-insensitive; a handle name#uid is matched on its name), matches
// is tested on the message's text parts joined by newlines.
func (e chanEvent) answers(msg map[string]any) bool {
	if e.from != "" {
		from, _ := msg["from"].(map[string]any)
		name, _ := from["name"].(string)
		want, _, _ := strings.Cut(e.from, "#")
		if !strings.EqualFold(name, want) {
			return false
		}
	}
	if e.matches == nil {
		return true
	}
	parts, _ := msg["parts"].([]any)
	var texts []string
	for _, p := range parts {
		if pm, ok := p.(map[string]any); ok && pm["kind"] == protocol.PartText {
			if t, ok := pm["text"].(string); ok {
				texts = append(texts, t)
			}
		}
	}
	return e.matches.MatchString(strings.Join(texts, "\n"))
}

// decodeChat reads a chat message as a JSON object; anything else answers nothing.
func decodeChat(data []byte) map[string]any {
	var v any
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	m, _ := v.(map[string]any)
	return m
}

// waitConsumerName is the durable that holds one wait's position: wfw_<requestId>.
func waitConsumerName(requestID string) string { return "wfw_" + requestID }

// waitConsumerConfig is a wait's consumer: the channel from any sender, acked
// explicitly, from the messages published after it is first made.
func waitConsumerConfig(space, requestID, channel string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       waitConsumerName(requestID),
		FilterSubject: protocol.ChannelFilter(space, channel),
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverNewPolicy,
	}
}

// permissionDenied is a channel effect the run's admission does not allow.
func permissionDenied(format string, args ...any) *lang.EffectError {
	return &lang.EffectError{Code: "L4000", Kind: "permission-denied", Message: fmt.Sprintf(format, args...)}
}

// admitted reads the run's admission and revocation marker again (leader-served) and
// refuses unless the read ceiling covers the channel.
func (d *drive) admitted(ctx context.Context, channel string) error {
	adm, err := runstore.OpenAdmissions(ctx, d.cfg.JS, d.cfg.Space)
	if err != nil {
		return permissionDenied("run %s: its admission cannot be read: %v", d.run, err)
	}
	ep := d.cfg.endpoint()
	a, err := adm.Admission(ctx, ep, d.run)
	if errors.Is(err, runstore.ErrNoRecord) {
		return permissionDenied("run %s has no admission, so it may read no channel", d.run)
	}
	if err != nil {
		return permissionDenied("run %s: its admission cannot be read: %v", d.run, err)
	}
	rv, err := adm.Revoked(ctx, ep, d.run)
	if err != nil {
		return permissionDenied("run %s: its revocation marker cannot be read: %v", d.run, err)
	}
	if rv != nil {
		return permissionDenied("run %s was revoked by %s (%s); no further channel effect runs", d.run, rv.By, rv.Reason)
	}
	if !permitsPattern(a.Ceiling.Subscribe, protocol.ChannelFilter(d.cfg.Space, channel)) {
		return permissionDenied("run %s is not admitted to read channel %q", d.run, channel)
	}
	return nil
}

// permitsPattern reports whether a ceiling direction covers every subject of pattern:
// allowed all, or covered by an allow pattern, and touched by no deny pattern.
func permitsPattern(p runstore.SubjectPermission, pattern string) bool {
	for _, deny := range p.Deny {
		if subjectsOverlap(deny, pattern) {
			return false
		}
	}
	switch p.Allow.Mode {
	case runstore.AllowAll:
		return true
	case runstore.AllowPatterns:
		for _, allow := range p.Allow.Patterns {
			if subjectCovers(allow, pattern) {
				return true
			}
		}
	}
	return false
}

// subjectCovers reports whether every subject pattern s matches is matched by p.
func subjectCovers(p, s string) bool {
	ps, ss := strings.Split(p, "."), strings.Split(s, ".")
	for i, t := range ps {
		if t == ">" {
			return len(ss) > i
		}
		if i >= len(ss) || ss[i] == ">" {
			return false
		}
		if t != "*" && t != ss[i] {
			return false
		}
	}
	return len(ps) == len(ss)
}

// subjectsOverlap reports whether some subject matches both a and b.
func subjectsOverlap(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; ; i++ {
		switch {
		case i == len(as) || i == len(bs):
			return len(as) == len(bs)
		case as[i] == ">" || bs[i] == ">":
			return true
		case as[i] != "*" && bs[i] != "*" && as[i] != bs[i]:
			return false
		}
	}
}

func readChanExternal(e runstore.Entry) (chanExternal, bool) {
	var x chanExternal
	if len(e.External) == 0 || json.Unmarshal(e.External, &x) != nil || x.WaitChannel == "" {
		return x, false
	}
	return x, true
}

// bindChan appends e pending again with x bound.
func (d *drive) bindChan(ctx context.Context, e runstore.Entry, x chanExternal) (runstore.Entry, error) {
	b, err := json.Marshal(x)
	if err != nil {
		return e, err
	}
	e.External = b
	return d.append(ctx, e)
}

// waitChannel performs wait(message(...)) and wait(idle(...)).
func (d *drive) waitChannel(ctx context.Context, c lang.Call, e runstore.Entry, ev map[string]any) (lang.Result, error) {
	evt, bad := readChanEvent(ev)
	if bad != nil {
		return d.failStep(ctx, e, bad)
	}
	if err := d.admitted(ctx, evt.channel); err != nil {
		return d.failStep(ctx, e, err.(*lang.EffectError))
	}
	chat := protocol.StreamChat(d.cfg.Space)
	x, bound := readChanExternal(e)
	if bound && x.WaitChannel != evt.channel {
		return lang.Result{}, fmt.Errorf("wait %s: its entry is bound to channel %q, not %q", c.Key, x.WaitChannel, evt.channel)
	}
	if bound && x.ChatSeq > 0 {
		// A predecessor matched and acked this message before it could settle.
		msg, err := d.messageAt(ctx, chat, e.RequestID, x)
		if err != nil {
			return lang.Result{}, fmt.Errorf("wait %s: %w", c.Key, err)
		}
		return d.settleWait(ctx, e, msg, max(d.cfg.now(), x.Since))
	}
	var timeout int64
	if s, ok := c.Input["timeout"].(string); ok && !bound {
		ms, err := lang.ParseDuration(s)
		if err != nil {
			return d.failStep(ctx, e, &lang.EffectError{Code: "L4016", Kind: "bad-duration", Message: err.Error()})
		}
		timeout = ms
	}
	// The consumer first, then the bind: once the entry names its channel, the position
	// on that channel is held (a stop in between re-binds and finds the same consumer).
	name := waitConsumerName(e.RequestID)
	cons, err := d.cfg.JS.CreateConsumer(ctx, chat, waitConsumerConfig(d.cfg.Space, e.RequestID, evt.channel))
	if err != nil {
		return lang.Result{}, fmt.Errorf("wait %s: consumer %s on %s: %w", c.Key, name, chat, err)
	}
	if !bound {
		now := d.cfg.now()
		x = chanExternal{WaitChannel: evt.channel, Since: now}
		if timeout > 0 {
			x.Deadline = now + timeout
		}
		if e, err = d.bindChan(ctx, e, x); err != nil {
			return lang.Result{}, err
		}
	}
	over := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := d.cfg.JS.DeleteConsumer(dctx, chat, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			d.log.Warn("wait consumer left behind", "run", d.run, "step", c.Key, "consumer", name, "err", err)
		}
	}
	filter := protocol.ChannelFilter(d.cfg.Space, evt.channel)
	idleUntil := d.cfg.now() + evt.idle
	for {
		now := d.cfg.now()
		if x.Deadline > 0 && now >= x.Deadline {
			over()
			return d.settleWait(ctx, e, nil, x.Deadline)
		}
		if evt.kind == "idle" && now >= idleUntil {
			over()
			return d.settleWait(ctx, e, map[string]any{"channel": evt.channel, "at": float64(now)}, now)
		}
		if err := d.admitted(ctx, evt.channel); err != nil {
			over()
			var fail *lang.EffectError
			if errors.As(err, &fail) && ctx.Err() == nil {
				return d.failStep(ctx, e, fail)
			}
			return lang.Result{}, ctx.Err()
		}
		fctx, fcancel := context.WithTimeout(ctx, waitPoll)
		batch, err := cons.Fetch(16, jetstream.FetchContext(fctx))
		if err != nil {
			fcancel()
			if ctx.Err() != nil {
				return d.waitEnded(ctx, over)
			}
			return lang.Result{}, fmt.Errorf("wait %s: fetch: %w", c.Key, err)
		}
		var matched map[string]any
		for m := range batch.Messages() {
			if matched != nil {
				continue // left unacked: redelivered to nobody, the consumer goes
			}
			if !subjectCovers(filter, m.Subject()) {
				_ = m.Ack()
				continue
			}
			if evt.kind == "idle" {
				// Any traffic restarts the window, whatever it says.
				_ = m.Ack()
				idleUntil = d.cfg.now() + evt.idle
				continue
			}
			msg := decodeChat(m.Data())
			if msg == nil || !evt.answers(msg) {
				_ = m.Ack()
				continue
			}
			meta, err := m.Metadata()
			if err != nil {
				fcancel()
				return lang.Result{}, fmt.Errorf("wait %s: message metadata: %w", c.Key, err)
			}
			// Bind before ack: a crash between the two redelivers the message to the
			// consumer that stays; after the ack, the bound sequence answers it.
			x.ChatSeq = meta.Sequence.Stream
			if e, err = d.bindChan(ctx, e, x); err != nil {
				fcancel()
				return lang.Result{}, err
			}
			if err := m.DoubleAck(ctx); err != nil {
				d.log.Warn("wait ack", "run", d.run, "step", c.Key, "err", err)
			}
			matched = msg
		}
		fcancel()
		if matched != nil {
			over()
			return d.settleWait(ctx, e, matched, max(d.cfg.now(), x.Since))
		}
		if ctx.Err() != nil {
			return d.waitEnded(ctx, over)
		}
		if berr := batch.Error(); berr != nil && !benignFetch(berr) {
			// The consumer may be gone (deleted by hand): make it again and look again
			// after one poll, rather than spin on a fetch that fails at once.
			d.log.Warn("wait fetch", "run", d.run, "step", c.Key, "consumer", name, "err", berr)
			if cons, err = d.cfg.JS.CreateConsumer(ctx, chat, waitConsumerConfig(d.cfg.Space, e.RequestID, evt.channel)); err != nil && ctx.Err() == nil {
				return lang.Result{}, fmt.Errorf("wait %s: consumer %s on %s: %w", c.Key, name, chat, err)
			}
			t := time.NewTimer(waitPoll)
			select {
			case <-ctx.Done():
				t.Stop()
				return d.waitEnded(ctx, over)
			case <-t.C:
			}
		}
	}
}

// benignFetch reports whether a fetch ended only because nothing came before it expired.
func benignFetch(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages)
}

// waitEnded ends a wait whose context ended: a cancelled branch's wait is over and its
// consumer goes; a stopped driver's consumer stays for the resume.
func (d *drive) waitEnded(ctx context.Context, over func()) (lang.Result, error) {
	if d.runCtx != nil && d.runCtx.Err() == nil {
		over()
	}
	return lang.Result{}, ctx.Err()
}

// messageAt re-reads the message a wait bound: through the wait's own consumer name,
// made again to start at the bound sequence and filtered to the wait's channel (so the
// broker, not only this check, keeps the read on that channel), then deleted.
func (d *drive) messageAt(ctx context.Context, chat, requestID string, x chanExternal) (map[string]any, error) {
	name := waitConsumerName(requestID)
	if err := d.cfg.JS.DeleteConsumer(ctx, chat, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("consumer %s: %w", name, err)
	}
	cons, err := d.cfg.JS.CreateConsumer(ctx, chat, jetstream.ConsumerConfig{
		Durable: name, FilterSubject: protocol.ChannelFilter(d.cfg.Space, x.WaitChannel),
		AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: x.ChatSeq,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", name, err)
	}
	defer func() {
		if err := d.cfg.JS.DeleteConsumer(context.WithoutCancel(ctx), chat, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			d.log.Warn("wait consumer left behind", "run", d.run, "consumer", name, "err", err)
		}
	}()
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	batch, err := cons.Fetch(1, jetstream.FetchContext(fctx))
	if err != nil {
		return nil, err
	}
	m, ok := <-batch.Messages()
	if !ok {
		return nil, fmt.Errorf("the message it matched (sequence %d) cannot be read again: %v", x.ChatSeq, batch.Error())
	}
	meta, err := m.Metadata()
	if err != nil || meta.Sequence.Stream != x.ChatSeq {
		return nil, fmt.Errorf("the message it matched (sequence %d) is no longer on channel %q", x.ChatSeq, x.WaitChannel)
	}
	msg := decodeChat(m.Data())
	if msg == nil {
		return nil, fmt.Errorf("the message at sequence %d is not a chat message", x.ChatSeq)
	}
	return msg, nil
}

// settleWait settles a channel wait ok with v (nil: its timeout passed).
func (d *drive) settleWait(ctx context.Context, e runstore.Entry, v map[string]any, end int64) (lang.Result, error) {
	var out any
	if v != nil {
		out = v
	}
	if err := d.settle(ctx, e, "ok", out, nil, end); err != nil {
		return lang.Result{}, err
	}
	return lang.Result{Value: out, EndedAt: end}, nil
}

// agentHandle is an agent a program may name: a seat's name, or a reference handle
// name#lifecycleUid.
var agentHandle = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}(#[A-Za-z0-9_-]{1,64})?$`)

// monitor registers interest in an agent: the registration is the journal entry, bound
// with the handle, settled ok with null. It performs nothing on the wire.
func (d *drive) monitor(ctx context.Context, c lang.Call, e runstore.Entry) (lang.Result, error) {
	agent, _ := c.Input["agent"].(string)
	if !agentHandle.MatchString(agent) {
		return d.failStep(ctx, e, &lang.EffectError{Code: "L4016", Kind: "bad-agent",
			Message: fmt.Sprintf("monitor needs an agent handle from spawn (a name, or name#uid), not %q", agent)})
	}
	b, err := json.Marshal(map[string]string{"agent": agent})
	if err != nil {
		return lang.Result{}, err
	}
	if string(e.External) != string(b) {
		e.External = b
		if e, err = d.append(ctx, e); err != nil {
			return lang.Result{}, err
		}
	}
	at := max(d.cfg.now(), e.StartedAt)
	if err := d.settle(ctx, e, "ok", nil, nil, at); err != nil {
		return lang.Result{}, err
	}
	return lang.Result{EndedAt: at}, nil
}
