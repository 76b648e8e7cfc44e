package claims

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/client"
)

// The claims bucket is read without a consumer, as presence is: an agent may not create
// one on a public bucket (trust.ProfileAgent), so the whole bucket is read by batch
// Direct Get requests on its stream (client.ScanBucket). The bucket keeps one value per
// key, so every message is the latest value of its key.

// maxRecords is how many records one read takes at most: a hang guard on a flooded bucket.
const maxRecords = 100_000

// ErrNoBucket reports a space without a claims bucket, or a credential that may not read
// it: a space provisioned before claims existed gains the bucket at the next `cotal up`.
var ErrNoBucket = errors.New("the space has no claims bucket readable by this credential (a space made before claims gains it at the next `cotal up`)")

// scan reads the latest message of every key of the bucket, in stream order. A bucket no
// server answers for, or a read that times out, is ErrNoBucket.
func scan(ctx context.Context, nc *nats.Conn, bucket string) ([]client.KVRecord, error) {
	recs, err := client.ScanBucket(ctx, nc, bucket, ">", maxRecords)
	if errors.Is(err, client.ErrBucketUnanswered) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return nil, fmt.Errorf("%w: %w", ErrNoBucket, err)
	}
	return recs, err
}
