package temporalx

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
)

// A search attribute type the server does not know is refused before any
// call (the client is lazy and points nowhere: no call may be made).
func TestSetupRejectsUnknownType(t *testing.T) {
	t.Parallel()
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	require.NoError(t, err)
	defer c.Close()
	_, err = Setup{SearchAttributes: map[string]string{"SweepID": "Keyword", "Odd": "Integer"}}.Ensure(context.Background(), c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `search attribute Odd: unknown type "Integer"`)
}
