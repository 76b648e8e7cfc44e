// Per-user authentication: a space whose agents sign in through an IdP (the auth service).

package up

import (
	"fmt"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// enableUserAuth pins the IdP of space and creates its auth service's keys, before any
// broker process starts, so the broker preloads the callout account and supervises the
// space's auth service.
func enableUserAuth(opts *Options, proj *workspace.Project, space string) error {
	chain, err := trust.Open(proj.AuthDir())
	if err != nil {
		return err
	}
	if _, err := chain.Space(space); err != nil {
		return err
	}
	pin, err := authsvc.Enable(chain, space, opts.IdP, opts.ClientID)
	if err != nil {
		return cmdutil.Refuse("--user-auth --idp "+opts.IdP, err.Error()+
			"; keep the IdP the space was created with, or serve the people of the new IdP in a new space (--space)", "")
	}
	if pin.OIDC() {
		fmt.Fprintf(opts.IO.ErrOut, "user auth: space %s admits people of %s (client %s)\n", space, pin.Issuer, pin.ClientID)
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "user auth: space %s admits people of %s (issuer %s, keys %s)\n", space, pin.URL, pin.Issuer, pin.JWKSURI)
	}
	return nil
}
