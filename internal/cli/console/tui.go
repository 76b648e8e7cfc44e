package console

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/meshview"
	"github.com/cotal-ai/cotal/protocol"
)

// glyphs draw each state as a shape; colours repeat it.
var glyphs = map[protocol.Status]string{protocol.StatusWorking: "●", protocol.StatusWaiting: "◐", protocol.StatusIdle: "○", protocol.StatusOffline: "⊘"}

// stateColour is the SGR foreground of each state (green, yellow, blue, grey).
var stateColour = map[protocol.Status]string{protocol.StatusWorking: "32", protocol.StatusWaiting: "33", protocol.StatusIdle: "34", protocol.StatusOffline: "90"}

// style wraps s in an SGR sequence; s is already escaped.
func style(sgr, s string) string { return "\x1b[" + sgr + "m" + s + "\x1b[0m" }

// eventMsg carries one model event into the program; closedMsg says the feed ended.
type (
	eventMsg  meshview.Event
	closedMsg struct{}
	postedMsg struct{ err error }
)

// tui is the console's terminal UI over a meshview.Model: roster, live feed, channel
// tabs (1-9, [ ]), the needs-you lens (n), the DM lens (d), the task board (t) and file
// claims (c) lenses, the workflow runs lens (r: answer a checkpoint), search (/) and a
// line to post (i, Enter sends). Every peer string
// passes termsafe.Escape.
type tui struct {
	model  *meshview.Model
	events <-chan meshview.Event
	post   func(channel, text string) error // nil: read-only
	now    func() time.Time
	dms    bool
	// teamErr is why the task board or the file claims are not read, or nil; nil func
	// means the same.
	teamErr func() error

	width, height int
	tab           int    // 0: all channels; i: the i-th channel
	lens          string // "", "needs", "dms", "tasks" or "claims"
	search        string
	searching     bool
	typing        bool
	line          string
	status        string
	feed          []meshview.Message
	runs          runsState
}

func (t *tui) Init() tea.Cmd { return t.wait() }

func (t *tui) wait() tea.Cmd {
	return func() tea.Msg {
		ev, ok := <-t.events
		if !ok {
			return closedMsg{}
		}
		return eventMsg(ev)
	}
}

func (t *tui) channels() []string {
	var out []string
	for _, c := range t.model.Channels() {
		out = append(out, c.Name)
	}
	return out
}

func (t *tui) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch m := msg.(type) {
	case tea.WindowSizeMsg:
		t.width, t.height = m.Width, m.Height
	case eventMsg:
		if m.Message != nil {
			t.feed = append(t.feed, *m.Message)
			if len(t.feed) > 500 {
				t.feed = t.feed[len(t.feed)-500:]
			}
		}
		return t, t.wait()
	case closedMsg:
		t.status = "the feed ended (fell behind); restart cotal console"
	case runsMsg:
		t.onRuns(m)
	case runsTick:
		if t.lens == "runs" {
			return t, tea.Batch(t.loadRuns(), tea.Tick(runsEvery, func(time.Time) tea.Msg { return runsTick{} }))
		}
	case answeredMsg:
		if m.err != nil {
			t.status = "not answered: " + m.err.Error()
		} else {
			t.status = "answered " + m.step + " (answer " + m.id + "); its driver settles the step"
		}
		return t, t.loadRuns()
	case postedMsg:
		if m.err != nil {
			t.status = "not sent: " + m.err.Error()
		} else {
			t.status = "sent"
		}
	case tea.KeyPressMsg:
		return t.key(m)
	}
	return t, nil
}

func (t *tui) key(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	s := k.String()
	switch {
	case t.searching:
		switch s {
		case "enter", "esc":
			t.searching = false
		case "backspace":
			t.search = trimLast(t.search)
		default:
			t.search += k.Text
		}
		return t, nil
	case t.typing:
		switch s {
		case "esc":
			t.typing, t.line = false, ""
		case "backspace":
			t.line = trimLast(t.line)
		case "enter":
			text, ch := t.line, t.currentChannel()
			t.typing, t.line = false, ""
			if t.post == nil || strings.TrimSpace(text) == "" {
				return t, nil
			}
			if ch == "" {
				ch = protocol.DefaultChannel
			}
			t.status = "sending to #" + ch + "…"
			return t, func() tea.Msg { return postedMsg{t.post(ch, text)} }
		default:
			t.line += k.Text
		}
		return t, nil
	}
	if t.lens == "runs" {
		if cmd, ok := t.runsKey(s, k.Text); ok {
			return t, cmd
		}
	}
	switch s {
	case "q", "ctrl+c":
		return t, tea.Quit
	case "r":
		if t.lens = toggle(t.lens, "runs"); t.lens == "runs" {
			return t, tea.Batch(t.loadRuns(), tea.Tick(runsEvery, func(time.Time) tea.Msg { return runsTick{} }))
		}
	case "n":
		t.lens = toggle(t.lens, "needs")
	case "d":
		t.lens = toggle(t.lens, "dms")
	case "t":
		t.lens = toggle(t.lens, "tasks")
	case "c":
		t.lens = toggle(t.lens, "claims")
	case "/":
		t.searching, t.search = true, ""
	case "i", "enter":
		t.typing = t.post != nil
	case "[":
		t.tab = max(0, t.tab-1)
	case "]":
		t.tab = min(len(t.channels()), t.tab+1)
	case "0", "1", "2", "3", "4", "5", "6", "7", "8", "9":
		if n := int(s[0] - '0'); n <= len(t.channels()) {
			t.tab = n
		}
	}
	return t, nil
}

func toggle(cur, v string) string {
	if cur == v {
		return ""
	}
	return v
}

func trimLast(s string) string {
	r := []rune(s)
	if len(r) == 0 {
		return s
	}
	return string(r[:len(r)-1])
}

func (t *tui) currentChannel() string {
	chs := t.channels()
	if t.tab == 0 || t.tab > len(chs) {
		return ""
	}
	return chs[t.tab-1]
}

func (t *tui) View() tea.View {
	v := tea.NewView(t.render())
	v.AltScreen = true
	return v
}

// render draws the whole screen as text.
func (t *tui) render() string {
	width := t.width
	if width <= 0 {
		width = 100
	}
	height := t.height
	if height <= 0 {
		height = 30
	}
	c := t.model.Counts()
	var b strings.Builder
	// Tiles: the golden signals, always on.
	fmt.Fprintf(&b, "%s  %s %d working  %s %d waiting  %s %d idle  %s %d offline",
		style("1", "cotal console"), paint(protocol.StatusWorking, glyphs[protocol.StatusWorking]), c.Working,
		paint(protocol.StatusWaiting, glyphs[protocol.StatusWaiting]), c.Waiting,
		paint(protocol.StatusIdle, glyphs[protocol.StatusIdle]), c.Idle, paint(protocol.StatusOffline, glyphs[protocol.StatusOffline]), c.Offline)
	if ny := t.model.NeedsYou(); len(ny) > 0 {
		fmt.Fprintf(&b, "  oldest waiting %s", age(ny[0].WaitingMS))
	}
	b.WriteString("\n")
	// Channel tabs.
	tabs := []string{"0 all"}
	for i, ch := range t.channels() {
		tabs = append(tabs, fmt.Sprintf("%d #%s", i+1, termsafe.Escape(ch)))
	}
	for i, tab := range tabs {
		if i == t.tab {
			tabs[i] = style("1", "["+tab+"]")
		} else {
			tabs[i] = style("90", " "+tab+" ")
		}
	}
	b.WriteString(strings.Join(tabs, " ") + "\n")

	rosterW := min(34, width/3)
	body := height - 4
	left := t.rosterLines(rosterW)
	var right []string
	switch t.lens {
	case "needs":
		right = t.needsLines()
	case "dms":
		right = t.dmLines()
	case "tasks":
		right = t.taskLines()
	case "claims":
		right = t.claimLines()
	case "runs":
		right = t.runsLines(width - rosterW - 3)
	default:
		right = t.feedLines()
	}
	if len(right) > body {
		right = right[len(right)-body:]
	}
	for i := range body {
		l, r := "", ""
		if i < len(left) {
			l = left[i]
		}
		if i < len(right) {
			r = right[i]
		}
		pad := rosterW - ansi.StringWidth(l)
		if pad < 0 {
			pad = 0
		}
		b.WriteString(l + strings.Repeat(" ", pad) + " │ " + r + "\n")
	}
	switch {
	case t.searching:
		b.WriteString("search: " + t.search + "▏")
	case t.runs.answering && t.lens == "runs":
		step := ""
		if t.runs.sel < len(t.runs.pauses) {
			step = t.runs.pauses[t.runs.sel].Step
		}
		b.WriteString("answer " + termsafe.Escape(step) + " (JSON)> " + termsafe.Escape(t.runs.value) + "▏")
	case t.typing:
		ch := t.currentChannel()
		if ch == "" {
			ch = protocol.DefaultChannel
		}
		b.WriteString("#" + termsafe.Escape(ch) + "> " + t.line + "▏")
	default:
		hint := "n needs-you · d DMs · t tasks · c claims · r runs · / search · 1-9 [ ] channels · i post · q quit"
		if t.search != "" {
			hint = "filter: " + termsafe.Escape(t.search) + " · " + hint
		}
		if t.status != "" {
			hint = termsafe.Escape(t.status) + " · " + hint
		}
		b.WriteString(style("90", hint))
	}
	return b.String()
}

func paint(st protocol.Status, s string) string {
	return style(stateColour[st], s)
}

func age(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	return d.Truncate(time.Second).String()
}

func clip(s string, w int) string {
	r := []rune(s)
	if w > 1 && len(r) > w {
		return string(r[:w-1]) + "…"
	}
	return s
}

func (t *tui) rosterLines(w int) []string {
	out := []string{"ROSTER"}
	for _, a := range t.model.Roster() {
		line := glyphs[a.State] + " " + termsafe.Escape(a.Name)
		if a.Role != "" {
			line += " (" + termsafe.Escape(a.Role) + ")"
		}
		out = append(out, paint(a.State, clip(line, w)))
		if a.Activity != "" && a.Online {
			out = append(out, "  "+clip(termsafe.Escape(a.Activity), w-2))
		}
	}
	return out
}

func (t *tui) needsLines() []string {
	out := []string{"NEEDS YOU (waiting longest first)"}
	for _, a := range t.model.NeedsYou() {
		line := fmt.Sprintf("%s %s waiting %s", glyphs[a.State], termsafe.Escape(a.Name), age(a.WaitingMS))
		if a.Activity != "" {
			line += ": " + termsafe.Escape(a.Activity)
		}
		out = append(out, paint(a.State, line))
	}
	if len(out) == 1 {
		out = append(out, "nobody is waiting")
	}
	return out
}

func (t *tui) dmLines() []string {
	if !t.dms {
		return []string{"DIRECT MESSAGES", "DMs hidden: this credential sees channels only"}
	}
	out := []string{"DIRECT MESSAGES"}
	for _, m := range t.model.DMs(200) {
		if t.match(m) {
			out = append(out, t.messageLine(m))
		}
	}
	return out
}

func (t *tui) feedLines() []string {
	ch := t.currentChannel()
	title := "FEED (all channels)"
	if ch != "" {
		title = "#" + termsafe.Escape(ch)
	}
	out := []string{title}
	for _, m := range t.feed {
		if m.Kind != protocol.DeliveryChannel || (ch != "" && m.Channel != ch) || !t.match(m) {
			continue
		}
		out = append(out, t.messageLine(m))
	}
	return out
}

func (t *tui) match(m meshview.Message) bool {
	if t.search == "" {
		return true
	}
	q := strings.ToLower(t.search)
	return strings.Contains(strings.ToLower(m.Text), q) || strings.Contains(strings.ToLower(m.FromName), q)
}

func (t *tui) messageLine(m meshview.Message) string {
	who := termsafe.Escape(m.FromName)
	where := ""
	switch m.Kind {
	case protocol.DeliveryChannel:
		where = "#" + termsafe.Escape(m.Channel)
	case protocol.DeliveryDM:
		where = "→ " + termsafe.Escape(nameOr(t.model.Name(m.To), m.To))
	default:
		where = "→ role " + termsafe.Escape(m.Role)
	}
	return fmt.Sprintf("%s [%s] %s: %s", time.UnixMilli(m.TS).Format("15:04:05"), where, who, termsafe.Escape(strings.ReplaceAll(m.Text, "\n", " ")))
}

func nameOr(name, id string) string {
	if name == "" {
		return id
	}
	return name
}
