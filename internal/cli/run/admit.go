package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/runstore"
)

// channelList reads an --admit-read / --admit-publish value: channels separated by
// commas, or none.
func channelList(v string) ([]string, error) {
	var out []string
	for _, ch := range strings.Split(v, ",") {
		ch = strings.TrimSpace(ch)
		if ch == "" {
			continue
		}
		if ch != runstore.AllowNone {
			if err := protocol.CheckConcreteChannel(ch); err != nil {
				return nil, err
			}
		}
		out = append(out, ch)
	}
	if len(out) == 0 {
		return nil, errors.New("name at least one channel, or none")
	}
	if len(out) > 1 && strings.Contains(","+v+",", ","+runstore.AllowNone+",") {
		return nil, errors.New("none stands alone")
	}
	return out, nil
}

// admit writes a local run's admission before it is driven: the operator's provenance
// and the channel ceiling named on the command line (run-admission.ts's local shape).
func (o *Options) admit(ctx context.Context, js jetstream.JetStream, space, runID string) error {
	read, _ := channelList(o.AdmitRead) // checked with the flags
	publish, _ := channelList(o.AdmitPublish)
	var raw [13]byte
	_, _ = rand.Read(raw[:])
	uid := hex.EncodeToString(raw[:])
	caller := runstore.Caller{Owner: protocol.OwnerLocal, Actor: "cli_run_" + uid[:8], UID: "u_" + uid[:20]}
	a := runstore.Admission{Version: 1, Space: space, Endpoint: runstore.DefaultEndpoint, RunID: runID, InstanceID: uid[:26],
		Caller: caller,
		Ceiling: runstore.Ceiling{
			Publish: runstore.ChannelAllow(publish, func(ch string) string {
				return protocol.ChatSubject(space, protocol.Principal{Owner: caller.Owner, Actor: caller.Actor}, ch)
			}),
			Subscribe: runstore.ChannelAllow(read, func(ch string) string { return protocol.ChannelFilter(space, ch) }),
		},
		Provenance: runstore.Provenance{Kind: "operator", By: caller.Actor,
			Reason: "cotal run start --local --admit-read " + o.AdmitRead + " --admit-publish " + o.AdmitPublish},
		AdmittedAt: time.Now().UnixMilli()}
	adm, err := runstore.OpenAdmissions(ctx, js, space)
	if err != nil {
		return err
	}
	if err := adm.Admit(ctx, a); err != nil {
		return fmt.Errorf("admit run %s: %w", runID, err)
	}
	return nil
}

// refuseRevoked refuses to go on with a run whose admission was revoked; a marker that
// cannot be read refuses too, since it may say so.
func refuseRevoked(ctx context.Context, js jetstream.JetStream, space, runID string) error {
	adm, err := runstore.OpenAdmissions(ctx, js, space)
	if err != nil {
		return err
	}
	rv, err := adm.Revoked(ctx, runstore.DefaultEndpoint, runID)
	if err != nil {
		return cmdutil.Refuse("run "+runID, "its revocation marker cannot be read ("+cmdutil.OneLine(err.Error())+"), and it may say the run is revoked", "")
	}
	if rv != nil {
		return cmdutil.Refuse("run "+runID, "revoked by "+cmdutil.OneLine(rv.By)+" ("+cmdutil.OneLine(rv.Reason)+"); a revoked run is not resumed", "")
	}
	return nil
}
