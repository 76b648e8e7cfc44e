package doctor

import (
	"errors"
	"time"

	"github.com/cotal-ai/cotal/devicelogin"
)

// checkLogin reports this machine's IdP session for a user-auth space (cotal login): the
// commands that join the space take their ID tokens from it. None, or one that expired for
// good, is a warning: the operator may not need to sign in here.
func (d *doctor) checkLogin(space string) {
	pin, ok := d.userAuth(space)
	if !ok || d.opts.LoginDir == nil {
		return
	}
	dir, err := d.opts.LoginDir()
	if err != nil {
		d.add(Check{Check: "login", Subject: "space " + space, Status: StatusWarn, Message: err.Error()})
		return
	}
	url, st, now := pin.LoginURL(), devicelogin.Store{Dir: dir}, d.opts.Now()
	next := "cotal login --idp " + url
	var expires time.Time
	refreshable := false
	if !pin.OIDC() {
		s, err := st.LoadRef(url)
		if err != nil {
			d.loginMissing(space, url, next, err)
			return
		}
		expires = time.Unix(s.ExpiresAt, 0)
	} else {
		s, err := st.Load(url)
		if err != nil {
			d.loginMissing(space, url, next, err)
			return
		}
		expires, refreshable = s.Expiry, s.RefreshToken != ""
	}
	when := expires.UTC().Format("2006-01-02 15:04:05Z")
	switch {
	case refreshable:
		d.ok("login", "space "+space, "signed in to "+url+" (the session renews itself)")
	case !now.Before(expires):
		d.add(Check{Check: "login", Subject: "space " + space, Status: StatusWarn,
			Message: "the session at " + url + " expired " + when + ": joining the space asks for a new sign-in", Next: next})
	case expires.Sub(now) < expiryWarning:
		d.add(Check{Check: "login", Subject: "space " + space, Status: StatusWarn,
			Message: "the session at " + url + " expires " + when + ", within a day", Next: next})
	default:
		d.ok("login", "space "+space, "signed in to "+url+" until "+when)
	}
}

func (d *doctor) loginMissing(space, url, next string, err error) {
	msg := "no session at " + url + " on this machine: joining the space asks for a sign-in"
	if !errors.Is(err, devicelogin.ErrNoSession) {
		msg = "the session at " + url + " cannot be read: " + err.Error()
	}
	d.add(Check{Check: "login", Subject: "space " + space, Status: StatusWarn, Message: msg, Next: next})
}
