package a2agw

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// maxBody bounds one JSON-RPC request.
const maxBody = 1 << 20

// Handler serves the gateway's card, each exposed name's card and JSON-RPC endpoint:
//
//	GET  /.well-known/agent-card.json               the gateway's card
//	GET  /agents/<name>/.well-known/agent-card.json  an exposed name's card
//	POST /agents/<name>                              its JSON-RPC 2.0 endpoint
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/agent-card.json", g.gatewayCard)
	mux.HandleFunc("GET /agents/{name}/.well-known/agent-card.json", g.agentCard)
	mux.HandleFunc("POST /agents/{name}", g.rpc)
	mux.HandleFunc("POST /agents/{name}/", g.rpc)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpError(w, http.StatusNotFound, "no such page: "+strconv.QuoteToASCII(r.URL.Path)+" (the gateway's card is /.well-known/agent-card.json)")
	})
	return g.guard(mux)
}

// guard refuses a request for a host the gateway does not serve (a DNS-rebound page), a
// browser's cross-site write, and off loopback a JSON-RPC call without a valid bearer
// token. The cards stay readable: a caller learns the auth scheme from them.
func (g *Gateway) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if !HostOK(r.Host, g.cfg.Port, g.cfg.Hosts) {
			httpError(w, http.StatusMisdirectedRequest, "this gateway does not serve host "+strconv.QuoteToASCII(r.Host)+
				": call it as 127.0.0.1 or localhost with its port (cotal a2a --allow-host NAME adds a name)")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
			httpError(w, http.StatusForbidden, "a cross-site request from a web page is refused")
			return
		}
		if g.cfg.Bearer != nil && r.Method == http.MethodPost {
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || !g.cfg.Bearer(tok) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="cotal-a2a"`)
				httpError(w, http.StatusUnauthorized, "a bearer token is required: mint one with `cotal a2a token` and send it as Authorization: Bearer <token>")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// HostOK reports whether a Host header names a server on port: loopback names or any IP
// address (a rebound page always names its own DNS name), or one of hosts.
func HostOK(hostport string, port int, hosts []string) bool {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		host, p = hostport, "80"
	}
	if port != 0 && p != strconv.Itoa(port) {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || net.ParseIP(strings.Trim(host, "[]")) != nil {
		return true
	}
	for _, h := range hosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}

// sameOrigin passes a request that is not a browser's (no Origin, no Sec-Fetch-Site)
// and a browser's from the gateway's own origin.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// card fills the fields every card of this gateway shares.
func (g *Gateway) card(name, desc, path string, skills []Skill) AgentCard {
	c := AgentCard{ProtocolVersion: ProtocolVersion, Name: name, Description: desc,
		URL: strings.TrimSuffix(g.cfg.BaseURL, "/") + path, PreferredTransport: "JSONRPC", Version: "1",
		Capabilities:      Capabilities{Streaming: true, PushNotifications: true},
		DefaultInputModes: []string{"text/plain", "application/json"}, DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills: skills}
	if c.Skills == nil {
		c.Skills = []Skill{}
	}
	if g.cfg.Bearer != nil {
		c.SecuritySchemes = map[string]SecurityScheme{"bearer": {Type: "http", Scheme: "bearer",
			Description: "a token minted by `cotal a2a token`"}}
		c.Security = []map[string][]string{{"bearer": {}}}
	}
	return c
}

// gatewayCard lists the exposed names as skills; its url is the first exposed name's
// endpoint (each has its own card and endpoint under /agents/<name>).
func (g *Gateway) gatewayCard(w http.ResponseWriter, _ *http.Request) {
	space := g.cfg.Endpoint.Space()
	skills := make([]Skill, 0, len(g.cfg.Expose))
	path := "/"
	for i, e := range g.cfg.Expose {
		n := exposedName(e)
		if i == 0 {
			path = "/agents/" + n
		}
		skills = append(skills, Skill{ID: n, Name: n, Tags: []string{"cotal"},
			Description: fmt.Sprintf("%s of cotal space %s: its card is /agents/%s/.well-known/agent-card.json", n, space, n)})
	}
	writeJSON(w, g.card("cotal space "+space, "The agents of cotal space "+space+" over A2A", path, skills))
}

// agentCard is an exposed name's card, from its presence card (or its role's first
// holder's): name, description, skills.
func (g *Gateway) agentCard(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	t, err := g.resolve(r.Context(), name)
	if errors.Is(err, errNotExposed) {
		httpError(w, http.StatusNotFound, "no exposed agent or role "+strconv.QuoteToASCII(name))
		return
	}
	if err != nil {
		httpError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, g.cardOf(t))
}

func (g *Gateway) cardOf(t target) AgentCard {
	space := g.cfg.Endpoint.Space()
	desc := fmt.Sprintf("agent %s of cotal space %s", t.name, space)
	if t.role != "" {
		desc = fmt.Sprintf("role %s of cotal space %s: each task goes to one of its holders", t.name, space)
	}
	var skills []Skill
	if t.peer != nil {
		if t.peer.Card.Description != "" {
			desc = t.peer.Card.Description
		}
		for _, s := range t.peer.Card.Skills {
			skills = append(skills, Skill{ID: s.ID, Name: s.Name, Description: s.Description, Tags: orTags(t.peer.Card.Tags)})
		}
	}
	if len(skills) == 0 {
		id := t.name
		if t.role != "" {
			id = "role-" + t.name
		}
		skills = []Skill{{ID: id, Name: t.name, Description: desc, Tags: []string{"cotal"}}}
		if t.peer != nil {
			if p, ok := t.peer.Card.Meta["persona"].(string); ok && p != "" {
				skills[0].Tags = append(skills[0].Tags, "persona:"+p)
			}
		}
	}
	return g.card(t.name, desc, "/agents/"+t.name, skills)
}

func orTags(t []string) []string {
	if len(t) == 0 {
		return []string{"cotal"}
	}
	return t
}

// rpc serves one JSON-RPC request at an exposed name's endpoint.
func (g *Gateway) rpc(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req rpcRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return
	}
	if len(body) > maxBody {
		g.reply(w, nil, nil, &rpcError{codeInvalidRequest, fmt.Sprintf("request over %d bytes", maxBody)})
		return
	}
	if err := json.Unmarshal(body, &req); err != nil {
		g.reply(w, nil, nil, &rpcError{codeParse, "not a JSON-RPC request: " + err.Error()})
		return
	}
	if req.JSONRPC != "2.0" || req.Method == "" {
		g.reply(w, req.ID, nil, &rpcError{codeInvalidRequest, `want {"jsonrpc":"2.0","method":...}`})
		return
	}
	t, err := g.resolve(r.Context(), name)
	if errors.Is(err, errNotExposed) {
		httpError(w, http.StatusNotFound, "no exposed agent or role "+strconv.QuoteToASCII(name))
		return
	}
	if err != nil {
		g.reply(w, req.ID, nil, &rpcError{codeInternal, err.Error()})
		return
	}
	switch req.Method {
	case "message/send":
		res, err := g.messageSend(r.Context(), t, req.Params)
		g.reply(w, req.ID, res, err)
	case "message/stream":
		g.messageStream(w, r, t, req)
	case "tasks/get":
		res, err := g.tasksGet(r.Context(), t, req.Params)
		g.reply(w, req.ID, res, err)
	case "tasks/cancel":
		res, err := g.tasksCancel(r.Context(), t, req.Params)
		g.reply(w, req.ID, res, err)
	case "tasks/resubscribe":
		g.resubscribe(w, r, t, req)
	case "tasks/pushNotificationConfig/set":
		res, err := g.pushSet(r.Context(), t, req.Params)
		g.reply(w, req.ID, res, err)
	case "tasks/pushNotificationConfig/get":
		res, err := g.pushGet(r.Context(), t, req.Params)
		g.reply(w, req.ID, res, err)
	default:
		g.reply(w, req.ID, nil, &rpcError{codeMethodNotFound, "method " + strconv.QuoteToASCII(req.Method) + " is not served"})
	}
}

// reply writes one JSON-RPC response: res, or err as an error object.
func (g *Gateway) reply(w http.ResponseWriter, id json.RawMessage, res any, err error) {
	if id == nil {
		id = json.RawMessage("null")
	}
	resp := rpcResponse{JSONRPC: "2.0", ID: id, Result: res}
	if err != nil {
		resp.Result = nil
		resp.Error = asRPC(err)
	}
	writeJSON(w, resp)
}

func asRPC(err error) *rpcError {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	if errors.Is(err, errNoTask) {
		return &rpcError{codeTaskNotFound, "task not found"}
	}
	return &rpcError{codeInternal, err.Error()}
}

// bearerHash is how tokens are kept: the hex SHA-256 of the token.
func bearerHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return fmt.Sprintf("%x", sum[:])
}

// hashEqual compares two hashes in constant time.
func hashEqual(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// decodeParams decodes a request's params into v, or says why not.
func decodeParams(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return &rpcError{codeInvalidParams, "params are required"}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return &rpcError{codeInvalidParams, "params: " + err.Error()}
	}
	return nil
}
