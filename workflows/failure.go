package workflows

import (
	"errors"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/failure"
)

// FailureOf is the failure class of a stage's error as the workflow gets it:
// a heartbeat timeout is a lost worker or server, an invalid result and an
// injected fault are known by their type, and every other activity error
// carries its class as details (activities.classify). An error from an
// older worker without details gets the class its type implies.
func FailureOf(err error) failure.Failure {
	msg := failure.Clip(RootMessage(err))
	var to *temporal.TimeoutError
	if errors.As(err, &to) {
		if to.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT {
			return failure.Failure{Class: failure.LostWorker, Excerpt: "no heartbeat within the heartbeat timeout"}
		}
		return failure.Failure{Class: failure.Transient, Excerpt: msg}
	}
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		return failure.Failure{Class: failure.Transient, Excerpt: msg}
	}
	return activities.AppFailure(app, msg)
}
