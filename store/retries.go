package store

import "context"

type callerRetriesKey struct{}

// WithCallerRetries marks ctx for a call whose caller retries by itself,
// with its own backoff (the sync engine's long poll of the change feed):
// the client then makes one attempt and returns its failure at once, so a
// store that went away is seen and reported now, not after the client's
// own retries.
func WithCallerRetries(ctx context.Context) context.Context {
	return context.WithValue(ctx, callerRetriesKey{}, true)
}

// CallerRetries reports whether ctx was marked by WithCallerRetries.
func CallerRetries(ctx context.Context) bool {
	v, _ := ctx.Value(callerRetriesKey{}).(bool)
	return v
}
