package provision

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// drift is one setting that differs from what the space needs.
type drift struct {
	field      string
	have, want string
	fix        func(*jetstream.StreamConfig) // nil: cannot change without loss (a conflict), unless kept
	why        string                        // for a conflict: what the change would lose
	// kept is set for a setting left as it is although it differs, with the reason: the
	// server cannot change it in place and the difference loses nothing.
	kept string
	// lower is set when the per-subject limit would go down to this value; inspect allows
	// it (sets fix) when no subject holds more.
	lower int64
	// scale is set for a replica count raised in place; when the server refuses the
	// update, the error names the stream and how to migrate it.
	scale bool
}

func (d drift) String() string {
	s := fmt.Sprintf("%s %s, want %s", d.field, d.have, d.want)
	if d.why != "" {
		s += " (" + d.why + ")"
	}
	return s
}

// compare lists the settings of have that matter to cotal and differ from want. Settings it
// does not list (age and size limits of the message streams, descriptions, ...) are the
// operator's and are left as they are. isBucket adds the bucket TTL, which is KV semantics.
func compare(have, want jetstream.StreamConfig, isBucket bool) []drift {
	var ds []drift
	if !sameSet(have.Subjects, want.Subjects) {
		ds = append(ds, drift{field: "subjects", have: fmt.Sprint(have.Subjects), want: fmt.Sprint(want.Subjects)})
	}
	if h, w := replicaCount(have.Replicas), replicaCount(want.Replicas); h != w {
		d := drift{field: "replicas", have: strconv.Itoa(h), want: strconv.Itoa(w)}
		if h < w { // a stream update of num_replicas: the server copies it to new peers
			d.fix = func(c *jetstream.StreamConfig) { c.Replicas = w }
			d.scale = true
		} else {
			d.kept = "more replicas lose nothing; lower them by hand with `nats stream edit " + have.Name + " --replicas " + strconv.Itoa(w) + "` if that is meant"
		}
		ds = append(ds, d)
	}
	if have.Retention != want.Retention {
		ds = append(ds, drift{field: "retention", have: have.Retention.String(), want: want.Retention.String()})
	}
	if have.Storage != want.Storage {
		ds = append(ds, drift{field: "storage", have: have.Storage.String(), want: want.Storage.String()})
	}
	if h, w := perSubject(have.MaxMsgsPerSubject), perSubject(want.MaxMsgsPerSubject); h != w {
		d := drift{field: "max msgs per subject", have: limit(have.MaxMsgsPerSubject), want: limit(want.MaxMsgsPerSubject)}
		if h < w { // raising a limit drops nothing
			d.fix = func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = want.MaxMsgsPerSubject }
		} else {
			d.lower = w
		}
		ds = append(ds, d)
	}
	wantDup := want.Duplicates
	if !isBucket && have.MaxAge > 0 && have.MaxAge < wantDup {
		wantDup = have.MaxAge // the server caps the window at an operator's age limit
	}
	if have.Duplicates != wantDup {
		ds = append(ds, drift{field: "duplicate window", have: have.Duplicates.String(), want: wantDup.String(),
			fix: func(c *jetstream.StreamConfig) { c.Duplicates = wantDup }})
	}
	if isBucket && have.MaxAge != want.MaxAge {
		ds = append(ds, drift{field: "ttl", have: have.MaxAge.String(), want: want.MaxAge.String(),
			fix: func(c *jetstream.StreamConfig) { c.MaxAge = want.MaxAge }})
	}
	if have.Discard != want.Discard {
		ds = append(ds, drift{field: "discard", have: have.Discard.String(), want: want.Discard.String(),
			fix: func(c *jetstream.StreamConfig) { c.Discard = want.Discard }})
	}
	if have.AllowDirect != want.AllowDirect {
		ds = append(ds, drift{field: "allow direct", have: strconv.FormatBool(have.AllowDirect), want: strconv.FormatBool(want.AllowDirect),
			fix: func(c *jetstream.StreamConfig) { c.AllowDirect = want.AllowDirect }})
	}
	if have.AllowRollup != want.AllowRollup {
		ds = append(ds, drift{field: "allow rollup", have: strconv.FormatBool(have.AllowRollup), want: strconv.FormatBool(want.AllowRollup),
			fix: func(c *jetstream.StreamConfig) { c.AllowRollup = want.AllowRollup }})
	}
	if have.DenyDelete != want.DenyDelete {
		// nats-server refuses to lift deny_delete on an existing stream; it only forbids
		// erasing single messages by sequence, which no cotal or reference client does.
		ds = append(ds, oneWay("deny delete", want.DenyDelete, func(c *jetstream.StreamConfig) { c.DenyDelete = true },
			"the server cannot allow deletes on an existing stream; it forbids only erasing a message by sequence, which no client does"))
	}
	if have.DenyPurge != want.DenyPurge {
		ds = append(ds, oneWay("deny purge", want.DenyPurge, func(c *jetstream.StreamConfig) { c.DenyPurge = true },
			"the server cannot allow purges on an existing stream; no cotal client purges it"))
	}
	if have.AllowMsgTTL != want.AllowMsgTTL {
		ds = append(ds, oneWay("allow msg ttl", want.AllowMsgTTL, func(c *jetstream.StreamConfig) { c.AllowMsgTTL = true },
			"the server cannot turn per-message TTLs off; a stream no client sends a TTL to is unchanged by them"))
	}
	if have.AllowMsgSchedules != want.AllowMsgSchedules {
		ds = append(ds, oneWay("allow msg schedules", want.AllowMsgSchedules, func(c *jetstream.StreamConfig) { c.AllowMsgSchedules = true },
			"the server cannot turn message schedules off; a stream no client schedules on is unchanged by them"))
	}
	if have.SubjectDeleteMarkerTTL != want.SubjectDeleteMarkerTTL {
		ds = append(ds, drift{field: "subject delete marker ttl", have: have.SubjectDeleteMarkerTTL.String(), want: want.SubjectDeleteMarkerTTL.String(),
			fix: func(c *jetstream.StreamConfig) {
				c.SubjectDeleteMarkerTTL = want.SubjectDeleteMarkerTTL
				if want.SubjectDeleteMarkerTTL > 0 { // the server requires both
					c.AllowMsgTTL, c.AllowRollup, c.DenyPurge = true, true, false
				}
			}})
	}
	return ds
}

// oneWay is the drift of a flag an existing stream has as !want, when the server can turn
// the flag on in place but never off: turning it on is fixed by on, turning it off is kept
// with the reason why.
func oneWay(field string, want bool, on func(*jetstream.StreamConfig), why string) drift {
	d := drift{field: field, have: strconv.FormatBool(!want), want: strconv.FormatBool(want)}
	if want {
		d.fix = on
	} else {
		d.kept = why
	}
	return d
}

// replicaCount reads a stream's replica count; 0 means 1.
func replicaCount(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

// perSubject orders a per-subject limit; zero and negative mean unlimited.
func perSubject(n int64) int64 {
	if n <= 0 {
		return int64(^uint64(0) >> 1)
	}
	return n
}

func limit(n int64) string {
	if n <= 0 {
		return "unlimited"
	}
	return strconv.FormatInt(n, 10)
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
