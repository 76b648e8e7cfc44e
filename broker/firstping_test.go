package broker_test

import (
	"bufio"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/broker/brokertest"
)

// firstPingWindow is longer than nats-server's short first PING to a client (2 s plus up
// to 20% after it starts handling CONNECT), with a margin for a loaded machine.
const firstPingWindow = 4 * time.Second

// A connect whose handshake is slow gets its PONG before any PING: nats.go fails a connect
// whose first line after CONNECT is not PONG ("expected 'PONG', got 'PING'"), which is how
// provisioner and lane connects failed on a broker of thousands of accounts, whose
// authentication took longer than the server's short first PING. The client here holds
// its PING back past that PING's time, as a slow authentication holds back the PONG.
func TestSlowConnectGetsPongBeforePing(t *testing.T) {
	srv := brokertest.Start(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.ClientURL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	info, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(info, "INFO ") {
		t.Fatalf("first line %q (%v), want INFO", info, err)
	}
	if _, err := conn.Write([]byte("CONNECT {\"verbose\":false,\"pedantic\":false,\"protocol\":1}\r\n")); err != nil {
		t.Fatal(err)
	}
	// Nothing may come while the connect is unanswered.
	if err := conn.SetReadDeadline(time.Now().Add(firstPingWindow)); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("server sent %q (%v) before the connect's PONG, want nothing within %s", line, err, firstPingWindow)
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "PONG\r\n" {
		t.Fatalf("answer to the connect's PING = %q (%v), want PONG", line, err)
	}
}
