package up

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/cotal-ai/cotal/backup"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// restoreState is what --restore carries through a run.
type restoreState struct {
	path    string          // --restore, absolute
	archive *backup.Archive // checked whole before anything is written
}

// addRestoreFlag registers --restore.
func addRestoreFlag(fl *pflag.FlagSet, o *Options) {
	fl.StringVar(&o.restoreFlag, "restore", "", "restore the spaces of a backup (cotal backup create) into this fresh project or broker")
}

// openRestore checks --restore's archive from end to end before anything is written, and
// its fit with the other flags: a mode that matches the archive's, a --space it holds (the
// archive's first space when none is named).
func (o *Options) openRestore() error {
	if o.restoreFlag == "" {
		return nil
	}
	if o.DryRun {
		return cmdutil.FlagErrorf("--restore and --dry-run exclude each other")
	}
	// Stat before the archive is opened: opening a named pipe waits for a writer.
	if err := cmdutil.BackupFile("--restore", o.restoreFlag).CheckStat(); err != nil {
		return err
	}
	abs, err := filepath.Abs(o.restoreFlag)
	if err != nil {
		return cmdutil.FlagErrorf("--restore %s: %v", o.restoreFlag, err)
	}
	a, err := backup.Open(abs)
	if err != nil {
		return cmdutil.RefuseUsage("--restore "+o.restoreFlag, err.Error()+"; nothing was changed", "cotal backup inspect "+cmdutil.ShellQuote(abs))
	}
	m := a.Manifest
	if (m.Mode == workspace.ModeOpen) != o.Open {
		want := "without --open"
		if m.Mode == workspace.ModeOpen {
			want = "with --open"
		}
		return cmdutil.RefuseUsage("--restore "+o.restoreFlag, "it is a backup of an "+m.Mode+" mesh: restore it "+want, "")
	}
	if o.Space == "" {
		o.Space = m.Spaces[0].Name
	} else if !slices.Contains(m.SpaceNames(), o.Space) {
		return cmdutil.RefuseUsage("--space "+o.Space, "the backup holds "+strings.Join(m.SpaceNames(), ", ")+
			": name one of them, or leave --space out for "+m.Spaces[0].Name, "")
	}
	o.restore = &restoreState{path: abs, archive: a}
	return nil
}

// restoreArgs are the flags a detached child needs to restore as its parent was asked.
func (o *Options) restoreArgs() []string {
	if o.restore == nil {
		return nil
	}
	return []string{"--restore", o.restore.path}
}

// prepareRestore refuses a restore into a project whose mesh runs (a live space), and on
// an authenticated mesh puts the archive's trust chain, when it carries one, into a
// project that has none, and makes an account for each space it holds. A detaching
// parent only refuses: its background child does the rest.
func (o *Options) prepareRestore(proj *workspace.Project) error {
	if o.restore == nil {
		return nil
	}
	if cmdutil.MeshRunning(proj) {
		return cmdutil.Refuse("--restore on the running mesh of "+proj.Root,
			"a restore goes into a fresh broker and never writes over a live space; stop this one first (its store stays) or restore in another project",
			"cotal down")
	}
	if o.Detach || o.Open {
		return nil
	}
	m := o.restore.archive.Manifest
	if m.HasChain() {
		raw, err := o.restore.archive.ReadMember(backup.ChainMember)
		if err != nil {
			return err
		}
		res, err := trust.Import(bytes.NewReader(raw), proj.AuthDir(), false)
		if errors.Is(err, trust.ErrChainExists) {
			return cmdutil.Refuse("--restore "+o.restore.path,
				"the backup carries a trust chain, and "+proj.AuthDir()+" holds another one; restore into a project without .cotal/auth, "+
					"or move that folder aside to take the backup's keys", "")
		}
		if err != nil {
			return err
		}
		if !res.Unchanged {
			fmt.Fprintf(o.IO.ErrOut, "restored the trust chain (%s) into %s\n", cmdutil.Count(res.Files, "file"), proj.AuthDir())
		}
	}
	chain, err := trust.Open(proj.AuthDir())
	if err != nil {
		return err
	}
	if m.Operator != "" && m.Operator != chain.OperatorPublicKey() {
		fmt.Fprintf(o.IO.ErrOut, "! the backup's spaces come back under this project's keys, not the operator %s they were cut under: credentials minted before stop working (mint them again)\n", m.Operator)
	}
	for _, s := range m.SpaceNames() {
		if _, err := chain.Space(s); err != nil {
			return err
		}
	}
	return nil
}

// restoreSpaces restores every space of the archive on the broker at url, after the
// broker started and before the spaces are provisioned (which then adds what a backup
// leaves out: presence and the leases). Every space is first checked fresh: when one
// already has a stream there, nothing is restored.
func (o *Options) restoreSpaces(ctx context.Context, chain *trust.Chain, url, ca string) error {
	if o.restore == nil {
		return nil
	}
	a := o.restore.archive
	conns := map[string]func() error{}
	for _, s := range a.Manifest.SpaceNames() {
		var creds []byte
		if chain != nil {
			acct, err := chain.Space(s)
			if err != nil {
				return err
			}
			creds, err = acct.Mint(trust.UserSpec{Name: "cotal up --restore", Profile: trust.ProfileProvisioner,
				Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "cotal_up"}, ExpiresIn: time.Hour})
			if err != nil {
				return err
			}
		}
		nc, err := cmdutil.DialCreds(url, creds, ca, "")
		if err != nil {
			return err
		}
		defer nc.Close()
		if err := a.CheckFresh(ctx, nc, s); errors.Is(err, backup.ErrLiveSpace) {
			return cmdutil.Refuse("--restore "+o.restore.path, err.Error()+"; a restore never writes over stored data, and nothing was restored",
				"")
		} else if err != nil {
			return err
		}
		conns[s] = func() error {
			rep, err := a.Restore(ctx, nc, s)
			if err != nil {
				return err
			}
			var msgs uint64
			cons := 0
			for _, st := range rep.Streams {
				msgs += st.Messages
				cons += st.Durables
			}
			fmt.Fprintf(o.IO.ErrOut, "✓ restored space %s from %s: %s, %s, %s\n", s, o.restore.path,
				cmdutil.Count(len(rep.Streams), "stream"), cmdutil.Count(msgs, "message"), cmdutil.Count(cons, "durable consumer"))
			return nil
		}
	}
	for _, s := range a.Manifest.SpaceNames() {
		if err := conns[s](); err != nil {
			return err
		}
	}
	return nil
}

// noteRestored says, once a detached mesh is ready, what its background child restored
// (it checked every stream against the backup before it reported ready).
func (o *Options) noteRestored() {
	if o.restore == nil {
		return
	}
	fmt.Fprintf(o.IO.Out, "✓ restored %s from %s\n", o.restore.archive.Manifest.Summary(), o.restore.path)
}
