package nightly

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/nightly/regress"
)

// Summary is a nightly's outcome: the nightly workflow's result and
// the JSON body its webhook receives.
type Summary struct {
	NightlyID       string            `json:"nightly_id"`
	SweepID         string            `json:"sweep_id"`
	Night           time.Time         `json:"night"`
	Baseline        string            `json:"baseline"`
	Points          int               `json:"points"`
	Compared        int               `json:"compared"`
	NoComparable    []string          `json:"no_comparable_baseline,omitempty"`
	Counts          map[string]int    `json:"counts"` // point statuses
	Regressions     int               `json:"regressions"`
	RegressedPoints []string          `json:"regressed_points"`
	Findings        []regress.Finding `json:"findings"`
	ReportURI       string            `json:"report_uri,omitempty"`
	// ImageChanges names the points that run another image than their
	// baseline; SourceCommit the commit a git-sourced schedule planned
	// from; CheckFailures why no point ran (the configs failed the check).
	ImageChanges  []ImageChange `json:"image_changes,omitempty"`
	SourceCommit  string        `json:"source_commit,omitempty"`
	CheckFailures []string      `json:"check_failures,omitempty"`
	// Phase is PhaseForecast on the post at the start of a night (the
	// forecast, before any point ran); empty on the summary at its end.
	Phase string `json:"phase,omitempty"`
	// Forecast is the night's forecast (a schedule created with
	// --forecast), or ForecastError why there is none;
	// ForecastWebhookError says the start-of-night post failed.
	Forecast             *forecast.Brief `json:"forecast,omitempty"`
	ForecastError        string          `json:"forecast_error,omitempty"`
	ForecastWebhookError string          `json:"forecast_webhook_error,omitempty"`
}

// PhaseForecast marks the webhook post at the start of a night.
const PhaseForecast = "forecast"

// WebhookRequest posts a nightly's summary, as JSON, to a URL.
type WebhookRequest struct {
	URL     string  `json:"url"`
	Summary Summary `json:"summary"`
}

// ErrWebhookRejected is the error type of a webhook that answered with a
// client error: retrying the same body will not help.
const ErrWebhookRejected = "WebhookRejected"

// PostWebhook POSTs the summary as JSON; 2xx is success, other 4xx (but
// 408 and 429) fail for good, anything else is retried by the activity's
// policy.
func (a *Activities) PostWebhook(ctx context.Context, req WebhookRequest) error {
	body, err := json.Marshal(req.Summary)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("webhook: %v", err), ErrWebhookRejected, err)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Webhook URLs often embed a token: errors name only scheme and host.
	where := redactURL(req.URL)
	hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, req.URL, bytes.NewReader(body))
	if err != nil {
		return temporal.NewNonRetryableApplicationError("webhook "+where+": invalid URL", ErrWebhookRejected, nil)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("User-Agent", "sweepflow-nightly")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return temporal.NewApplicationError(fmt.Sprintf("webhook %s: %v", where, err), string(failure.ErrTransient))
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return nil
	case c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("webhook %s: HTTP %d: %s", where, c, bytes.TrimSpace(snippet)), ErrWebhookRejected, nil)
	default:
		return temporal.NewApplicationError(fmt.Sprintf("webhook %s: HTTP %d: %s", where, c, bytes.TrimSpace(snippet)), string(failure.ErrTransient))
	}
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsable URL)"
	}
	return u.Scheme + "://" + u.Host + "/..."
}
