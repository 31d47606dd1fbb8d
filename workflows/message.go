package workflows

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
)

// appMessage is ApplicationError.Error() without the repetition: the
// activities put their cause's text in the message (activities.classify),
// and Error() would append the cause once more.
func appMessage(app *temporal.ApplicationError) string {
	msg := app.Message()
	if app.Type() != "" {
		msg = fmt.Sprintf("%s (type: %s, retryable: %v)", msg, app.Type(), !app.NonRetryable())
	}
	cause := errors.Unwrap(app)
	if cause == nil {
		return msg
	}
	text := cause.Error()
	var capp *temporal.ApplicationError
	if errors.As(cause, &capp) {
		text = capp.Message()
	}
	if strings.Contains(app.Message(), text) {
		return msg
	}
	return msg + ": " + cause.Error()
}

// RootMessage is the message an outcome shows for err: its application
// error with type and cause, or the timeout's kind.
func RootMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return appMessage(app)
	}
	var to *temporal.TimeoutError
	if errors.As(err, &to) {
		return "timeout: " + to.TimeoutType().String()
	}
	return err.Error()
}
