// Package logout implements `cotal logout`: forget the login sessions `cotal login`
// kept, and with --idp end that IdP's session at the IdP too.
package logout

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/devicelogin"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/oidc"
)

// Options are the flags of `cotal logout`.
type Options struct {
	IO    *iostreams.IOStreams
	Dir   func() (string, error) // folder of the sessions; only run calls it
	IdP   string                 // only this IdP's session, ended at the IdP too
	Local bool                   // with IdP: forget it here without asking the IdP
	JSON  bool
}

// Report is what `cotal logout --json` prints. It never holds a token.
type Report struct {
	Removed []devicelogin.Kept `json:"removed"`
	// Revoked lists the IdPs whose session was ended at POST <base>/sign-out.
	Revoked []string `json:"revoked"`
}

// signOutTimeout bounds the call to the IdP.
const signOutTimeout = 30 * time.Second

// NewCmdLogout builds `cotal logout`.
func NewCmdLogout(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Dir: f.LoginDir}
	cmd := &cobra.Command{
		Use:   "logout [--idp URL [--local]] [--json]",
		Short: "Forget the login sessions of cotal login, and end one at its IdP",
		Long: `Remove the sessions cotal login keeps for this user in <config>/cotal/logins/
(<config> is $XDG_CONFIG_HOME or ~/.config). Commands that join a user-auth space then
ask you to run cotal login again. Nothing else changes: meshes, keys and creds files stay.

Without --idp every kept session is removed, here only: the IdPs are not contacted, and
a session stays valid at its IdP until it expires there.

With --idp URL only that IdP's session goes. A session of an IdP pinned the reference's
way (Better Auth at <origin>/api/auth) is first ended at the IdP with POST <URL>/sign-out,
as the reference's cotal logout does, so the session token is dead even where it was
copied; if the IdP cannot be reached nothing is removed (--local forgets it here anyway).
An OIDC provider's session (ID and refresh token) is forgotten here; end the session at
the provider itself if it must stop at once.`,
		Example: `  cotal logout                                              # forget every session
  cotal logout --idp https://idp.example.com/api/auth       # end it at the IdP too
  cotal logout --idp https://idp.example.com/api/auth --local
  cotal logout --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("idp") {
				if err := oidc.CheckIssuer(opts.IdP); err != nil {
					return cmdutil.FlagErrorf("--idp: %v", err)
				}
			}
			if opts.Local && opts.IdP == "" {
				return cmdutil.FlagErrorf("--local goes with --idp: without --idp no IdP is contacted anyway")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runLogout(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.IdP, "idp", "", "only this IdP's session (the URL cotal login --idp was given), ended at the IdP too")
	fl.BoolVar(&opts.Local, "local", false, "with --idp: forget the session here without contacting the IdP")
	fl.BoolVar(&opts.JSON, "json", false, "print one JSON document")
	return cmd
}

func runLogout(ctx context.Context, opts *Options) error {
	dir, err := opts.Dir()
	if err != nil {
		return err
	}
	st := devicelogin.Store{Dir: dir}
	kept, err := st.List()
	if err != nil {
		return err
	}
	rep := Report{Removed: []devicelogin.Kept{}, Revoked: []string{}}
	if opts.IdP == "" {
		if err := st.RemoveAll(); err != nil {
			return err
		}
		rep.Removed = append(rep.Removed, kept...)
		return show(opts, rep, dir)
	}
	if err := logoutIdP(ctx, opts, st, &rep); err != nil {
		return err
	}
	return show(opts, rep, dir)
}

// logoutIdP ends and forgets the sessions of opts.IdP: its reference session (ended at
// the IdP first, unless --local) and its OIDC session.
func logoutIdP(ctx context.Context, opts *Options, st devicelogin.Store, rep *Report) error {
	url, err := oidc.NormalizeIdPURL(opts.IdP)
	if err != nil {
		return cmdutil.FlagErrorf("--idp: %v", err)
	}
	rs, err := st.LoadRef(opts.IdP)
	switch {
	case errors.Is(err, devicelogin.ErrNoSession):
	case err != nil:
		return err
	default:
		if !opts.Local {
			sctx, cancel := context.WithTimeout(ctx, signOutTimeout)
			ended, err := devicelogin.RefSignOut(sctx, devicelogin.RefConfig{URL: opts.IdP}, rs.Token)
			cancel()
			if err != nil {
				return cmdutil.WithNext(fmt.Errorf("logout %s: %w; the session is kept, still live at the IdP", url, err),
					"cotal logout --idp "+opts.IdP+" --local")
			}
			if ended {
				rep.Revoked = append(rep.Revoked, url)
			}
		}
		if _, err := st.RemoveRef(opts.IdP); err != nil {
			return err
		}
		rep.Removed = append(rep.Removed, devicelogin.Kept{IdP: url, Kind: "reference", Sub: rs.Sub, Path: filepath.Join(st.Dir, devicelogin.RefSessionsFile)})
	}
	s, err := st.Load(opts.IdP)
	switch {
	case errors.Is(err, devicelogin.ErrNoSession):
	case err != nil:
		return err
	default:
		p, err := st.Path(opts.IdP)
		if err != nil {
			return err
		}
		if err := st.Remove(opts.IdP); err != nil {
			return err
		}
		rep.Removed = append(rep.Removed, devicelogin.Kept{IdP: s.Issuer, Kind: "oidc", Sub: s.Subject, Path: p})
	}
	return nil
}

func show(opts *Options, rep Report, dir string) error {
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, rep)
	}
	out := opts.IO.Out
	if len(rep.Removed) == 0 {
		if opts.IdP != "" {
			fmt.Fprintf(out, "no login session for %s: nothing to remove\n", opts.IdP)
		} else {
			fmt.Fprintf(out, "no login sessions in %s: nothing to remove\n", dir)
		}
		return nil
	}
	revoked := map[string]bool{}
	for _, u := range rep.Revoked {
		revoked[u] = true
	}
	for _, k := range rep.Removed {
		who := ""
		if k.Sub != "" {
			who = " as " + k.Sub
		}
		idp := k.IdP
		if idp == "" {
			idp = k.Path
		}
		switch {
		case revoked[k.IdP]:
			fmt.Fprintf(out, "✓ logged out of %s%s: the session was ended at the IdP and removed here\n", idp, who)
		case opts.IdP == "" || k.Kind == "oidc" || opts.Local:
			fmt.Fprintf(out, "✓ logged out of %s%s: the session was removed here (still valid at the IdP until it expires)\n", idp, who)
		default:
			fmt.Fprintf(out, "✓ logged out of %s%s: the IdP had already ended the session; removed here\n", idp, who)
		}
	}
	return nil
}
