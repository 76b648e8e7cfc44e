package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The public buckets (presence and the channel registry) are read without a consumer:
// an untrusted credential may not create one on them (see trust.ProfileAgent). One key is
// a Direct Get (jetstream.KeyValue.Get does that on a bucket with direct get on), the
// whole bucket is a batch Direct Get, and live changes arrive on a plain subscription to
// the subjects KV puts are published on. Both buckets keep one value per key, so every
// message of their stream is the latest value of its key.

// kvRecord is the latest message of one key of a bucket.
type kvRecord struct {
	key   string
	value []byte
	op    jetstream.KeyValueOp
	seq   uint64
}

// Headers of a KV message and of a Direct Get answer.
const (
	hdrKVOperation = "KV-Operation"
	hdrSubject     = "Nats-Subject"
	hdrSequence    = "Nats-Sequence"
	hdrNumPending  = "Nats-Num-Pending"
	hdrLastSeq     = "Nats-Last-Sequence"
	hdrStatus      = "Status"
	hdrTimeStamp   = "Nats-Time-Stamp"
)

// directBatch is how many records one batch Direct Get request asks for.
const directBatch = 256

// apiTimeout bounds a bucket read whose context has no deadline, as the JetStream API's
// own requests are.
const apiTimeout = 5 * time.Second

// kvOp reads the KV operation of a message's headers: a put unless marked DEL or PURGE.
func kvOp(h nats.Header) jetstream.KeyValueOp {
	switch h.Get(hdrKVOperation) {
	case "DEL":
		return jetstream.KeyValueDelete
	case "PURGE":
		return jetstream.KeyValuePurge
	}
	return jetstream.KeyValuePut
}

// kvSubjectPrefix is the prefix of every key subject of bucket: $KV.<bucket>.
func kvSubjectPrefix(bucket string) string { return "$KV." + bucket + "." }

// scanBucket reads the latest message of every key of bucket, in stream order (ScanBucket),
// naming a read the broker refused this credential.
func (e *Endpoint) scanBucket(ctx context.Context, bucket string) ([]kvRecord, error) {
	recs, err := ScanBucket(ctx, e.nc, bucket, ">", 0)
	if err != nil {
		return nil, e.refused(err)
	}
	out := make([]kvRecord, len(recs))
	for i, r := range recs {
		out[i] = kvRecord{key: r.Key, value: r.Value, op: r.Op, seq: r.Seq}
	}
	return out, nil
}

// KVRecord is the latest message of one key of a bucket, as ScanBucket reads it.
type KVRecord struct {
	Key    string
	Value  []byte
	Op     jetstream.KeyValueOp // a put, or a delete or purge marker
	Seq    uint64
	Stored time.Time // when the broker stored it
}

// ErrBucketUnanswered wraps a bucket read no server answered (status 503): the bucket
// does not exist, or its stream has no leader.
var ErrBucketUnanswered = errors.New("no server answers for the bucket")

// ScanBucket reads the latest message of every key of bucket matching filter (a key
// pattern; ">" is every key) on nc, in stream order, by batch Direct Get requests on the
// bucket's stream: it needs no consumer, which an untrusted credential may not create on
// a shared bucket. It needs a bucket with direct get on and one value per key (history 1).
// max > 0 stops after that many records, a bound on a flooded bucket. A context without
// a deadline is bounded by apiTimeout.
func ScanBucket(ctx context.Context, nc *nats.Conn, bucket, filter string, max int) ([]KVRecord, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, apiTimeout)
		defer cancel()
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("read bucket %s: %w", bucket, err)
	}
	defer func() { _ = sub.Unsubscribe() }() // the reads are done; nothing more is expected
	prefix := kvSubjectPrefix(bucket)
	api := "$JS.API.DIRECT.GET.KV_" + bucket
	var out []KVRecord
	next := uint64(1)
	for max <= 0 || len(out) < max {
		req, err := json.Marshal(struct {
			Seq     uint64 `json:"seq"`
			NextFor string `json:"next_by_subj"`
			Batch   int    `json:"batch"`
		}{next, prefix + filter, directBatch})
		if err != nil {
			return nil, fmt.Errorf("read bucket %s: %w", bucket, err)
		}
		if err := nc.PublishRequest(api, inbox, req); err != nil {
			return nil, fmt.Errorf("read bucket %s: %w", bucket, err)
		}
		more, last, err := readBatch(ctx, sub, prefix, &out)
		if err != nil {
			return nil, fmt.Errorf("read bucket %s: %w", bucket, err)
		}
		if !more {
			return out, nil
		}
		next = last + 1
	}
	return out, nil
}

// readBatch reads the answers of one batch Direct Get into out until its end-of-batch
// marker. more reports records left past last, the last sequence read.
func readBatch(ctx context.Context, sub *nats.Subscription, prefix string, out *[]KVRecord) (more bool, last uint64, err error) {
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return false, 0, err
		}
		switch status := m.Header.Get(hdrStatus); status {
		case "":
		case "204": // end of batch
			pending, _ := strconv.ParseUint(m.Header.Get(hdrNumPending), 10, 64)
			last, err := strconv.ParseUint(m.Header.Get(hdrLastSeq), 10, 64)
			if err != nil {
				return false, 0, fmt.Errorf("end of batch without a last sequence: %w", err)
			}
			return pending > 0 && last > 0, last, nil
		case "404": // nothing from the asked sequence on
			return false, 0, nil
		case "503":
			return false, 0, fmt.Errorf("%w: direct get: %s", ErrBucketUnanswered, m.Header.Get("Description"))
		default:
			return false, 0, fmt.Errorf("direct get: status %s %s", status, m.Header.Get("Description"))
		}
		subject := m.Header.Get(hdrSubject)
		seq, err := strconv.ParseUint(m.Header.Get(hdrSequence), 10, 64)
		if err != nil || !strings.HasPrefix(subject, prefix) {
			return false, 0, fmt.Errorf("direct get answer for %q, sequence %q: not a key of the bucket", subject, m.Header.Get(hdrSequence))
		}
		ts, _ := time.Parse(time.RFC3339Nano, m.Header.Get(hdrTimeStamp))
		*out = append(*out, KVRecord{Key: strings.TrimPrefix(subject, prefix), Value: m.Data, Op: kvOp(m.Header), Seq: seq, Stored: ts})
	}
}

// errNoLiveGrant reports a credential that may not subscribe to a bucket's key subjects
// (one minted before that grant existed).
var errNoLiveGrant = errors.New("the credential may not subscribe to the bucket's key subjects")

// subscribeBucket subscribes to every key subject of bucket and checks with the broker
// that the subscription was let in. A refused subscription is errNoLiveGrant. handle
// runs on the subscription's own goroutine and must return quickly: messages wait for it
// without a count limit, up to 64 MiB.
func (e *Endpoint) subscribeBucket(ctx context.Context, bucket string, handle nats.MsgHandler) (*nats.Subscription, error) {
	subject := kvSubjectPrefix(bucket) + ">"
	sub, err := e.nc.Subscribe(subject, handle)
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	if err := sub.SetPendingLimits(-1, 64<<20); err != nil {
		_ = sub.Unsubscribe() // the subscription is abandoned either way
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	// A refusal arrives before the answer to a flush sent after the subscription.
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, apiTimeout)
		defer cancel()
	}
	if err := e.nc.FlushWithContext(ctx); err != nil {
		_ = sub.Unsubscribe() // the subscription is abandoned either way
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	if last := e.nc.LastError(); last != nil && errors.Is(last, nats.ErrPermissionViolation) &&
		strings.Contains(last.Error(), `"`+subject+`"`) {
		_ = sub.Unsubscribe()
		return nil, errNoLiveGrant
	}
	return sub, nil
}

// recordOf turns a live message on a key subject of bucket into a record.
func recordOf(m *nats.Msg, prefix string) (kvRecord, bool) {
	if !strings.HasPrefix(m.Subject, prefix) {
		return kvRecord{}, false
	}
	return kvRecord{key: strings.TrimPrefix(m.Subject, prefix), value: m.Data, op: kvOp(m.Header)}, true
}
