package agentmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The reference's feedback intakes: the keyed beta intake (with a key) and the public one
// (without, which needs a contact email).
const (
	FeedbackURL       = "https://broker.cotal.ai/v1/feedback"
	PublicFeedbackURL = "https://cotal.ai/v1/feedback"
)

// Feedback is where cotal_feedback sends a report.
type Feedback struct {
	// URL is the intake; "" means FeedbackURL with a Key, else PublicFeedbackURL.
	URL string
	// Key is sent as a bearer token; "" sends none and then a contact email is required.
	Key string
	// Email is the contact when the call names none.
	Email string
	// Source names the sending connector in the report; "" means "cotal-mcp".
	Source string
	// Client posts the report; nil means one with a 20 s timeout.
	Client *http.Client
}

// FeedbackFromEnv reads the intake as the reference's connector does: COTAL_FEEDBACK_URL,
// COTAL_FEEDBACK_KEY and COTAL_FEEDBACK_EMAIL.
func FeedbackFromEnv(getenv func(string) string) *Feedback {
	return &Feedback{URL: strings.TrimSpace(getenv("COTAL_FEEDBACK_URL")), Key: strings.TrimSpace(getenv("COTAL_FEEDBACK_KEY")),
		Email: strings.TrimSpace(getenv("COTAL_FEEDBACK_EMAIL"))}
}

// url is the intake a report goes to.
func (f *Feedback) url() string {
	switch {
	case f.URL != "":
		return f.URL
	case f.Key != "":
		return FeedbackURL
	}
	return PublicFeedbackURL
}

type feedbackArgs struct {
	Origin      string `json:"origin" jsonschema:"human when relaying the user's feedback, agent when reporting something you hit yourself"`
	Type        string `json:"type" jsonschema:"what kind of feedback: bug, idea, friction, praise or other"`
	Summary     string `json:"summary" jsonschema:"one-line summary, at most 300 characters"`
	Details     string `json:"details,omitempty" jsonschema:"longer free-form details; never secrets"`
	Severity    string `json:"severity,omitempty" jsonschema:"how badly it hurts: low, medium or high"`
	Area        string `json:"area,omitempty" jsonschema:"the part of Cotal it concerns, e.g. presence, channels, CLI"`
	Repro       string `json:"repro,omitempty" jsonschema:"steps to reproduce"`
	Expected    string `json:"expected,omitempty" jsonschema:"what you expected"`
	Actual      string `json:"actual,omitempty" jsonschema:"what happened"`
	Diagnostics string `json:"diagnostics,omitempty" jsonschema:"logs or errors as text; never secrets"`
	Email       string `json:"email,omitempty" jsonschema:"contact email; required on the public intake when none is configured"`
}

// feedbackLimits are the reference's bounds, in characters, per field.
var feedbackLimits = map[string]int{"summary": 300, "details": 10_000, "area": 120, "repro": 10_000,
	"expected": 5_000, "actual": 5_000, "diagnostics": 10_000}

func feedbackSchema() *jsonschema.Schema {
	return toolSchema[feedbackArgs](func(p map[string]*jsonschema.Schema) {
		p["origin"].Enum = []any{"human", "agent"}
		p["type"].Enum = []any{"bug", "idea", "friction", "praise", "other"}
		p["severity"].Enum = []any{"low", "medium", "high"}
		for k, n := range feedbackLimits {
			p[k].MaxLength = maxLen(n)
		}
		p["email"].MaxLength = maxLen(254)
	})
}

type feedbackOut struct {
	ID        string `json:"id,omitempty"`
	Intake    string `json:"intake"`
	Published *bool  `json:"published,omitempty"`
}

func (s *Server) feedback(ctx context.Context, _ *mcp.CallToolRequest, a feedbackArgs) (*mcp.CallToolResult, feedbackOut, error) {
	if strings.TrimSpace(a.Summary) == "" {
		return nil, feedbackOut{}, errors.New("summary is empty: write a one-line summary; nothing was sent")
	}
	f := s.Feedback
	body := map[string]any{"origin": a.Origin, "type": a.Type, "summary": a.Summary, "source": f.Source}
	if f.Source == "" {
		body["source"] = "cotal-mcp"
	}
	for k, v := range map[string]string{"details": a.Details, "severity": a.Severity, "area": a.Area, "repro": a.Repro,
		"expected": a.Expected, "actual": a.Actual, "diagnostics": a.Diagnostics} {
		if v != "" {
			body[k] = v
		}
	}
	url := f.url()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return nil, feedbackOut{}, fmt.Errorf("feedback intake %q: %w; nothing was sent", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if f.Key != "" {
		req.Header.Set("Authorization", "Bearer "+f.Key)
	} else {
		email := strings.TrimSpace(a.Email)
		if email == "" {
			email = f.Email
		}
		if email == "" {
			return nil, feedbackOut{}, errors.New("feedback without a key goes to the public intake, which needs a contact email: ask the user for one and pass email (or the operator sets COTAL_FEEDBACK_EMAIL); nothing was sent")
		}
		body["email"] = email
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, feedbackOut{}, fmt.Errorf("encode feedback: %w", err)
	}
	req.Body = io.NopCloser(bytes.NewReader(raw))
	req.ContentLength = int64(len(raw))
	hc := f.Client
	if hc == nil {
		hc = &http.Client{Timeout: 20 * time.Second}
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, feedbackOut{}, fmt.Errorf("reach the feedback intake at %s: %w", url, err)
	}
	defer func() { _ = res.Body.Close() }()
	rb, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	var reply struct {
		ID        string `json:"id"`
		Error     string `json:"error"`
		Published *bool  `json:"published"`
	}
	if json.Unmarshal(rb, &reply) != nil && len(rb) > 0 {
		reply.Error = string(rb)
	}
	if res.StatusCode/100 != 2 {
		why := ""
		if reply.Error != "" {
			why = ": " + peerText(reply.Error, shownActivity)
		}
		return nil, feedbackOut{}, fmt.Errorf("the feedback intake at %s refused the report (%d%s)", url, res.StatusCode, why)
	}
	out := feedbackOut{ID: peerText(reply.ID, shownName), Intake: url, Published: reply.Published}
	msg := "Feedback sent to " + url
	if out.ID != "" {
		msg += " (id " + out.ID + ")"
	}
	if reply.Published != nil && !*reply.Published {
		msg += "; stored, but the intake's own feedback channel did not get it"
	}
	return text("%s. Thanks!", msg), out, nil
}
