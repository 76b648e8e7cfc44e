package redact_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/cotal-ai/cotal/internal/redact"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://u:p@h:1":                             "nats://***@h:1",
		"https://user:hunter2@127.0.0.1:1":           "https://***@127.0.0.1:1",
		"nats://a:b@c@h:1":                           "nats://***@h:1",
		"nats://u:p@h:1/x?y#z":                       "nats://***@h:1/x?***#***",
		"http://127.0.0.1:1/?token=hunter2":          "http://127.0.0.1:1/?token=***",
		"http://h/p?a=1&token=hunter2;b=2":           "http://h/p?a=***&token=***&b=***",
		"https://h/cb#access_token=hunter2":          "https://h/cb#***",
		"https://h/a?":                               "https://h/a?",
		"https://h/a#":                               "https://h/a#",
		"nats://h:1":                                 "nats://h:1",
		"https://mesh.example.com/cotal":             "https://mesh.example.com/cotal",
		"nats://h:1/path@notuser":                    "nats://h:1/path@notuser",
		"not a url":                                  "not a url",
		"user:hunter2@h:1":                           "***@h:1",
		"https://user:hunter2@h:1/p?token=hunter2#x": "https://***@h:1/p?token=***#***",
		"": "",
	} {
		got := redact.URL(in)
		if got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "hunter2") {
			t.Errorf("URL(%q) = %q keeps the secret", in, got)
		}
	}
}

// A request's error names the host, says what to check, and never repeats the URL's
// secrets; errors.Is and errors.As still reach the cause.
func TestRequestErrorRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = http.Get("http://user:hunter2@" + addr + "/?token=hunter2")
	err = redact.RequestError(err)
	msg := err.Error()
	if strings.Contains(msg, "hunter2") || strings.Contains(msg, "dial tcp") ||
		msg != "nothing answers at "+addr+" (connection refused): check the URL's host and port, and that the server runs" {
		t.Errorf("refused: %q", msg)
	}
	var ue *url.Error
	if !errors.Is(err, syscall.ECONNREFUSED) || !errors.As(err, &ue) || strings.Contains(ue.URL, "hunter2") {
		t.Errorf("the cause is lost or keeps the secret: %#v", err)
	}
}

func TestRequestErrorOther(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/?token=hunter2", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = http.DefaultClient.Do(req)
	if msg := redact.RequestError(err).Error(); msg != "the request to 127.0.0.1:1 was cancelled" {
		t.Errorf("cancelled: %q", msg)
	}

	srv := httptest.NewServer(http.RedirectHandler("http://127.0.0.1:1/x", http.StatusFound))
	defer srv.Close()
	mine := errors.New("a redirect to another origin")
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return mine }}
	_, err = c.Get(srv.URL + "/?token=hunter2")
	err = redact.RequestError(err)
	if msg := err.Error(); strings.Contains(msg, "hunter2") || !strings.HasSuffix(msg, ": a redirect to another origin") || !errors.Is(err, mine) {
		t.Errorf("own error: %q", msg)
	}

	plain := errors.New("not a request error")
	if redact.RequestError(plain) != plain || redact.RequestError(nil) != nil {
		t.Error("an error that is not a *url.Error is not returned as it is")
	}
}

func TestParseErrorDropsTheURL(t *testing.T) {
	raw := fmt.Sprintf("https://u:hunter2@x/%s?token=s3cret", "%zz") // built, so vet tools do not flag the bad escape
	_, err := url.Parse(raw)
	cause := redact.ParseError(err)
	if cause == nil || strings.Contains(cause.Error(), "hunter2") || strings.Contains(cause.Error(), "s3cret") {
		t.Fatalf("ParseError = %v, want the cause without the URL", cause)
	}
	if strings.Contains(cause.Error(), "zz") || !strings.Contains(cause.Error(), "%") {
		t.Fatalf("ParseError = %v, want the kind of fault without the URL's text", cause)
	}
	// A bad escape inside a password: not one character of it is shown.
	_, err = url.Parse(fmt.Sprintf("https://u:ab%szq@x/", "%"))
	if cause := redact.ParseError(err); err == nil || strings.Contains(cause.Error(), "zq") {
		t.Fatalf("ParseError = %v shows part of the password", cause)
	}
	plain := errors.New("plain")
	if redact.ParseError(plain) != plain {
		t.Fatal("a non-url error is not returned as it is")
	}
}
