package deps
import (
	_ "go.temporal.io/sdk/client"
	_ "go.temporal.io/sdk/testsuite"
	_ "gopkg.in/yaml.v3"
	_ "go.uber.org/zap"
	_ "go.uber.org/zap/exp/zapslog"
	_ "github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)
