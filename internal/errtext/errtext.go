// Package errtext shapes an error's message for one line of output: the
// first line of a joined error, or the whole message with its line breaks
// and runs of spaces folded.
package errtext

import (
	"errors"
	"strings"
)

// FirstLine is the first line of err's message: the first error of an
// errors.Join, the headline of a multi-line report.
func FirstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// FirstLineError is err cut to its first line: err itself when its message
// has one line (its chain intact for errors.Is), else a new error.
func FirstLineError(err error) error {
	if s := err.Error(); strings.IndexByte(s, '\n') >= 0 {
		return errors.New(FirstLine(err))
	}
	return err
}

// Folded is err's whole message on one line, every run of white space one
// space.
func Folded(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
