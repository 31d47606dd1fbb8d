// Package treecopy copies a directory tree, for tests that change a copy of
// the repository's configs/ rather than the real one.
package treecopy

import (
	"io/fs"
	"os"
	"path/filepath"
)

// Copy copies the tree at src to dst. edit, when not nil, may rewrite a
// file's bytes on the way; rel is its path under src, slash-separated.
func Copy(src, dst string, edit func(rel string, data []byte) ([]byte, error)) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if edit != nil {
			if data, err = edit(filepath.ToSlash(rel), data); err != nil {
				return err
			}
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
}
