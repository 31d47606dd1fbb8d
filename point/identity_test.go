package point

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func base() Deployment {
	return Deployment{Row: `{"image":"img:1","model":"m","runner":"gb200"}`, BaselineRow: `{"model":"m","runner":"gb200"}`, RecipeRef: "recipes/a.yaml", Recipe: []byte("resources: {}\n"),
		Image: "img:1", Model: "m", Launcher: "local+local/sweepflow-launch/1", Backend: "local"}
}

func TestIdentity(t *testing.T) {
	ref := New(base(), 1024)
	cases := []struct {
		name string
		mod  func(*Deployment)
		conc int
		same bool
	}{
		{"same deployment and concurrency", func(*Deployment) {}, 1024, true},
		{"concurrency changes it", func(*Deployment) {}, 768, false},
		{"recipe bytes change it", func(d *Deployment) { d.Recipe = []byte("resources: {x: 1}\n") }, 1024, false},
		{"recipe path changes it", func(d *Deployment) { d.RecipeRef = "recipes/b.yaml" }, 1024, false},
		{"image changes it", func(d *Deployment) { d.Image = "img:2" }, 1024, false},
		{"launcher changes it", func(d *Deployment) { d.Launcher = "slurm+srtctl/sweepflow-launch/1" }, 1024, false},
		{"backend changes it", func(d *Deployment) { d.Backend = "slurm" }, 1024, false},
		{"model changes it", func(d *Deployment) { d.Model = "m2" }, 1024, false},
		{"row changes it", func(d *Deployment) { d.Row = `{"model":"m","runner":"b200"}` }, 1024, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := base()
			c.mod(&d)
			got := New(d, c.conc)
			if c.same {
				assert.Equal(t, ref, got)
			} else {
				assert.NotEqual(t, ref.String(), got.String())
			}
		})
	}
}

func TestExpNameIsNotIdentity(t *testing.T) {
	// The exp-name is not hashed: two exp-names of one identity give
	// different IDs but the same ledger identity; one exp-name at two
	// concurrencies (fixed-seq-len rows) gives two of each.
	id := New(base(), 4)
	assert.NotEqual(t, ID("a_1k1k", id), ID("b_1k1k", id))
	id8 := New(base(), 8)
	assert.NotEqual(t, ID("a_1k1k", id), ID("a_1k1k", id8))
	assert.NotEqual(t, id.String(), id8.String())
}

func TestParseRoundTrip(t *testing.T) {
	id := New(base(), 1280)
	got, err := Parse(id.String())
	require.NoError(t, err)
	assert.Equal(t, id, got)
	_, err = Parse("nope")
	assert.Error(t, err)
}

func TestBaselineKeyIgnoresOnlyTheImage(t *testing.T) {
	d := base()
	k := BaselineKey(d, 64)
	d2 := base()
	d2.Image = "img:2"
	assert.Equal(t, k, BaselineKey(d2, 64), "a new image is the same point for baselines")
	assert.NotEqual(t, k, BaselineKey(d, 128))
	d3 := base()
	d3.Recipe = []byte("other")
	assert.NotEqual(t, k, BaselineKey(d3, 64))
	assert.NotEqual(t, New(d, 64).String(), New(d2, 64).String(), "but a different identity")
}
