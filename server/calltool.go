package server

import "context"

// CallInfo is the tool a call's context belongs to (what Options.EnvFor
// may want to know: the hosted server queues a user's writes, not reads).
type CallInfo struct {
	Name     string
	ReadOnly bool
}

type callKey struct{}

func withCall(ctx context.Context, c CallInfo) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallOf is the tool call ctx belongs to (ok false: not a tool call).
func CallOf(ctx context.Context) (CallInfo, bool) {
	c, ok := ctx.Value(callKey{}).(CallInfo)
	return c, ok
}
