package claims

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// The claims bucket is read without a consumer, as presence is: an agent may not create
// one on a public bucket (trust.ProfileAgent), so the whole bucket is read by batch
// Direct Get requests on its stream. The bucket keeps one value per key, so every message
// is the latest value of its key.

// Headers of a KV message and of a Direct Get answer.
const (
	hdrKVOperation = "KV-Operation"
	hdrSubject     = "Nats-Subject"
	hdrSequence    = "Nats-Sequence"
	hdrTimeStamp   = "Nats-Time-Stamp"
	hdrNumPending  = "Nats-Num-Pending"
	hdrLastSeq     = "Nats-Last-Sequence"
	hdrStatus      = "Status"
)

const (
	directBatch = 256             // records one batch Direct Get asks for
	maxRecords  = 100_000         // records one read takes at most: a hang guard on a flooded bucket
	apiTimeout  = 5 * time.Second // a read whose context has no deadline
)

// stored is the latest message of one key.
type stored struct {
	key    string
	value  []byte
	del    bool
	seq    uint64
	stored time.Time
}

// ErrNoBucket reports a space without a claims bucket, or a credential that may not read
// it: a space provisioned before claims existed gains the bucket at the next `cotal up`.
var ErrNoBucket = errors.New("the space has no claims bucket readable by this credential (a space made before claims gains it at the next `cotal up`)")

// scan reads the latest message of every key of the bucket, in stream order.
func scan(ctx context.Context, nc *nats.Conn, bucket string) ([]stored, error) {
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
	prefix := "$KV." + bucket + "."
	api := "$JS.API.DIRECT.GET.KV_" + bucket
	var out []stored
	next := uint64(1)
	for len(out) < maxRecords {
		req, err := json.Marshal(struct {
			Seq     uint64 `json:"seq"`
			NextFor string `json:"next_by_subj"`
			Batch   int    `json:"batch"`
		}{next, prefix + ">", directBatch})
		if err != nil {
			return nil, fmt.Errorf("read bucket %s: %w", bucket, err)
		}
		if err := nc.PublishRequest(api, inbox, req); err != nil {
			return nil, fmt.Errorf("read bucket %s: %w", bucket, err)
		}
		more, last, err := readBatch(ctx, sub, prefix, &out)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
				err = fmt.Errorf("%w: %w", ErrNoBucket, err)
			}
			return nil, fmt.Errorf("read bucket %s: %w", bucket, err)
		}
		if !more {
			return out, nil
		}
		next = last + 1
	}
	return out, nil
}

// readBatch reads the answers of one batch Direct Get into out until its end marker.
func readBatch(ctx context.Context, sub *nats.Subscription, prefix string, out *[]stored) (more bool, last uint64, err error) {
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
			return false, 0, fmt.Errorf("%w: direct get: no responders", ErrNoBucket)
		default:
			return false, 0, fmt.Errorf("direct get: status %s %s", status, m.Header.Get("Description"))
		}
		subject := m.Header.Get(hdrSubject)
		seq, err := strconv.ParseUint(m.Header.Get(hdrSequence), 10, 64)
		if err != nil || !strings.HasPrefix(subject, prefix) {
			return false, 0, fmt.Errorf("direct get answer for %q, sequence %q: not a key of the bucket", subject, m.Header.Get(hdrSequence))
		}
		ts, _ := time.Parse(time.RFC3339Nano, m.Header.Get(hdrTimeStamp))
		op := m.Header.Get(hdrKVOperation)
		*out = append(*out, stored{key: strings.TrimPrefix(subject, prefix), value: m.Data,
			del: op == "DEL" || op == "PURGE", seq: seq, stored: ts})
	}
}
