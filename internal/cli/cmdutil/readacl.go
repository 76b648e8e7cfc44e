package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// RecordReadACL writes the read ACL row of the member credential creds, minted for space,
// the way the reference records it at mint (acls.ts commitAcl with reissue): in
// cotal_acl_<space>, key <owner>.<actor>.<uid>, allowSubscribe and issuedAllowSubscribe
// the channels the credential may read, revision one more than the row it replaces, by
// compare-and-set (delivery.RecordGrant). The delivery daemon, Go's or the reference's,
// reads that row at a durable join and for every copy. js is the minter's connection, which
// may write the bucket. Every minter of a credential with a lifecycle uid calls it.
//
// The rows of the same principal under another lifecycle uid are purged (the reference's
// deleteAcl at deprovision): the trust chain holds one uid per agent, so a new uid retires
// the old one, and two live rows would make every durable join of the alias ambiguous. A
// space without the ACL bucket (no durable plane) gets no row.
func RecordReadACL(ctx context.Context, js jetstream.JetStream, space string, creds []byte) error {
	c, err := trust.ReadCreds(creds)
	if err != nil {
		return fmt.Errorf("record read ACL: %w", err)
	}
	uc, err := jwt.DecodeUserClaims(c.JWT)
	if err != nil {
		return fmt.Errorf("record read ACL of %s: %w", c.Principal, err)
	}
	return writeReadACL(ctx, js, space, c.Principal, c.LifecycleUID, func(kv jetstream.KeyValue) error {
		return delivery.RecordGrant(ctx, kv, c.Principal, c.LifecycleUID, c.Name, uc.Subject, uc.Permissions.Sub, time.Now())
	})
}

// SeedReadACL writes the read ACL row of member (p, uid) with the channels allow, as
// RecordReadACL does, unless that member already has one: for a persona provisioned
// before any credential is minted for it (cotal up), whose row a later mint replaces. An
// existing row is left alone, so it never reaches wider than the credential it was written
// for.
func SeedReadACL(ctx context.Context, js jetstream.JetStream, space string, p protocol.Principal, uid string, allow []string) error {
	return writeReadACL(ctx, js, space, p, uid, func(kv jetstream.KeyValue) error {
		switch _, err := kv.Get(ctx, protocol.MemberKey(p, uid)); {
		case err == nil:
			return nil
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			return fmt.Errorf("read ACL of %s: %w", p, err)
		}
		return delivery.CommitACL(ctx, kv, p, uid, allow, time.Now())
	})
}

// writeReadACL opens the space's ACL bucket, runs write on it, and purges the rows of p
// under any lifecycle uid but uid. A space without the bucket is left as it is.
func writeReadACL(ctx context.Context, js jetstream.JetStream, space string, p protocol.Principal, uid string, write func(jetstream.KeyValue) error) error {
	kv, err := js.KeyValue(ctx, protocol.BucketACL(space))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read ACL bucket of space %q: %w", space, err)
	}
	if err := write(kv); err != nil {
		return err
	}
	keys, err := kv.ListKeysFiltered(ctx, p.String()+".*")
	if err != nil {
		return fmt.Errorf("read ACL rows of %s: %w", p, err)
	}
	var stale []string
	for k := range keys.Keys() {
		if k != protocol.MemberKey(p, uid) {
			stale = append(stale, k)
		}
	}
	if err := ctx.Err(); err != nil { // the listing ended early: stale may be short
		return fmt.Errorf("read ACL rows of %s: %w", p, err)
	}
	for _, k := range stale {
		if err := kv.Purge(ctx, k); err != nil {
			return fmt.Errorf("retire ACL row %s: %w", k, err)
		}
	}
	return nil
}
