package cmdutil

import (
	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/oidc"
)

// CheckIdPFlags checks --user-auth, --idp and --client-id as `cotal up` and `cotal broker
// export` take them: --idp and --client-id only with --user-auth, which needs --idp; with
// --client-id the IdP is an OIDC issuer, without it an IdP pinned the reference's way.
func CheckIdPFlags(cmd *cobra.Command, userAuth bool, idp, clientID string) error {
	if userAuth && idp == "" {
		return FlagErrorf("--user-auth needs --idp <URL>: the IdP people sign in with")
	}
	if !userAuth && (cmd.Flags().Changed("idp") || cmd.Flags().Changed("client-id")) {
		return FlagErrorf("--idp and --client-id go with --user-auth")
	}
	if !userAuth {
		return nil
	}
	if cmd.Flags().Changed("client-id") {
		if clientID == "" {
			return FlagErrorf("--client-id: want the OIDC client id people sign in with, or leave it out to pin the IdP the reference's way")
		}
		if err := oidc.CheckIssuer(idp); err != nil {
			return FlagErrorf("--idp: %v", err)
		}
		return nil
	}
	if _, err := oidc.NormalizeIdPURL(idp); err != nil {
		return FlagErrorf("--idp: %v", err)
	}
	return nil
}
