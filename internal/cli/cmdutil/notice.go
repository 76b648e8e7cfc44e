package cmdutil

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/termsafe"
)

// NoticeHandler writes each log record to w as one notice line of a chat stream, the way
// join prints its own ("! connection lost ..."): "! <message>: key=value ...", with no
// time or level, escaped like every log line (a value holding a control character is
// quoted as a Go escape). A record below level is dropped.
func NoticeHandler(w io.Writer, level slog.Leveler) slog.Handler {
	buf := new(bytes.Buffer)
	inner := slog.NewTextHandler(buf, &slog.HandlerOptions{Level: level, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
			return slog.Attr{}
		}
		return a
	}})
	return &noticeHandler{mu: new(sync.Mutex), buf: buf, inner: inner, w: w}
}

type noticeHandler struct {
	mu    *sync.Mutex   // guards buf and writes to w, shared by every handler derived
	buf   *bytes.Buffer // inner's output, one record at a time
	inner slog.Handler
	w     io.Writer
}

func (h *noticeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *noticeHandler) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.buf.Reset()
	if err := h.inner.Handle(ctx, r); err != nil {
		return err
	}
	line := "! " + termsafe.Escape(r.Message)
	if attrs := strings.TrimSpace(h.buf.String()); attrs != "" {
		line += ": " + attrs
	}
	_, err := io.WriteString(h.w, line+"\n")
	return err
}

func (h *noticeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &noticeHandler{mu: h.mu, buf: h.buf, inner: h.inner.WithAttrs(as), w: h.w}
}

func (h *noticeHandler) WithGroup(name string) slog.Handler {
	return &noticeHandler{mu: h.mu, buf: h.buf, inner: h.inner.WithGroup(name), w: h.w}
}

// ChatConnect is f.Connect for a command whose terminal shows a chat stream (join): the
// client's log records reach stderr as notice lines (NoticeHandler), never as log lines
// between the messages; COTAL_DEBUG (a debug-level f.Logger) lets debug records through.
func (f *Factory) ChatConnect(ctx context.Context, t Target, cfg client.Config, as As) (*client.Endpoint, error) {
	if cfg.Logger == nil {
		level := slog.LevelWarn
		if f.Logger != nil && f.Logger.Enabled(ctx, slog.LevelDebug) {
			level = slog.LevelDebug
		}
		cfg.Logger = slog.New(NoticeHandler(f.IO.ErrOut, level))
	}
	return f.Connect(ctx, t, cfg, as)
}
