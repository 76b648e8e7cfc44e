package cli_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cotal-ai/cotal/backup"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// cmdStreamDump writes to FILE, as the space's provisioner, every message of every stream
// a backup of SPACE holds (sequence, subject, headers, data, quoted byte for byte) and
// every durable consumer with its position, so two dumps compare with cmp:
//
//	streamdump SPACE FILE
func cmdStreamDump(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: streamdump SPACE FILE")
	}
	space := args[0]
	server, chain := scriptMesh(ts)
	acct, err := chain.Space(space)
	if err != nil {
		ts.Fatalf("space account: %v", err)
	}
	creds, err := acct.Mint(trust.UserSpec{Name: "script", Profile: trust.ProfileProvisioner,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "script"}, ExpiresIn: time.Hour})
	if err != nil {
		ts.Fatalf("mint: %v", err)
	}
	c, err := trust.ReadCreds(creds)
	if err != nil {
		ts.Fatalf("creds: %v", err)
	}
	nc, err := nats.Connect(server, c.Options()...)
	if err != nil {
		ts.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		ts.Fatalf("jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	keep, _ := backup.Inventory(space)
	for _, cfg := range keep {
		s, err := js.Stream(ctx, cfg.Name)
		if err != nil {
			ts.Fatalf("stream %s: %v", cfg.Name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			ts.Fatalf("stream %s: %v", cfg.Name, err)
		}
		st := info.State
		if st.Msgs == 0 { // an empty stream's first sequence is 0 or last+1: only the last counts
			fmt.Fprintf(&b, "stream %s messages=0 last=%d\n", cfg.Name, st.LastSeq)
		} else {
			fmt.Fprintf(&b, "stream %s messages=%d first=%d last=%d\n", cfg.Name, st.Msgs, st.FirstSeq, st.LastSeq)
		}
		for seq := st.FirstSeq; st.Msgs > 0 && seq <= st.LastSeq; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				ts.Fatalf("%s seq %d: %v", cfg.Name, seq, err)
			}
			keys := make([]string, 0, len(m.Header))
			for k := range m.Header {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var hdr []string
			for _, k := range keys {
				hdr = append(hdr, k+"="+strconv.Quote(strings.Join(m.Header.Values(k), ",")))
			}
			fmt.Fprintf(&b, "  %d %s [%s] %s\n", m.Sequence, m.Subject, strings.Join(hdr, " "), strconv.Quote(string(m.Data)))
		}
		var cons []string
		for ci := range s.ListConsumers(ctx).Info() {
			if ci.Config.Durable == "" {
				continue // a reader connected now, not stored state
			}
			cons = append(cons, fmt.Sprintf("  consumer %s filter=%s delivered=%d ackfloor=%d pending=%d",
				ci.Name, ci.Config.FilterSubject, ci.Delivered.Stream, ci.AckFloor.Stream, ci.NumPending))
		}
		sort.Strings(cons)
		for _, l := range cons {
			fmt.Fprintln(&b, l)
		}
	}
	if err := os.WriteFile(ts.MkAbs(args[1]), []byte(b.String()), 0o600); err != nil {
		ts.Fatalf("write %s: %v", args[1], err)
	}
}

// cmdTruncFile cuts FILE to its first N bytes, or drops its last -N bytes:
//
//	truncfile FILE N
func cmdTruncFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: truncfile FILE N")
	}
	n, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		ts.Fatalf("N: %v", err)
	}
	path := ts.MkAbs(args[0])
	fi, err := os.Stat(path)
	if err != nil {
		ts.Fatalf("%v", err)
	}
	if n < 0 {
		n = fi.Size() + n
	}
	if err := os.Truncate(path, n); err != nil {
		ts.Fatalf("%v", err)
	}
}

// cmdFlipByte flips the lowest bit of FILE's byte at OFFSET (negative: from the end):
//
//	flipbyte FILE OFFSET
func cmdFlipByte(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: flipbyte FILE OFFSET")
	}
	at, err := strconv.Atoi(args[1])
	if err != nil {
		ts.Fatalf("OFFSET: %v", err)
	}
	path := ts.MkAbs(args[0])
	b, err := os.ReadFile(path)
	if err != nil {
		ts.Fatalf("%v", err)
	}
	if at < 0 {
		at += len(b)
	}
	b[at] ^= 0x01
	if err := os.WriteFile(path, b, 0o600); err != nil {
		ts.Fatalf("%v", err)
	}
}

// cmdOneFile sets VAR to the path of the one file in DIR, failing when there is not
// exactly one:
//
//	onefile VAR DIR
func cmdOneFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: onefile VAR DIR")
	}
	des, err := os.ReadDir(ts.MkAbs(args[1]))
	if err != nil {
		ts.Fatalf("%v", err)
	}
	if len(des) != 1 {
		ts.Fatalf("%s holds %d entries, want 1", args[1], len(des))
	}
	ts.Setenv(args[0], ts.MkAbs(args[1]+"/"+des[0].Name()))
}
