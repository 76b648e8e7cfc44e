package callout

import (
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// TestEncodeMatchesTheLibrary: the responder's token encoding is byte for byte what
// jwt.Encode writes for the same claims in the same second, for a user JWT (with
// permissions, tags, limits, expiry and an issuer account) and an authorization
// response, granted or refused; a user JWT whose subject is not a user key is refused as
// Encode refuses it.
func TestEncodeMatchesTheLibrary(t *testing.T) {
	h, err := json.Marshal(&jwt.Header{Type: jwt.TokenTypeJwt, Algorithm: jwt.AlgorithmNkey})
	if err != nil {
		t.Fatal(err)
	}
	if got := base64.RawURLEncoding.EncodeToString(h); got != tokenHeader {
		t.Fatalf("tokenHeader %q, the library's header encodes to %q", tokenHeader, got)
	}
	k := newKeys(t)
	s, err := newSigner(k.dataSK)
	if err != nil {
		t.Fatal(err)
	}
	u, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	upub := pub(t, u)
	user := func() *jwt.UserClaims {
		uc := jwt.NewUserClaims(upub)
		uc.Name = "u_x-alice"
		uc.IssuerAccount = pub(t, k.dataAcc)
		uc.Permissions.Pub.Allow.Add("data.>")
		uc.Permissions.Sub.Allow.Add("data.>", "_INBOX_x.>")
		uc.Permissions.Sub.Deny.Add("data.secret")
		uc.Tags = jwt.TagList{"actor:Alice", "uid:1"}
		uc.Expires = time.Now().Add(time.Hour).Unix()
		uc.Limits.NatsLimits = jwt.NatsLimits{Subs: 10, Data: 1 << 20, Payload: 1 << 16}
		return uc
	}
	response := func(errText string) *jwt.AuthorizationResponseClaims {
		rc := jwt.NewAuthorizationResponseClaims(upub)
		rc.Audience = "NSERVER"
		rc.IssuerAccount = pub(t, k.calloutAcc)
		rc.Jwt = "a.b.c"
		rc.Error = errText
		return rc
	}
	check := func(name, want string, got func(now time.Time) (string, error)) {
		t.Helper()
		c, err := jwt.Decode(want)
		if err != nil {
			t.Fatalf("%s: library token: %v", name, err)
		}
		tok, err := got(time.Unix(c.Claims().IssuedAt, 0))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tok != want {
			t.Errorf("%s:\n got %s\nwant %s", name, tok, want)
		}
		if _, err := jwt.Decode(tok); err != nil {
			t.Errorf("%s: does not decode: %v", name, err)
		}
	}
	want, err := user().Encode(k.dataSK)
	if err != nil {
		t.Fatal(err)
	}
	check("user", want, func(now time.Time) (string, error) { return encodeUser(user(), s, now) })
	for _, e := range []string{"", "not authorized: bearer refused"} {
		want, err := response(e).Encode(k.dataSK)
		if err != nil {
			t.Fatal(err)
		}
		check("response "+e, want, func(now time.Time) (string, error) { return encodeResponse(response(e), s, now) })
	}
	bad := user()
	bad.Subject = pub(t, k.dataAcc)
	if _, err := encodeUser(bad, s, time.Now()); err == nil {
		t.Error("a user JWT for an account key was signed")
	}
}
