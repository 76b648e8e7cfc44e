package protocol

import (
	"encoding/hex"
)

// Names of one space's JetStream footprint. Every function takes the space token as it
// appears in subjects (see CheckSpace).

// StreamChat names the multicast history stream.
func StreamChat(space string) string { return "CHAT_" + space }

// StreamDM names the unicast stream.
func StreamDM(space string) string { return "DM_" + space }

// StreamTask names the anycast work-queue stream.
func StreamTask(space string) string { return "TASK_" + space }

// BucketPresence names the presence KV bucket.
func BucketPresence(space string) string { return "cotal_presence_" + space }

// BucketChannels names the channel registry KV bucket.
func BucketChannels(space string) string { return "cotal_channels_" + space }

// BucketA2APeers names the registry of external A2A agents presented as peers (a Go
// extension: one row per agent, written by the project's operator only).
func BucketA2APeers(space string) string { return "cotal_a2apeers_" + space }

// BucketA2A names the A2A gateway's task bucket (a Go extension, docs/interop.md): the
// tasks `cotal a2a` serves, so a gateway restart keeps them.
func BucketA2A(space string) string { return "cotal_a2a_" + space }

// ConsumerDM names a principal's DM durable: dm_<owner>-<actor>-<uid>.
func ConsumerDM(p Principal, uid string) string { return "dm_" + p.Dash() + "-" + uid }

// ConsumerDMPrefix is the name prefix shared by every DM durable of one principal.
func ConsumerDMPrefix(p Principal) string { return "dm_" + p.Dash() + "-" }

// ConsumerRole names the role-shared anycast durable: svc_<role>.
func ConsumerRole(role string) string { return "svc_" + Token(role) }

// ConsumerHistory names a principal's transient history reader: chathist_<owner>-<actor>-<uid>.
func ConsumerHistory(p Principal, uid string) string { return "chathist_" + p.Dash() + "-" + uid }

// ChannelDefaultsKey is the channel-registry key that holds the space-wide defaults.
const ChannelDefaultsKey = "=defaults"

// SpaceKey returns the case-safe file-name key of a space: the lowercase hex of its UTF-8
// bytes ("prod" -> "70726f64"). Per-space files (creds, accounts, pidfiles, logs) are named
// with it, as in the reference, so two spaces that differ only in case never share a file.
func SpaceKey(space string) string { return hex.EncodeToString([]byte(space)) }

// RunHostEndpoint is the endpoint under which a space's manager hosts workflow runs (the
// reference's default endpoint id).
const RunHostEndpoint = "manager"

// RunJournalSubject is the subject of a workflow run's journal in WFJ_<space>.
func RunJournalSubject(space, run string) string { return Root + "." + space + ".wfj." + run }

// RunAdmissionKey is the key of a run's admission record in cotal_admission_<space>.
func RunAdmissionKey(endpoint, run string) string {
	return "admission.v1." + endpoint + "." + run
}

// RunSettleSubject is the subject of a checkpoint's one-use settle fact in EPF_<space>.
func RunSettleSubject(space, endpoint, token string) string {
	return Root + "." + space + ".epf." + endpoint + ".cp." + token
}

// The timer plane's phases: a host's request, the timer writer's armed schedule, and the
// message the broker publishes at the deadline.
const (
	TimerSchedule = "schedule"
	TimerArmed    = "armed"
	TimerFire     = "fire"
)

// TimerSubject is a timer's subject on the timer plane:
// cotal.<space>.ept.<endpoint>.<instanceId>.<epoch>.<timerId>.<phase>. Requests (phase
// schedule) go to EPT_REQ_<space>; armed schedules and fires to EPT_<space>. Any token
// may be "*" for a filter.
func TimerSubject(space, endpoint, instance, epoch, timer, phase string) string {
	return Root + "." + space + ".ept." + endpoint + "." + instance + "." + epoch + "." + timer + "." + phase
}

// TimerWriterDurable is the timer writer's durable on EPT_REQ_<space> (the reference's
// timerw_<space>).
func TimerWriterDurable(space string) string { return "timerw_" + space }
