package spacehost

import (
	"context"
	"log/slog"
)

// PrefixHandler wraps a slog.Handler so that a logger made With("space", s) writes its
// messages as "[s] message" instead of carrying a space attribute: the host hands each
// lane logger.With("space", name), and every lane line then starts with [<space>].
type PrefixHandler struct {
	next   slog.Handler
	prefix string
	group  bool // a group is open: attributes are no longer top level
}

// NewPrefixHandler wraps next.
func NewPrefixHandler(next slog.Handler) *PrefixHandler { return &PrefixHandler{next: next} }

// Enabled reports whether the wrapped handler handles level.
func (h *PrefixHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle prefixes the record's message with [<space>] when a space was set.
func (h *PrefixHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.prefix != "" {
		nr := slog.NewRecord(r.Time, r.Level, h.prefix+r.Message, r.PC)
		r.Attrs(func(a slog.Attr) bool {
			nr.AddAttrs(a)
			return true
		})
		r = nr
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs takes a top-level "space" attribute as the prefix (the first one wins, so a
// lane repeating its space adds nothing) and passes the others on.
func (h *PrefixHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	rest := make([]slog.Attr, 0, len(attrs))
	for _, a := range attrs {
		if !c.group && a.Key == "space" {
			if c.prefix == "" {
				c.prefix = "[" + a.Value.String() + "] "
			}
			continue
		}
		rest = append(rest, a)
	}
	if len(rest) > 0 {
		c.next = c.next.WithAttrs(rest)
	}
	return &c
}

// WithGroup opens a group on the wrapped handler.
func (h *PrefixHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.next = c.next.WithGroup(name)
	c.group = true
	return &c
}
