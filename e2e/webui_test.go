package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"image"
	"image/png"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sweepflow/sweepflow/codec"
	"github.com/sweepflow/sweepflow/internal/prereq"
	"github.com/sweepflow/sweepflow/internal/testnet"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/workflows"
)

// chromiumPath finds headless Chromium (Debian's chromium, which .ci/run
// installs). Without it the test skips locally and fails under CI.
func chromiumPath(t *testing.T) string {
	for _, p := range []string{os.Getenv("SWEEPFLOW_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	prereq.Missing(t, "chromium not installed (apt-get install -y chromium); skipping the Web UI check")
	return ""
}

// newUIEnv is newITEnv with the dev server's Web UI on uiPort; extra goes
// to `temporal server start-dev`. It returns the env and the UI's base URL.
func newUIEnv(t *testing.T, uiPort int, extra ...string) (*itEnv, string) {
	return newITEnvWith(t, uiPort, extra...), fmt.Sprintf("http://127.0.0.1:%d", uiPort)
}

// chromiumFlags are webui.md's: a fresh profile each run (no stale column
// layout), no network noise, and a virtual-time budget so the single-page
// app renders before the DOM is dumped.
func chromiumRun(t *testing.T, chromium string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--hide-scrollbars", "--user-data-dir=" + t.TempDir(), "--window-size=1600,1000", "--virtual-time-budget=10000"}
	cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
	var stderr capped
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "chromium %v: %s", args, stderr.String())
	return out
}

// capped keeps the first 4 KiB of chromium's (noisy) stderr.
type capped struct{ b []byte }

func (c *capped) Write(p []byte) (int, error) {
	if n := 4096 - len(c.b); n > 0 {
		c.b = append(c.b, p[:min(n, len(p))]...)
	}
	return len(p), nil
}
func (c *capped) String() string { return string(c.b) }

var (
	rowIDRe   = regexp.MustCompile(`aria-label="Select Workflow ([^"]+)"`)
	countRe   = regexp.MustCompile(`data-testid="workflow-count"[^>]*>\s*([0-9,]+)`)
	filterErr = "There is an error with filtering Workflows"
)

// unescapeAll undoes the UI's HTML escaping, which is applied twice to the
// label ("/" arrives as "&amp;#x2F;").
func unescapeAll(s string) string {
	for {
		u := html.UnescapeString(s)
		if u == s {
			return s
		}
		s = u
	}
}

// uiList loads the workflow list with a visibility query in headless
// Chromium and returns the workflow IDs of its rows and the count header.
func uiList(t *testing.T, chromium, ui, query string) (ids []string, count string) {
	t.Helper()
	u := ui + "/namespaces/default/workflows"
	if query != "" {
		u += "?query=" + url.QueryEscape(query)
	}
	dom := string(chromiumRun(t, chromium, "--dump-dom", u))
	require.Contains(t, dom, `data-testid="workflow-count"`, "only the app shell rendered for %s", u)
	require.NotContains(t, dom, filterErr, "the UI rejected the query %s", query)
	for _, m := range rowIDRe.FindAllStringSubmatch(dom, -1) {
		ids = append(ids, unescapeAll(m[1]))
	}
	sort.Strings(ids)
	if m := countRe.FindStringSubmatch(dom); m != nil {
		count = m[1]
	}
	return ids, count
}

// TestWebUIListsAndFilters runs the agg test sweep on a dev server started
// with its Web UI, adds a point of another config key that matches no
// filter below, and checks in headless Chromium that the UI lists the sweep
// and its points, that filtering by ConfigKey shows only the matching
// points, and that a bad query shows the UI's error (so the error check can
// fail). The other point's input is AES-GCM encrypted: the UI, pointed at
// `starter codec-server`, must show it decrypted. It also saves screenshots
// (SWEEPFLOW_UI_SCREENSHOTS=dir keeps them).
func TestWebUIListsAndFilters(t *testing.T) {
	chromium := chromiumPath(t)
	uiPort, codecPort := testnet.FreePort(t), testnet.FreePort(t)
	keyFile := filepath.Join(t.TempDir(), "codec.key")
	key := bytes.Repeat([]byte{0x5a}, codec.KeySize)
	require.NoError(t, os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)), 0o600))
	codecSrv := exec.Command(starterBinary(t), "codec-server", "--listen", fmt.Sprintf("127.0.0.1:%d", codecPort),
		"--key-file", keyFile, "--ui-origin", fmt.Sprintf("http://127.0.0.1:%d", uiPort))
	codecSrv.Stdout, codecSrv.Stderr = io.Discard, io.Discard
	require.NoError(t, codecSrv.Start())
	t.Cleanup(func() { _ = codecSrv.Process.Kill(); _ = codecSrv.Wait() })
	e, ui := newUIEnv(t, uiPort, "--ui-codec-endpoint", fmt.Sprintf("http://127.0.0.1:%d", codecPort))
	e.startWorkerWith(e.c, e.workerConfig())

	out, code := e.cli("sweep", "start", "--sweep", "testdata/agg-sweep.yaml", "--fast-retries", "--json")
	require.Equal(t, 0, code, out)
	var started struct {
		SweepID string `json:"sweep_id"`
		UI      string `json:"ui"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &started))
	pr := e.wait(started.SweepID, 3*time.Minute)
	require.Equal(t, 2, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)

	aggKey := "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-agg"
	points := []string{
		workflows.PointWorkflowID(started.SweepID, simID(t, "dsv4_p1x8_d0x8_conc1_kvdram-hicache")),
		workflows.PointWorkflowID(started.SweepID, simID(t, "dsv4_p1x8_d0x8_conc4_kvdram-hicache")),
	}
	// A point of another config key (no worker polls its queue: it stays
	// Running, which the list page renders fine), started by a client with
	// the payload codec, so its input is ciphertext in history.
	other := "ui-check-other-config/dsv4_p1x8ep8dpa_d1x16ep16dpa_conc64_kvdram-hicache"
	marker := "decoded-by-the-codec-server-" + randomHex(t, 4)
	cc, err := codec.New(key)
	require.NoError(t, err)
	conv := codec.NewConverters(cc)
	sealed, err := client.NewClientFromExisting(e.c, client.Options{DataConverter: conv.DataConverter, FailureConverter: conv.FailureConverter})
	require.NoError(t, err)
	defer sealed.Close()
	otherRun, err := sealed.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: other, TaskQueue: "ui-check-nobody-polls", StaticSummary: "a point of another config key",
		TypedSearchAttributes: temporal.NewSearchAttributes(temporalx.SAKind.ValueSet(temporalx.KindPoint),
			temporalx.SASweepID.ValueSet("ui-check-other-config"),
			temporalx.SAConfigKey.ValueSet("dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg"),
			temporalx.SAPointStatus.ValueSet(point.StatusPending)),
	}, "PointWorkflow", map[string]string{"note": marker})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.c.TerminateWorkflow(context.Background(), other, "", "test done") })
	all := append([]string{started.SweepID, other}, points...)
	sort.Strings(all)
	e.eventually("visibility to list all 4 workflows", 30*time.Second, func() bool { return len(e.list("")) == 4 })

	// The link `sweep start` prints is the SweepID filter.
	sweepQuery := fmt.Sprintf(`SweepID="%s"`, started.SweepID)
	assert.Contains(t, started.UI, url.QueryEscape(sweepQuery))

	cases := []struct {
		name  string
		query string
		want  []string
	}{
		{"everything", "", all},
		{"the sweep and its points", sweepQuery, append([]string{started.SweepID}, points...)},
		{"points of the agg config key only", fmt.Sprintf(`ConfigKey="%s"`, aggKey), points},
		{"sweeps only", `SweepflowKind="sweep"`, []string{started.SweepID}},
		{"compound: completed agg points", fmt.Sprintf(`ConfigKey="%s" AND PointStatus="completed"`, aggKey), points},
		{"no match", `ConfigKey="no-such-config"`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := append([]string(nil), tc.want...)
			sort.Strings(want)
			ids, count := uiList(t, chromium, ui, tc.query)
			assert.Equal(t, want, ids, "rows for %q", tc.query)
			assert.Equal(t, strconv.Itoa(len(want)), count, "workflow-count for %q", tc.query)
		})
	}

	// The error banner is real: an unknown attribute shows it.
	dom := string(chromiumRun(t, chromium, "--dump-dom", ui+"/namespaces/default/workflows?query="+url.QueryEscape(`Bogus="x"`)))
	assert.Contains(t, dom, filterErr)

	// The Web UI decrypts through the codec server. The detail page of a
	// running workflow never settles under --virtual-time-budget (history
	// long-poll, webui.md), so the workflow is closed first.
	require.NoError(t, e.c.TerminateWorkflow(context.Background(), other, "", "ui check"))
	for _, ev := range e.historyBytes(other) {
		require.NotContains(t, string(ev), marker, "the input is ciphertext in history")
	}
	detail := fmt.Sprintf("%s/namespaces/default/workflows/%s/%s/history", ui, url.PathEscape(other), otherRun.GetRunID())
	dom = string(chromiumRun(t, chromium, "--dump-dom", detail))
	assert.True(t, strings.Contains(dom, marker), "the Web UI must show the input decrypted by the codec server (%s)", detail)

	// Screenshots of the filtered list, checked to be a rendered page (not
	// a blank or a shell).
	dir := os.Getenv("SWEEPFLOW_UI_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	list := ui + "/namespaces/default/workflows?query="
	for name, u := range map[string]string{"ui-sweep.png": list + url.QueryEscape(sweepQuery),
		"ui-configkey.png": list + url.QueryEscape(fmt.Sprintf(`ConfigKey="%s"`, aggKey)), "ui-codec-detail.png": detail} {
		shot := filepath.Join(dir, name)
		chromiumRun(t, chromium, "--screenshot="+shot, u)
		f, err := os.Open(shot)
		require.NoError(t, err)
		img, err := png.Decode(f)
		f.Close()
		require.NoError(t, err, name)
		assert.Equal(t, image.Pt(1600, 1000), img.Bounds().Size(), name)
		assert.Greater(t, distinctColours(img, 64), 20, "%s looks blank", name)
		t.Logf("screenshot %s", shot)
	}
}

// distinctColours counts colours in a grid sample of img (up to limit).
func distinctColours(img image.Image, limit int) int {
	seen := map[[3]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[[3]uint32{r >> 8, g >> 8, bl >> 8}] = true
			if len(seen) >= limit {
				return len(seen)
			}
		}
	}
	return len(seen)
}
