package trust

import "strings"

// Subjects of the NATS JetStream and KV APIs that grants name. Package protocol builds the
// Cotal subjects and stream, bucket and consumer names; these only wrap them.

const (
	jsAPIPrefix = "$JS.API."
	jsAckPrefix = "$JS.ACK."
	jsFCPrefix  = "$JS.FC."
	kvPrefix    = "$KV."
	inboxRoot   = "_INBOX_"

	// accountConnz is the broker's per-account CONNZ import: asked from a data account,
	// it answers with that account's connections only.
	accountConnz = "$SYS.REQ.ACCOUNT.PING.CONNZ"
)

// JetStream API verbs.
const (
	verbAccountInfo     = "INFO"
	verbStreamInfo      = "STREAM.INFO"
	verbStreamMsgGet    = "STREAM.MSG.GET"
	verbDirectGet       = "DIRECT.GET"
	verbConsumerCreate  = "CONSUMER.CREATE"
	verbDurableCreate   = "CONSUMER.DURABLE.CREATE"
	verbConsumerDelete  = "CONSUMER.DELETE"
	verbConsumerInfo    = "CONSUMER.INFO"
	verbConsumerNames   = "CONSUMER.NAMES"
	verbConsumerNext    = "CONSUMER.MSG.NEXT"
	verbConsumerReset   = "CONSUMER.RESET"
	verbStreamCreate    = "STREAM.CREATE"
	verbStreamUpdate    = "STREAM.UPDATE"
	verbStreamDelete    = "STREAM.DELETE"
	verbStreamPurge     = "STREAM.PURGE"
	verbStreamMsgDelete = "STREAM.MSG.DELETE"
)

// api is the JetStream API subject of verb with its arguments: $JS.API.<verb>.<args...>.
func api(verb string, args ...string) string {
	return jsAPIPrefix + strings.Join(append([]string{verb}, args...), ".")
}

// acks is every ack subject of one consumer: $JS.ACK.<stream>.<consumer>.> (ack, nak,
// term, in progress and next all reply there).
func acks(stream, consumer string) string { return jsAckPrefix + stream + "." + consumer + ".>" }

// flowControl is every flow-control reply subject of a stream's push consumers.
func flowControl(stream string) string { return jsFCPrefix + stream + ".>" }

// kvStream is the stream backing a KV bucket.
func kvStream(bucket string) string { return "KV_" + bucket }

// kvKey is the subject a KV put of key in bucket publishes on.
func kvKey(bucket, key string) string { return kvPrefix + bucket + "." + key }

// inboxPrefix is the reply-inbox prefix of the user with public key user.
func inboxPrefix(user string) string { return inboxRoot + user }
