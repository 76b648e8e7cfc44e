package provision

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/claims"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/taskboard"
)

// duplicateWindow is the dedupe window of every stream (wire-protocol §8).
const duplicateWindow = 2 * time.Minute

// chatPerSubject bounds CHAT history per sender and channel subject.
const chatPerSubject = 1000

// dlvPerSubject bounds one member's hand-off backlog: an offline member keeps its newest
// 1000 durable copies (the reference's backup-config.ts BACKUP_MAX_MSGS_PER_SUBJECT).
const dlvPerSubject = 1000

// AuthMarkerTTL is how long the auth bucket keeps the marker a per-message TTL leaves
// when it removes a row (the reference's EP_AUTH_MARKER_TTL_MS).
const AuthMarkerTTL = time.Hour

// DLVDuplicateWindow is the dedupe window of the hand-off stream: a copy written twice
// within it (a redelivered post, a restarted daemon) is stored once.
const DLVDuplicateWindow = 2 * time.Hour

// LeaseTTL is the delivery lease's lifetime without renewal (the lease bucket's TTL).
const LeaseTTL = 30 * time.Second

// resource is one stream or KV bucket of a space.
type resource struct {
	kind string                    // "stream" or "bucket", for messages
	name string                    // the stream or bucket name
	want jetstream.StreamConfig    // the stream as wanted; Space creates exactly this, compare reads it
	kv   *jetstream.KeyValueConfig // non-nil for a KV bucket (compared as one); nil for a stream
}

func (r resource) wrap(space string, err error) error {
	return fmt.Errorf("provision space %q: %s %s: %w", space, r.kind, r.name, err)
}

// resources lists a space's footprint in creation order (wire-protocol §6.1, §7.1, §8).
// leaseTTL is the delivery lease bucket's TTL; replicas is every stream's and bucket's
// replica count.
func resources(space string, leaseTTL time.Duration, replicas int) []resource {
	out := footprint(space, leaseTTL)
	for i := range out {
		out[i].want.Replicas = replicas
		if out[i].kv != nil {
			out[i].kv.Replicas = replicas
		}
	}
	return out
}

// footprint is resources with one replica each.
func footprint(space string, leaseTTL time.Duration) []resource {
	chat := baseStream(protocol.StreamChat(space), protocol.ChatAll(space))
	chat.MaxMsgsPerSubject = chatPerSubject
	chat.AllowDirect = true

	dm := baseStream(protocol.StreamDM(space), protocol.InstAll(space)) // direct get MUST stay off

	task := baseStream(protocol.StreamTask(space), protocol.SvcAll(space))
	task.Retention = jetstream.WorkQueuePolicy

	// INBOX: the reference's mixed inbox, where its fan-out writes and its reader takes
	// (backup-config.ts canonicalBackupStreamConfig, created by streams.ts
	// createSpaceStreams), shaped as DLV. Go's fan-out writes DLV directly; Go's daemon
	// moves what a reference fan-out left here.
	inbox := baseStream(protocol.StreamInbox(space), protocol.DinboxAll(space))
	inbox.MaxMsgsPerSubject = dlvPerSubject
	inbox.Duplicates = DLVDuplicateWindow

	dlv := baseStream(protocol.StreamDLV(space), protocol.DLVAll(space))
	dlv.MaxMsgsPerSubject = dlvPerSubject
	dlv.Duplicates = DLVDuplicateWindow

	// The control surface's journal streams (the reference's createEndpointStreams in
	// packages/core/src/endpoint-binding.ts): EPJ holds untrusted submissions, deduplicated
	// by nothing (the server's least window), for a day; EPF the canonical facts, read by
	// last subject.
	epj := baseStream(StreamEPJ(space), protocol.Root+"."+space+".epj.>")
	epj.MaxAge = EPSubmissionMaxAge
	epj.Duplicates = EPJDuplicateWindow
	epf := baseStream(StreamEPF(space), protocol.Root+"."+space+".epf.>")
	epf.AllowDirect = true
	epc := ContractStoreConfig(space)
	// WFJ: the workflow step journal, one subject per run (endpoint-binding.ts
	// createEndpointStreams): no age limit, since a run that sleeps a month resumes by
	// re-reading it, and no direct get, since a resume must read its predecessor's last
	// appends from the leader.
	wfj := baseStream(StreamWFJ(space), protocol.Root+"."+space+".wfj.*")
	eptReq, ept := TimerStreams(space)

	return []resource{
		{kind: "stream", name: chat.Name, want: chat},
		{kind: "stream", name: dm.Name, want: dm},
		{kind: "stream", name: task.Name, want: task},
		presenceBucket(space),
		bucket(jetstream.KeyValueConfig{ // discard=New and rollup, as §7.1 wants
			Bucket:   protocol.BucketChannels(space),
			History:  1,
			Storage:  jetstream.FileStorage,
			Replicas: 1,
		}),
		{kind: "stream", name: inbox.Name, want: inbox},
		{kind: "stream", name: dlv.Name, want: dlv},
		bucket(jetstream.KeyValueConfig{ // holds lease keys only, so the bucket TTL is the lease's
			Bucket:   protocol.BucketDelivery(space),
			History:  1,
			TTL:      leaseTTL,
			Storage:  jetstream.FileStorage,
			Replicas: 1,
		}),
		bucket(jetstream.KeyValueConfig{ // the manager leases, lease.<instanceId>; TTL 10 s
			Bucket:   protocol.BucketManager(space),
			History:  1,
			TTL:      ManagerLeaseTTL,
			Storage:  jetstream.FileStorage,
			Replicas: 1,
		}),
		bucket(jetstream.KeyValueConfig{
			Bucket:   protocol.BucketMembers(space),
			History:  1,
			Storage:  jetstream.FileStorage,
			Replicas: 1,
		}),
		bucket(jetstream.KeyValueConfig{
			Bucket:   protocol.BucketACL(space),
			History:  1,
			Storage:  jetstream.FileStorage,
			Replicas: 1,
		}),
		authBucket(space),
		claimsBucket(space),
		{kind: "stream", name: epj.Name, want: epj},
		{kind: "stream", name: epf.Name, want: epf},
		{kind: "stream", name: epc.Name, want: epc},
		tasksBucket(space),
		{kind: "stream", name: wfj.Name, want: wfj},
		recordsBucket(space),
		admissionBucket(space),
		a2aBucket(space),
		a2aPeersBucket(space),
		{kind: "stream", name: eptReq.Name, want: eptReq},
		{kind: "stream", name: ept.Name, want: ept},
	}
}

// a2aBucket is the A2A gateway's task bucket (a Go extension, see package a2agw): one
// value per key, no rollup (a stray rollup would erase every task), tasks kept a week.
func a2aBucket(space string) resource {
	r := bucket(jetstream.KeyValueConfig{
		Bucket:   protocol.BucketA2A(space),
		History:  1,
		TTL:      A2ATaskTTL,
		Storage:  jetstream.FileStorage,
		Replicas: 1,
	})
	r.want.AllowRollup = false
	return r
}

// A2ATaskTTL is how long the A2A gateway's bucket keeps a task after its last change.
const A2ATaskTTL = 7 * 24 * time.Hour

// a2aPeersBucket is the registry of external A2A agents presented as peers (a Go
// extension, see package a2apeer): one row per agent, each at most a2aPeerValueSize
// bytes, written by the project's operator alone (no profile but the provisioner may
// read or write it), so no rollup is needed and none is allowed.
func a2aPeersBucket(space string) resource {
	r := bucket(jetstream.KeyValueConfig{
		Bucket:       protocol.BucketA2APeers(space),
		History:      1,
		MaxValueSize: a2aPeerValueSize,
		Storage:      jetstream.FileStorage,
		Replicas:     1,
	})
	r.want.AllowRollup = false
	r.want.MaxMsgSize = a2aPeerValueSize
	return r
}

// a2aPeerValueSize bounds one registration: a card's description and skills, trimmed by
// the registering command, with room to spare.
const a2aPeerValueSize = 64 << 10

// tasksBucket is the task board (a Go extension, see taskboard). Like presence it refuses
// rollup: every agent writes its own keys, and a Nats-Rollup: all header on one of them
// would otherwise purge every other row of the board.
func tasksBucket(space string) resource {
	r := bucket(jetstream.KeyValueConfig{
		Bucket:   taskboard.Bucket(space),
		History:  1,
		Storage:  jetstream.FileStorage,
		Replicas: 1,
	})
	r.want.AllowRollup = false
	return r
}

// StreamWFJ names the workflow step journal stream (cotal.<space>.wfj.<runId>).
func StreamWFJ(space string) string { return "WFJ_" + space }

// BucketRecords names the control surface's records bucket (run, program, answer,
// notice, migration and checkpoint records).
func BucketRecords(space string) string { return "cotal_records_" + space }

// BucketAdmission names the workflow run admissions bucket.
func BucketAdmission(space string) string { return "cotal_admission_" + space }

// recordsBucket is the records bucket as the reference's ensureAuthorityStores makes it:
// per-key CAS, direct get on, no rollup, and no delete or purge through the stream API
// (a record is never erased).
func recordsBucket(space string) resource {
	r := bucket(jetstream.KeyValueConfig{
		Bucket:   BucketRecords(space),
		History:  1,
		Storage:  jetstream.FileStorage,
		Replicas: 1,
	})
	r.want.AllowRollup = false
	r.want.DenyDelete = true
	r.want.DenyPurge = true
	return r
}

// admissionBucket is the run admissions bucket (run-admission.ts ensureAdmissionStore):
// leader-served reads only, no rollup, no delete or purge.
func admissionBucket(space string) resource {
	r := recordsBucket(space)
	r.name = BucketAdmission(space)
	r.kv.Bucket = r.name
	r.want.Name = "KV_" + r.name
	r.want.Subjects = []string{"$KV." + r.name + ".>"}
	r.want.AllowDirect = false
	return r
}

// StreamEPJ names the control surface's submission journal stream (cotal.<space>.epj.>).
func StreamEPJ(space string) string { return "EPJ_" + space }

// StreamEPF names the control surface's canonical fact stream (cotal.<space>.epf.>).
func StreamEPF(space string) string { return "EPF_" + space }

// StreamEPC names the control surface's contract store (cotal.<space>.epc.>).
func StreamEPC(space string) string { return "EPC_" + space }

// ContractStoreConfig is the control surface's contract store at one replica, as the
// reference's ensureContractStore (endpoint-binding.ts) makes it: one immutable artifact
// per digest subject, read by Direct Get, never deleted or purged.
func ContractStoreConfig(space string) jetstream.StreamConfig {
	epc := baseStream(StreamEPC(space), protocol.Root+"."+space+".epc.>")
	epc.AllowDirect, epc.DenyDelete, epc.DenyPurge = true, true, true
	epc.MaxMsgsPerSubject, epc.Discard, epc.DiscardNewPerSubject = 1, jetstream.DiscardNew, true
	return epc
}

// StreamEPTReq names the timer plane's request stream (cotal.<space>.ept.*.*.*.*.schedule).
func StreamEPTReq(space string) string { return "EPT_REQ_" + space }

// StreamEPT names the timer plane's authoritative stream (its .armed schedules and their
// .fire messages).
func StreamEPT(space string) string { return "EPT_" + space }

// EPIngressMaxAge is how long EPT_REQ keeps a schedule request: longer than the timer
// writer is ever down (the reference's EP_INGRESS_MAX_AGE_MS).
const EPIngressMaxAge = 24 * time.Hour

// EPTimerMaxAge is how long EPT keeps an armed schedule and its fire, so a pause may be
// armed about a month ahead (the reference's EP_TIMER_MAX_AGE_MS).
const EPTimerMaxAge = 31 * 24 * time.Hour

// TimerStreams are the timer plane's two streams as the reference's createEndpointStreams
// makes them. EPT_REQ holds the requests hosts publish, with message schedules off, so a
// scheduling header a requester sets arms nothing; EPT holds the timer writer's .armed
// schedules and the .fire messages the broker publishes at their deadlines (a schedule's
// target must be a subject of its own stream).
func TimerStreams(space string) (req, ept jetstream.StreamConfig) {
	p := protocol.Root + "." + space + ".ept.*.*.*.*."
	req = baseStream(StreamEPTReq(space), p+"schedule")
	req.MaxAge = EPIngressMaxAge
	ept = baseStream(StreamEPT(space), p+"armed")
	ept.Subjects = append(ept.Subjects, p+"fire")
	ept.MaxAge = EPTimerMaxAge
	// The server turns rollup on with schedules: a schedule re-published on its subject
	// replaces the one before. Only the timer writer may publish on EPT.
	ept.AllowMsgSchedules, ept.AllowRollup = true, true
	return req, ept
}

// EPJDuplicateWindow is EPJ's dedupe window: the server's least, since submitters set no
// Nats-Msg-Id (the reference's EPJ_DUPLICATE_WINDOW_MS).
const EPJDuplicateWindow = 100 * time.Millisecond

// EPSubmissionMaxAge is how long EPJ keeps a submission (EP_SUBMISSION_MAX_AGE_MS).
const EPSubmissionMaxAge = 24 * time.Hour

// presenceBucket is the presence bucket. It refuses rollup: every agent may write its own
// key, and a Nats-Rollup: all header on that one put would otherwise purge every other
// peer's record. An existing bucket that allows rollup is repaired in place. No cotal
// client purges a presence key (which is what needs rollup); leaving writes an offline
// record.
func presenceBucket(space string) resource {
	r := bucket(jetstream.KeyValueConfig{
		Bucket:   protocol.BucketPresence(space),
		History:  1,
		TTL:      protocol.LivenessWindow,
		Storage:  jetstream.FileStorage,
		Replicas: 1,
	})
	r.want.AllowRollup = false
	return r
}

// claimsBucket is the file-claims bucket (a Go extension, see package claims): one value
// per key, per-message TTLs on (a claim lives for its own ttl), its max age the longest
// claim, so no record outlives claims.MaxTTL whoever wrote it, records of at most
// claimValueSize bytes, and no rollup: an agent writes keys under its own principal, and
// a Nats-Rollup: all on one of them would purge every other claim.
func claimsBucket(space string) resource {
	r := bucket(jetstream.KeyValueConfig{
		Bucket:       claims.Bucket(space),
		History:      1,
		TTL:          claims.MaxTTL,
		MaxValueSize: claimValueSize,
		Storage:      jetstream.FileStorage,
		Replicas:     1,
	})
	r.want.AllowRollup = false
	r.want.AllowMsgTTL = true
	r.want.MaxMsgSize = claimValueSize
	return r
}

// claimValueSize bounds one claims record: a path, a name and a reason with room to spare.
const claimValueSize = 4096

// ManagerLeaseTTL is the TTL of the manager lease bucket: a manager that stops renewing
// its row loses it this long after its last write.
const ManagerLeaseTTL = 10 * time.Second

// BucketAuth names the space's user-auth KV bucket, which holds the actor ledger.
func BucketAuth(space string) string { return "cotal_auth_" + space }

// authBucket is the user-auth bucket, shaped as the reference's ensureAuthorityStores
// makes and verifies it (kvm.create with allow_direct false and a marker TTL): direct get
// off, since a direct get is served by any replica without the stream's read permissions
// in the way, and per-message TTLs on, with a one-hour marker TTL.
func authBucket(space string) resource {
	r := bucket(jetstream.KeyValueConfig{
		Bucket:   BucketAuth(space),
		History:  1,
		Storage:  jetstream.FileStorage,
		Replicas: 1,
	})
	r.want.AllowDirect = false
	r.want.AllowMsgTTL = true
	r.want.SubjectDeleteMarkerTTL = AuthMarkerTTL
	return r
}

// baseStream is the common stream config of wire-protocol §8.
func baseStream(name, subject string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              name,
		Subjects:          []string{subject},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          1,
		MaxConsumers:      -1,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: -1,
		Discard:           jetstream.DiscardOld,
		Duplicates:        duplicateWindow,
	}
}

// bucket describes a KV bucket as the KV-shaped stream the reference makes for it
// (backup-config.ts for the channels, members and ACL buckets; nats.js kvm.create for the
// others): what nats.go's KV API makes, except that message deletes are allowed (nats.go
// denies them, the reference does not) and the limits are written out as -1. Space creates
// the stream itself; the KV API binds to it as a bucket all the same.
func bucket(kv jetstream.KeyValueConfig) resource {
	dup := duplicateWindow
	if kv.TTL > 0 && kv.TTL < dup {
		dup = kv.TTL
	}
	return resource{
		kind: "bucket",
		name: kv.Bucket,
		kv:   &kv,
		want: jetstream.StreamConfig{
			Name:              "KV_" + kv.Bucket,
			Subjects:          []string{"$KV." + kv.Bucket + ".>"},
			Retention:         jetstream.LimitsPolicy,
			Storage:           kv.Storage,
			Replicas:          kv.Replicas,
			MaxConsumers:      -1,
			MaxMsgs:           -1,
			MaxBytes:          -1,
			MaxMsgSize:        -1,
			MaxMsgsPerSubject: int64(kv.History),
			MaxAge:            kv.TTL,
			Discard:           jetstream.DiscardNew,
			Duplicates:        dup,
			AllowDirect:       true,
			AllowRollup:       true,
		},
	}
}
