package cmdutil

import (
	"strings"
	"testing"
)

func TestCheckServerURLs(t *testing.T) {
	tests := []struct {
		in, wantErr string
	}{
		{in: "nats://127.0.0.1:4222"},
		{in: "tls://a.example:4222,nats+tls://b.example:4222"},
		{in: "ws://127.0.0.1:8080"},
		{in: "wss://mesh.example"},
		{in: "nats://127.0.0.1:4222/"},
		{in: "", wantErr: "want a NATS URL"},
		{in: "http://127.0.0.1:4222", wantErr: "http:// is not a scheme of a NATS server URL"},
		{in: "127.0.0.1:4222", wantErr: "has no scheme: want nats://, tls://"},
		{in: "localhost", wantErr: "has no scheme"},
		{in: "nats://u:pw@127.0.0.1:4222", wantErr: `"nats://***@127.0.0.1:4222" carries a user or password`},
		{in: "nats://tok@127.0.0.1:4222", wantErr: "carries a user or password"},
		{in: "nats://127.0.0.1:4222/x", wantErr: "has a path, query or fragment"},
		{in: "nats://127.0.0.1:4222?a=b", wantErr: "has a path, query or fragment"},
		{in: "nats://127.0.0.1:4222#f", wantErr: "has a path, query or fragment"},
		{in: "nats://", wantErr: "has no host"},
		{in: "nats://127.0.0.1:", wantErr: "has an empty port"},
		{in: "nats://127.0.0.1:4222,http://x:1", wantErr: "http://"},
	}
	for _, tt := range tests {
		err := CheckServerURLs(tt.in)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("CheckServerURLs(%q) = %v, want nil", tt.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("CheckServerURLs(%q) = %v, want %q", tt.in, err, tt.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), "pw@") {
			t.Errorf("CheckServerURLs(%q) repeats the password: %v", tt.in, err)
		}
	}
}

func TestCheckListenURL(t *testing.T) {
	if _, err := CheckListenURL("tls://127.0.0.1:4222"); err == nil || !strings.Contains(err.Error(), "want nats://") {
		t.Errorf("tls:// listen URL: %v", err)
	}
	_, err := CheckListenURL("nats://me:secret@0.0.0.0:4222")
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "listen URL does not take") {
		t.Errorf("userinfo listen URL: %v", err)
	}
}
