package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/provision"
)

// How a reference caller finds and calls the manager (docs/interop.md item 6): the
// contract artifacts in the contract store EPC_<space> (what its describe-driven invoker
// fetches and verifies; space setup makes the store, and a manager on a space made
// earlier makes it when it may), and the service record svc.manager.<instanceId> in the
// records bucket cotal_records_<space> (the registry its multi-manager census reads).

// ServiceRecordKey is the service record of the manager instance (the split keys
// <key>.spec and <key>.status of endpoint-records.ts).
func ServiceRecordKey(instance string) string { return "svc." + mgrclient.EPEndpoint + "." + instance }

// ServiceSpec is a service record's spec half (endpoint-service.ts ServiceSpec).
type ServiceSpec struct {
	Endpoint       string               `json:"endpoint"`
	Owner          string               `json:"owner"`
	ClusterDigests []string             `json:"clusterDigests"`
	Protocol       mgrclient.EPProtocol `json:"protocol"`
}

// ServiceStatus is a service record's status half (endpoint-service.ts ServiceStatus):
// the instance's epoch, its state (ready, or exited once it stops) and the spec revision
// it observed.
type ServiceStatus struct {
	Epoch                uint64 `json:"epoch"`
	State                string `json:"state"`
	ObservedSpecRevision uint64 `json:"observedSpecRevision"`
}

// publishContract makes the contract store when the space has none and publishes every
// artifact of the manager's contract at its digest subject, create-only: an artifact
// already there (the same bytes, since the subject is their digest) is left as it is.
func (m *Manager) publishContract(ctx context.Context) error {
	js := m.ep.JetStream()
	if _, err := js.Stream(ctx, provision.StreamEPC(m.Space)); errors.Is(err, jetstream.ErrStreamNotFound) {
		if _, err := js.CreateStream(ctx, provision.ContractStoreConfig(m.Space)); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("contract store %s: %w", provision.StreamEPC(m.Space), err)
		}
	} else if err != nil {
		return fmt.Errorf("contract store %s: %w", provision.StreamEPC(m.Space), err)
	}
	for h, b := range m.contract.Artifacts {
		msg := &nats.Msg{Subject: mgrclient.EPArtifactSubject(m.Space, h), Data: b, Header: nats.Header{}}
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		if _, err := js.PublishMsg(ctx, msg); err != nil && !artifactThere(err) {
			return fmt.Errorf("contract artifact %s: %w", h, err)
		}
	}
	return nil
}

// artifactThere reports whether a create-only publish lost to an artifact already at the
// subject: the wrong-last-sequence refusal, or the per-subject limit's.
func artifactThere(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case jetstream.JSErrCodeStreamWrongLastSequence, 10077, 10164:
		return true
	}
	return false
}

// register writes the manager's service record when the space has the reference's
// records bucket: its spec (endpoint, owner, cluster digest) and its status (ready at this
// run's epoch). It returns the bucket (nil when there is none) for deregister.
func (m *Manager) register(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := m.ep.JetStream().KeyValue(ctx, provision.BucketRecords(m.Space))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("records bucket %s: %w", provision.BucketRecords(m.Space), err)
	}
	key := ServiceRecordKey(m.instanceID)
	spec, _ := json.Marshal(ServiceSpec{Endpoint: mgrclient.EPEndpoint, Owner: m.Operator.Owner,
		ClusterDigests: []string{m.contract.ClusterDigest}, Protocol: mgrclient.EPProtocol{V: 1}}) // strings always encode
	rev, err := kv.Put(ctx, key+".spec", spec)
	if err != nil {
		return nil, fmt.Errorf("service record %s: %w", key, err)
	}
	status, _ := json.Marshal(ServiceStatus{Epoch: m.epoch, State: "ready", ObservedSpecRevision: rev})
	if _, err := kv.Put(ctx, key+".status", status); err != nil {
		return nil, fmt.Errorf("service record %s: %w", key, err)
	}
	return kv, nil
}

// deregister removes the manager's service record on a clean stop, if it is still this
// run's (a later run of the instance, at a higher epoch, keeps its own).
func (m *Manager) deregister(ctx context.Context, kv jetstream.KeyValue) error {
	key := ServiceRecordKey(m.instanceID)
	e, err := kv.Get(ctx, key+".status")
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("service record %s: %w", key, err)
	}
	var st ServiceStatus
	if json.Unmarshal(e.Value(), &st) == nil && st.Epoch > m.epoch {
		return nil
	}
	for _, k := range []string{key + ".status", key + ".spec"} {
		if err := kv.Delete(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("service record %s: %w", k, err)
		}
	}
	return nil
}
