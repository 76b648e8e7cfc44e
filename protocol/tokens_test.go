package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

// The SPEC's test owners (wire-protocol.md §3.5) and an nkey-shaped token: 56 uppercase
// base32 characters starting with U, which is never a valid owner.
var (
	ownerA = "u_" + strings.Repeat("a", 26)
	ownerB = "u_" + strings.Repeat("b", 26)
	nkey   = "UAQGX7NKWJ4HD3JZPRL5MBQ2TYV6CE4SXA7FKGN3ZQH2WBRD5LPMQCAD"

	alice = protocol.Principal{Owner: ownerA, Actor: "alice"}
	bob   = protocol.Principal{Owner: ownerB, Actor: "bob"}
)

func TestFixtures(t *testing.T) {
	if len(ownerA) != 28 || len(nkey) != 56 {
		t.Fatalf("fixture lengths: ownerA %d, nkey %d", len(ownerA), len(nkey))
	}
}

func TestValidOwner(t *testing.T) {
	a25 := strings.Repeat("a", 25)
	tests := []struct {
		in   string
		want bool
	}{
		{"local", true},
		{ownerA, true},
		{ownerB, true},
		{"u_abcdefghijklmnopqrstuvwxyz", true},
		{"u_234567" + strings.Repeat("z", 20), true},

		{"", false},
		{"Local", false},
		{"LOCAL", false},
		{"local ", false},
		{" local", false},
		{"localx", false},
		{nkey, false},                  // an nkey is never an owner
		{strings.ToLower(nkey), false}, // nor its lowercase
		{"u_" + a25, false},            // 25 characters
		{"u_" + a25 + "aa", false},     // 27 characters
		{"u_" + a25 + "1", false},      // 0, 1, 8 and 9 are not base32
		{"u_" + a25 + "0", false},
		{"u_" + a25 + "8", false},
		{"u_" + a25 + "9", false},
		{"u_" + a25 + "A", false}, // uppercase
		{"u_" + a25 + "_", false},
		{"u_" + a25 + "-", false},
		{"u_" + a25 + ".", false},
		{"u_" + a25 + "é", false},
		{"U_" + a25 + "a", false}, // prefix is lowercase u_
		{"u-" + a25 + "a", false},
		{"u" + a25 + "aa", false},
		{ownerA + "\n", false}, // $ must not match before a newline
		{"\n" + ownerA, false},
		{ownerA + ".alice", false}, // a principal is not an owner
		{"u_" + strings.Repeat("a", 56), false},
	}
	for _, tt := range tests {
		if got := protocol.ValidOwner(tt.in); got != tt.want {
			t.Errorf("ValidOwner(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestValidActor(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"alice", true},
		{"Alice_01", true},
		{"_", true},
		{"0", true},
		{nkey, true}, // dev mode: the actor is the connection id
		{strings.Repeat("x", protocol.MaxActorLength), true},

		{strings.Repeat("x", protocol.MaxActorLength+1), false},
		{"", false},
		{"a-b", false}, // - is the dash-form separator
		{"a.b", false},
		{"*", false},
		{">", false},
		{"a*", false},
		{"a>", false},
		{"a b", false},
		{"alice\n", false},
		{"élise", false},
		{"a/b", false},
	}
	for _, tt := range tests {
		if got := protocol.ValidActor(tt.in); got != tt.want {
			t.Errorf("ValidActor(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestPrincipalForms(t *testing.T) {
	if got, want := alice.String(), ownerA+".alice"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := alice.Dash(), ownerA+"-alice"; got != want {
		t.Errorf("Dash() = %q, want %q", got, want)
	}
	dev := protocol.Principal{Owner: protocol.OwnerLocal, Actor: nkey}
	if got, want := dev.String(), "local."+nkey; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := dev.Dash(), "local-"+nkey; got != want {
		t.Errorf("Dash() = %q, want %q", got, want)
	}
}

func TestPrincipalValidate(t *testing.T) {
	tests := []struct {
		p       protocol.Principal
		wantErr string // "" for valid; else a word the error must name
	}{
		{alice, ""},
		{bob, ""},
		{protocol.Principal{Owner: "local", Actor: nkey}, ""},
		{protocol.Principal{Owner: nkey, Actor: "team"}, "owner"},
		{protocol.Principal{Owner: "", Actor: "alice"}, "owner"},
		{protocol.Principal{Owner: ownerA, Actor: ""}, "actor"},
		{protocol.Principal{Owner: ownerA, Actor: "a-b"}, "actor"},
		{protocol.Principal{Owner: ownerA, Actor: "a.b"}, "actor"},
		{protocol.Principal{Owner: ownerA, Actor: strings.Repeat("x", 65)}, "actor"},
		{protocol.Principal{}, "owner"},
	}
	for _, tt := range tests {
		err := tt.p.Validate()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%+v.Validate() = %v, want nil", tt.p, err)
		case tt.wantErr != "" && err == nil:
			t.Errorf("%+v.Validate() = nil, want an error", tt.p)
		case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
			t.Errorf("%+v.Validate() = %q, want it to name the %s", tt.p, err, tt.wantErr)
		}
	}
}

func TestParsePrincipal(t *testing.T) {
	tests := []struct {
		in   string
		want protocol.Principal
		ok   bool
	}{
		{ownerA + ".alice", alice, true},
		{ownerB + ".bob", bob, true},
		{"local." + nkey, protocol.Principal{Owner: "local", Actor: nkey}, true},
		{"local.a_1", protocol.Principal{Owner: "local", Actor: "a_1"}, true},

		{"", protocol.Principal{}, false},
		{"local", protocol.Principal{}, false},
		{ownerA, protocol.Principal{}, false},
		{".alice", protocol.Principal{}, false},
		{"local.", protocol.Principal{}, false},
		{".", protocol.Principal{}, false},
		{ownerA + ".alice.bob", protocol.Principal{}, false}, // the actor would hold a dot
		{ownerA + "-alice", protocol.Principal{}, false},     // dash-form is not dot-form
		{nkey + ".team", protocol.Principal{}, false},        // nkey owner
		{"local.a-b", protocol.Principal{}, false},
		{"local.*", protocol.Principal{}, false},
		{"*.alice", protocol.Principal{}, false},
		{"LOCAL.alice", protocol.Principal{}, false},
		{" local.alice", protocol.Principal{}, false}, // never trimmed
		{"local.alice ", protocol.Principal{}, false},
	}
	for _, tt := range tests {
		got, err := protocol.ParsePrincipal(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParsePrincipal(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if got != tt.want {
			t.Errorf("ParsePrincipal(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		if tt.ok && got.String() != tt.in {
			t.Errorf("ParsePrincipal(%q).String() = %q, want its input", tt.in, got.String())
		}
	}
}

func TestToken(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"main", "main"},
		{"team-a_1", "team-a_1"},
		{"-", "-"},
		{"_", "_"},
		{"  main  ", "main"},
		{"\tmain\r\n", "main"},
		{"my space", "my_space"},
		{"a.b", "a_b"},
		{"a*b>c", "a_b_c"},
		{"foo/bar", "foo_bar"},
		{"a\x00b", "a_b"},
		{"", "_"},
		{"   ", "_"},
		{"\t\n", "_"},

		// Unicode: one "_" per UTF-16 code unit, as the reference's JavaScript regex does.
		{"é", "_"},
		{"équipe", "_quipe"},
		{"日本", "__"},
		{"🚀", "__"}, // outside the BMP: a surrogate pair
		{"a🚀b", "a__b"},
		{"\ufffd", "_"},

		// Invalid UTF-8: one "_" per bad byte.
		{"\xff", "_"},
		{"a\xff\xfeb", "a__b"},

		// Trimming follows String.prototype.trim.
		{"\u00a0main\u3000", "main"}, // Zs
		{"\u2028main\u2029", "main"}, // line and paragraph separators
		{"\ufeffmain\ufeff", "main"}, // the BOM is JavaScript white space
		{"\u0085main", "_main"},      // NEL is not
		{"\u200bmain", "_main"},      // nor is a zero-width space (Cf)
		{"a b\u00a0", "a_b"},         // inner white space is replaced, outer trimmed
	}
	for _, tt := range tests {
		got := protocol.Token(tt.in)
		if got != tt.want {
			t.Errorf("Token(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if !protocol.ValidToken(got) {
			t.Errorf("Token(%q) = %q is not a valid token", tt.in, got)
		}
		if again := protocol.Token(got); again != got {
			t.Errorf("Token(Token(%q)) = %q, want %q", tt.in, again, got)
		}
	}
}

func TestValidToken(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"a", true},
		{"A-z_0", true},
		{"_", true},
		{"-", true},
		{ownerA, true},
		{nkey, true},

		{"", false},
		{"a.b", false},
		{"a b", false},
		{" a", false},
		{"*", false},
		{">", false},
		{"é", false},
		{"a\n", false},
		{"\xff", false},
	}
	for _, tt := range tests {
		if got := protocol.ValidToken(tt.in); got != tt.want {
			t.Errorf("ValidToken(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if tt.want && protocol.Token(tt.in) != tt.in {
			t.Errorf("Token(%q) = %q, want a valid token unchanged", tt.in, protocol.Token(tt.in))
		}
	}
}

func TestCheckSpace(t *testing.T) {
	tests := []struct {
		in       string
		ok       bool
		suggests string // the sanitised form the error should name
	}{
		{"main", true, ""},
		{"my-space_2", true, ""},
		{"my space", false, `"my_space"`},
		{"a.b", false, `"a_b"`},
		{"", false, `"_"`},
		{"*", false, `"_"`},
		{">", false, `"_"`},
		{" main", false, `"main"`},
		{"équipe", false, `"_quipe"`},
		{strings.Repeat("a", protocol.MaxSpaceLen), true, ""},
		{strings.Repeat("a", protocol.MaxSpaceLen+1), false, "(65 characters): a space name is at most 64 characters"},
		{strings.Repeat("é", 10000), false, "(20000 characters): a space name is at most 64 characters"},
	}
	for _, tt := range tests {
		err := protocol.CheckSpace(tt.in)
		if err != nil && len(err.Error()) > 200 {
			t.Errorf("CheckSpace(%d bytes): a %d-byte error", len(tt.in), len(err.Error()))
		}
		if (err == nil) != tt.ok {
			t.Errorf("CheckSpace(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if tt.ok {
			continue
		}
		if !errors.Is(err, protocol.ErrInvalidSpace) {
			t.Errorf("CheckSpace(%q) = %v, want it to wrap ErrInvalidSpace", tt.in, err)
		}
		if !strings.Contains(err.Error(), tt.suggests) {
			t.Errorf("CheckSpace(%q) = %q, want it to suggest %s", tt.in, err, tt.suggests)
		}
	}
}

func FuzzToken(f *testing.F) {
	for _, s := range []string{"main", " my space ", "", "🚀", "\xff", "\ufeffa", "a.b*>", "équipe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := protocol.Token(s)
		if !protocol.ValidToken(tok) {
			t.Fatalf("Token(%q) = %q is not a valid token", s, tok)
		}
		if again := protocol.Token(tok); again != tok {
			t.Fatalf("Token is not idempotent on %q: %q then %q", s, tok, again)
		}
		if protocol.ValidToken(s) && tok != s {
			t.Fatalf("Token(%q) = %q rewrote a valid token", s, tok)
		}
		if len(tok) > len(s) && tok != "_" {
			t.Fatalf("Token(%q) = %q grew the input", s, tok)
		}
	})
}
