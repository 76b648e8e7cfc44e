package exchangewire

import (
	"net"
	"strings"
	"testing"
)

// A refused bundle URL or broker URL never repeats a password or a query's token, and a
// failed fetch names the host and the cause, not a raw Go error.
func TestURLSecretsNotEchoed(t *testing.T) {
	for _, raw := range []string{
		"https://user:hunter2@mesh.example.com",
		"http://user:hunter2@example.com/?token=hunter2",
		"ftp://mesh.example.com/?token=hunter2",
		"https://user:hunter2@mesh.example.com/%zz",
	} {
		if _, err := BundleURL(raw); err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("BundleURL(%q): %v", raw, err)
		}
	}
	for _, raw := range []string{"nats://user:hunter2@127.0.0.1:4222", "http://h/?token=hunter2", "nats://user:hunter2@h:"} {
		if err := CheckBrokerURL(raw); err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("CheckBrokerURL(%q): %v", raw, err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = FetchBundle(t.Context(), "http://"+addr+"/?token=hunter2")
	if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "dial tcp") ||
		!strings.Contains(err.Error(), "nothing answers at "+addr+" (connection refused)") {
		t.Errorf("fetch from a closed port: %v", err)
	}
}
