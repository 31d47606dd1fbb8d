package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/sweepflow/sweepflow/codec"
	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/internal/testnet"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/workflows"
)

var dataRe = regexp.MustCompile(`"data":\s*"([A-Za-z0-9+/=]+)"`)

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// historyBytes returns the raw protobuf bytes of every event of a workflow,
// as the server stores them.
func (e *itEnv) historyBytes(wid string) [][]byte {
	it := e.c.GetWorkflowHistory(context.Background(), wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out [][]byte
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(e.t, err)
		b, err := proto.Marshal(ev)
		require.NoError(e.t, err)
		out = append(out, b)
	}
	require.NotEmpty(e.t, out, "no history for %s", wid)
	return out
}

// leaks counts, per needle, the events of the sweep's workflows (the sweep
// and every point) whose raw bytes contain it.
func (e *itEnv) leaks(sweepID string, needles map[string]string) map[string]int {
	wids := e.list(fmt.Sprintf(`SweepID = %q`, sweepID))
	require.Len(e.t, wids, 3, "the sweep and its 2 points")
	found := map[string]int{}
	events := 0
	for _, wid := range wids {
		for _, ev := range e.historyBytes(wid) {
			events++
			for name, needle := range needles {
				if bytes.Contains(ev, []byte(needle)) {
					found[name]++
				}
			}
		}
	}
	e.t.Logf("sweep %s: scanned %d events of %d workflows: %v", sweepID, events, len(wids), found)
	return found
}

// TestSecretsNeverInHistory runs the agg sweep twice on the dev server, with
// an HF token and an S3 secret key in the worker's environment (the serving
// processes inherit it: that is how a stage gets its credentials) and the S3
// key also planted in the point's InferenceX row, where a careless config
// would put it, so it is serialized into every point's inputs.
//
// With the payload codec on, no event of the sweep or its points contains
// the token, the key or even the points' fingerprints in plain text. The
// same run without the codec shows the fingerprint and the planted key in
// plain text (so the scan can fail), and still never the token: it only
// lives in the worker's environment. The codec server then lets the real
// Temporal CLI decode the encrypted history.
func TestSecretsNeverInHistory(t *testing.T) {
	e := newITEnv(t)
	hfToken := "hf_" + randomHex(t, 16)
	s3Key := "s3sk_" + randomHex(t, 16)
	t.Setenv("HF_TOKEN", hfToken)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3Key)

	key := make([]byte, codec.KeySize)
	_, err := rand.Read(key)
	require.NoError(t, err)
	keyFile := filepath.Join(t.TempDir(), "codec.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600))

	run := func(id string, withCodec bool) (map[string]int, string) {
		t.Setenv(codec.EnvKey, "")
		t.Setenv(codec.EnvKeyFile, "")
		if withCodec {
			t.Setenv(codec.EnvKeyFile, keyFile)
		}
		// Starter and worker both dial through temporalx.ClientOptions.
		opts, err := temporalx.ClientOptions(nil)
		require.NoError(t, err)
		require.Equal(t, withCodec, opts.DataConverter != nil, "codec on iff a key is configured")
		c, err := client.Dial(opts)
		require.NoError(t, err)
		defer c.Close()
		stop := e.startWorkerWith(c, e.workerConfig())
		defer stop()

		in, _, err := control.Build(control.Request{SweepFile: "testdata/agg-sweep.yaml", ID: id, Tuning: control.FastTuning()})
		require.NoError(t, err)
		require.Len(t, in.Points, 2)
		for i := range in.Points {
			var row map[string]any
			require.NoError(t, json.Unmarshal(in.Points[i].Row, &row))
			prefill := row["prefill"].(map[string]any)
			prefill["additional-settings"] = append(prefill["additional-settings"].([]any), "AWS_SECRET_ACCESS_KEY="+s3Key)
			in.Points[i].Row, err = json.Marshal(row)
			require.NoError(t, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		wr, err := control.Start(ctx, c, in)
		require.NoError(t, err)
		var pr workflows.SweepProgress
		require.NoError(t, wr.Get(ctx, &pr), "the sweep's result decodes with this client")
		require.Equal(t, 2, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
		fp := in.Points[0].Identity
		return e.leaks(id, map[string]string{"hf token": hfToken, "s3 key": s3Key, "fingerprint": fp}), fp
	}

	sealed, fp := run("secrets-codec", true)
	assert.Zero(t, sealed["hf token"], "HF token in an encrypted history")
	assert.Zero(t, sealed["s3 key"], "S3 key in an encrypted history")
	assert.Zero(t, sealed["fingerprint"], "a payload field in plain text in an encrypted history")

	plain, _ := run("secrets-plain", false)
	assert.Zero(t, plain["hf token"], "the token comes from the worker's environment, never through history")
	assert.Positive(t, plain["s3 key"], "without the codec the planted key is visible: the scan works")
	assert.Positive(t, plain["fingerprint"], "without the codec payloads are plain JSON: the scan works")

	// The codec server decodes for the CLI (and the Web UI), with the key.
	port := testnet.FreePort(t)
	srv := exec.Command(e.starterBin, "codec-server", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--key-file", keyFile)
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	require.NoError(t, srv.Start())
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	e.eventually("the codec server to listen", 20*time.Second, func() bool {
		resp, err := http.Post(endpoint+"/decode", "application/json", strings.NewReader(`{"payloads":[]}`))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	point := workflows.PointWorkflowID("secrets-codec", simID(t, "dsv4_p1x8_d0x8_conc1_kvdram-hicache"))
	// `temporal workflow show -o json` prints payload data as base64:
	// decode every data field and search the plain bytes.
	show := func(args ...string) string {
		out, err := exec.Command(e.temporal, append([]string{"workflow", "show", "--address", e.addr, "-w", point, "-o", "json"}, args...)...).CombinedOutput()
		require.NoError(t, err, string(out))
		var b strings.Builder
		for _, m := range dataRe.FindAllStringSubmatch(string(out), -1) {
			if d, err := base64.StdEncoding.DecodeString(m[1]); err == nil {
				b.Write(d)
			}
		}
		require.NotZero(t, b.Len(), "no payloads in the CLI's output")
		return b.String()
	}
	assert.NotContains(t, show(), fp, "the CLI without the codec sees ciphertext")
	decoded := show("--codec-endpoint", endpoint)
	assert.Contains(t, decoded, fp, "the CLI with the codec endpoint decodes the point's input")
	assert.Contains(t, decoded, s3Key, "and the planted key with it: the codec protects history, not a secret put in a config")
	assert.Contains(t, srvOut.String(), codec.KeyID(key))
}
