package activities

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// busyGauges are the in-flight gauges a server exposes on /metrics: the
// SGLang workers' running and queued requests and the dynamo frontend's
// active requests. InferenceX's agentic client waits until they are all 0
// before the next concurrency on the same servers
// (wait_for_agentic_servers_idle); a shared bring-up must too, or requests
// left over from the previous point load the next point's figures.
var busyGauges = []string{"sglang:num_running_reqs", "sglang:num_queue_reqs", "dynamo_frontend_active_requests"}

// IdleWait says how a handed-over server is judged idle: Polls consecutive
// readings Interval apart with every busy gauge at 0, within Timeout.
type IdleWait struct {
	Interval time.Duration
	Polls    int
	Timeout  time.Duration
}

func (w IdleWait) withDefaults() IdleWait {
	if w.Interval <= 0 {
		w.Interval = time.Second
	}
	if w.Polls <= 0 {
		w.Polls = 3
	}
	if w.Timeout <= 0 {
		w.Timeout = 30 * time.Minute
	}
	return w
}

// inFlight reads the busy gauges from url/metrics. known is false when the
// server exposes none of them (nothing to wait on).
func inFlight(ctx context.Context, url string) (n float64, known bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, strings.TrimRight(url, "/")+"/metrics", nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(f[0], "{")
		for _, g := range busyGauges {
			if name == g {
				v, perr := strconv.ParseFloat(f[1], 64)
				if perr != nil {
					return 0, true, fmt.Errorf("metrics: %s: %v", name, perr)
				}
				n += v
				known = true
			}
		}
	}
	return n, known, sc.Err()
}

// waitIdle blocks until the server at url has had nothing in flight for
// w.Polls readings in a row. A server without the gauges, or whose /metrics
// cannot be read w.Polls times in a row, is taken as idle (health already
// answered; there is nothing to wait on); one still busy after w.Timeout is
// an error naming how many requests it still holds.
func waitIdle(ctx context.Context, url string, w IdleWait, status func(string)) error {
	w = w.withDefaults()
	deadline := time.Now().Add(w.Timeout)
	quiet, unreadable := 0, 0
	for {
		n, known, err := inFlight(ctx, url)
		if err != nil && ctx.Err() == nil {
			if unreadable++; unreadable >= w.Polls {
				return nil
			}
		} else {
			unreadable = 0
		}
		switch {
		case err == nil && !known:
			return nil
		case err == nil && n == 0:
			quiet++
			if quiet >= w.Polls {
				return nil
			}
		default:
			quiet = 0
			if status != nil {
				if err != nil {
					status(fmt.Sprintf("waiting for the server to go idle: %v", err))
				} else {
					status(fmt.Sprintf("waiting for the server to go idle: %.0f requests in flight", n))
				}
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("server %s did not report idle within %s: %w", url, w.Timeout, err)
			}
			return fmt.Errorf("server %s still has %.0f requests in flight after %s", url, n, w.Timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(w.Interval):
		}
	}
}
