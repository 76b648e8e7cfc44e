package a2apeer

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
)

// A refused URL and a failed card fetch never repeat a password or a query's token, and
// a failed fetch says what went wrong at which host, not a raw Go error; it stays
// transient, so the bridge retries.
func TestURLSecretsNotEchoed(t *testing.T) {
	for _, raw := range []string{
		"https://user:hunter2@127.0.0.1:1",
		"http://user:hunter2@example.com/?token=hunter2",
		"http://127.0.0.1:1/?token=hunter2#hunter2",
		"ftp://127.0.0.1/?token=hunter2",
		"http://127.0.0.1:1/%zz?token=hunter2",
	} {
		_, err := CheckURL(raw)
		if err == nil || strings.Contains(err.Error(), "hunter2") || !errors.Is(err, ErrURL) {
			t.Errorf("CheckURL(%q): %v", raw, err)
		}
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, _, err = HTTP{}.FetchCard(t.Context(), "http://"+addr+"/?token=hunter2", "")
	want := "agent card http://" + addr + "/.well-known/agent-card.json?token=***: nothing answers at " + addr + " (connection refused)"
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("fetch from a closed port: %v\nwant it to start %q", err, want)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) || !Transient(err) {
		t.Errorf("the cause is lost: %#v", err)
	}

	c := &Caller{Endpoint: "http://" + addr + "/rpc?token=hunter2"}
	_, err = c.Send(t.Context(), Message{})
	if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "dial tcp") || !Transient(err) {
		t.Errorf("call to a closed port: %v", err)
	}
}
