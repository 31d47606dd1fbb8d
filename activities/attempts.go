package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// StageActivities maps each stage activity of a point to its stage: the
// attempts the attempt ledger records.
var StageActivities = map[string]string{
	"Allocate": point.StageAllocate, "StageCheckpoint": point.StageCheckpoint, "BringUp": point.StageBringUp, "Warmup": point.StageWarmup,
	"Perf": point.StagePerf, "Eval": point.StageEval, "Upload": point.StageUpload, "Teardown": point.StageTeardown,
}

// AttemptLedger is the worker interceptor that gives every attempt of a
// stage activity one row in the ledger (results.StageAttempt), in one place
// rather than in each activity:
//
//   - when an attempt starts, a row with outcome running and this worker's
//     identity, which keeps its latest heartbeat details while it runs;
//     earlier attempts of the same stage in the same workflow run
//     that never ended are marked lost (their worker died, or its heartbeat
//     or result never reached the server), with the heartbeat details the
//     server kept for them; an earlier attempt of the same activity that
//     ended ok is relabelled lost (its result never reached the server, or
//     this attempt would not exist);
//   - when it ends, its outcome: ok, failed (the error's class and evidence:
//     type, message, the failure's excerpt such as a log-tail signature, and
//     the last heartbeat details it recorded), cancelled by the workflow
//     (an operator's cancel), or lost (its worker stopping, or heartbeats
//     that could not reach the server).
//
// The last attempt of a stage that never ended is closed by the point's
// final record (RecordPoint). Every write is keyed by Temporal's (workflow,
// run, activity, attempt): a redelivered or retried write adds no row, and
// the first end recorded stands. A ledger that cannot be written costs a
// warning, never the attempt.
type AttemptLedger struct {
	interceptor.WorkerInterceptorBase
	Store *results.Store
	// Worker is this worker's identity (the one Temporal shows).
	Worker string
	Logger *zap.Logger
}

// ledgerWriteTimeout bounds each ledger write around an attempt: the attempt
// does not heartbeat during it, and a write that waited out a database
// restart would time the attempt out.
const ledgerWriteTimeout = 2 * time.Second

// InterceptActivity wraps one activity execution.
func (l *AttemptLedger) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &attemptInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, l: l}
}

type attemptInbound struct {
	interceptor.ActivityInboundInterceptorBase
	l   *AttemptLedger
	out *beatOutbound
}

func (i *attemptInbound) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	i.out = &beatOutbound{ActivityOutboundInterceptorBase: interceptor.ActivityOutboundInterceptorBase{Next: outbound}, l: i.l}
	return i.Next.Init(i.out)
}

// beatOutbound keeps the latest heartbeat details of the attempt: evidence
// of how far it got. It also writes them to the attempt's row, the first
// ones at once and later ones at most every beatWriteEvery, so an attempt
// whose worker dies leaves its progress behind (its retry reads the details
// the server kept, but a new retry budget does not).
type beatOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
	l *AttemptLedger
	a *results.StageAttempt // nil: not a stage attempt

	mu      sync.Mutex
	last    any
	beat    bool
	written string    // details last written to the row
	at      time.Time // when
	writing bool
}

// beatWriteEvery bounds how often a running attempt's heartbeat details
// are written to its row.
const beatWriteEvery = 10 * time.Second

func (o *beatOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	if len(details) > 0 {
		o.mu.Lock()
		o.last, o.beat = details[0], true
		o.mu.Unlock()
		o.keep(ctx)
	}
	o.Next.RecordHeartbeat(ctx, details...)
}

// keep writes the latest details to the row in the background when they
// changed and the last write is old enough; one write at a time.
func (o *beatOutbound) keep(ctx context.Context) {
	if o.a == nil {
		return
	}
	o.mu.Lock()
	d := heartbeatJSON(o.last)
	if o.writing || d == "" || d == o.written || (!o.at.IsZero() && time.Since(o.at) < beatWriteEvery) {
		o.mu.Unlock()
		return
	}
	o.writing, o.written, o.at = true, d, time.Now()
	a := *o.a
	o.mu.Unlock()
	go func() {
		defer func() {
			o.mu.Lock()
			o.writing = false
			o.mu.Unlock()
		}()
		wctx, cancel := writeCtx(ctx)
		defer cancel()
		a.Heartbeat = d
		if err := o.l.Store.BeatAttempt(wctx, a); err != nil {
			o.l.log(ctx).Debug("attempt ledger: keeping the heartbeat failed", zap.Error(err))
		}
	}()
}

// details is the latest heartbeat as clipped JSON ("" when none).
func (o *beatOutbound) details() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.beat {
		return ""
	}
	return heartbeatJSON(o.last)
}

// wait lets a heartbeat write in flight finish, so it cannot land after
// the attempt's end.
func (o *beatOutbound) wait() {
	for {
		o.mu.Lock()
		w := o.writing
		o.mu.Unlock()
		if !w {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// maxHeartbeat bounds the heartbeat details kept as evidence.
const maxHeartbeat = 1024

func heartbeatJSON(d any) string {
	var b []byte
	if raw, ok := d.(json.RawMessage); ok {
		b = raw
	} else {
		b, _ = json.Marshal(d)
	}
	s := string(b)
	if s == "null" {
		return ""
	}
	if len(s) > maxHeartbeat {
		s = s[:maxHeartbeat-3] + "..."
	}
	return s
}

func (i *attemptInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (res any, err error) {
	a, ok := i.l.attempt(ctx, in.Args)
	if !ok {
		return i.Next.ExecuteActivity(ctx, in)
	}
	i.l.begin(ctx, a)
	i.out.mu.Lock()
	i.out.a = &a
	i.out.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			i.out.wait()
			i.l.end(ctx, a, fmt.Errorf("panic: %v", p), i.out.details())
			panic(p)
		}
	}()
	res, err = i.Next.ExecuteActivity(ctx, in)
	i.out.wait()
	i.l.end(ctx, a, err, i.out.details())
	return res, err
}

// attempt is the row of the running attempt, if it is a stage attempt of
// a point workflow.
func (l *AttemptLedger) attempt(ctx context.Context, args []any) (results.StageAttempt, bool) {
	if l.Store == nil || !activity.IsActivity(ctx) {
		return results.StageAttempt{}, false
	}
	info := activity.GetInfo(ctx)
	stage, ok := StageActivities[info.ActivityType.Name]
	p, okp := pointOf(args)
	if !ok || !okp || info.WorkflowExecution.ID == "" {
		return results.StageAttempt{}, false
	}
	started := info.StartedTime
	if started.IsZero() {
		started = time.Now()
	}
	return results.StageAttempt{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID, ActivityID: info.ActivityID,
		Attempt: int(info.Attempt), SweepID: p.SweepID, PointID: p.PointID, Stage: stage, Worker: l.Worker, StartedAt: started}, true
}

// pointOf finds the point in a stage activity's first argument.
func pointOf(args []any) (point.Spec, bool) {
	if len(args) == 0 {
		return point.Spec{}, false
	}
	switch v := args[0].(type) {
	case point.Spec:
		return v, true
	case *point.Spec:
		return *v, v != nil
	case StageInput:
		return v.Point, true
	case *StageInput:
		return v.Point, v != nil
	case UploadInput:
		return v.Point, true
	case *UploadInput:
		return v.Point, v != nil
	}
	return point.Spec{}, false
}

func (l *AttemptLedger) log(ctx context.Context) *zap.Logger { return ContextLogger(ctx, l.Logger) }

// writeCtx is the context of a ledger write: it outlives the attempt's
// cancellation (the end of a cancelled attempt is written too) and is
// bounded by ledgerWriteTimeout.
func writeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), ledgerWriteTimeout)
}

// begin records the attempt's start and settles the earlier attempts of its
// stage that never ended.
func (l *AttemptLedger) begin(ctx context.Context, a results.StageAttempt) {
	wctx, cancel := writeCtx(ctx)
	defer cancel()
	prior, err := l.Store.RunAttempts(wctx, a.WorkflowID, a.RunID)
	if err != nil {
		l.log(ctx).Warn("attempt ledger: reading earlier attempts failed", zap.Error(err))
	}
	// The details the server kept for this activity are its previous
	// attempt's last heartbeat.
	kept := ""
	if a.Attempt > 1 && activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		var raw json.RawMessage
		if activity.GetHeartbeatDetails(ctx, &raw) == nil {
			kept = heartbeatJSON(raw)
		}
	}
	for _, p := range prior {
		if p.Stage != a.Stage || (p.ActivityID == a.ActivityID && p.Attempt >= a.Attempt) {
			continue
		}
		switch {
		case p.Outcome == results.AttemptRunning:
			markLost(&p, fmt.Sprintf("noticed when attempt %d of %s started", a.Attempt, a.Stage))
			if p.ActivityID == a.ActivityID && p.Attempt == a.Attempt-1 {
				p.Heartbeat = kept
			}
			p.EndedAt = a.StartedAt
			if _, err := l.Store.EndAttempt(wctx, p); err != nil {
				l.log(ctx).Warn("attempt ledger: marking a lost attempt failed", zap.Int("lost_attempt", p.Attempt), zap.Error(err))
			}
		case p.Outcome == results.AttemptOK && p.ActivityID == a.ActivityID:
			p.Class, p.ErrorType = failure.LostWorker, "Timeout"
			p.Message = fmt.Sprintf("its result never reached the server: attempt %d of the activity started after it", a.Attempt)
			if _, err := l.Store.Relabel(wctx, p); err != nil {
				l.log(ctx).Warn("attempt ledger: relabelling a lost attempt failed", zap.Int("lost_attempt", p.Attempt), zap.Error(err))
			}
		}
	}
	if err := l.Store.StartAttempt(wctx, a); err != nil {
		l.log(ctx).Warn("attempt ledger: recording the attempt's start failed", zap.Error(err))
	}
}

// end records how the attempt ended.
func (l *AttemptLedger) end(ctx context.Context, a results.StageAttempt, err error, heartbeat string) {
	AttemptEnd(ctx, &a, err)
	a.Heartbeat, a.EndedAt = heartbeat, time.Now()
	wctx, cancel := writeCtx(ctx)
	defer cancel()
	if _, werr := l.Store.EndAttempt(wctx, a); werr != nil {
		l.log(ctx).Warn("attempt ledger: recording the attempt's end failed", zap.Error(werr))
	}
}

// markLost makes a row that never ended a lost attempt, naming its worker
// and who noticed.
func markLost(r *results.StageAttempt, noticed string) {
	r.Outcome, r.Class, r.ErrorType = results.AttemptLost, failure.LostWorker, "Timeout"
	r.Excerpt = "no heartbeat within the heartbeat timeout"
	r.Message = fmt.Sprintf("no result from worker %s: its heartbeat or result never reached the server "+
		"(a dead worker, a cut network or a restarted server); %s", r.Worker, noticed)
}

// AttemptEnd sets an attempt's outcome, class and evidence from the error
// its activity returned (nil: ok) and the state of its context.
func AttemptEnd(ctx context.Context, a *results.StageAttempt, err error) {
	a.Outcome = results.AttemptOK
	if err == nil {
		return
	}
	a.Outcome, a.ErrorType, a.Message = results.AttemptFailed, fmt.Sprintf("%T", err), failure.Clip(err.Error())
	switch {
	case ctx.Err() == context.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
		a.Class, a.ErrorType = failure.StageTimeout, "DeadlineExceeded"
		a.Excerpt = "the stage's start-to-close timeout ran out"
		if activity.IsActivity(ctx) {
			a.Excerpt += fmt.Sprintf(" (%s)", activity.GetInfo(ctx).StartToCloseTimeout)
		}
		return
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		cause := context.Cause(ctx)
		a.ErrorType = string(failure.ErrCanceled)
		switch {
		case temporal.IsCanceledError(cause):
			a.Outcome, a.Class = results.AttemptCancelled, failure.OperatorCancel
			a.Excerpt = "cancelled by the workflow (an operator cancelled the sweep or the point)"
		case workerStopping(ctx):
			a.Outcome, a.Class = results.AttemptLost, failure.LostWorker
			a.Excerpt = "the worker stopped during the attempt"
		default:
			a.Outcome, a.Class = results.AttemptLost, failure.LostWorker
			a.Excerpt = "the heartbeat did not reach the server"
			if cause != nil && cause != context.Canceled {
				a.Excerpt = failure.Clip(a.Excerpt + ": " + cause.Error())
			}
		}
		return
	}
	if app, ok := errors.AsType[*temporal.ApplicationError](err); ok {
		a.ErrorType, a.Message = app.Type(), failure.Clip(app.Message())
		f := AppFailure(app, a.Message)
		a.Class, a.Excerpt = f.Class, f.Excerpt
		return
	}
	f := backendFailure(err)
	a.Class, a.Excerpt = f.Class, f.Excerpt
}

func workerStopping(ctx context.Context) bool {
	if !activity.IsActivity(ctx) {
		return false
	}
	select {
	case <-activity.GetWorkerStopChannel(ctx):
		return true
	default:
		return false
	}
}

// AppFailure is the failure class of an activity's application error: the
// validity gate's and --inject-fault's by their type, otherwise the class
// classify attached as details, else the one its type implies (an error of
// an older worker), with excerpt as the evidence.
func AppFailure(app *temporal.ApplicationError, excerpt string) failure.Failure {
	t := failure.ErrorType(app.Type())
	if t.ByType() {
		return failure.Failure{Class: t.Class(), Excerpt: failure.Clip(app.Message())}
	}
	var f failure.Failure
	if app.HasDetails() && app.Details(&f) == nil && f.Class != "" {
		return f
	}
	return failure.Failure{Class: t.Class(), Excerpt: excerpt}
}

// closeOpenAttempts settles, at the point's final record, the attempts of
// its workflow run that never ended: the last attempt of a stage whose
// worker died leaves no later attempt to notice it. The point workflow saw
// how the attempt's retry budget ended (rec's failures): a heartbeat
// timeout is a lost attempt, ended when the workflow saw it; another error
// is the attempt's own (its end was not written); a stage that went on ok
// took its result.
func (a *Activities) closeOpenAttempts(ctx context.Context, rec PointRecord) {
	if a.Store == nil || !activity.IsActivity(ctx) {
		return
	}
	info := activity.GetInfo(ctx)
	wctx, cancel := writeCtx(ctx)
	defer cancel()
	rows, err := a.Store.RunAttempts(wctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID)
	if err != nil {
		a.log(ctx).Warn("attempt ledger: reading the point's attempts failed", zap.Error(err))
		return
	}
	for _, r := range rows {
		if r.Outcome != results.AttemptRunning {
			continue
		}
		settleOpen(&r, rec)
		if _, err := a.Store.EndAttempt(wctx, r); err != nil {
			a.log(ctx).Warn("attempt ledger: closing an attempt failed", zap.String("stage", r.Stage), zap.Int("attempt", r.Attempt), zap.Error(err))
		}
	}
}

// settleOpen ends an attempt that never ended, from the stage run of rec
// that holds it (see closeOpenAttempts).
func settleOpen(r *results.StageAttempt, rec PointRecord) {
	markLost(r, "closed by the point's final record")
	r.EndedAt = rec.At
	// The stage run that holds the attempt: the last of its stage that
	// started before it (the workflow's clock and the worker's may differ
	// by a little).
	var run *point.StageRun
	for i := range rec.Stages {
		s := &rec.Stages[i]
		if s.Stage == r.Stage && !s.Started.After(r.StartedAt.Add(time.Second)) {
			run = s
		}
	}
	if run == nil {
		return
	}
	for _, f := range run.Failures {
		if f.At.Before(r.StartedAt) {
			continue
		}
		r.EndedAt = f.At
		if f.Class != failure.LostWorker {
			r.Outcome, r.Class, r.ErrorType, r.Excerpt = results.AttemptFailed, f.Class, "", f.Excerpt
			r.Message = "the attempt's end was not recorded; the workflow saw it fail: " + f.Excerpt
		}
		return
	}
	if !run.Ended.IsZero() {
		r.EndedAt = run.Ended
		if run.Outcome == point.OutcomeOK {
			r.Outcome, r.Class, r.ErrorType, r.Excerpt, r.Message = results.AttemptOK, "", "", "", ""
		}
	}
}
