package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// The subset of the Compose specification docker-compose.yml uses. Decoding
// is strict, so a misspelt key (depend_on, healthchek) fails the test instead
// of being ignored as Compose would ignore an unknown extension.
type composeFile struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
	// The workers' shared definition (a YAML anchor).
	XWorker any `yaml:"x-worker"`
}

type service struct {
	Image       string               `yaml:"image"`
	Build       *build               `yaml:"build"`
	DependsOn   map[string]dependsOn `yaml:"depends_on"`
	Environment map[string]string    `yaml:"environment"`
	Ports       []string             `yaml:"ports"`
	Volumes     []string             `yaml:"volumes"`
	Healthcheck *healthcheck         `yaml:"healthcheck"`
	Entrypoint  []string             `yaml:"entrypoint"`
	Command     []string             `yaml:"command"`
	Restart     string               `yaml:"restart"`
	NetworkMode string               `yaml:"network_mode"`
	Pid         string               `yaml:"pid"`
}

type build struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

type dependsOn struct {
	Condition string `yaml:"condition"`
}

type healthcheck struct {
	Test        []string `yaml:"test"`
	Interval    string   `yaml:"interval"`
	Timeout     string   `yaml:"timeout"`
	Retries     int      `yaml:"retries"`
	StartPeriod string   `yaml:"start_period"`
}

// repoRoot is the repository root (this package is deploy/).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	return root
}

var (
	// ${NAME}, ${NAME:-default}, ${NAME-default}: the forms Compose
	// interpolates. A bare $NAME also interpolates, which inside a shell
	// script is almost always a bug (the script meant $$NAME), so it is
	// rejected here.
	braced  = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}`)
	nameRef = regexp.MustCompile(`^\$[A-Za-z_]`)
)

// interpolate applies Compose's variable substitution to one value: $$ is a
// literal $, ${NAME...} is looked up in env (then its default).
func interpolate(s string, env map[string]string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '$' {
			b.WriteByte(s[i])
			i++
			continue
		}
		rest := s[i:]
		switch {
		case strings.HasPrefix(rest, "$$"):
			b.WriteByte('$')
			i += 2
		case braced.MatchString(rest):
			m := braced.FindStringSubmatch(rest)
			v, set := env[m[1]]
			if m[2] == ":-" && v == "" || m[2] == "-" && !set {
				v = m[3]
			}
			b.WriteString(v)
			i += len(m[0])
		case nameRef.MatchString(rest):
			return "", fmt.Errorf("unbraced variable in %q: Compose substitutes it from the host environment; write $$ for a shell variable or ${NAME} for a Compose one", firstLine(rest))
		default:
			return "", fmt.Errorf("bad substitution in %q: write $$ for a literal $", firstLine(rest))
		}
	}
	return b.String(), nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// loadCompose reads a compose file as Compose would with the given
// environment: interpolated values, then strict decoding.
func loadCompose(path string, env map[string]string) (*composeFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var walk func(n *yaml.Node) error
	walk = func(n *yaml.Node) error {
		if n.Kind == yaml.ScalarNode {
			v, err := interpolate(n.Value, env)
			if err != nil {
				return fmt.Errorf("%s:%d: %w", path, n.Line, err)
			}
			n.Value = v
		}
		for _, c := range n.Content {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(&doc); err != nil {
		return nil, err
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	dec.KnownFields(true)
	var cf composeFile
	if err := dec.Decode(&cf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &cf, nil
}

// stackCompose is docker-compose.yml with every variable at its default.
func stackCompose(t *testing.T) *composeFile {
	t.Helper()
	cf, err := loadCompose(filepath.Join(repoRoot(t), "docker-compose.yml"), nil)
	require.NoError(t, err)
	return cf
}

// script is the shell script a one-shot service runs: entrypoint
// ["/bin/sh", "-euc"] and the script as its only command argument.
func script(t *testing.T, svc service) string {
	t.Helper()
	require.Equal(t, []string{"/bin/sh", "-euc"}, svc.Entrypoint)
	require.Len(t, svc.Command, 1)
	return svc.Command[0]
}
