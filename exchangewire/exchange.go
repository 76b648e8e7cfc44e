// Package exchangewire is the wire of a user-auth space's exchange, shared by the server
// (package exchange) and its clients (userauth, meshreg, the CLI): the JSON bodies of
// POST /exchange and its errors, the discovery bundle a public face serves at BundlePath,
// and the URL rules both sides apply to what a bundle says. It holds no server code, so a
// client that imports it links neither the exchange server nor the ledger or bearer issuer.
package exchangewire

import "time"

// Request is the body of POST /exchange, as the reference's clients send it (its
// implementations/auth/src/service.ts handleExchange): a person sets IDPToken and Actor; an
// agent sets Owner, Actor and ActorToken. Mixing the two is refused. Unknown fields are
// ignored, as the reference ignores them.
type Request struct {
	IDPToken string `json:"idpToken,omitempty"` // human: the IdP ID token
	// IDToken is the name Go releases before the reference's wire used for IDPToken; it is
	// accepted on input (never with IDPToken) and Go clients no longer send it.
	IDToken    string `json:"idToken,omitempty"`
	Owner      string `json:"owner,omitempty"`      // agent: the owner the actor token belongs to
	Actor      string `json:"actor"`                // the actor to act as; both kinds
	ActorToken string `json:"actorToken,omitempty"` // agent: a still-valid bearer of Owner
	// TTLSec, when set, asks for a shorter bearer: its lifetime is the smaller of TTLSec
	// (whole seconds) and the kind's maximum.
	TTLSec *float64 `json:"ttlSec,omitempty"`
	// View and ManagerInstanceID are the reference's bearer views; this exchange serves
	// none, so they are type-checked and otherwise ignored (see docs/interop.md).
	View              *string `json:"view,omitempty"`
	ManagerInstanceID *string `json:"managerInstanceId,omitempty"`
}

// Response is the body of a successful exchange: the reference's {token, owner, exp}
// followed by Go's extras.
type Response struct {
	Token string `json:"token"` // the Cotal bearer
	Owner string `json:"owner"`
	Exp   int64  `json:"exp"` // its expiry, unix seconds
	Actor string `json:"actor"`
	// LifecycleUID is the actor's incarnation, which names its DM durable; set when the
	// server enrolls principals (exchange.Server.Enroll).
	LifecycleUID string `json:"lifecycleUid,omitempty"`
	// ExpiresAt is the expiry in unix milliseconds, for Go clients released before Exp;
	// read Expiry instead.
	ExpiresAt int64 `json:"expiresAt,omitempty"`
}

// Expiry is when the bearer expires: Exp, or ExpiresAt from an exchange released before
// Exp.
func (r Response) Expiry() time.Time {
	if r.Exp != 0 {
		return time.Unix(r.Exp, 0)
	}
	return time.UnixMilli(r.ExpiresAt)
}

// ErrorBody is the JSON body of every error response: the reference's {"error": sentence}
// (implementations/auth/src/service.ts send), followed by Go's stable code.
type ErrorBody struct {
	Error string `json:"error"`          // what went wrong and what to do, for a person
	Code  string `json:"code,omitempty"` // a stable code: unauthorized, refused, throttled, ...
	// Message is where Go releases before the reference's wire put the sentence (their
	// Error held the code); it is read from such a server's answers, never written.
	Message string `json:"message,omitempty"`
}

// Sentence is the person-readable reason of an error body from either wire.
func (e ErrorBody) Sentence() string {
	if e.Message != "" {
		return e.Message
	}
	return e.Error
}
