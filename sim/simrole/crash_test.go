package simrole

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/failure"
)

// Each injected crash prints a tail the built-in signatures classify as the
// crash it names, and the worker role fails; other roles ignore it.
func TestCrashTailsMatchTheirSignatures(t *testing.T) {
	for _, name := range Crashes() {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			env := map[string]string{EnvCrash: name}
			err := Run(context.Background(), RoleWorker, []string{"python3", "-m", "sglang.launch_server", "--model-path", "/m"},
				Options{Getenv: func(k string) string { return env[k] }, Environ: []string{}, Stdout: &out, Stderr: &out})
			require.Error(t, err)
			f, ok := failure.Builtin().Match(out.String())
			require.True(t, ok, out.String())
			assert.Equal(t, failure.Class(name), f.Class)
		})
	}
	var out bytes.Buffer
	err := Run(context.Background(), RoleWorker, []string{"python3"}, Options{Getenv: func(k string) string {
		if k == EnvCrash {
			return "disk-full"
		}
		return ""
	}, Environ: []string{}, Stdout: &out, Stderr: &out})
	require.True(t, errors.Is(err, ErrUsage), "%v", err)
	assert.Contains(t, err.Error(), "want one of cuda-oom, gpu-xid, nccl")
}
