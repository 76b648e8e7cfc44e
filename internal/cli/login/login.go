// Package login implements `cotal login`: sign in to an OIDC provider with the device flow
// and keep the session for the commands that join user-auth spaces.
package login

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	oidclogin "github.com/cotal-ai/cotal/login"
	"github.com/cotal-ai/cotal/oidc"
)

// Options are the flags of `cotal login`.
type Options struct {
	IO   *iostreams.IOStreams
	Dir  func() (string, error)                     // folder of the sessions; only run calls it
	Now  func() time.Time                           // nil means time.Now
	Wait func(context.Context, time.Duration) error // between polls; nil means a timer

	IdP      string // issuer URL of the OIDC provider
	ClientID string // OIDC client id the device flow runs as
	Status   bool   // only show the stored session
}

// NewCmdLogin builds `cotal login`.
func NewCmdLogin(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Dir: f.LoginDir}
	cmd := &cobra.Command{
		Use:   "login --idp URL [--client-id ID] [--status]",
		Short: "Sign in to an OIDC provider for user-auth spaces",
		Long: `Sign in to the OIDC provider of a user-auth space with the device flow (RFC 8628):
cotal shows a web address and a code; open the address in any browser, sign in and
confirm the code. cotal then keeps the session (an ID token and a refresh token) in
<config>/cotal/logins/ (0600, one file per provider; <config> is $XDG_CONFIG_HOME or
~/.config), and commands that join a user-auth space take fresh ID tokens from it,
refreshing them as they expire. Run cotal login again when they say so.

--idp is the provider's issuer URL (https://, or http:// on 127.0.0.1 or localhost), the
same as the space's cotal up --user-auth --idp (cotal status shows it); its endpoints come from
<issuer>/.well-known/openid-configuration. --client-id must be a client the provider
allows the device flow for, and the audience the auth service expects.

--status shows the stored session of the provider without contacting it.`,
		Example: `  cotal login --idp https://idp.example.com/realms/team
  cotal login --idp http://127.0.0.1:5556/dex --client-id cotal-team
  cotal login --idp https://idp.example.com/realms/team --status`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.IdP == "" {
				return cmdutil.FlagErrorf("--idp is required: the issuer URL of the OIDC provider")
			}
			if err := oidc.CheckIssuer(opts.IdP); err != nil {
				return cmdutil.FlagErrorf("--idp: %v", err)
			}
			if opts.ClientID == "" {
				return cmdutil.FlagErrorf("--client-id: want a non-empty client id")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runLogin(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.IdP, "idp", "", "issuer URL of the OIDC provider (required)")
	fl.StringVar(&opts.ClientID, "client-id", oidclogin.DefaultClientID, "OIDC client id to sign in as")
	fl.BoolVar(&opts.Status, "status", false, "show the stored session instead of signing in")
	return cmd
}

func runLogin(ctx context.Context, opts *Options) error {
	dir, err := opts.Dir()
	if err != nil {
		return err
	}
	st := oidclogin.Store{Dir: dir}
	if opts.Status {
		return showStatus(opts, st)
	}
	cfg := oidclogin.Config{Issuer: opts.IdP, ClientID: opts.ClientID, Now: opts.Now, Wait: opts.Wait,
		Prompt: func(p oidclogin.Prompt) {
			if p.VerificationURIComplete != "" {
				fmt.Fprintf(opts.IO.ErrOut, "To sign in, open %s\nand check that it shows the code %s (valid for %s).\n",
					p.VerificationURIComplete, p.UserCode, p.ExpiresIn)
			} else {
				fmt.Fprintf(opts.IO.ErrOut, "To sign in, open %s\nand enter the code %s (valid for %s).\n",
					p.VerificationURI, p.UserCode, p.ExpiresIn)
			}
			fmt.Fprintln(opts.IO.ErrOut, "Waiting for approval...")
		}}
	s, err := oidclogin.Login(ctx, cfg)
	if errors.Is(err, oidclogin.ErrDenied) {
		return cmdutil.Refuse("the login", "the sign-in was denied at "+opts.IdP, "cotal login --idp "+opts.IdP)
	}
	if errors.Is(err, oidclogin.ErrExpired) {
		return cmdutil.Refuse("the login", "the code expired before it was approved", "cotal login --idp "+opts.IdP)
	}
	if err != nil {
		return err
	}
	if err := st.Save(s); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "✓ logged in to %s as %s\n", s.Issuer, s.Subject)
	return nil
}

func showStatus(opts *Options, st oidclogin.Store) error {
	s, err := st.Load(opts.IdP)
	if errors.Is(err, oidclogin.ErrNoSession) {
		return cmdutil.Refuse("--status", "there is no login session for "+opts.IdP, "cotal login --idp "+opts.IdP)
	}
	if err != nil {
		return err
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	state := "valid until " + s.Expiry.Local().Format(time.RFC3339)
	if !now().Before(s.Expiry) {
		state = "expired at " + s.Expiry.Local().Format(time.RFC3339)
	}
	refresh := "no refresh token"
	if s.RefreshToken != "" {
		refresh = "refreshable"
	}
	fmt.Fprintf(opts.IO.Out, "logged in to %s as %s (client id %s; ID token %s; %s)\n", s.Issuer, s.Subject, s.ClientID, state, refresh)
	return nil
}
