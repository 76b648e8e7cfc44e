package up

import (
	"fmt"
	"io"
	"slices"

	"github.com/spf13/pflag"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/trust"
)

// limitFlag is the flag of the limit called name: --max-storage, --max-connections, ...
func limitFlag(name string) string { return "max-" + name }

// limitUsage says what each limit flag bounds.
var limitUsage = map[string]string{
	"storage":       "disk the space's streams and buckets may hold, every replica counted (512MiB, 4GiB, unlimited)",
	"memory":        "memory the space's memory streams may hold",
	"streams":       "streams and buckets the space may have",
	"consumers":     "consumers the space's streams may have, durable and ephemeral",
	"connections":   "connections to the space at once",
	"subscriptions": "subscriptions of one connection to the space",
	"payload":       "bytes of one message (at most the broker's own 1MiB)",
}

// addLimitFlags adds a --max-<limit> flag per space limit, read into texts.
func addLimitFlags(fl *pflag.FlagSet, texts map[string]*string) {
	for _, name := range trust.LimitNames() {
		texts[name] = fl.String(limitFlag(name), "", "space limit: "+limitUsage[name]+" (default "+defaultText(name)+")")
	}
}

// defaultText is the default of the limit called name, as a person writes it.
func defaultText(name string) string { return trust.DefaultLimits().Text(name) }

// readLimitFlags parses the limit flags that were given into opts.Limits.
func (o *Options) readLimitFlags(fl *pflag.FlagSet, texts map[string]*string) error {
	for _, name := range trust.LimitNames() {
		if !fl.Changed(limitFlag(name)) {
			continue
		}
		if o.Open {
			return cmdutil.FlagErrorf("--%s and --open exclude each other: an open mesh has no accounts to bound (use the authenticated mesh)", limitFlag(name))
		}
		if err := o.Limits.Set(name, *texts[name]); err != nil {
			return cmdutil.FlagErrorf("--%s: %v", limitFlag(name), err)
		}
	}
	return nil
}

// limitArgs are the limit flags given, for the background child.
func (o *Options) limitArgs() []string {
	var args []string
	for _, name := range trust.LimitNames() {
		if v := o.Limits.Text(name); v != "" {
			args = append(args, "--"+limitFlag(name), v)
		}
	}
	return args
}

// applyLimits gives the accounts of spaces their limits before a broker serves them or
// they are pushed to one: space (the one up names) gets the limits of the flags, over
// those of the manifest, over its account's current ones (a new account's are
// trust.DefaultLimits); every other space whose account has no limits yet (one made by an
// older cotal) gets olderSpaceLimits. It returns the spaces whose account changed, which a
// running broker must be handed again (PushAccount), and says so on errOut.
func (o *Options) applyLimits(chain *trust.Chain, space string, spaces []string, errOut io.Writer) ([]string, error) {
	var changed []string
	for _, s := range spaces {
		acct, err := chain.Space(s)
		if err != nil {
			return nil, err
		}
		cur, set := acct.Limits()
		base := cur
		if !set {
			base = olderSpaceLimits()
		}
		want := base
		if s == space {
			var fromFile trust.Limits
			if o.manifest != nil {
				fromFile = o.manifest.Limits
			}
			want = o.Limits.Over(fromFile).Over(base)
		}
		if set && want == cur {
			continue
		}
		if _, _, err := chain.SetLimits(s, want); err != nil {
			return nil, err
		}
		if set {
			fmt.Fprintf(errOut, "space %s: limits %s (were %s)\n", s, want, cur)
		} else {
			fmt.Fprintf(errOut, "space %s had no limits (made by an older cotal): it now has %s\n", s, want)
			if want.Storage == trust.Unlimited {
				fmt.Fprintf(errOut, "space %s keeps no storage limit, so what it stores today is never refused: set one with `cotal up --space %s --max-storage 4GiB` (see docs/operations.md)\n", s, s)
			}
		}
		changed = append(changed, s)
	}
	return changed, nil
}

// olderSpaceLimits are the limits a space made before limits existed gets: the defaults,
// except storage and memory, which stay unlimited. Such a space may already hold more
// than the default storage, and a limit below what it holds would refuse every write,
// presence included; the operator sets one knowing its size.
func olderSpaceLimits() trust.Limits {
	l := trust.DefaultLimits()
	l.Storage, l.Memory = trust.Unlimited, trust.Unlimited
	return l
}

// withSpace is spaces with space first, once.
func withSpace(space string, spaces []string) []string {
	out := []string{space}
	for _, s := range spaces {
		if s != space && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
