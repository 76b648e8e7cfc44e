package mcp

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/cotal-ai/cotal/connector"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/workspace"
)

// directMaterial are the variables that carry connection material directly; a launch
// that also names a launch-material file carries two identities and is refused, as the
// reference's connector-core config.ts (readMaterial) refuses it.
var directMaterial = []string{"COTAL_CREDS", "COTAL_SERVERS", "COTAL_TOKEN", connector.EnvOwner, connector.EnvActor,
	connector.EnvSentinelCreds, connector.EnvBearerCmd, "COTAL_CONTROL_TOKEN", "COTAL_LINK"}

// launchMaterial is the reference's launch-material file (core launch-material.ts,
// LaunchMaterial): what a launcher hands a session instead of putting it in the env.
type launchMaterial struct {
	Servers      *string         `json:"servers"`
	Creds        *string         `json:"creds"`
	Token        *string         `json:"token"`
	ControlToken *string         `json:"controlToken"`
	UserAuth     json.RawMessage `json:"userAuth"`
}

// readLaunchMaterial reads the file COTAL_LAUNCH_MATERIAL names, refusing one others may
// read, one that is not a JSON object, a field that is not a non-empty string, and one
// that carries nothing this reader recognises (as readLaunchMaterial/validate does).
func readLaunchMaterial(path string) (launchMaterial, error) {
	var m launchMaterial
	what := connector.EnvLaunchMaterial + "=" + path
	// A named pipe or a device is refused unopened: opening a named pipe waits for a writer.
	if err := (cmdutil.UserFile{Flag: connector.EnvLaunchMaterial, Path: path, Kind: "a launch material file (JSON)", Max: math.MaxInt64}).CheckStat(); err != nil {
		return m, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return m, cmdutil.FlagErrorf("%s: %v", what, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return m, cmdutil.FlagErrorf("%s is readable beyond its owner (mode %o): connection material belongs in a 0600 file; chmod 600 it", what, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return m, cmdutil.FlagErrorf("%s: %v", what, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		return m, cmdutil.FlagErrorf("%s: want a JSON object with servers, creds, token or userAuth", what)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, cmdutil.FlagErrorf("%s: servers, creds, token and controlToken must be non-empty strings: %v", what, err)
	}
	recognised := false
	for k, v := range map[string]*string{"servers": m.Servers, "creds": m.Creds, "token": m.Token, "controlToken": m.ControlToken} {
		if v == nil {
			continue
		}
		if strings.TrimSpace(*v) == "" {
			return m, cmdutil.FlagErrorf("%s: %s is empty: want a non-empty string", what, k)
		}
		recognised = true
	}
	if len(m.UserAuth) > 0 {
		return m, cmdutil.FlagErrorf("%s carries userAuth (a user-mode launch): cotal mcp serves a static-creds launch only; launch it with creds in the material", what)
	}
	if m.Token != nil {
		return m, cmdutil.FlagErrorf("%s carries a token: cotal mcp connects with creds (or to an open mesh); put creds in the material", what)
	}
	if !recognised {
		return m, cmdutil.FlagErrorf("%s carries nothing this reader recognises: a launch that references material and supplies none is refused", what)
	}
	return m, nil
}

// refEnv reads the reference connectors' names (connector-core config.ts,
// configFromEnv) that no flag sets: the launch material, the agent file, the ACLs, the
// attention defaults, the lifecycle uid, the kind, model and variant. Go's own names stay
// aliases: where both are set and disagree, the launch is refused.
func (o *Options) refEnv(fs *pflag.FlagSet, getenv func(string) string, lookup func(string) (string, bool)) error {
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	if p := env(connector.EnvLaunchMaterial); p != "" {
		var both []string
		for _, k := range directMaterial {
			if env(k) != "" {
				both = append(both, k)
			}
		}
		if len(both) > 0 {
			return cmdutil.FlagErrorf("this launch carries connection material both as %s and as %s: one launch carries one identity; drop the direct variables or the material file",
				connector.EnvLaunchMaterial, strings.Join(both, ", "))
		}
		m, err := readLaunchMaterial(p)
		if err != nil {
			return err
		}
		if m.Servers != nil && !fs.Changed("server") {
			o.Mesh.Server = strings.Join(splitList(*m.Servers), ",")
		}
		if m.Creds != nil && !fs.Changed("creds") {
			o.Mesh.Creds, o.fromEnvVar["creds"] = *m.Creds, connector.EnvLaunchMaterial
		}
	}
	user := 0
	for _, k := range []string{connector.EnvOwner, connector.EnvActor, connector.EnvSentinelCreds, connector.EnvBearerCmd} {
		if env(k) != "" {
			user++
		}
	}
	switch {
	case user > 0 && user < 4:
		return cmdutil.FlagErrorf("a user-mode launch needs all of COTAL_OWNER, COTAL_ACTOR, COTAL_SENTINEL_CREDS and COTAL_BEARER_CMD: a partial set is a broken launcher")
	case user == 4:
		return cmdutil.FlagErrorf("a user-mode launch (COTAL_OWNER, COTAL_ACTOR, COTAL_SENTINEL_CREDS, COTAL_BEARER_CMD) is not served by cotal mcp: launch it with COTAL_CREDS (or creds in %s)", connector.EnvLaunchMaterial)
	}
	if p := env(connector.EnvAgentFile); p != "" {
		b, err := (cmdutil.UserFile{Flag: connector.EnvAgentFile, Path: p, Kind: "a persona file", Max: cmdutil.MaxPromptFileSize}).Read()
		if err != nil {
			return err
		}
		per, err := workspace.ParsePersona(p, b)
		if err != nil {
			return cmdutil.FlagErrorf("%s: %v", connector.EnvAgentFile, err)
		}
		if o.Persona != "" && o.Persona != per.Name {
			return cmdutil.FlagErrorf("%s names persona %q but %s: they must be the same persona; drop one", connector.EnvAgentFile, per.Name, o.source("persona", o.Persona))
		}
		o.agentFile = per
		if o.Persona == "" {
			if o.Name == "" {
				o.Name, o.fromEnvVar["name"] = per.Name, connector.EnvAgentFile
			}
			if o.Role == "" {
				o.Role = per.Role
			}
			if !o.channelsSet {
				o.Channels, o.channelsSet, o.fromEnvVar["channel"] = per.BootSet(), true, connector.EnvAgentFile
			}
			if len(o.Capabilities) == 0 {
				o.Capabilities = per.Capabilities
			}
		}
	}
	list := func(k string) ([]string, bool) {
		v, ok := lookup(k)
		return splitList(v), ok && strings.TrimSpace(v) != ""
	}
	var err error
	var subSet, pubSet bool
	o.AllowSubscribe, subSet = list(connector.EnvAllowSubscribe)
	o.AllowPublish, pubSet = list(connector.EnvAllowPublish)
	if o.agentFile != nil && o.Persona == "" {
		// The agent file's ACLs, exactly (an empty one reads or posts nowhere), where the
		// env names none: env > agent file, as configFromEnv resolves them.
		if !subSet {
			o.AllowSubscribe, subSet = o.agentFile.ReadACL(), true
		}
		if !pubSet {
			o.AllowPublish, pubSet = o.agentFile.AllowPublish, true
		}
	}
	o.aclSet = subSet || pubSet
	for _, l := range []struct {
		name string
		chs  []string
	}{{connector.EnvAllowSubscribe, o.AllowSubscribe}, {connector.EnvAllowPublish, o.AllowPublish}} {
		for _, ch := range l.chs {
			if err = protocol.CheckChannelPattern(ch); err != nil {
				return cmdutil.FlagErrorf("%s: %v", l.name, err)
			}
		}
	}
	if len(o.AllowSubscribe) > 0 {
		for _, ch := range o.Channels {
			if !protocol.ChannelCovered(o.AllowSubscribe, ch) {
				return cmdutil.FlagErrorf("subscribe channel %q (%s) is not within %s [%s]: an agent joins only channels it may read",
					ch, o.source("channel", strings.Join(o.Channels, ",")), connector.EnvAllowSubscribe, strings.Join(o.AllowSubscribe, ", "))
			}
		}
	}
	quiet, _ := list(connector.EnvQuiet)
	muted, _ := list(connector.EnvMuted)
	read := o.AllowSubscribe
	if len(read) == 0 {
		read = o.Channels
	}
	for _, l := range []struct {
		name string
		chs  []string
	}{{connector.EnvQuiet, quiet}, {connector.EnvMuted, muted}} {
		for _, ch := range l.chs {
			switch {
			case protocol.CheckConcreteChannel(ch) != nil:
				return cmdutil.FlagErrorf("%s: channel %q must be one concrete channel (no wildcard)", l.name, ch)
			case !protocol.ChannelCovered(read, ch):
				return cmdutil.FlagErrorf("%s: channel %q is not within the read ACL [%s]", l.name, ch, strings.Join(read, ", "))
			case contains(quiet, ch) && contains(muted, ch):
				return cmdutil.FlagErrorf("channel %q is in both %s and %s: pick one", ch, connector.EnvQuiet, connector.EnvMuted)
			}
		}
	}
	if uid := env(connector.EnvLifecycleUID); uid != "" {
		if !protocol.ValidLifecycleUID(uid) {
			return cmdutil.FlagErrorf("%s=%q: want 26 to 32 of a-z 0-9", connector.EnvLifecycleUID, uid)
		}
		o.LifecycleUID = uid
	}
	if k := env(connector.EnvKind); k != "" && k != protocol.CardAgent {
		return cmdutil.FlagErrorf("%s=%q: cotal mcp serves an agent; want agent or leave it unset", connector.EnvKind, k)
	}
	o.Model, o.Variant = env(connector.EnvModel), env(connector.EnvVariant)
	for k, v := range map[string]string{connector.EnvModel: o.Model, connector.EnvVariant: o.Variant} {
		if v != "" && connector.CheckModel(v) != nil {
			return cmdutil.FlagErrorf("%s=%q: a model is one word such as sonnet", k, v)
		}
	}
	return nil
}

// checkCredsUID refuses a COTAL_LIFECYCLE_UID that is not the uid the creds were minted
// for: the durables the credential may bind are that uid's.
func checkCredsUID(uid, credsUID string) error {
	if uid != "" && credsUID != "" && uid != credsUID {
		return fmt.Errorf("%s %s is not the lifecycle uid %s the creds were minted for: the launcher must name the creds' own", connector.EnvLifecycleUID, uid, credsUID)
	}
	return nil
}
