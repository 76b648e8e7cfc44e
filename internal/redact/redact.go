// Package redact keeps secrets a person typed into a URL out of what cotal prints, logs or
// writes: a user and password before the host, and the values of the query and the
// fragment, which may hold a token. It also turns the error of an HTTP request, which
// net/http words with the request's whole URL, into one that names only the host.
package redact

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
)

// Mask is what stands in for a secret.
const Mask = "***"

// URL is raw with its user and password replaced by "***" (so "https://***@host"), the
// value of each query parameter replaced by "***" ("?token=***"; a parameter without a
// "=" is all "***") and a fragment replaced by "***". Scheme, host, port and path are
// kept, so a message still names the place. raw need not parse: text without a "://" is
// read as an authority, path, query and fragment all the same, and text with no "@",
// "?" or "#" in the places they would go is returned as it is.
func URL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	prefix := ""
	if ok {
		prefix = scheme + "://"
	} else {
		rest = raw
	}
	end := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = i
	}
	authority, tail := rest[:end], rest[end:]
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		authority = Mask + "@" + authority[at+1:]
	}
	tail, fragment, hasFragment := strings.Cut(tail, "#")
	path, query, hasQuery := strings.Cut(tail, "?")
	var b strings.Builder
	b.WriteString(prefix + authority + path)
	if hasQuery {
		b.WriteString("?" + redactQuery(query))
	}
	if hasFragment {
		b.WriteString("#")
		if fragment != "" {
			b.WriteString(Mask)
		}
	}
	return b.String()
}

// redactQuery keeps each parameter's name and masks its value.
func redactQuery(q string) string {
	if q == "" {
		return ""
	}
	parts := strings.FieldsFunc(q, func(r rune) bool { return r == '&' || r == ';' })
	for i, p := range parts {
		if name, _, ok := strings.Cut(p, "="); ok {
			parts[i] = name + "=" + Mask
		} else {
			parts[i] = Mask
		}
	}
	return strings.Join(parts, "&")
}

// requestError is an HTTP request's error worded for a person, with no URL but its host.
type requestError struct {
	msg string
	err error // the *url.Error, its URL redacted, so errors.Is and errors.As still see the cause
}

func (e *requestError) Error() string { return e.msg }
func (e *requestError) Unwrap() error { return e.err }

// RequestError words err, returned by an http.Client's Do, Get or Post, for a person:
// what went wrong reaching the host, and what to check, naming only the host, never the
// URL (a *url.Error prints it whole, query and all). Any other error, and nil, is returned
// as it is. errors.Is and errors.As still reach the cause (and the *url.Error, whose URL
// is redacted).
func RequestError(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	host := "the server"
	if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
		host = u.Host
	}
	safe := &url.Error{Op: ue.Op, URL: URL(ue.URL), Err: ue.Err}
	return &requestError{msg: describe(host, ue), err: safe}
}

// describe says what went wrong reaching host, and what to check.
func describe(host string, ue *url.Error) string {
	inner := ue.Err
	var dns *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	switch {
	case errors.Is(inner, syscall.ECONNREFUSED):
		return fmt.Sprintf("nothing answers at %s (connection refused): check the URL's host and port, and that the server runs", host)
	case errors.As(inner, &dns):
		return fmt.Sprintf("host %s was not found (DNS lookup failed): check the URL's host name", host)
	case errors.Is(inner, context.Canceled):
		return fmt.Sprintf("the request to %s was cancelled", host)
	case ue.Timeout() || errors.Is(inner, context.DeadlineExceeded):
		return fmt.Sprintf("%s did not answer in time: check the URL and that the server runs and is reachable from here", host)
	case errors.As(inner, &unknownCA) || errors.As(inner, &hostname) || errors.As(inner, &verify):
		return fmt.Sprintf("the TLS certificate of %s could not be verified (%s): check the URL's host, or trust the server's CA", host, scrub(inner.Error(), ue.URL))
	case errors.As(inner, &header):
		return fmt.Sprintf("%s does not speak TLS: check the URL's scheme (http or https) and port", host)
	}
	var netErr net.Error
	if errors.As(inner, &netErr) {
		return fmt.Sprintf("reaching %s: %s: check the URL and that the server runs", host, scrub(inner.Error(), ue.URL))
	}
	return fmt.Sprintf("%s: %s", host, scrub(inner.Error(), ue.URL)) // cotal's own, such as a refused redirect
}

// scrub replaces raw, and its user info and query, wherever they appear in msg.
func scrub(msg, raw string) string {
	if raw == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, raw, URL(raw))
	if u, err := url.Parse(raw); err == nil {
		if u.User != nil {
			if s := u.User.String(); s != "" {
				msg = strings.ReplaceAll(msg, s, Mask)
			}
		}
		if u.RawQuery != "" {
			msg = strings.ReplaceAll(msg, u.RawQuery, redactQuery(u.RawQuery))
		}
	}
	return msg
}

// ParseError is the cause behind a url.Parse error, worded without any part of the URL:
// net/url quotes the whole URL, a bad escape ("%zz", which may be two characters of a
// password) or a bad host character. It keeps a refusal's cause for errors.Unwrap.
func ParseError(err error) error {
	ue, ok := errors.AsType[*url.Error](err)
	if !ok {
		return err
	}
	switch ue.Err.(type) {
	case url.EscapeError:
		return errors.New("a % not followed by two hex digits")
	case url.InvalidHostError:
		return errors.New("a character a host may not hold")
	}
	return ue.Err
}
