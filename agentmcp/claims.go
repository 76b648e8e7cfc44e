package agentmcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/claims"
)

// Bounds of the claim tools' arguments.
const (
	DefaultClaimTTL = time.Hour       // a claim's ttl when the call names none
	MinClaimTTL     = 5 * time.Second // the shortest ttl a tool call may ask for
	shownClaims     = 16              // claims one roster entry lists
	shownChannels   = 32              // channels one roster entry lists
	shownPath       = claims.MaxPathLength
)

type (
	claimArgs struct {
		Paths     []string `json:"paths" jsonschema:"files or directories relative to the repository root; a directory covers everything under it"`
		TTL       int      `json:"ttl,omitempty" jsonschema:"seconds the claim lasts (default 3600); claim the same paths again to extend it"`
		Exclusive *bool    `json:"exclusive,omitempty" jsonschema:"true (default): no one else may claim an overlapping path; false: shared, conflicting only with exclusive claims"`
		Reason    string   `json:"reason,omitempty" jsonschema:"why you claim it; shown to anyone whose claim conflicts"`
	}
	releaseArgs struct {
		Paths []string `json:"paths,omitempty" jsonschema:"paths you claimed, as you claimed them"`
		All   bool     `json:"all,omitempty" jsonschema:"release every claim you hold"`
	}
	claimsArgs struct {
		Path string `json:"path,omitempty" jsonschema:"only the claims overlapping this path"`
	}
)

type (
	// ClaimInfo is one claim as the model sees it; the holder's strings are escaped.
	ClaimInfo struct {
		Path      string `json:"path"`
		Holder    string `json:"holder"`
		HolderID  string `json:"holderId"`
		Exclusive bool   `json:"exclusive"`
		Reason    string `json:"reason,omitempty"`
		Since     string `json:"since"`
		Expires   string `json:"expiresAt"`
		Ourselves bool   `json:"you,omitempty"`
	}
	// ClaimConflict is a path asked for and the claim in its way.
	ClaimConflict struct {
		Path string    `json:"path"`
		Held ClaimInfo `json:"heldBy"`
	}
	claimOut struct {
		Granted   []ClaimInfo     `json:"granted"`
		Renewed   []string        `json:"renewed,omitempty"`
		Conflicts []ClaimConflict `json:"conflicts,omitempty"`
	}
	releaseOut struct {
		Released []string `json:"released"`
		NotHeld  []string `json:"notHeld,omitempty"`
	}
	claimsOut struct {
		Claims []ClaimInfo `json:"claims"`
	}
)

// claimStore is the agent's view of the space's claims.
func (s *Server) claimStore() *claims.Store {
	ep := s.Endpoint
	return &claims.Store{JS: ep.JetStream(), Space: ep.Space(), Holder: ep.Principal(), Name: ep.Card().Name, Root: s.Repo}
}

func (s *Server) addClaimTools() {
	paths := func(p map[string]*jsonschema.Schema) {
		p["paths"].MaxItems = jsonschema.Ptr(claims.MaxPaths)
		p["paths"].Items.MaxLength = maxLen(claims.MaxPathLength)
	}
	claimS := toolSchema[claimArgs](func(p map[string]*jsonschema.Schema) {
		paths(p)
		p["paths"].MinItems = jsonschema.Ptr(1)
		p["ttl"].Minimum, p["ttl"].Maximum = jsonschema.Ptr(MinClaimTTL.Seconds()), jsonschema.Ptr(claims.MaxTTL.Seconds())
		p["reason"].MaxLength = maxLen(claims.MaxReasonLength)
	})
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_claim_paths", Title: "Cotal: claim files you are editing", InputSchema: claimS,
		Description: "Tell every peer which files or directories you are working on, so two agents do not edit the same code. Advisory: nothing is locked on disk. All paths are claimed or none: a conflict names who holds the path, since when and why. Exclusive (the default) conflicts with any overlapping claim; shared only with exclusive ones. A claim lapses after ttl seconds whether or not you are still running; claim again to extend it, cotal_release_paths when done."},
		s.claimPaths)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_release_paths", Title: "Cotal: release your file claims", InputSchema: toolSchema[releaseArgs](paths),
		Description: "Release claims you hold: the paths given, or all. Release what you finished so others may take it."}, s.releasePaths)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_claims", Title: "Cotal: who works on which files", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: toolSchema[claimsArgs](func(p map[string]*jsonschema.Schema) { p["path"].MaxLength = maxLen(claims.MaxPathLength) }),
		Description: "List the live file claims of the space (who holds which path, exclusive or shared, since when, why, until when), or only those overlapping path. Check before editing shared code."},
		s.listClaims)
}

// claimInfo renders c for the model: what its holder wrote is cut and escaped.
func (s *Server) claimInfo(c claims.Claim) ClaimInfo {
	return ClaimInfo{Path: peerText(c.Path, shownPath), Holder: peerText(c.Name, shownName), HolderID: peerText(c.Holder, shownName),
		Exclusive: c.Exclusive, Reason: peerText(c.Reason, claims.MaxReasonLength),
		Since: time.UnixMilli(c.Since).UTC().Format(time.RFC3339), Expires: c.ExpiresAt().UTC().Format(time.RFC3339),
		Ourselves: c.Holder == s.Endpoint.Principal().String()}
}

func kindWord(exclusive bool) string {
	if exclusive {
		return "exclusive"
	}
	return "shared"
}

// claimLine is one claim on one line: path, kind, holder, since, until, reason.
func claimLine(c ClaimInfo, now time.Time) string {
	who := c.Holder + " (" + c.HolderID + ")"
	if c.Ourselves {
		who = "you"
	}
	l := fmt.Sprintf("%s: %s, held by %s since %s%s, until %s", c.Path, kindWord(c.Exclusive), who, c.Since, ago(c.Since, now), c.Expires)
	if c.Reason != "" {
		l += `; reason: "` + c.Reason + `"`
	}
	return l
}

// ago is " (5m ago)" for an RFC 3339 time, or "".
func ago(ts string, now time.Time) string {
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil || t.After(now) {
		return ""
	}
	return " (" + now.Sub(t).Truncate(time.Second).String() + " ago)"
}

func (s *Server) claimPaths(ctx context.Context, _ *mcp.CallToolRequest, a claimArgs) (*mcp.CallToolResult, claimOut, error) {
	ttl := DefaultClaimTTL
	if a.TTL != 0 {
		ttl = time.Duration(a.TTL) * time.Second
	}
	if ttl < MinClaimTTL || ttl > claims.MaxTTL {
		return nil, claimOut{}, fmt.Errorf("ttl %d: give %d to %d seconds; nothing was claimed", a.TTL, int(MinClaimTTL.Seconds()), int(claims.MaxTTL.Seconds()))
	}
	exclusive := a.Exclusive == nil || *a.Exclusive
	res, err := s.claimStore().Claim(ctx, claims.Request{Paths: a.Paths, TTL: ttl, Exclusive: exclusive, Reason: a.Reason})
	if err != nil {
		return nil, claimOut{}, claimErr("claim", err)
	}
	out := claimOut{Granted: []ClaimInfo{}, Renewed: res.Renewed}
	now := time.Now()
	var b strings.Builder
	if len(res.Conflicts) > 0 {
		b.WriteString("Nothing was claimed: ")
		fmt.Fprintf(&b, "%s.\n", count(len(res.Conflicts), "conflicting claim"))
		for _, c := range res.Conflicts {
			ci := ClaimConflict{Path: peerText(c.Path, shownPath), Held: s.claimInfo(c.Held)}
			out.Conflicts = append(out.Conflicts, ci)
			fmt.Fprintf(&b, "%s conflicts with %s\n", ci.Path, claimLine(ci.Held, now))
		}
		b.WriteString("Work elsewhere, ask the holder (cotal_dm), or claim as shared if you only read.")
		return text("%s", b.String()), out, nil
	}
	fmt.Fprintf(&b, "Claimed %s (%s) until %s:", count(len(res.Granted), "path"), kindWord(exclusive), now.Add(ttl).UTC().Format(time.RFC3339))
	for _, c := range res.Granted {
		out.Granted = append(out.Granted, s.claimInfo(c))
		b.WriteString("\n  " + peerText(c.Path, shownPath))
	}
	if len(res.Renewed) > 0 {
		fmt.Fprintf(&b, "\n%d of them you already held: extended.", len(res.Renewed))
	}
	b.WriteString("\nClaim again before then to extend; cotal_release_paths when done.")
	return text("%s", b.String()), out, nil
}

func (s *Server) releasePaths(ctx context.Context, _ *mcp.CallToolRequest, a releaseArgs) (*mcp.CallToolResult, releaseOut, error) {
	if !a.All && len(a.Paths) == 0 {
		return nil, releaseOut{}, errors.New("no paths: name the paths to release, or pass all")
	}
	rel, notHeld, err := s.claimStore().Release(ctx, a.Paths, a.All)
	if err != nil {
		return nil, releaseOut{}, claimErr("release", err)
	}
	out := releaseOut{Released: rel, NotHeld: notHeld}
	if out.Released == nil {
		out.Released = []string{}
	}
	line := "Released " + count(len(rel), "claim")
	if len(rel) > 0 {
		line += ": " + peerText(strings.Join(rel, ", "), shownPath*2)
	}
	line += "."
	if len(notHeld) > 0 {
		line += " Not yours (nothing done): " + peerText(strings.Join(notHeld, ", "), shownPath*2) + "."
	}
	return text("%s", line), out, nil
}

func (s *Server) listClaims(ctx context.Context, _ *mcp.CallToolRequest, a claimsArgs) (*mcp.CallToolResult, claimsOut, error) {
	var filter string
	if a.Path != "" {
		n, err := claims.Normalize(a.Path, s.Repo)
		if err != nil {
			return nil, claimsOut{}, err
		}
		filter = n
	}
	all, err := s.claimStore().List(ctx)
	if err != nil {
		return nil, claimsOut{}, claimErr("list claims", err)
	}
	out := claimsOut{Claims: []ClaimInfo{}}
	now := time.Now()
	var lines []string
	for _, c := range all {
		if filter != "" && !claims.Overlap(filter, c.Path) {
			continue
		}
		ci := s.claimInfo(c)
		out.Claims = append(out.Claims, ci)
		lines = append(lines, claimLine(ci, now))
	}
	if len(lines) == 0 {
		if filter != "" {
			return text("No claim overlaps %s.", peerText(filter, shownPath)), out, nil
		}
		return text("No files are claimed."), out, nil
	}
	return text("%s", strings.Join(lines, "\n")), out, nil
}

// claimErr wraps a store error, saying what to do about a space without the bucket.
func claimErr(what string, err error) error {
	if errors.Is(err, claims.ErrNoBucket) {
		return fmt.Errorf("%s: %w; ask the operator to run `cotal up`", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// peerClaims groups the live claims by holder id, for the roster; nil when they cannot be
// read (a space made before claims existed): the roster is shown without them.
func (s *Server) peerClaims(ctx context.Context) map[string][]claims.Claim {
	all, err := s.claimStore().List(ctx)
	if err != nil {
		s.Logger.Debug("claims for the roster", "err", err)
		return nil
	}
	by := map[string][]claims.Claim{}
	for _, c := range all {
		by[c.Holder] = append(by[c.Holder], c)
	}
	return by
}

// count is "1 path", "2 paths".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
