package strictyaml

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// pairs flattens a resolved mapping into "key=value" strings, in order.
func pairs(t *testing.T, n *yaml.Node) []string {
	t.Helper()
	require.Equal(t, yaml.MappingNode, n.Kind)
	var out []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		v := n.Content[i+1]
		if v.Kind == yaml.MappingNode {
			out = append(out, n.Content[i].Value+"={")
			out = append(out, pairs(t, v)...)
			out = append(out, "}")
			continue
		}
		out = append(out, n.Content[i].Value+"="+v.Value)
	}
	return out
}

// The expected trees are what PyYAML's safe_load builds (SafeConstructor
// flatten_mapping and construct_mapping).
func TestResolvePyYAML(t *testing.T) {
	root, err := Parse("r.yaml", []byte(`base: &b {a: 1, b: 2}
other: &o {b: 20, c: 30}
one:
  <<: *b
  b: 3
list:
  <<: [*o, *b]
  d: 4
dup:
  x: 1
  y: 2
  x: 5
`))
	require.NoError(t, err)
	out, dups, err := ResolvePyYAML(root)
	require.NoError(t, err)
	got := pairs(t, out)
	assert.Equal(t, []string{"base={", "a=1", "b=2", "}", "other={", "b=20", "c=30", "}",
		"one={", "a=1", "b=3", "}", // merged keys first, the mapping's own value wins
		"list={", "a=1", "b=20", "c=30", "d=4", "}", // the list's later entries first, so the earlier ones win: b from *o
		"dup={", "x=5", "y=2", "}"}, got, "a key written twice keeps its first place and its last value")
	require.Len(t, dups, 1)
	assert.Equal(t, Duplicate{Key: "x", Line: 12, FirstLine: 10, ValueLine: 12, ParentPath: "dup"}, dups[0])
	assert.Equal(t, "dup.x", dups[0].Field())
	assert.Len(t, root.Content[9].Content, 6, "the parsed tree is left as it was (both x still there)")

	bad, err := Parse("r.yaml", []byte("a:\n  <<: 3\n"))
	require.NoError(t, err)
	_, _, err = ResolvePyYAML(bad)
	assert.ErrorContains(t, err, "a.<<: a merge key takes a mapping or a list of mappings")
}
