package protocol

// An agent's watchers of the two public buckets (presence and the channel registry): push
// consumers a trusted provisioner creates for one lifecycle, each delivering to a fixed
// rail the agent may only subscribe to. The reference's agent endpoints bind them instead
// of making their own ordered consumer (packages/core/src/subjects.ts
// agentKvWatchConsumerName, agentKvWatchDeliverySubject): a consumer create carries its
// deliver subject in the request body, which no permission can reach, so an agent that
// could create one could make the server write bucket records into any stream.

// KVWatch names which public bucket a watcher reads.
type KVWatch string

// The two watched buckets, as their one-letter token in names and subjects.
const (
	KVWatchPresence KVWatch = "p" // the presence bucket
	KVWatchChannels KVWatch = "c" // the channel registry
)

// KVWatches are both watchers, presence first.
var KVWatches = [...]KVWatch{KVWatchPresence, KVWatchChannels}

// Bucket is the bucket the watcher reads in space.
func (k KVWatch) Bucket(space string) string {
	if k == KVWatchChannels {
		return BucketChannels(space)
	}
	return BucketPresence(space)
}

// ConsumerKVWatch names a lifecycle's watcher of bucket k: kvw-<p|c>-<owner>-<actor>-<uid>.
func ConsumerKVWatch(k KVWatch, p Principal, uid string) string {
	return "kvw-" + string(k) + "-" + p.Dash() + "-" + uid
}

// KVWatchSubject is the rail a lifecycle's watcher of bucket k delivers to:
// cotal.<space>.kvwatch.<p|c>.<owner>.<actor>.<uid>. No stream captures it.
func KVWatchSubject(space string, k KVWatch, p Principal, uid string) string {
	return join(space, KindKVWatch, string(k), p.Owner, p.Actor, uid)
}

// KindKVWatch is the subject kind of the public-bucket watcher rails.
const KindKVWatch Kind = "kvwatch"
