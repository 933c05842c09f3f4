package worker

import (
	"context"
	"log/slog"

	"github.com/sirupsen/logrus"
)

// logrusHandler sends the SDK's log lines (log/slog: the session tool
// runner's reconnects and send retries, skill downloads) to the worker's
// logrus logger, with their attributes as fields, so they share its format,
// level and work_id/session fields.
type logrusHandler struct {
	log   logrus.FieldLogger
	group string
}

var _ slog.Handler = logrusHandler{}

// newSlog is a slog.Logger writing to log.
func newSlog(log logrus.FieldLogger) *slog.Logger { return slog.New(logrusHandler{log: log}) }

// Enabled leaves the level decision to logrus.
func (h logrusHandler) Enabled(_ context.Context, l slog.Level) bool {
	switch lg := h.log.(type) {
	case *logrus.Logger:
		return lg.IsLevelEnabled(toLogrus(l))
	case *logrus.Entry:
		return lg.Logger.IsLevelEnabled(toLogrus(l))
	}
	return true
}

func (h logrusHandler) Handle(_ context.Context, r slog.Record) error {
	fields := logrus.Fields{}
	r.Attrs(func(a slog.Attr) bool {
		h.add(fields, a)
		return true
	})
	h.log.WithFields(fields).Log(toLogrus(r.Level), r.Message)
	return nil
}

func (h logrusHandler) WithAttrs(as []slog.Attr) slog.Handler {
	fields := logrus.Fields{}
	for _, a := range as {
		h.add(fields, a)
	}
	return logrusHandler{log: h.log.WithFields(fields), group: h.group}
}

func (h logrusHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	if h.group != "" {
		name = h.group + "." + name
	}
	return logrusHandler{log: h.log, group: name}
}

func (h logrusHandler) add(fields logrus.Fields, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	key := a.Key
	if h.group != "" {
		key = h.group + "." + key
	}
	if a.Value.Kind() == slog.KindGroup {
		sub := logrusHandler{log: h.log, group: key}
		for _, g := range a.Value.Group() {
			sub.add(fields, g)
		}
		return
	}
	fields[key] = a.Value.Any()
}

func toLogrus(l slog.Level) logrus.Level {
	switch {
	case l >= slog.LevelError:
		return logrus.ErrorLevel
	case l >= slog.LevelWarn:
		return logrus.WarnLevel
	case l >= slog.LevelInfo:
		return logrus.InfoLevel
	}
	return logrus.DebugLevel
}
