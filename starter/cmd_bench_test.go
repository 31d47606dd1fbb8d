package main

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBenchUsageErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"bad rate", []string{"--request-rate", "fast"}, "--request-rate"},
		{"bad concurrency", []string{"--concurrency", "0"}, "--concurrency must be >= 1"},
		{"bad deployment", []string{"--deployment", "banana"}, "--deployment"},
		{"deployment and counts", []string{"--deployment", "TP8 agg", "--total-gpus", "8"}, "exclusive"},
		{"bad ratio", []string{"--random-range-ratio", "1.5"}, "--random-range-ratio"},
		{"zero osl", []string{"--osl", "0"}, "--isl and --osl must be >= 1"},
		{"missing trace", []string{"--trace", "/nonexistent/trace.jsonl"}, "no such file"},
		{"bad extra body", []string{"--extra-body", "[1]"}, "--extra-body"},
		{"unknown flag", []string{"--nope"}, "unknown flag: --nope"},
		{"stray argument", []string{"extra"}, "unexpected argument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := benchEndpoint(context.Background(), tc.args, &stdout, &stderr)
			var ee *exitError
			require.True(t, errors.As(err, &ee), "%v", err)
			assert.Equal(t, 2, ee.code)
			assert.Contains(t, ee.msg, tc.want)
		})
	}
}
