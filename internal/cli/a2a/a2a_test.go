package a2a

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

func TestNewCmdA2AFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
		check   func(*Options) bool
	}{
		{args: []string{"--expose", "reviewer"}, check: func(o *Options) bool { return o.Listen == DefaultListen && o.Expose[0] == "reviewer" }},
		{args: []string{"--expose", "agent:bob", "--expose", "role:triage", "--listen", "127.0.0.1:0"},
			check: func(o *Options) bool { return len(o.Expose) == 2 && o.Listen == "127.0.0.1:0" }},
		{args: []string{"--expose", "x", "--listen", "[::1]:7800"}, check: func(o *Options) bool { return true }},
		{args: []string{}, wantErr: "--expose: name at least one"},
		{args: []string{"--expose", "bad name"}, wantErr: `--expose "bad name"`},
		{args: []string{"--expose", "x", "--listen", "7800"}, wantErr: "want HOST:PORT"},
		{args: []string{"--expose", "x", "--listen", "127.0.0.1:99999"}, wantErr: "0 to 65535"},
		{args: []string{"--expose", "x", "--listen", "0.0.0.0:7800"}, wantErr: "refusing --listen 0.0.0.0:7800"},
		{args: []string{"--expose", "x", "--listen", "0.0.0.0:7800", "--allow-remote"}, wantErr: "without TLS"},
		{args: []string{"--expose", "x", "--allow-remote"}, wantErr: "without TLS"},
		{args: []string{"--expose", "x", "--tls-cert", "c.pem"}, wantErr: "go together"},
		{args: []string{"--expose", "x", "--allow-host", "1.2.3.4"}, wantErr: "--allow-host"},
		{args: []string{"--expose", "x", "--listen", "0.0.0.0:7800", "--allow-remote", "--tls-cert", "c", "--tls-key", "k"},
			check: func(o *Options) bool { return o.AllowRemote }},
	} {
		ios, _, _, _ := iostreams.Test()
		var got *Options
		cmd := NewCmdA2A(&cmdutil.Factory{IO: ios}, func(_ context.Context, o *Options) error { got = o; return nil })
		cmd.SetArgs(tc.args)
		cmd.SetOut(ios.Out)
		cmd.SetErr(ios.ErrOut)
		err := cmd.Execute()
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || got != nil {
				t.Errorf("%v: err %v, want %q and no run", tc.args, err, tc.wantErr)
			}
		case err != nil || got == nil || !tc.check(got):
			t.Errorf("%v: opts %+v, err %v", tc.args, got, err)
		}
	}
}

func TestNewCmdTokenFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
		name    string
		ttl     time.Duration
	}{
		{args: nil, name: "caller", ttl: 30 * 24 * time.Hour},
		{args: []string{"--name", "ci", "--ttl", "1h"}, name: "ci", ttl: time.Hour},
		{args: []string{"--ttl", "0"}, name: "caller"},
		{args: []string{"--name", "a b"}, wantErr: `--name "a b"`},
		{args: []string{"--ttl", "-1h"}, wantErr: "--ttl -1h0m0s"},
	} {
		ios, _, _, _ := iostreams.Test()
		var got *TokenOptions
		cmd := NewCmdToken(&cmdutil.Factory{IO: ios}, func(_ context.Context, o *TokenOptions) error { got = o; return nil })
		cmd.SetArgs(tc.args)
		cmd.SetOut(ios.Out)
		cmd.SetErr(ios.ErrOut)
		err := cmd.Execute()
		var fe *cmdutil.FlagError
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &fe) {
				t.Errorf("%v: err %v, want a flag error %q", tc.args, err, tc.wantErr)
			}
		case err != nil || got == nil || got.Name != tc.name || got.TTL != tc.ttl:
			t.Errorf("%v: opts %+v, err %v", tc.args, got, err)
		}
	}
}
