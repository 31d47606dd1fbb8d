package temporalx

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Setup is what a Temporal server that is not the embedded dev server needs
// before sweepflow runs on it: the namespace and sweepflow's search
// attributes. Ensure is idempotent: it creates only what is missing.
type Setup struct {
	Namespace string
	Retention time.Duration
	// SearchAttributes maps name to type (Keyword, Int, ...).
	SearchAttributes map[string]string
	// Wait bounds how long Ensure retries while the server is not serving
	// yet or the new namespace is not visible yet.
	Wait time.Duration
}

// SetupReport says what Ensure created.
type SetupReport struct {
	NamespaceCreated bool
	AttributesAdded  []string
}

var saTypes = map[string]enumspb.IndexedValueType{
	"Keyword": enumspb.INDEXED_VALUE_TYPE_KEYWORD, "Text": enumspb.INDEXED_VALUE_TYPE_TEXT,
	"Int": enumspb.INDEXED_VALUE_TYPE_INT, "Double": enumspb.INDEXED_VALUE_TYPE_DOUBLE,
	"Bool": enumspb.INDEXED_VALUE_TYPE_BOOL, "Datetime": enumspb.INDEXED_VALUE_TYPE_DATETIME,
	"KeywordList": enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}

// Ensure creates the namespace and the missing search attributes through c,
// retrying transient errors (server starting, namespace not yet visible)
// until s.Wait has passed.
func (s Setup) Ensure(ctx context.Context, c client.Client) (SetupReport, error) {
	var rep SetupReport
	ns := orDefault(s.Namespace)
	want := map[string]enumspb.IndexedValueType{}
	for name, typ := range s.SearchAttributes {
		t, ok := saTypes[typ]
		if !ok {
			return rep, fmt.Errorf("search attribute %s: unknown type %q", name, typ)
		}
		want[name] = t
	}
	wait := s.Wait
	if wait <= 0 {
		wait = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	retry := func(what string, f func(context.Context) error) error {
		var last error
		for {
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			last = f(cctx)
			ccancel()
			if last == nil {
				return nil
			}
			if isPermanent(last) {
				return fmt.Errorf("%s: %w", what, last)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s: still failing after %s: %w", what, wait, last)
			case <-time.After(time.Second):
			}
		}
	}
	if err := retry("namespace "+ns, func(ctx context.Context) error {
		_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
		var nf *serviceerror.NamespaceNotFound
		if !errors.As(err, &nf) {
			return err
		}
		retention := s.Retention
		if retention <= 0 {
			retention = 30 * 24 * time.Hour
		}
		_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(retention),
			Description: "sweepflow",
		})
		var exists *serviceerror.NamespaceAlreadyExists
		if err == nil || errors.As(err, &exists) {
			rep.NamespaceCreated = err == nil
			return errNotYet // describe again until it is visible
		}
		return err
	}); err != nil {
		return rep, err
	}
	err := retry("search attributes of "+ns, func(ctx context.Context) error {
		have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
		if err != nil {
			return err
		}
		missing := map[string]enumspb.IndexedValueType{}
		for name, t := range want {
			got, ok := have.GetCustomAttributes()[name]
			if !ok {
				missing[name] = t
			} else if got != t {
				return permanent{fmt.Errorf("search attribute %s exists with type %s, sweepflow needs %s", name, got, t)}
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace: ns, SearchAttributes: missing,
		}); err != nil {
			var exists *serviceerror.AlreadyExists
			if !errors.As(err, &exists) {
				return err
			}
		}
		for name := range missing {
			rep.AttributesAdded = append(rep.AttributesAdded, name)
		}
		return errNotYet // list again until all are there
	})
	sort.Strings(rep.AttributesAdded)
	rep.AttributesAdded = dedup(rep.AttributesAdded)
	return rep, err
}

var errNotYet = errors.New("not visible yet")

type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

func isPermanent(err error) bool {
	var p permanent
	var perm *serviceerror.PermissionDenied
	var inv *serviceerror.InvalidArgument
	return errors.As(err, &p) || errors.As(err, &perm) || errors.As(err, &inv)
}

func dedup(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
