package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// cmdStreamEdit changes, as the space's provisioner on a raw JetStream connection, the
// duplicate window of one stream of the project's mesh, as an operator editing it by hand
// with the nats CLI would:
//
//	streamedit SPACE STREAM DUPLICATES
func cmdStreamEdit(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: streamedit SPACE STREAM DUPLICATES")
	}
	dup, err := time.ParseDuration(args[2])
	ts.Check(err)
	server, chain := scriptMesh(ts)
	acct, err := chain.Space(args[0])
	ts.Check(err)
	creds, err := acct.Mint(trust.UserSpec{Name: "script", Profile: trust.ProfileProvisioner,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "script"}, ExpiresIn: time.Hour})
	ts.Check(err)
	c, err := trust.ReadCreds(creds)
	ts.Check(err)
	nc, err := nats.Connect(server, append(c.Options(), client.TLSOptions("")...)...)
	ts.Check(err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	ts.Check(err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, args[1])
	ts.Check(err)
	cfg := st.CachedInfo().Config
	cfg.Duplicates = dup
	_, err = js.UpdateStream(ctx, cfg)
	ts.Check(err)
}

// cmdOldCreds writes where cotal mint would (.cotal/auth/creds/space.<hex>/NAME.creds,
// mode 0600) an observer credential of SPACE for NAME, signed by the space's key like any
// cotal mint, whose expiry passed an hour ago:
//
//	oldcreds SPACE NAME
func cmdOldCreds(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: oldcreds SPACE NAME")
	}
	_, chain := scriptMesh(ts)
	acct, err := chain.Space(args[0])
	ts.Check(err)
	creds, err := acct.Mint(trust.UserSpec{Name: args[1], Profile: trust.ProfileObserver,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: args[1]}, ExpiresIn: time.Hour})
	ts.Check(err)
	c, err := trust.ReadCreds(creds)
	ts.Check(err)
	uc, err := jwt.DecodeUserClaims(c.JWT)
	ts.Check(err)
	now := time.Now()
	uc.IssuedAt, uc.Expires = now.Add(-2*time.Hour).Unix(), now.Add(-time.Hour).Unix()
	signed, err := uc.Encode(acct.UserSigner())
	ts.Check(err)
	out, err := jwt.FormatUserConfig(signed, []byte(c.Seed))
	ts.Check(err)
	dir := ts.MkAbs(filepath.Join(".cotal", "auth", "creds", "space."+protocol.SpaceKey(args[0])))
	ts.Check(os.MkdirAll(dir, 0o700))
	ts.Check(os.WriteFile(filepath.Join(dir, args[1]+".creds"), out, 0o600))
}
