package sim

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFlushCache: POST /flush_cache empties the prefix cache, as SGLang's
// does, so the same prompt is served cold again (issue 24, build 2).
func TestFlushCache(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{TimeScale: 0.01, Seed: 1, Deployment: mustDeployment(t, "1P1D DEP8/DEP16")})
	cachedOf := func(r streamResult) float64 {
		usage := r.events[len(r.events)-2].json["usage"].(map[string]any)
		return usage["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64)
	}
	prompt := words(1024, "f")
	first := post(t, url+"/v1/chat/completions", chatBody(prompt, 4, true))
	require.Equal(t, 200, first.status)
	assert.Zero(t, cachedOf(first))
	again := post(t, url+"/v1/chat/completions", chatBody(prompt, 4, true))
	assert.Positive(t, cachedOf(again), "the resent prompt hits the cache")

	resp, err := http.Post(url+"/flush_cache", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	cold := post(t, url+"/v1/chat/completions", chatBody(prompt, 4, true))
	assert.Zero(t, cachedOf(cold), "flushed: served cold")
}
