package cmdutil

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/protocol"
)

// MessageLine renders one received message as a single line: where it came from (the
// channel, "dm" or "anycast <role>", with "history" for replays), the verified sender and
// the text. The sender shows its id when its display name differs from its actor, so a
// payload name cannot pass for someone else. Everything that came from the mesh is
// escaped (termsafe.Escape), so no part of a message can start a line or drive the
// terminal.
func MessageLine(in *client.Incoming) string {
	var where string
	switch in.Kind {
	case protocol.DeliveryChannel:
		where = "#" + in.Subject.Channel
	case protocol.DeliveryDM:
		where = "dm"
	case protocol.DeliveryAnycast:
		where = "anycast " + in.Subject.Role
	}
	if in.Historical {
		where += " history"
	}
	return fmt.Sprintf("[%s] %s: %s", termsafe.Escape(where), Sender(in), OneLine(in.Text()))
}

// Sender names the verified sender of a message, escaped for the terminal.
func Sender(in *client.Incoming) string {
	if strings.EqualFold(in.From.Name, in.Subject.Sender.Actor) {
		return termsafe.Escape(in.From.Name)
	}
	return termsafe.Escape(in.From.Name + " (" + in.Subject.Sender.String() + ")")
}

// OneLine makes text from the mesh (or any text a peer chose) safe to print as part of
// one line: line breaks show as \n, and every other control, bidi or format character
// as a visible escape (see termsafe.Escape).
func OneLine(s string) string { return termsafe.Escape(s) }

// PeerLine renders one roster entry; the card's name, id and role and the activity are
// escaped, the activity shown in double quotes.
func PeerLine(p client.Peer, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s %-8s %s", termsafe.Escape(p.Card.Name), p.State(), termsafe.Escape(p.Card.ID))
	if p.Card.Role != "" {
		fmt.Fprintf(&b, "  role=%s", termsafe.Escape(p.Card.Role))
	}
	if p.Activity != "" && p.Online {
		fmt.Fprintf(&b, "  \"%s\"", termsafe.Escape(p.Activity))
	}
	if !p.Online {
		fmt.Fprintf(&b, "  (last seen %s ago)", now.Sub(time.UnixMilli(p.TS)).Round(time.Second))
	}
	return b.String()
}

// OperatorIdentity is the name and actor of the person at the keyboard: "<login>@<host>"
// and the login made into an actor token.
func OperatorIdentity() (name, actor string) {
	login := "operator"
	if u, err := user.Current(); err == nil && u.Username != "" {
		login = u.Username
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	var b strings.Builder
	for _, r := range login {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	actor = b.String()
	if len(actor) > protocol.MaxActorLength {
		actor = actor[:protocol.MaxActorLength]
	}
	return login + "@" + host, actor
}

// WriteJSON prints v as the one indented JSON document of --json. Strings from the mesh
// keep their exact value, and every control, bidi or format character in them is a
// \u escape, never raw (termsafe.EscapeJSON), so printing it on a terminal is safe too.
func WriteJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(termsafe.EscapeJSON(b.Bytes()))
	return err
}

// ConnLine says once that the connection to space was lost, and once that it is back.
func ConnLine(w io.Writer, space string, ev client.ConnEvent, wait time.Duration) {
	if ev.Connected {
		fmt.Fprintf(w, "reconnected to space %s at %s\n", space, ev.URL)
		return
	}
	fmt.Fprintf(w, "! connection to space %s at %s lost (%s); reconnecting for up to %s\n", space, ev.URL, termsafe.Escape(fmt.Sprint(ev.Err)), wait)
}

// WriteJSONLine prints v as one JSON object on one line (a --json stream of records),
// escaped as WriteJSON does.
func WriteJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(termsafe.EscapeJSON(b), '\n'))
	return err
}
