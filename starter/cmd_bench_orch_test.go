package main

import (
	"context"
	"io"
	"testing"
)

const benchSweepFile = "../configs/sweeps/dsv4-gb200-agentx.yaml"

func TestBenchOrchUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no points", nil, "--points is required"},
		{"zero runs", []string{"--points", "5", "--runs", "0"}, "--runs must be positive"},
		{"zero parallel", []string{"--points", "5", "--parallel", "0"}, "--parallel must be positive"},
		{"one poller", []string{"--points", "5", "--pollers", "1"}, "--pollers must be at least 2"},
		{"zero per deployment", []string{"--points", "5", "--per-deployment", "0"}, "--per-deployment must be positive"},
		{"negative history limit", []string{"--points", "5", "--history-limit", "-1"}, "--history-limit must not be negative"},
		{"missing sweep", []string{"--points", "5", "--sweep", "testdata/no-such-sweep.yaml"}, "--sweep names the plan"},
		{"positional", []string{"extra"}, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := benchOrchestration(context.Background(), tt.args, io.Discard, io.Discard)
			requireExit(t, err, 2, tt.want)
		})
	}
}
