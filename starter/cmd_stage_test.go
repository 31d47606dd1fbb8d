package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/staging"
)

func stageEvents(t *testing.T, out []byte) []stageEvent {
	t.Helper()
	var evs []stageEvent
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var ev stageEvent
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev), "line %q", sc.Text())
		evs = append(evs, ev)
	}
	return evs
}

func TestStageCommandJSON(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "a.safetensors"), bytes.Repeat([]byte{1}, 1000), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "config.json"), []byte(`{"x":1}`), 0o644))

	tests := []struct {
		name       string
		mutate     func()
		wantCode   int
		wantCopied int
		wantEvent  string
	}{
		{name: "first run copies", wantCopied: 2, wantEvent: "report"},
		{name: "second run skips", wantCopied: 0, wantEvent: "report"},
		{name: "source tampered", mutate: func() {
			require.NoError(t, os.WriteFile(filepath.Join(src, "config.json"), []byte(`{"x":2}`), 0o644))
			require.NoError(t, os.Remove(filepath.Join(dst, "config.json")))
		}, wantCode: exitChecksumMismatch, wantEvent: "error"},
	}
	for _, tc := range tests { // sequential: each step builds on the last
		if tc.mutate != nil {
			tc.mutate()
		}
		var stdout, stderr bytes.Buffer
		err := stageMain(context.Background(), staging.Options{Src: src, Dst: dst, Parallel: 2}, true, &stdout, &stderr, time.Now())
		evs := stageEvents(t, stdout.Bytes())
		require.NotEmpty(t, evs, tc.name)
		last := evs[len(evs)-1]
		assert.Equal(t, tc.wantEvent, last.Event, tc.name)
		if tc.wantCode != 0 {
			var ee *exitError
			require.ErrorAs(t, err, &ee, tc.name)
			assert.Equal(t, tc.wantCode, ee.code, tc.name)
			assert.True(t, last.ChecksumMismatch, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		require.NotNil(t, last.Report, tc.name)
		assert.Equal(t, tc.wantCopied, last.Report.FilesCopied, tc.name)
		// Each progress line carries the resumable state.
		prog := evs[len(evs)-2]
		require.Equal(t, "progress", prog.Event, tc.name)
		assert.Len(t, prog.Progress.Done, 2, tc.name)
	}
}

func TestStageCommandUsage(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "resume.json")
	require.NoError(t, os.WriteFile(bad, []byte("nope"), 0o644))
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "missing dst", args: []string{"--src", "/x"}, want: "--src and --dst are required"},
		{name: "stray arg", args: []string{"--src", "/x", "--dst", "/y", "extra"}, want: `unexpected argument "extra"`},
		{name: "bad parallel", args: []string{"--src", "/x", "--dst", "/y", "--parallel", "0"}, want: "--parallel 0"},
		{name: "bad resume", args: []string{"--src", "/x", "--dst", "/y", "--resume", bad}, want: "not a progress object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := runStage(tc.args)
			requireExit(t, err, 2, tc.want)
		})
	}
}
