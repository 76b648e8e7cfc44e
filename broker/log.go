package broker

import (
	"fmt"
	"log/slog"
	"strings"
)

// natsLogger forwards nats-server's logging to slog. Its Fatalf never exits the process:
// it logs at error level and hands the error to the Server, which stops the broker.
type natsLogger struct {
	log   *slog.Logger
	fatal chan error // the first fatal error; later ones are only logged
}

func newNATSLogger(log *slog.Logger) *natsLogger {
	return &natsLogger{log: log, fatal: make(chan error, 1)}
}

// Noticef logs at info level.
func (l *natsLogger) Noticef(format string, v ...any) { l.log.Info(msg(format, v)) }

// Warnf logs at warn level.
func (l *natsLogger) Warnf(format string, v ...any) { l.log.Warn(msg(format, v)) }

// Errorf logs at error level.
func (l *natsLogger) Errorf(format string, v ...any) { l.log.Error(msg(format, v)) }

// Debugf logs at debug level.
func (l *natsLogger) Debugf(format string, v ...any) { l.log.Debug(msg(format, v)) }

// Tracef logs at debug level; the Server leaves tracing off.
func (l *natsLogger) Tracef(format string, v ...any) { l.log.Debug(msg(format, v)) }

// Fatalf logs at error level and records the error instead of exiting.
func (l *natsLogger) Fatalf(format string, v ...any) {
	err := &fatalError{msg: msg(format, v)}
	for _, a := range v {
		if e, ok := a.(error); ok {
			err.cause = e
			break
		}
	}
	l.log.Error(err.msg, "fatal", true)
	select {
	case l.fatal <- err:
	default:
	}
}

// fatalError is a nats-server fatal log line, unwrapping to the error it formatted, if any.
type fatalError struct {
	msg   string
	cause error
}

func (e *fatalError) Error() string { return e.msg }
func (e *fatalError) Unwrap() error { return e.cause }

func msg(format string, v []any) string {
	return strings.TrimSpace(fmt.Sprintf(format, v...))
}
