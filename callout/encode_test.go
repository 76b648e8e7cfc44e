package callout

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
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

// TestDecodeRequestAgreesWithTheLibrary: the responder's request decoding accepts exactly
// the tokens jwt.DecodeAuthorizationRequestClaims accepts, with the same claims: a good
// request; and refuses a tampered payload, a tampered or missing signature, an issuer that
// is not the signer, an account-signed request, a user JWT, and malformed tokens.
func TestDecodeRequestAgreesWithTheLibrary(t *testing.T) {
	k := newKeys(t)
	srvA := newFakeServer(t, pub(t, k.calloutAcc))
	srvB := newFakeServer(t, pub(t, k.calloutAcc))
	c, _ := srvA.claims(t, "good")
	good := srvA.sign(t, c, srvA.kp)
	h, p, s := splitToken(t, good)
	enc := base64.RawURLEncoding

	reissued := func(edit func(m map[string]any)) string {
		raw, err := enc.DecodeString(p)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return h + "." + enc.EncodeToString(b) + "." + s
	}
	sig, err := enc.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	sig[0] ^= 1
	accountSigner, err := newSigner(k.dataAcc) // the library will not sign a request with it
	if err != nil {
		t.Fatal(err)
	}
	c.Type, c.Version = jwt.AuthorizationRequestClaim, claimsVersion
	accountSigned, err := encodeClaims(c, &c.ClaimsData, accountSigner, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	userTok, _, _ := userCreds(t, k.dataSK, pub(t, k.dataAcc), nil)

	cases := map[string]struct {
		token  string
		accept bool
	}{
		"good":             {good, true},
		"tampered payload": {reissued(func(m map[string]any) { m["name"] = "other" }), false},
		"other issuer":     {reissued(func(m map[string]any) { m["iss"] = srvB.id }), false},
		"tampered sig":     {h + "." + p + "." + enc.EncodeToString(sig), false},
		"no sig":           {h + "." + p + ".", false},
		"two chunks":       {h + "." + p, false},
		"four chunks":      {good + "." + s, false},
		"bad base64":       {h + ".!!!." + s, false},
		"account signed":   {accountSigned, false},
		"user jwt":         {userTok, false},
	}
	for name, tc := range cases {
		ours, errOurs := decodeRequest(tc.token)
		lib, errLib := jwt.DecodeAuthorizationRequestClaims(tc.token)
		if (errOurs == nil) != tc.accept || (errLib == nil) != tc.accept {
			t.Errorf("%s: ours %v, library %v, want accepted %v", name, errOurs, errLib, tc.accept)
			continue
		}
		if tc.accept && !reflect.DeepEqual(ours, lib) {
			t.Errorf("%s: claims differ:\n ours %+v\n  lib %+v", name, ours, lib)
		}
	}
}

// splitToken returns a JWT's three parts.
func splitToken(t *testing.T, tok string) (string, string, string) {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q has %d parts", tok, len(parts))
	}
	return parts[0], parts[1], parts[2]
}
