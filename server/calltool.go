package server

import "context"

// CallInfo is the tool call a context belongs to (what Options.EnvFor may
// want to know: the hosted server queues a user's writes, not reads).
type CallInfo struct {
	Name     string
	ReadOnly bool
	// Yield, if EnvFor sets it, lets go of what the call holds for others
	// (the user's turn to write) while it waits for its person's answer
	// (a confirmation asked mid-call); the function it returns takes it
	// again (waiting for it) before the call goes on.
	Yield func() (again func())
}

type callKey struct{}

func withCall(ctx context.Context, c *CallInfo) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallOf is the tool call ctx belongs to (ok false: not a tool call).
func CallOf(ctx context.Context) (*CallInfo, bool) {
	c, ok := ctx.Value(callKey{}).(*CallInfo)
	return c, ok
}
