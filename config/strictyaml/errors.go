// Package strictyaml is the strict YAML decoding shared by the loaders in
// config and inferencex/ixconfig. A file is parsed into yaml.v3 nodes and its
// scalars are typed the way PyYAML's safe_load types them, so a file means
// the same to sweepflow as to InferenceX; every problem is collected with its
// place and rendered as "FILE:LINE: FIELD: what was expected".
package strictyaml

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Pos is a location in a config file. File is the path as it should be shown
// to a human (relative to the working directory when possible).
type Pos struct {
	File string `json:"file"`
	Line int    `json:"line"`
}

func (p Pos) String() string {
	if p.Line <= 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d", p.File, p.Line)
}

// Error is one problem found in a config file.
type Error struct {
	Pos   Pos
	Field string // dotted path of the offending field; empty for file-level problems
	Msg   string
}

func (e *Error) Error() string {
	if e.Pos.File == "" {
		if e.Field == "" {
			return e.Msg
		}
		return e.Field + ": " + e.Msg
	}
	if e.Field == "" {
		return e.Pos.String() + ": " + e.Msg
	}
	return e.Pos.String() + ": " + e.Field + ": " + e.Msg
}

// Errors is every problem found while loading. Its Error method renders the
// first one on a single line and says how many more there are, so a CLI can
// print exactly one line; callers that want all of them range over the slice.
type Errors []*Error

func (es Errors) Error() string {
	switch len(es) {
	case 0:
		return "no errors"
	case 1:
		return es[0].Error()
	default:
		return fmt.Sprintf("%s (and %d more problem%s)", es[0].Error(), len(es)-1, plural(len(es)-1))
	}
}

// Err returns es as an error, or nil when it is empty (avoids the typed-nil trap).
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Add records one problem.
func (es *Errors) Add(pos Pos, field, format string, args ...any) {
	*es = append(*es, &Error{Pos: pos, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// AddErr records err, flattening Errors and keeping *Error as is.
func (es *Errors) AddErr(err error) {
	switch e := err.(type) {
	case nil:
	case Errors:
		*es = append(*es, e...)
	case *Error:
		*es = append(*es, e)
	default:
		*es = append(*es, &Error{Msg: err.Error()})
	}
}

// CleanIOError renders a file error with the path as DisplayPath shows it.
func CleanIOError(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return fmt.Sprintf("%s %s: %v", pe.Op, DisplayPath(pe.Path), pe.Err)
	}
	return err.Error()
}

// DisplayPath shortens an absolute path to one relative to the working
// directory when it lies below it, so error lines stay readable.
func DisplayPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	wd, err := os.Getwd()
	if err != nil {
		return abs
	}
	rel, err := filepath.Rel(wd, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return abs
	}
	return rel
}
