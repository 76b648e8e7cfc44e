package web

import (
	"cmp"
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/meshview"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/taskboard"
)

//go:embed static
var staticFS embed.FS

// Post is the dashboard's one write: a channel post (Channel set) or a DM (To, a peer's
// id) with Text, sent as the person at the keyboard.
type Post struct {
	Channel string `json:"channel,omitempty"`
	To      string `json:"to,omitempty"`
	Text    string `json:"text"`
}

// Server is the dashboard's HTTP face over a meshview.Model. Set fields before Handler.
type Server struct {
	Space string
	PID   int
	Model *meshview.Model
	// Channels reads the space's channels as stored (names, counts, registry); nil means
	// only what the model saw. A failure answers 503 naming it.
	Channels func(ctx context.Context) ([]client.ChannelStat, error)
	// Send performs a Post; nil refuses posts.
	Send func(ctx context.Context, p Post) error
	// HistoryErr is why the start-up history read failed, or nil.
	HistoryErr func() error
	// TeamErr is why the task board or the file claims could not be read, or nil; nil
	// func means the same.
	TeamErr func() error
	// DMs says whether the tap sees direct messages (an admin view).
	DMs bool
	// Token, when set, is required on every request: the cookie the page gets when its
	// token URL is opened, ?token= or Authorization: Bearer.
	Token string
	// Port is the port the dashboard serves on: a Host header naming another port is
	// refused. 0 accepts any port (a test's handler without a listener).
	Port int
	// Hosts are the DNS names, beyond localhost and cotal.localhost, that requests may
	// name in Host (cotal web --allow-host). An IP address is always accepted: DNS
	// rebinding needs a name.
	Hosts []string
	// Ping is the interval of the feed's keep-alive comment; 0 means 20 s.
	Ping time.Duration
	// RosterEvery bounds how often one feed sends roster events: the first after a quiet
	// interval goes at once, later ones are held (the latest per agent) and sent together
	// when the interval ends. 0 means 250 ms; a negative value sends every event.
	RosterEvery time.Duration
	Logger      *slog.Logger // nil means discard
	// Runs reads and answers the space's workflow runs; nil answers 503 with RunsErr.
	Runs    Runs
	RunsErr string
	// AnswerBy is who an answer from this dashboard is recorded as (the person it runs
	// as); "" means "web".
	AnswerBy string
}

// Handler returns the dashboard's routes.
func (s *Server) Handler() http.Handler {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	files := http.FileServerFS(sub)
	mux.HandleFunc("GET /{$}", s.static(files))
	for _, f := range []string{"/app.js", "/style.css", "/graph.js"} {
		mux.HandleFunc("GET "+f, s.static(files))
	}
	mux.HandleFunc("GET /api/meta", s.meta)
	mux.HandleFunc("GET /api/roster", s.roster)
	mux.HandleFunc("GET /api/channels", s.channels)
	mux.HandleFunc("GET /api/channels/{name}/history", s.history)
	mux.HandleFunc("GET /api/dms", s.dms)
	mux.HandleFunc("GET /api/activity", s.activity)
	mux.HandleFunc("GET /api/tasks", s.tasks)
	mux.HandleFunc("GET /api/claims", s.claims)
	mux.HandleFunc("POST /api/post", s.post)
	mux.HandleFunc("GET /api/runs", s.runList)
	mux.HandleFunc("GET /api/runs/pending", s.runPending)
	mux.HandleFunc("GET /api/runs/{id}/journal", s.runJournal)
	mux.HandleFunc("POST /api/runs/{id}/answer", s.runAnswer)
	mux.HandleFunc("GET /feed", s.feed)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not-found", "no such page: "+strconv.QuoteToASCII(r.URL.Path))
	})
	return s.guard(mux)
}

// guard refuses a request for a host this dashboard does not serve (a DNS-rebound page),
// a cross-site write, and, when a token is set, a request without it. Opening the page
// with ?token= sets the token as a cookie and redirects to the same page without it.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		w.Header().Set("Referrer-Policy", "no-referrer")
		if !s.hostOK(r.Host) {
			writeError(w, http.StatusMisdirectedRequest, "wrong-host",
				"this dashboard does not serve host "+strconv.QuoteToASCII(r.Host)+": open it as http://127.0.0.1 or http://localhost with its port (cotal web --allow-host NAME adds a name)")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !s.sameOrigin(r) {
			writeError(w, http.StatusForbidden, "cross-origin", "a write must come from this dashboard's own page")
			return
		}
		if s.Token == "" {
			next.ServeHTTP(w, r)
			return
		}
		from, ok := s.token(r)
		if !ok {
			writeError(w, http.StatusUnauthorized, "token", "this dashboard needs the token printed when `cotal web` started: open the URL it printed (?token=...)")
			return
		}
		if from == "query" && r.Method == http.MethodGet && r.URL.Path == "/" {
			// The page: keep the token in a cookie every later request carries (the
			// scripts, the API, the feed), and drop it from the address bar and history.
			http.SetCookie(w, &http.Cookie{Name: s.cookieName(), Value: s.Token, Path: "/",
				HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del("token")
			u := url.URL{Path: "/", RawQuery: q.Encode()}
			http.Redirect(w, r, u.String(), http.StatusSeeOther)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// token reports whether r carries the token, and where: "cookie", "header" or "query".
func (s *Server) token(r *http.Request) (from string, ok bool) {
	match := func(got string) bool { return subtle.ConstantTimeCompare([]byte(got), []byte(s.Token)) == 1 }
	if c, err := r.Cookie(s.cookieName()); err == nil && match(c.Value) {
		return "cookie", true
	}
	if h, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && match(h) {
		return "header", true
	}
	if match(r.URL.Query().Get("token")) {
		return "query", true
	}
	return "", false
}

// cookieName names the token cookie by port: a browser sends a host's cookies to every
// port, so two dashboards on one machine each keep their own.
func (s *Server) cookieName() string { return "cotal_web_" + strconv.Itoa(s.Port) }

// hostOK reports whether a Host header names this dashboard: loopback names or any IP
// address (a rebound page always names its own DNS name), or one of s.Hosts, with the
// port it serves on.
func (s *Server) hostOK(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, "80" // no port: the browser's default
	}
	if s.Port != 0 && port != strconv.Itoa(s.Port) {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || host == "cotal.localhost" || net.ParseIP(strings.Trim(host, "[]")) != nil {
		return true
	}
	for _, h := range s.Hosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}

// sameOrigin reports whether a write comes from this dashboard's own page: a browser
// names the page's origin (Origin), and tells whether it is this site (Sec-Fetch-Site).
// A request without them is not a browser's (curl, a script) and passes.
func (s *Server) sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Scheme == "http" && strings.EqualFold(u.Host, r.Host)
}

func (s *Server) static(files http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}
}

// errorBody is every error answer: a code naming what failed and a sentence.
type errorBody struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

func writeError(w http.ResponseWriter, status int, code, reason string) {
	writeJSON(w, status, errorBody{Error: code, Reason: reason})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing else to tell
}

// Meta is the answer of /api/meta.
type Meta struct {
	Space        string          `json:"space"`
	PID          int             `json:"pid"`
	DMVisible    bool            `json:"dmVisible"`
	CanPost      bool            `json:"canPost"`
	Seq          uint64          `json:"seq"` // the latest feed event
	Counts       meshview.Counts `json:"counts"`
	HistoryError string          `json:"historyError,omitempty"`
}

func (s *Server) meta(w http.ResponseWriter, _ *http.Request) {
	m := Meta{Space: s.Space, PID: s.PID, DMVisible: s.DMs, CanPost: s.Send != nil, Seq: s.Model.Seq(), Counts: s.Model.Counts()}
	if s.HistoryErr != nil {
		if err := s.HistoryErr(); err != nil {
			m.HistoryError = err.Error()
		}
	}
	writeJSON(w, http.StatusOK, m)
}

// Roster is the answer of /api/roster.
type Roster struct {
	Agents   []meshview.Agent   `json:"agents"`
	Counts   meshview.Counts    `json:"counts"`
	NeedsYou []meshview.Waiting `json:"needsYou"`
}

func (s *Server) roster(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, Roster{Agents: s.Model.Roster(), Counts: s.Model.Counts(), NeedsYou: s.Model.NeedsYou()})
}

// ChannelRow is one row of /api/channels.
type ChannelRow struct {
	Name          string   `json:"name"`
	Messages      uint64   `json:"messages"` // stored on the space (or seen, without a store read)
	Seen          int      `json:"seen"`     // seen by this dashboard
	Members       []string `json:"members"`
	Description   string   `json:"description,omitempty"`
	DeliveryClass string   `json:"deliveryClass,omitempty"`
}

func (s *Server) channels(w http.ResponseWriter, r *http.Request) {
	rows := map[string]*ChannelRow{}
	for _, c := range s.Model.Channels() {
		rows[c.Name] = &ChannelRow{Name: c.Name, Messages: uint64(c.Messages), Seen: c.Messages, Members: c.Members}
	}
	if s.Channels != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 8*time.Second)
		stats, err := s.Channels(ctx)
		cancel()
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "channels-read-failed", "reading the space's channels: "+err.Error())
			return
		}
		for _, st := range stats {
			row := rows[st.Name]
			if row == nil {
				row = &ChannelRow{Name: st.Name, Members: []string{}}
				rows[st.Name] = row
			}
			row.Messages = max(row.Messages, st.Messages)
			row.Description, row.DeliveryClass = st.Config.Description, st.Config.DeliveryClass
		}
	}
	out := make([]ChannelRow, 0, len(rows))
	for _, row := range rows {
		out = append(out, *row)
	}
	sortRows(out)
	writeJSON(w, http.StatusOK, map[string]any{"channels": out})
}

// limit reads ?limit=, a whole number from 1 to max; absent means dflt.
func limit(r *http.Request, dflt, maxN int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return dflt, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxN {
		return 0, fmt.Errorf("limit %s: want a whole number from 1 to %d", strconv.QuoteToASCII(v), maxN)
	}
	return n, nil
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := protocol.CheckConcreteChannel(name); err != nil {
		writeError(w, http.StatusBadRequest, "bad-channel", fmt.Sprintf("channel %s: %v", strconv.QuoteToASCII(name), err))
		return
	}
	n, err := limit(r, 200, 10000)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad-limit", err.Error())
		return
	}
	msgs, _ := s.Model.History(name, n)
	if msgs == nil {
		msgs = []meshview.Message{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"channel": name, "messages": msgs})
}

func (s *Server) dms(w http.ResponseWriter, r *http.Request) {
	if !s.DMs {
		writeError(w, http.StatusForbidden, "dms-hidden", "this dashboard's credential does not see direct messages")
		return
	}
	n, err := limit(r, 500, 10000)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad-limit", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": s.Model.DMs(n)})
}

// activity answers the all-activity feed's backfill: the newest messages of every kind
// the dashboard holds (history read at start, then live), oldest first.
func (s *Server) activity(w http.ResponseWriter, r *http.Request) {
	n, err := limit(r, 200, meshview.DefaultFeedDepth)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad-limit", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": s.Model.Recent(n)})
}

// Tasks is the answer of /api/tasks.
type Tasks struct {
	Tasks     []meshview.Task `json:"tasks"`               // creation order
	ReadError string          `json:"readError,omitempty"` // why the board is not (freshly) read
}

// tasks answers the space's task board as the model holds it (watched live, never read
// per request), every task or those of ?status=.
func (s *Server) tasks(w http.ResponseWriter, r *http.Request) {
	all := s.Model.Tasks()
	if st := r.URL.Query().Get("status"); st != "" {
		if !taskboard.ValidStatus(st) {
			writeError(w, http.StatusBadRequest, "bad-status", fmt.Sprintf("status %s: want one of %s", strconv.QuoteToASCII(st), strings.Join(taskboard.Statuses, ", ")))
			return
		}
		all = slices.DeleteFunc(all, func(t meshview.Task) bool { return t.Status != st })
	}
	writeJSON(w, http.StatusOK, Tasks{Tasks: all, ReadError: s.teamErr()})
}

// Claims is the answer of /api/claims.
type Claims struct {
	Claims    []meshview.Claim `json:"claims"`              // by path, then holder
	ReadError string           `json:"readError,omitempty"` // why the claims are not (freshly) read
}

// claims answers the space's live file claims as the model holds them.
func (s *Server) claims(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, Claims{Claims: s.Model.Claims(), ReadError: s.teamErr()})
}

func (s *Server) teamErr() string {
	if s.TeamErr == nil {
		return ""
	}
	if err := s.TeamErr(); err != nil {
		return err.Error()
	}
	return ""
}

// maxPostBody bounds a post request.
const maxPostBody = 64 << 10

func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	if s.Send == nil {
		writeError(w, http.StatusForbidden, "read-only", "this dashboard does not post")
		return
	}
	// A page of another site may not post: a JSON body needs a CORS preflight this
	// server never grants, and guard checked a browser's Origin is this host.
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "bad-content-type", "post a JSON body with Content-Type: application/json")
		return
	}
	var p Post
	dec := json.NewDecoder(io.LimitReader(r.Body, maxPostBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		writeError(w, http.StatusBadRequest, "bad-body", "want {\"channel\" or \"to\", \"text\"}: "+err.Error())
		return
	}
	switch {
	case strings.TrimSpace(p.Text) == "":
		writeError(w, http.StatusBadRequest, "empty-text", "nothing to send: text is empty")
		return
	case (p.Channel == "") == (p.To == ""):
		writeError(w, http.StatusBadRequest, "bad-target", "name exactly one of channel or to")
		return
	case p.Channel != "":
		if err := protocol.CheckConcreteChannel(p.Channel); err != nil {
			writeError(w, http.StatusBadRequest, "bad-channel", fmt.Sprintf("channel %s: %v", strconv.QuoteToASCII(p.Channel), err))
			return
		}
	default:
		if _, err := protocol.ParsePrincipal(p.To); err != nil {
			writeError(w, http.StatusBadRequest, "bad-to", fmt.Sprintf("to %s: want a peer id such as local.alice: %v", strconv.QuoteToASCII(p.To), err))
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if err := s.Send(ctx, p); err != nil {
		s.Logger.Warn("post failed", "err", err)
		writeError(w, http.StatusBadGateway, "post-failed", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// feed streams model events as Server-Sent Events. A request with Last-Event-ID gets
// every event after it first; one whose events are no longer kept gets a "reset" event
// (read the API afresh). A new feed starts with a "snapshot" event.
func (s *Server) feed(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "no-streaming", "this connection cannot stream")
		return
	}
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("lastEventId")
	}
	var (
		past   []meshview.Event
		live   <-chan meshview.Event
		cancel func()
		resume = false
	)
	if last != "" {
		seq, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad-last-event-id", "Last-Event-ID "+strconv.QuoteToASCII(last)+": want an event number")
			return
		}
		past, live, cancel, resume = s.Model.SubscribeSince(seq)
	} else {
		past, live, cancel, _ = s.Model.SubscribeSince(^uint64(0))
	}
	defer cancel()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if !resume {
		kind := "snapshot"
		if last != "" {
			kind = "reset"
		}
		fmt.Fprintf(w, "id: %d\nevent: %s\ndata: {}\n\n", s.Model.Seq(), kind)
	}
	for _, ev := range past {
		if writeEvent(w, ev) != nil {
			return
		}
	}
	fl.Flush()
	ping := s.Ping
	if ping <= 0 {
		ping = 20 * time.Second
	}
	tick := time.NewTicker(ping)
	defer tick.Stop()
	hold := &rosterHold{every: s.RosterEvery, held: map[string]meshview.Event{}}
	if hold.every == 0 {
		hold.every = 250 * time.Millisecond
	}
	defer hold.stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			if _, err := io.WriteString(w, ": ping\n\n"); err != nil {
				return
			}
			fl.Flush()
		case <-hold.c:
			if hold.flush(w) != nil {
				return
			}
			fl.Flush()
		case ev, ok := <-live:
			if !ok {
				_ = hold.write(w) // what was held goes out before the browser reconnects
				fl.Flush()
				return // fell behind: the browser reconnects with Last-Event-ID
			}
			if hold.send(w, ev) != nil {
				return
			}
			// Drain what is queued before one flush.
			for n := len(live); n > 0; n-- {
				if hold.send(w, <-live) != nil {
					return
				}
			}
			fl.Flush()
		}
	}
}

// rosterHold coalesces one feed's roster events: at most one send per interval, the
// latest event per agent. Held events go out, in their order, before any later message
// event, so the ids a browser sees only grow and a resume from the last one loses
// nothing.
type rosterHold struct {
	every time.Duration
	held  map[string]meshview.Event // by agent id
	timer *time.Timer
	c     <-chan time.Time // nil while no interval runs
}

// send writes ev, or holds it when it is a roster event within the interval.
func (h *rosterHold) send(w io.Writer, ev meshview.Event) error {
	if ev.Type != meshview.EventRoster || ev.Agent == nil || h.every < 0 {
		if err := h.write(w); err != nil {
			return err
		}
		return writeEvent(w, ev)
	}
	if h.c != nil {
		h.held[ev.Agent.ID] = ev
		return nil
	}
	h.arm()
	return writeEvent(w, ev)
}

// flush ends an interval: it writes what was held, and keeps the interval running if
// there was any.
func (h *rosterHold) flush(w io.Writer) error {
	if len(h.held) == 0 {
		h.c = nil
		return nil
	}
	if err := h.write(w); err != nil {
		return err
	}
	h.arm()
	return nil
}

// write sends the held events in the order they happened.
func (h *rosterHold) write(w io.Writer) error {
	if len(h.held) == 0 {
		return nil
	}
	evs := make([]meshview.Event, 0, len(h.held))
	for _, ev := range h.held {
		evs = append(evs, ev)
	}
	clear(h.held)
	slices.SortFunc(evs, func(a, b meshview.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, ev := range evs {
		if err := writeEvent(w, ev); err != nil {
			return err
		}
	}
	return nil
}

func (h *rosterHold) arm() {
	if h.timer == nil {
		h.timer = time.NewTimer(h.every)
	} else {
		h.timer.Reset(h.every)
	}
	h.c = h.timer.C
}

func (h *rosterHold) stop() {
	if h.timer != nil {
		h.timer.Stop()
	}
}

func writeEvent(w io.Writer, ev meshview.Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, b)
	return err
}

func sortRows(rows []ChannelRow) {
	slices.SortFunc(rows, func(a, b ChannelRow) int { return strings.Compare(a.Name, b.Name) })
}
