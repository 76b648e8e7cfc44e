package provision_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// referenceRequest sends one raw JetStream API request as the reference's nats.js does and
// returns the API error's description, "" on success.
func referenceRequest(t *testing.T, nc *nats.Conn, subject string, body any) string {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	m, err := nc.Request(subject, b, 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	var reply struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if reply.Error != nil {
		return reply.Error.Description
	}
	return ""
}

// TestReferenceOnThreeReplicaSpace records the supported mix on a JetStream cluster: on a
// space Go provisioned with three replicas, what the reference's daemons, manager and
// provisioner of an agent do (consumers.add of fanout, reader, dlv_, dm_ and svc_ with the
// reference's configs; they name no replica count) succeeds, and the reference's
// createSpaceStreams (jsm.streams.add with num_replicas 1) is refused: a space the
// reference's `cotal up` provisions too must be made with `cotal up --replicas 1`.
func TestReferenceOnThreeReplicaSpace(t *testing.T) {
	chain := meshtest.Chain(t, "prod")
	urls := jetStreamCluster(t, chain, 3)
	acct, err := chain.Space("prod")
	if err != nil {
		t.Fatal(err)
	}
	creds, err := acct.Mint(meshtest.ProvisionerSpec("op"))
	if err != nil {
		t.Fatal(err)
	}
	nc := meshtest.ConnectTo(t, urls[0], creds)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provision.Space(t.Context(), js, "prod", provision.Options{Replicas: 3, Peers: 3}); err != nil {
		t.Fatal(err)
	}
	uid := "abcdefghijklmnopqrstuvwxyz"
	for _, c := range []struct {
		stream string
		cfg    map[string]any
	}{
		{"CHAT_prod", map[string]any{"durable_name": "fanout", "filter_subject": "cotal.prod.chat.>", "ack_policy": "explicit", "ack_wait": 60e9, "deliver_policy": "new"}},
		{"INBOX_prod", map[string]any{"durable_name": "reader", "filter_subject": "cotal.prod.dinbox.>", "ack_policy": "explicit", "ack_wait": 60e9, "deliver_policy": "all", "max_ack_pending": 1000}},
		{"DLV_prod", map[string]any{"durable_name": "dlv_local-bob-" + uid, "filter_subject": "cotal.prod.dlv.local.bob." + uid, "ack_policy": "explicit", "ack_wait": 60e9, "deliver_policy": "all"}},
		{"DM_prod", map[string]any{"durable_name": "dm_local-bob-" + uid, "filter_subject": "cotal.prod.inst.local.bob.>", "ack_policy": "explicit", "ack_wait": 60e9, "deliver_policy": "all"}},
		{"TASK_prod", map[string]any{"durable_name": "svc_reviewer", "filter_subject": "cotal.prod.svc.reviewer.>", "ack_policy": "explicit", "ack_wait": 60e9}},
	} {
		subject := "$JS.API.CONSUMER.CREATE." + c.stream + "." + c.cfg["durable_name"].(string) + "." + c.cfg["filter_subject"].(string)
		if e := referenceRequest(t, nc, subject, map[string]any{"stream_name": c.stream, "config": c.cfg, "action": "create"}); e != "" {
			t.Errorf("the reference's consumers.add %s on %s (R3): %s", c.cfg["durable_name"], c.stream, e)
		}
	}
	// Go's mint over what the reference made finds all three as they are.
	rep, err := provision.Agent(t.Context(), js, "prod", protocol.Principal{Owner: "local", Actor: "bob"}, uid, "reviewer")
	if err != nil || len(rep.Existing) != 3 {
		t.Errorf("provision.Agent over the reference's durables: %+v %v", rep, err)
	}
	inbox := map[string]any{"name": "INBOX_prod", "subjects": []string{"cotal.prod.dinbox.>"}, "retention": "limits", "storage": "file",
		"max_consumers": -1, "max_msgs": -1, "max_bytes": -1, "max_age": 0, "max_msgs_per_subject": 1000, "max_msg_size": -1,
		"discard": "old", "num_replicas": 1, "duplicate_window": 7200e9, "allow_direct": false}
	if e := referenceRequest(t, nc, "$JS.API.STREAM.CREATE.INBOX_prod", inbox); !strings.Contains(e, "already in use") {
		t.Errorf("the reference's streams.add INBOX_prod (R1) on the R3 space: %q, want refused", e)
	}
}
