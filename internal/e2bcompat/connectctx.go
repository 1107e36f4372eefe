package e2bcompat

import (
	"context"
	"errors"

	"connectrpc.com/connect"
)

// ctxCodes is the interceptor of envd's handlers that gives an RPC
// failing once its context is over the code of why it is over: the
// API's answer to a call cut short (whatever its code) is then
// deadline_exceeded when the client's Connect-Timeout-Ms ran out, as
// E2B's clients expect of commands.run(timeout=), or canceled.
type ctxCodes struct{}

func (ctxCodes) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		return res, markTooLarge(ctxCode(ctx, err))
	}
}

func (ctxCodes) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (ctxCodes) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return ctxCode(ctx, next(ctx, conn))
	}
}

// ctxCode is err with the code of ctx's end, if ctx has ended.
func ctxCode(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	code := connect.CodeCanceled
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		code = connect.CodeDeadlineExceeded
	}
	if connect.CodeOf(err) == code {
		return err
	}
	msg := err.Error()
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg = ce.Message()
	}
	return connect.NewError(code, messageError{msg: msg, err: err})
}
