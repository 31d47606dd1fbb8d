package activities

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// metricsServer answers /metrics with the busy gauges from busy(poll).
func metricsServer(t *testing.T, busy func(poll int) (running, queued, active int), withGauges bool) (*httptest.Server, *atomic.Int32) {
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		n := int(polls.Add(1))
		fmt.Fprintln(w, "# HELP sglang:cache_hit_rate x\nsglang:cache_hit_rate 0.5")
		if withGauges {
			run, q, act := busy(n)
			fmt.Fprintf(w, "sglang:num_running_reqs{model_name=\"m\"} %d\nsglang:num_queue_reqs{model_name=\"m\"} %d\ndynamo_frontend_active_requests %d\n", run, q, act)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &polls
}

func TestWaitIdle(t *testing.T) {
	fast := IdleWait{Interval: 5 * time.Millisecond, Polls: 3, Timeout: 2 * time.Second}
	cases := []struct {
		name      string
		busy      func(int) (int, int, int)
		gauges    bool
		wait      IdleWait
		wantPolls int32 // exact number of /metrics reads
		wantErr   string
	}{
		{"busy then idle: three quiet readings after the last busy one", func(n int) (int, int, int) {
			if n <= 2 {
				return 5, 1, 0
			}
			return 0, 0, 0
		}, true, fast, 5, ""},
		{"a busy reading resets the count", func(n int) (int, int, int) {
			if n == 2 {
				return 0, 0, 3 // the frontend still holds requests
			}
			return 0, 0, 0
		}, true, fast, 5, ""},
		{"no gauges: nothing to wait on", nil, false, fast, 1, ""},
		{"never idle", func(int) (int, int, int) { return 2, 7, 0 }, true,
			IdleWait{Interval: 5 * time.Millisecond, Polls: 3, Timeout: 30 * time.Millisecond}, 0, "still has 9 requests in flight"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, polls := metricsServer(t, c.busy, c.gauges)
			var statuses []string
			err := waitIdle(context.Background(), srv.URL, c.wait, func(s string) { statuses = append(statuses, s) })
			if c.wantErr != "" {
				require.ErrorContains(t, err, c.wantErr)
				assert.NotEmpty(t, statuses)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.wantPolls, polls.Load())
		})
	}
}

func TestWaitIdleUnreadableMetrics(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // connection refused from now on
	start := time.Now()
	require.NoError(t, waitIdle(context.Background(), url, IdleWait{Interval: 5 * time.Millisecond, Polls: 3, Timeout: time.Minute}, nil))
	assert.Less(t, time.Since(start), 30*time.Second, "gives up after three unreadable polls, not at the timeout")
}
