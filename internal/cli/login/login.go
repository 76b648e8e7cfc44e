// Package login implements `cotal login`: sign in to an IdP with the device flow and keep
// the session for the commands that join user-auth spaces.
package login

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/devicelogin"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/oidc"
)

// Options are the flags of `cotal login`.
type Options struct {
	IO   *iostreams.IOStreams
	Dir  func() (string, error)                     // folder of the sessions; only run calls it
	Now  func() time.Time                           // nil means time.Now
	Wait func(context.Context, time.Duration) error // between polls; nil means a timer

	IdP      string // base URL of a reference IdP, or issuer URL of an OIDC provider
	ClientID string // client id the device flow runs as; "" means the default of the IdP's kind
	Status   bool   // only show the stored session
	JSON     bool   // with Status: print it as one JSON document
}

// StatusJSON is the document `cotal login --status --json` prints. It never holds a
// token.
type StatusJSON struct {
	IdP         string `json:"idp"`                // the provider, as sessions are kept under it
	Kind        string `json:"kind"`               // "oidc", or "reference" (the reference's IdP session)
	Subject     string `json:"subject,omitempty"`  // who is signed in
	ClientID    string `json:"clientId,omitempty"` // oidc: the client the session was signed in as
	Expires     string `json:"expires"`            // RFC 3339, UTC: the ID token's (oidc) or the IdP session's expiry
	Expired     bool   `json:"expired"`            // Expires has passed
	Refreshable bool   `json:"refreshable"`        // oidc: it holds a refresh token; reference: the IdP session, from which each use fetches an ID token, has not expired
}

// NewCmdLogin builds `cotal login`.
func NewCmdLogin(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Dir: f.LoginDir}
	cmd := &cobra.Command{
		Use:   "login --idp URL [--client-id ID] [--status [--json]]",
		Short: "Sign in to the IdP of user-auth spaces",
		Long: `Sign in to the IdP of a user-auth space with the device flow (RFC 8628): cotal shows
a web address and a code; open the address in any browser, sign in and confirm the code.
Commands that join a user-auth space then take fresh ID tokens from the kept session.
Run cotal login again when they say so.

--idp is the URL the space's cotal up --user-auth --idp was given (cotal status shows it):
https://, or http:// on 127.0.0.1 or localhost.

An OIDC provider (it serves <idp>/.well-known/openid-configuration naming <idp> as its
issuer; a space pinned with --client-id) is signed in to at the endpoints its discovery
names; cotal keeps its ID token and refresh token in <config>/cotal/logins/ (0600, one
file per provider; <config> is $XDG_CONFIG_HOME or ~/.config) and refreshes them as they
expire. --client-id (default cotal) must be a client the provider allows the device flow
for, and the audience the auth service expects.

Any other IdP is signed in to as the TypeScript reference's cotal login does it (a space
pinned without --client-id, e.g. Better Auth at <origin>/api/auth): the device flow at
<idp>/device/code and <idp>/device/token (--client-id default cotal-cli) gives an IdP
session, kept in <config>/cotal/logins/idp-sessions.json in the reference's form, and
every join fetches a fresh ID token for it from <idp>/token.

--status shows the stored session of the provider without contacting it; with --json, as
one JSON document (idp, kind, subject, clientId, expires, expired, refreshable; never a
token).`,
		Example: `  cotal login --idp https://idp.example.com/realms/team
  cotal login --idp http://127.0.0.1:5556/dex --client-id cotal-team
  cotal login --idp https://idp.example.com/realms/team --status
  cotal login --idp https://idp.example.com/realms/team --status --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.IdP == "" {
				return cmdutil.FlagErrorf("--idp is required: the issuer URL of the OIDC provider")
			}
			if err := oidc.CheckIssuer(opts.IdP); err != nil {
				return cmdutil.FlagErrorf("--idp: %v", err)
			}
			if opts.JSON && !opts.Status {
				return cmdutil.FlagErrorf("--json goes with --status: cotal login --idp %s --status --json", opts.IdP)
			}
			if cmd.Flags().Changed("client-id") && opts.ClientID == "" {
				return cmdutil.FlagErrorf("--client-id: want a non-empty client id")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runLogin(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.IdP, "idp", "", "the IdP's URL, as cotal up --user-auth --idp named it (required)")
	fl.StringVar(&opts.ClientID, "client-id", "", "client id to sign in as (default cotal for an OIDC provider, cotal-cli for a reference IdP)")
	fl.BoolVar(&opts.Status, "status", false, "show the stored session instead of signing in")
	fl.BoolVar(&opts.JSON, "json", false, "with --status: print one JSON document")
	return cmd
}

func runLogin(ctx context.Context, opts *Options) error {
	dir, err := opts.Dir()
	if err != nil {
		return err
	}
	st := devicelogin.Store{Dir: dir}
	if opts.Status {
		return showStatus(opts, st)
	}
	prompt := func(p devicelogin.Prompt) {
		if p.VerificationURIComplete != "" {
			fmt.Fprintf(opts.IO.ErrOut, "To sign in, open %s\nand check that it shows the code %s (valid for %s).\n",
				p.VerificationURIComplete, p.UserCode, p.ExpiresIn)
		} else {
			fmt.Fprintf(opts.IO.ErrOut, "To sign in, open %s\nand enter the code %s (valid for %s).\n",
				p.VerificationURI, p.UserCode, p.ExpiresIn)
		}
		fmt.Fprintln(opts.IO.ErrOut, "Waiting for approval...")
	}
	cfg := devicelogin.Config{Issuer: opts.IdP, ClientID: opts.ClientID, Now: opts.Now, Wait: opts.Wait, Prompt: prompt}
	isOIDC, err := devicelogin.IsOIDC(ctx, cfg)
	if err != nil {
		return fmt.Errorf("login %s: %w", opts.IdP, err)
	}
	if !isOIDC {
		return refLogin(ctx, opts, st, devicelogin.RefConfig{URL: opts.IdP, ClientID: opts.ClientID, Now: opts.Now, Wait: opts.Wait, Prompt: prompt})
	}
	s, err := devicelogin.Login(ctx, cfg)
	if err != nil {
		return loginRefusal(opts, err)
	}
	if err := st.Save(s); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "✓ logged in to %s as %s\n", s.Issuer, s.Subject)
	return nil
}

// refLogin signs in to a reference IdP and keeps its session.
func refLogin(ctx context.Context, opts *Options, st devicelogin.Store, cfg devicelogin.RefConfig) error {
	s, err := devicelogin.RefLogin(ctx, cfg)
	if err != nil {
		return loginRefusal(opts, err)
	}
	if err := st.SaveRef(opts.IdP, s); err != nil {
		return err
	}
	url, _ := oidc.NormalizeIdPURL(opts.IdP) // RefLogin checked it
	fmt.Fprintf(opts.IO.Out, "✓ logged in to %s as %s\n", url, s.Sub)
	return nil
}

// loginRefusal turns a sign-in denied or expired at the IdP into a refusal naming the
// command to sign in again; other errors it returns as they are.
func loginRefusal(opts *Options, err error) error {
	if errors.Is(err, devicelogin.ErrDenied) {
		return cmdutil.Refuse("the login", "the sign-in was denied at "+opts.IdP, "cotal login --idp "+opts.IdP)
	}
	if errors.Is(err, devicelogin.ErrExpired) {
		return cmdutil.Refuse("the login", "the code expired before it was approved", "cotal login --idp "+opts.IdP)
	}
	return err
}

func showStatus(opts *Options, st devicelogin.Store) error {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	if rs, err := st.LoadRef(opts.IdP); err == nil {
		url, _ := oidc.NormalizeIdPURL(opts.IdP)
		exp := time.Unix(rs.ExpiresAt, 0)
		if opts.JSON {
			return cmdutil.WriteJSON(opts.IO.Out, StatusJSON{IdP: url, Kind: "reference", Subject: rs.Sub,
				Expires: exp.UTC().Format(time.RFC3339), Expired: !now().Before(exp), Refreshable: now().Before(exp)})
		}
		fmt.Fprintf(opts.IO.Out, "logged in to %s as %s (IdP session until %s)\n", url, rs.Sub, exp.Local().Format(time.RFC3339))
		return nil
	} else if !errors.Is(err, devicelogin.ErrNoSession) {
		return err
	}
	s, err := st.Load(opts.IdP)
	if errors.Is(err, devicelogin.ErrNoSession) {
		return cmdutil.Refuse("--status", "there is no login session for "+opts.IdP, "cotal login --idp "+opts.IdP)
	}
	if err != nil {
		return err
	}
	expired := !now().Before(s.Expiry)
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, StatusJSON{IdP: s.Issuer, Kind: "oidc", Subject: s.Subject, ClientID: s.ClientID,
			Expires: s.Expiry.UTC().Format(time.RFC3339), Expired: expired, Refreshable: s.RefreshToken != ""})
	}
	state := "valid until " + s.Expiry.Local().Format(time.RFC3339)
	if expired {
		state = "expired at " + s.Expiry.Local().Format(time.RFC3339)
	}
	refresh := "no refresh token"
	if s.RefreshToken != "" {
		refresh = "refreshable"
	}
	fmt.Fprintf(opts.IO.Out, "logged in to %s as %s (client id %s; ID token %s; %s)\n", s.Issuer, s.Subject, s.ClientID, state, refresh)
	return nil
}
