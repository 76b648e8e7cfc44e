package trust

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/claims"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/taskboard"
)

// Profile names what a credential may do in its space.
type Profile string

// Profiles. Every one but the provisioner is an explicit allow-list built from protocol's
// subject builders; whatever it does not allow, the broker refuses.
const (
	// ProfileAgent sends only with its own sender tokens, reads only its channels, its own
	// DM durable and its role, and writes only its own presence key and its own file
	// claims (keys under its principal in the claims bucket). Posting is
	// default-deny: only the channels in AllowPublish. It creates no consumer but its
	// history reader on CHAT. It reads presence and the registry without creating one: by
	// Direct Get, a live subscription, or the two watchers the provisioner pre-created for
	// its lifecycle (protocol.ConsumerKVWatch), which it may bind, look up and delete.
	ProfileAgent Profile = "agent"
	// ProfileObserver reads every channel, presence and the channel registry, and sends
	// nothing; it sees no DMs (the console). Like the agent, it creates no consumer but
	// its history reader on CHAT.
	ProfileObserver Profile = "observer"
	// ProfileAdmin reads everything of the messaging plane, DMs and anycasts included, and
	// sends nothing (the dashboard): not even a request to the agent manager, whose
	// operator rail only the project's own identity (the provisioner) may use.
	ProfileAdmin Profile = "admin"
	// ProfileDelivery is the delivery daemon: it reads CHAT through its fan-out durable,
	// writes members' hand-off copies to DLV and creates their bind-only durables there,
	// moves the reference's mixed inbox entries (INBOX, its durable "reader") to DLV,
	// keeps the lease, members and ACL buckets, reads the channel registry, rewrites a
	// presence entry offline when the agent's connection drops (liveness), answers the
	// delivery ctl rails and the live probe, and asks the broker for its own account's
	// connections. It sends nothing on the messaging plane.
	ProfileDelivery Profile = "delivery"
	// ProfileProvisioner may do anything in the space's account: it is the account
	// owner's identity, used by cotal up itself (streams, buckets, pre-created durables)
	// and by the person at the keyboard. Never hand it to an agent.
	ProfileProvisioner Profile = "provisioner"
	// ProfileManager is the agent manager (cotal supervise): an ordinary peer of the space
	// (its own presence key and DM durable, as an agent reading no channel) that also
	// answers the manager's control rails (every request on ctl.manager and
	// ctl.manager-agent and on the reference's ep.{one,all,inst}.manager rails, with its
	// answers on ep.reply.manager, the NATS micro service's $SRV discovery, one answer per request,
	// and the attach stream under an attach request's reply subjects) and keeps its lease
	// bucket. It may list the names of the DM durables, to tell whether a name was ever
	// held in the space before it gives it to a seat. It drives the workflow runs of its
	// endpoint ("manager"): the journal WFJ, its endpoint's records and admissions, the
	// checkpoint settle facts on EPF; never another endpoint's record nor a revocation
	// marker. It mints no credential: the process that runs it holds the project's keys.
	ProfileManager Profile = "manager"
)

// Valid reports whether p is one of the six profiles.
func (p Profile) Valid() bool {
	switch p {
	case ProfileAgent, ProfileObserver, ProfileAdmin, ProfileDelivery, ProfileProvisioner, ProfileManager:
		return true
	}
	return false
}

// MaxPolicySize bounds the JSON size of a minted user's permissions (16 KiB, as in the
// reference), so a credential always fits the broker's control line
// ([github.com/cotal-ai/cotal/broker.MaxControlLine], 64 KiB): the user JWT travels in
// the CONNECT line.
const MaxPolicySize = 16 << 10

// UserSpec says who a credential is for and what its profile lets it do.
type UserSpec struct {
	Name      string             // JWT name, for people and CONNZ; required
	Profile   Profile            // required
	Principal protocol.Principal // wire identity; required except for the provisioner
	// LifecycleUID is the incarnation whose durables the credential may use: an agent's DM
	// durable dm_<o>-<a>-<uid> and history reader chathist_<o>-<a>-<uid>. Required for an
	// agent; for an observer or admin it grants that history reader, and without it they
	// read live traffic, presence and the registry only.
	LifecycleUID string
	Role         string // agent only: the anycast role whose durable svc_<role> it may consume
	// Subscribe is the agent's boot read set; it must lie within AllowSubscribe. With
	// AllowSubscribe it is resolved by protocol.ReadSet: both nil, like an explicit
	// empty list, read nothing (the agent is DM-only).
	Subscribe []string
	// AllowSubscribe is the agent's read ACL (channel patterns); empty means Subscribe.
	AllowSubscribe []string
	AllowPublish   []string // agent only: post ACL (channel patterns); empty means it posts nowhere
	// Capabilities are the agent's persona capabilities; "spawn" lets it ask the manager
	// (ctl.manager-agent) to spawn personas and stop the seats it spawned. Agent only.
	Capabilities []string
	ExpiresIn    time.Duration // 0 means the credential never expires
}

// Permissions turns spec into the NATS permissions of a user of this account whose public
// nkey is user. It does no I/O. Every subject comes from protocol's builders or the
// JetStream API forms in jsapi.go; see the profile constants for what each allows. A
// non-provisioner may subscribe to replies under InboxPrefix of its own creds only.
// Bad specs get an error naming the field (or the mint flag) that is wrong.
func (a *Account) Permissions(spec UserSpec, user string) (jwt.Permissions, error) {
	if err := spec.check(); err != nil {
		return jwt.Permissions{}, err
	}
	if !nkeys.IsValidPublicUserKey(user) {
		return jwt.Permissions{}, fmt.Errorf("user key %q is not a public user nkey", user)
	}
	g := &grants{}
	space, inbox := a.space, inboxPrefix(user)+".>"
	switch spec.Profile {
	case ProfileAgent:
		agentGrants(g, space, spec, inbox)
	case ProfileObserver:
		readerGrants(g, space, spec, inbox, false)
	case ProfileAdmin:
		readerGrants(g, space, spec, inbox, true)
	case ProfileDelivery:
		deliveryGrants(g, space, inbox)
	case ProfileManager:
		managerGrants(g, space, spec, inbox)
	case ProfileProvisioner:
		g.pub(">")
		g.sub(">")
	}
	perms := g.permissions()
	b, err := json.Marshal(perms)
	if err != nil {
		return jwt.Permissions{}, fmt.Errorf("encode permissions: %w", err)
	}
	if len(b) > MaxPolicySize {
		return jwt.Permissions{}, fmt.Errorf("permissions of %q are %d bytes, over the %d-byte limit: grant fewer channels, or wildcards (team.>) instead of lists", spec.Name, len(b), MaxPolicySize)
	}
	return perms, nil
}

// agentGrants: publish only with its own sender tokens, read only its channels, its
// durables and the public buckets, write only its own presence key.
func agentGrants(g *grants, space string, s UserSpec, inbox string) {
	me := s.Principal
	chat, dm, task := protocol.StreamChat(space), protocol.StreamDM(space), protocol.StreamTask(space)

	// Sending: the forge lock. Every publish grant pins the sender tokens to me.
	for _, ch := range s.AllowPublish {
		g.pub(protocol.ChatSubject(space, me, ch))
	}
	anyone := protocol.Principal{Owner: "*", Actor: "*"} // any recipient
	g.pub(protocol.InstSubject(space, anyone, me), protocol.SvcSubject(space, "*", me))
	g.pub(kvKey(protocol.BucketPresence(space), me.String()))
	// The task board: only rows whose key ends in its own principal (taskboard's
	// <kind>.<id>.<owner>.<actor>), so its claims and statuses cannot be forged or removed
	// by another agent; it reads the board as a public bucket.
	g.pub(kvKey(taskboard.Bucket(space), "*.*."+me.String()))
	// File claims: only keys under its own principal (claims.Key), so it writes and
	// releases its own claims and no other's.
	g.pub(kvKey(claims.Bucket(space), me.String()+".>"))

	// Reading channels: live, and history through its one transient reader whose create
	// subject pins both the name and a filter inside the read ACL.
	read := s.readACL()
	for _, ch := range read {
		g.sub(protocol.ChannelFilter(space, ch))
	}
	hist := protocol.ConsumerHistory(me, s.LifecycleUID)
	for _, ch := range read {
		g.pub(api(verbConsumerCreate, chat, hist, protocol.ChannelFilter(space, ch)))
	}
	g.pub(api(verbConsumerInfo, chat, hist), api(verbConsumerNext, chat, hist), api(verbConsumerDelete, chat, hist))

	// DMs and anycasts: bind-only, on the durables the provisioner pre-created. The names
	// of DM's durables (who has an inbox, which presence shows anyway) may be listed, so a
	// DM to a peer offline past the presence TTL resolves and an unknown name is told so.
	bind(g, dm, protocol.ConsumerDM(me, s.LifecycleUID))
	g.pub(api(verbConsumerNames, dm))

	// The public-bucket watchers the provisioner pre-created for this lifecycle, which the
	// reference's agent endpoints bind instead of creating an ordered consumer: read their
	// fixed rails, ack, look them up and delete them (at a final stop). Never create one:
	// the deliver subject travels in the create's body.
	for _, k := range protocol.KVWatches {
		ks, name := kvStream(k.Bucket(space)), protocol.ConsumerKVWatch(k, me, s.LifecycleUID)
		g.sub(protocol.KVWatchSubject(space, k, me, s.LifecycleUID))
		g.pub(api(verbConsumerInfo, ks, name), api(verbConsumerDelete, ks, name), acks(ks, name))
	}
	if s.Role != "" {
		bind(g, task, protocol.ConsumerRole(s.Role))
	}

	// The durable plane: ask the delivery daemon (durable join, leave, list) and probe it
	// on its own request subjects only, read the answers under them, and bind the hand-off
	// durable the daemon creates at a durable join.
	dlv := protocol.StreamDLV(space)
	ctl := protocol.CtlSubject(space, protocol.ServiceDelivery, me)
	probe := protocol.LiveSubject(space, protocol.PlaneDelivery, me)
	g.pub(ctl, probe)
	g.sub(protocol.ReplyFilter(ctl), protocol.ReplyFilter(probe))
	bind(g, dlv, protocol.ConsumerDLV(me, s.LifecycleUID))

	// The A2A gateway's task bucket, read and written, only with the a2a-gateway
	// capability (cotal a2a's own identity); no other agent reads a caller's tasks.
	if s.HasCapability(CapabilityA2AGateway) {
		b := protocol.BucketA2A(space)
		readBucket(g, b)
		g.pub(kvPrefix + b + ".>")
	}

	// The manager's agent rail: everything with the spawn capability; else only the
	// seat's own turns of a workflow run (turn-pending, turn-yield).
	if s.HasCapability(CapabilitySpawn) {
		mgr := protocol.CtlSubject(space, protocol.ServiceManagerAgent, me) + ".*"
		g.pub(mgr)
		g.sub(protocol.ReplyFilter(mgr))
	} else {
		for _, op := range []string{protocol.MgrTurnPending, protocol.MgrTurnYield} {
			mgr := protocol.MgrSubject(space, protocol.ServiceManagerAgent, me, op)
			g.pub(mgr)
			g.sub(protocol.ReplyFilter(mgr))
		}
	}

	g.pub(api(verbAccountInfo), api(verbStreamInfo, chat))
	publicBuckets(g, space)
	g.sub(inbox)

	denyBindOnly(g, dm)
	denyBindOnly(g, task)
	denyBindOnly(g, dlv)
	denyAdmin(g, space)
}

// deliveryGrants: the delivery daemon's narrowest working set (see ProfileDelivery).
func deliveryGrants(g *grants, space, inbox string) {
	chat, dlv := protocol.StreamChat(space), protocol.StreamDLV(space)

	// CHAT: its fan-out durable and its transient catch-up reader, nothing else.
	for _, name := range []string{protocol.ConsumerFanout, protocol.ConsumerCatchup} {
		reader(g, chat, name)
		g.pub(acks(chat, name))
	}
	g.pub(api(verbDurableCreate, chat, protocol.ConsumerFanout), api(verbConsumerReset, chat, protocol.ConsumerFanout))
	// readHistory: one more fixed-name transient reader, acks none. A member's history is
	// read by the daemon (after its ACL check), so no member needs a consumer for it; a
	// Direct Get would need allow_direct on CHAT and reads any subject.
	reader(g, chat, protocol.ConsumerHistoryRead)

	// DLV: write hand-off copies, create members' bind-only durables, inspect them.
	g.pub(protocol.DLVAll(space))
	g.pub(api(verbConsumerCreate, dlv, ">"), api(verbDurableCreate, dlv, ">"), api(verbConsumerInfo, dlv, "*"))
	g.pub(api(verbAccountInfo), api(verbStreamInfo, chat), api(verbStreamInfo, dlv))

	// INBOX, the reference's mixed inbox: write entries (its fan-out) and move them to DLV
	// through the one durable "reader" (its trusted reader, and Go's).
	mixed := protocol.StreamInbox(space)
	g.pub(protocol.DinboxAll(space), api(verbStreamInfo, mixed))
	bind(g, mixed, protocol.ConsumerReader)
	g.pub(api(verbConsumerCreate, mixed, protocol.ConsumerReader), api(verbConsumerCreate, mixed, protocol.ConsumerReader, ">"),
		api(verbDurableCreate, mixed, protocol.ConsumerReader))

	// Its buckets, read and written; the channel registry, read.
	for _, b := range []string{protocol.BucketDelivery(space), protocol.BucketMembers(space), protocol.BucketACL(space)} {
		readBucket(g, b)
		g.pub(kvPrefix + b + ".>")
	}
	readBucket(g, protocol.BucketChannels(space))

	// The rails it answers, and only the reply subjects under their requests.
	for _, req := range []string{
		protocol.CtlFilter(space, protocol.ServiceDelivery),
		protocol.CtlFilter(space, protocol.ServiceDeliveryAdmin),
		protocol.LiveSubject(space, protocol.PlaneDelivery, protocol.Principal{Owner: "*", Actor: "*"}),
	} {
		g.sub(req)
		g.pub(protocol.ReplyFilter(req))
	}
	// Presence: read entries and rewrite an agent's own entry offline when the broker
	// reports its connection closed (the liveness watcher); no other key of the plane.
	pres := protocol.BucketPresence(space)
	ps := kvStream(pres)
	g.pub(api(verbStreamInfo, ps), api(verbStreamMsgGet, ps), api(verbDirectGet, ps), api(verbDirectGet, ps, ">"))
	g.pub(kvPrefix + pres + ".>")
	// Its own account's connections, for the liveness oracle (the broker scopes the
	// answer to the asking account).
	g.pub(accountConnz)
	g.sub(inbox)

	timerWriterGrants(g, space)

	// Sends nothing on the messaging plane.
	g.deny(protocol.ChatAll(space), protocol.InstAll(space), protocol.SvcAll(space))
	denyAdmin(g, space)
}

// timerWriterGrants: the delivery daemon's timer writer reads the schedule requests
// through its durable on EPT_REQ and publishes the armed schedules on EPT, reading the
// last one armed on a subject; the broker publishes the fires itself.
func timerWriterGrants(g *grants, space string) {
	req, ept, durable := provision.StreamEPTReq(space), provision.StreamEPT(space), protocol.TimerWriterDurable(space)
	bind(g, req, durable)
	g.pub(api(verbConsumerCreate, req, durable, ">"), api(verbDurableCreate, req, durable))
	g.pub(api(verbStreamInfo, ept), api(verbStreamMsgGet, ept))
	g.pub(protocol.TimerSubject(space, "*", "*", "*", "*", protocol.TimerArmed))
}

// managerGrants: an agent reading no channel, plus the manager's rails, its $SRV
// discovery subjects and its lease bucket.
func managerGrants(g *grants, space string, s UserSpec, inbox string) {
	peer := s
	peer.Subscribe, peer.AllowSubscribe, peer.AllowPublish, peer.Role, peer.Capabilities = []string{}, nil, nil, "", nil
	agentGrants(g, space, peer, inbox)
	for _, op := range protocol.MgrOps {
		g.sub(protocol.MgrAnyFilter(space, op))
	}
	for _, svc := range []string{protocol.ServiceManager, protocol.ServiceManagerAgent} {
		// The attach stream: terminal bytes under an attach request's reply subject.
		g.pub(protocol.ReplyFilter(protocol.MgrFilter(space, svc, protocol.MgrAttach)))
	}
	g.sub("$SRV.>")
	// The reference's endpoint rails to the manager (class, scatter and instance
	// requests) and its answers on the ep reply rail.
	ep := protocol.Root + "." + space + ".ep."
	g.sub(ep+"one.manager.>", ep+"all.manager.>", ep+"inst.manager.>")
	g.pub(ep + "reply.manager.>")
	// What a reference caller needs to resolve it: its contract artifacts in the contract
	// store (create-only publishes) and its own service record in the records bucket
	// (svc.manager.…, written under runHostGrants' one record subject *.manager.>).
	g.pub(api(verbStreamInfo, "EPC_"+space), protocol.Root+"."+space+".epc.>")
	rec := kvStream("cotal_records_" + space)
	g.pub(api(verbStreamInfo, rec), api(verbStreamMsgGet, rec), api(verbDirectGet, rec), api(verbDirectGet, rec, ">"))
	// The names of the DM durables (dm_<o>-<a>-<uid>): a name with one was held.
	g.pub(api(verbConsumerNames, protocol.StreamDM(space)))
	b := protocol.BucketManager(space)
	readBucket(g, b)
	g.pub(kvPrefix + b + ".>")
	runHostGrants(g, space)
	g.resp = true
}

// runHostGrants: what the manager needs to drive the workflow runs of its endpoint
// ("manager"): append to the journal and replay it through its own consumers, read and
// write its endpoint's records (runs, programs, answers its seats file, checkpoints,
// notices) and admissions, and publish a checkpoint's settle fact. It writes no other
// endpoint's record and no revocation marker: revoking a run is the operator's.
func runHostGrants(g *grants, space string) {
	const ep = protocol.RunHostEndpoint
	wfj := provision.StreamWFJ(space)
	g.pub(protocol.RunJournalSubject(space, "*"), api(verbStreamInfo, wfj))
	g.pub(api(verbConsumerCreate, wfj, ">"), api(verbConsumerInfo, wfj, "*"), api(verbConsumerNext, wfj, "*"),
		api(verbConsumerDelete, wfj, "*"), acks(wfj, "*"))
	rec := provision.BucketRecords(space)
	readBucket(g, rec)
	// Every record key is <kind>.<endpoint>.… (run, program, answer, cp, notice): one
	// subject grants them all for this endpoint, which keeps the manager's permissions
	// under the JWT's size limit with a space name of 64 characters.
	g.pub(kvKey(rec, "*."+ep+".>"))
	// Admissions are read a key at a time, never listed or watched: no consumer grants,
	// which keeps the manager's permissions under their size limit with a 64-character
	// space.
	adm := provision.BucketAdmission(space)
	getBucket(g, adm)
	g.pub(kvKey(adm, protocol.RunAdmissionKey(ep, "*")))
	epf := provision.StreamEPF(space)
	g.pub(api(verbStreamInfo, epf), api(verbStreamMsgGet, epf), api(verbDirectGet, epf), api(verbDirectGet, epf, ">"),
		protocol.RunSettleSubject(space, ep, "*"))
	// A conclave: its members' durable membership rows (read by a batch Direct Get,
	// written by CAS) and the registry row of the channel it mints. A KV key takes no
	// partial-token wildcard, so both buckets' keys are granted whole; the daemon still
	// copies only what a member's read ACL admits.
	mem := protocol.BucketMembers(space)
	g.pub(api(verbDirectGet, kvStream(mem)), kvPrefix+mem+".>", kvPrefix+protocol.BucketChannels(space)+".>")
	// Channel waits (wait(message|idle)): a wait's durable wfw_<requestId> on CHAT, made
	// with a filter (CHAT holds only the chat plane), pulled, acked and deleted. Which
	// channels a run reads is its admission's, checked by the driver before every read.
	// The delivery daemon's fan-out durable stays out of reach. These wildcards cover the
	// manager's own history reader's grants (unused: it reads no channel), which are dropped to keep the permissions
	// under their size limit with a 64-character space.
	chat := protocol.StreamChat(space)
	g.pub(api(verbConsumerCreate, chat, "*", ">"), api(verbConsumerInfo, chat, "*"), api(verbConsumerNext, chat, "*"),
		api(verbConsumerDelete, chat, "*"), acks(chat, "*"))
	g.deny(api(verbConsumerCreate, chat, protocol.ConsumerFanout, ">"), api(verbConsumerDelete, chat, protocol.ConsumerFanout))
	// The timer plane: request its pauses' timers and read their fires (runtimers).
	g.pub(protocol.TimerSubject(space, ep, "*", "*", "*", protocol.TimerSchedule), api(verbStreamMsgGet, provision.StreamEPT(space)))
	dropCovered(g)
}

// dropCovered removes the publish grants another publish grant already covers.
func dropCovered(g *grants) {
	var keep jwt.StringList
	for _, s := range g.pubAllow {
		covered := false
		for _, w := range g.pubAllow {
			if w != s && subjectCovers(w, s) {
				covered = true
				break
			}
		}
		if !covered {
			keep = append(keep, s)
		}
	}
	g.pubAllow = keep
}

// readerGrants is the observer, and with admin set the admin: read the messaging plane
// (DMs and anycasts only for the admin), presence and the registry; send nothing.
func readerGrants(g *grants, space string, s UserSpec, inbox string, admin bool) {
	chat, dm, task := protocol.StreamChat(space), protocol.StreamDM(space), protocol.StreamTask(space)
	g.sub(protocol.ChatAll(space))
	g.pub(api(verbAccountInfo), api(verbStreamInfo, chat))
	if admin {
		g.sub(protocol.InstAll(space), protocol.SvcAll(space))
		g.pub(api(verbStreamInfo, dm), api(verbStreamInfo, task))
	}
	if s.LifecycleUID != "" {
		hist := protocol.ConsumerHistory(s.Principal, s.LifecycleUID)
		reader(g, chat, hist)
		if admin {
			reader(g, dm, hist)
		}
	}
	publicBuckets(g, space)
	// The task board and the file claims live, as the roster is: the views (cotal web,
	// cotal console) show each change as it is written. Reading only: no key is writable.
	g.sub(kvPrefix+taskboard.Bucket(space)+".>", kvPrefix+claims.Bucket(space)+".>")
	g.sub(inbox)

	// Sends nothing on the messaging plane, and writes no KV key.
	// Nor asks the agent manager: its rails run programs and type into terminals.
	g.deny(protocol.ChatAll(space), protocol.InstAll(space), protocol.SvcAll(space), kvPrefix+">")
	for _, svc := range []string{protocol.ServiceManager, protocol.ServiceManagerAgent} {
		g.deny(protocol.CtlFilter(space, svc) + ".*")
	}
	if admin {
		// The admin's DM reader needs CONSUMER.CREATE/DELETE.DM_<space>.<its name>, so
		// only the forms that name no consumer or make a durable are denied outright.
		g.deny(api(verbConsumerCreate, dm), api(verbDurableCreate, dm, ">"))
	} else {
		denyBindOnly(g, dm)
	}
	denyBindOnly(g, task)
	denyAdmin(g, space)
}

// bind lets a credential consume an existing durable: look it up, pull, and ack.
func bind(g *grants, stream, durable string) {
	g.pub(api(verbConsumerInfo, stream, durable), api(verbConsumerNext, stream, durable), acks(stream, durable))
}

// reader lets a credential create, read and delete its one named history reader on
// stream, with any filter (the credential may read the whole stream).
func reader(g *grants, stream, name string) {
	g.pub(api(verbConsumerCreate, stream, name), api(verbConsumerCreate, stream, name, ">"))
	g.pub(api(verbConsumerInfo, stream, name), api(verbConsumerNext, stream, name), api(verbConsumerDelete, stream, name))
}

// publicBuckets lets a credential read presence, the channel registry, the task board and
// the file claims, which every
// member of the space may read, without ever creating a consumer on them: one key by
// Direct Get with the key in the request subject, the whole bucket by a batch Direct Get
// (each bucket keeps one value per key), and presence changes live by a plain
// subscription to the subjects KV puts are published on. No consumer create, info or
// delete and no flow-control reply is granted on the bucket streams: a consumer there
// would let the credential exhaust the stream's consumers, or, as a push consumer whose
// deliver subject no permission can reach, make the server write bucket records into
// another stream. (An agent's two pre-created watchers are granted by name in agentGrants.)
func publicBuckets(g *grants, space string) {
	for _, b := range []string{protocol.BucketPresence(space), protocol.BucketChannels(space), taskboard.Bucket(space), claims.Bucket(space)} {
		s := kvStream(b)
		g.pub(api(verbStreamInfo, s), api(verbStreamMsgGet, s), api(verbDirectGet, s), api(verbDirectGet, s, ">"))
		g.deny(api(verbConsumerCreate, s), api(verbConsumerCreate, s, ">"), api(verbDurableCreate, s, ">"))
	}
	g.sub(kvPrefix + protocol.BucketPresence(space) + ".>")
}

// readBucket lets a trusted daemon read and watch one KV bucket through consumers: a
// watch (and KV ListKeys) is an ordered push consumer with a generated name that nats.go
// deletes when the watch stops, so create, info and delete are granted on any consumer of
// the bucket's stream, plus its flow-control replies.
func readBucket(g *grants, bucket string) {
	s := kvStream(bucket)
	g.pub(api(verbStreamInfo, s), api(verbStreamMsgGet, s), api(verbDirectGet, s), api(verbDirectGet, s, ">"))
	g.pub(api(verbConsumerCreate, s, ">"), api(verbConsumerInfo, s, "*"), api(verbConsumerDelete, s, "*"), flowControl(s))
}

// getBucket grants reading bucket's keys one at a time (a Get, direct or not), with no
// listing or watching.
func getBucket(g *grants, bucket string) {
	s := kvStream(bucket)
	g.pub(api(verbStreamInfo, s), api(verbStreamMsgGet, s), api(verbDirectGet, s, ">"))
}

// denyBindOnly refuses every form that creates or deletes a consumer on stream: its
// durables are pre-created by the provisioner, because a consumer's filter travels in the
// request body, where no permission can reach it.
func denyBindOnly(g *grants, stream string) {
	g.deny(api(verbConsumerCreate, stream), api(verbConsumerCreate, stream, ">"),
		api(verbDurableCreate, stream, ">"), api(verbConsumerDelete, stream, ">"))
}

// denyAdmin refuses stream administration on the whole account and Direct Get on the
// message streams, which would read a message past every consumer ACL.
func denyAdmin(g *grants, space string) {
	for _, v := range []string{verbStreamCreate, verbStreamUpdate, verbStreamDelete, verbStreamPurge, verbStreamMsgDelete} {
		g.deny(api(v, ">"))
	}
	for _, s := range []string{protocol.StreamChat(space), protocol.StreamDM(space), protocol.StreamTask(space), protocol.StreamInbox(space), protocol.StreamDLV(space)} {
		g.deny(api(verbDirectGet, s), api(verbDirectGet, s, ">"))
	}
	// The A2A peer registry is the operator's alone: a row names a URL the bridge calls
	// and the peer it presents, so no other profile may write it, and none reads it (the
	// peers it presents show their cards in presence).
	a2a := kvStream(protocol.BucketA2APeers(space))
	g.deny(kvPrefix+protocol.BucketA2APeers(space)+".>", api(verbStreamInfo, a2a), api(verbStreamMsgGet, a2a),
		api(verbDirectGet, a2a), api(verbDirectGet, a2a, ">"), api(verbConsumerCreate, a2a), api(verbConsumerCreate, a2a, ">"),
		api(verbDurableCreate, a2a, ">"))
}

// grants collects subjects in order, without duplicates.
type grants struct {
	pubAllow, pubDeny, subAllow jwt.StringList
	resp                        bool // may answer each request it receives once (a service)
}

func (g *grants) pub(subjects ...string)  { g.pubAllow.Add(subjects...) }
func (g *grants) deny(subjects ...string) { g.pubDeny.Add(subjects...) }
func (g *grants) sub(subjects ...string)  { g.subAllow.Add(subjects...) }

func (g *grants) permissions() jwt.Permissions {
	p := jwt.Permissions{
		Pub: jwt.Permission{Allow: g.pubAllow, Deny: g.pubDeny},
		Sub: jwt.Permission{Allow: g.subAllow},
	}
	if g.resp {
		// One answer per request received, within a minute (a spawn that waits for its
		// settle answers within the readiness window).
		p.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: 2 * time.Minute}
	}
	return p
}

// readACL is the agent's read ACL as protocol.ReadSet resolves it: AllowSubscribe, or
// Subscribe when that is empty; none when both are omitted (the agent is DM-only).
func (s UserSpec) readACL() []string {
	_, allow := protocol.ReadSet(s.Subscribe, s.AllowSubscribe)
	return allow
}

// ReadACL returns the channel patterns an agent credential for s may read, with the
// default applied (see protocol.ReadSet). It is what the minter records in the ACL row.
func (s UserSpec) ReadACL() []string { return s.readACL() }

// tags are the JWT tags of the credential: owner, actor, principal and profile.
func (s UserSpec) tags() jwt.TagList {
	var t jwt.TagList
	if s.Principal != (protocol.Principal{}) {
		t = append(t, "owner:"+s.Principal.Owner, "actor:"+s.Principal.Actor, "principal:"+s.Principal.String())
	}
	if s.LifecycleUID != "" {
		t = append(t, "uid:"+s.LifecycleUID)
	}
	if s.Role != "" {
		t = append(t, "role:"+s.Role)
	}
	for _, c := range s.Capabilities {
		t = append(t, "cap:"+c)
	}
	return append(t, "profile:"+string(s.Profile))
}

// CapabilitySpawn is the persona capability that lets an agent ask the manager to spawn
// personas and stop the seats it spawned.
const CapabilitySpawn = "spawn"

// CapabilityA2AGateway is the capability of the A2A gateway's own identity (cotal a2a):
// it reads and writes the gateway's task bucket. No persona may carry it
// (workspace.CheckCapability refuses it): cotal a2a mints it for itself.
const CapabilityA2AGateway = "a2a-gateway"

// HasCapability reports whether the spec grants capability c.
func (s UserSpec) HasCapability(c string) bool {
	for _, have := range s.Capabilities {
		if have == c {
			return true
		}
	}
	return false
}

// Check validates spec without I/O, with messages that name the cotal mint flag at fault.
func (s UserSpec) Check() error { return s.check() }

// check validates spec without I/O. Messages name the cotal mint flag where one exists.
func (s UserSpec) check() error {
	if !s.Profile.Valid() {
		return fmt.Errorf("--profile %q: want agent, observer, admin, delivery, manager or provisioner", s.Profile)
	}
	if s.Name == "" || len(s.Name) > protocol.MaxNameLength || strings.ContainsAny(s.Name, "\n\r") {
		return fmt.Errorf("name %q: want 1 to %d characters on one line", s.Name, protocol.MaxNameLength)
	}
	if s.Profile != ProfileAgent {
		switch {
		case s.Role != "":
			return fmt.Errorf("--role is only for the agent profile, not %s", s.Profile)
		case len(s.AllowSubscribe) > 0:
			return fmt.Errorf("--allow-subscribe is only for the agent profile, not %s", s.Profile)
		case len(s.AllowPublish) > 0:
			return fmt.Errorf("--allow-publish is only for the agent profile, not %s", s.Profile)
		case len(s.Subscribe) > 0:
			return fmt.Errorf("a boot read set (subscribe) is only for the agent profile, not %s", s.Profile)
		case len(s.Capabilities) > 0:
			return fmt.Errorf("capabilities are only for the agent profile, not %s", s.Profile)
		}
	}
	if s.Profile != ProfileProvisioner || s.Principal != (protocol.Principal{}) {
		if err := s.Principal.Validate(); err != nil {
			return fmt.Errorf("principal: %w", err)
		}
	}
	switch {
	case s.LifecycleUID == "" && (s.Profile == ProfileAgent || s.Profile == ProfileManager):
		return fmt.Errorf("lifecycle uid: an agent credential needs one, to name the DM durable it binds")
	case s.LifecycleUID != "" && !protocol.ValidLifecycleUID(s.LifecycleUID):
		return fmt.Errorf("lifecycle uid %q: want 26 to 32 of a-z 0-9", s.LifecycleUID)
	case s.Role != "" && protocol.CheckRole(s.Role) != nil:
		return fmt.Errorf("--role: %w", protocol.CheckRole(s.Role))
	case s.ExpiresIn < 0:
		return fmt.Errorf("--expires-in %s: want a positive duration, or none", s.ExpiresIn)
	}
	for _, l := range []struct {
		flag string
		chs  []string
	}{{"subscribe", s.Subscribe}, {"--allow-subscribe", s.AllowSubscribe}, {"--allow-publish", s.AllowPublish}} {
		for _, ch := range l.chs {
			if err := protocol.CheckChannelPattern(ch); err != nil {
				return fmt.Errorf("%s: %w", l.flag, err)
			}
		}
	}
	if len(s.AllowSubscribe) > 0 {
		for _, ch := range s.Subscribe {
			if !protocol.ChannelCovered(s.AllowSubscribe, ch) {
				return fmt.Errorf("subscribe %q is outside the read ACL (--allow-subscribe %s)", ch, strings.Join(s.AllowSubscribe, ","))
			}
		}
	}
	return nil
}
