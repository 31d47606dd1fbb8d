package errtext

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFirstLineAndFolded(t *testing.T) {
	err := errors.Join(errors.New("recipe a.yaml: line 3: field tp: want an int"), errors.New("recipe b.yaml:  line 9"))
	assert.Equal(t, "recipe a.yaml: line 3: field tp: want an int", FirstLine(err))
	assert.Equal(t, "recipe a.yaml: line 3: field tp: want an int recipe b.yaml: line 9", Folded(err))
	assert.Equal(t, "one", FirstLine(errors.New("one")))
	one := errors.New("one")
	assert.Same(t, one, FirstLineError(one), "a one-line error keeps its chain")
	assert.Equal(t, "recipe a.yaml: line 3: field tp: want an int", FirstLineError(err).Error())
}
