package overlay

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/config/strictyaml"
)

// manifestName marks a composed root and says what it was composed from.
const manifestName = ".sweepflow-overlay.json"

// DefaultCacheDir is where Compose keeps composed roots:
// $XDG_CACHE_HOME/sweepflow/recipes (or the platform's user cache).
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for composed recipes roots: %w", err)
	}
	return filepath.Join(d, "sweepflow", "recipes"), nil
}

// Detect reads an InferenceX checkout's layout.
func Detect(inferencex string) (Layout, error) {
	switch {
	case isDir(filepath.Join(inferencex, SubmoduleDir)):
		return PinnedTree, nil
	case isDir(filepath.Join(inferencex, RecipesDir)):
		return LauncherCopies, nil
	}
	return "", fmt.Errorf("%s is not an InferenceX checkout: it has neither %s nor %s", inferencex, RecipesDir, SubmoduleDir)
}

// Compose lays inferencex's recipes over the srt-slurm checkout srtSlurm as
// its launchers do and returns the composed root, a directory under cache
// named by its content (the same files give the same directory, which is
// never rewritten). srtSlurm may be "" for a PinnedTree checkout: its
// submodule is the srt-slurm checkout. Only srt-slurm's recipes/ and
// configs/ are taken from its checkout: what CONFIG_FILE and a recipe's
// setup_script are looked up in.
func Compose(inferencex, srtSlurm, cache string) (*Root, error) {
	ix, err := realDir(inferencex, "InferenceX checkout")
	if err != nil {
		return nil, err
	}
	layout, err := Detect(ix)
	if err != nil {
		return nil, err
	}
	if srtSlurm == "" && layout == PinnedTree {
		srtSlurm = filepath.Join(ix, SubmoduleDir)
	}
	if srtSlurm == "" {
		return nil, fmt.Errorf("InferenceX checkout %s lays chosen directories of %s over an srt-slurm checkout (runners/launch_gb200-nv.sh, launch_gb300-nv.sh); name that checkout too (--srt-slurm DIR, or srt-slurm in the cluster profile)", ix, RecipesDir)
	}
	srt, err := realDir(srtSlurm, "srt-slurm checkout")
	if err != nil {
		return nil, err
	}
	files := map[string]string{} // path in the root -> source file
	add := func(src, dst string) error { return addTree(files, src, dst) }
	if layout == LauncherCopies && !isDir(filepath.Join(srt, "recipes")) {
		return nil, fmt.Errorf("srt-slurm checkout %s has no recipes/: InferenceX's launchers of this checkout copy its recipes over srt-slurm 1.x, whose tree has one", srt)
	}
	for _, d := range []string{"recipes", "configs"} {
		if err := add(filepath.Join(srt, d), d); err != nil {
			return nil, err
		}
	}
	tree := filepath.Join(ix, filepath.FromSlash(RecipesDir))
	switch layout {
	case LauncherCopies:
		for _, c := range launcherCopies() {
			if err := add(filepath.Join(tree, filepath.FromSlash(c.From)), c.To); err != nil {
				return nil, err
			}
		}
	case PinnedTree:
		// setup_srt_slurm(): the tree into recipes/, benchmarks/multi_node/
		// srt-slurm-recipes linked to recipes/, the tree's configs/ into
		// configs/.
		if err := add(tree, "recipes"); err != nil {
			return nil, err
		}
		linked := map[string]string{}
		for p, src := range files {
			if rest, ok := strings.CutPrefix(p, "recipes/"); ok {
				linked[RecipesDir+"/"+rest] = src
			}
		}
		maps.Copy(files, linked)
		if err := add(filepath.Join(tree, "configs"), "configs"); err != nil {
			return nil, err
		}
	}
	r := &Root{Layout: layout, InferenceX: ix, SrtSlurm: srt}
	r.Dir, err = materialize(files, r, cache)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// launcherCopies is every distinct copy of every launcher's ladder.
func launcherCopies() []Copy {
	var out []Copy
	for _, b := range Branches {
		for _, c := range b.Copies {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// Open reads the composed root at dir; false for any other directory.
func Open(dir string) (*Root, bool) {
	data, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return nil, false
	}
	var r Root
	if json.Unmarshal(data, &r) != nil || r.Layout == "" {
		return nil, false
	}
	r.Dir = dir
	return &r, true
}

// addTree records every regular file under src (following links) at dst/...;
// a later call overwrites, as a later cp does. A missing src adds nothing.
func addTree(files map[string]string, src, dst string) error {
	if !isDir(src) {
		return nil
	}
	src, err := filepath.EvalSymlinks(src) // a linked directory is walked as the directory
	if err != nil {
		return err
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			return nil // a dangling link or a link to a directory: cp -r copies the link, not files
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		files[path.Join(dst, filepath.ToSlash(rel))] = p
		return nil
	})
}

// materialize writes files under cache in a directory named by their paths
// and contents, unless it already exists.
func materialize(files map[string]string, r *Root, cache string) (string, error) {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	data := make(map[string][]byte, len(files))
	h := sha256.New()
	for _, p := range paths {
		b, err := os.ReadFile(files[p])
		if err != nil {
			return "", err
		}
		data[p] = b
		sum := sha256.Sum256(b)
		fmt.Fprintf(h, "%s\x00%x\n", p, sum)
	}
	manifest, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	h.Write(manifest)
	dir := filepath.Join(cache, hex.EncodeToString(h.Sum(nil))[:20])
	if _, ok := Open(dir); ok {
		return dir, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(cache, ".compose-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for _, p := range paths {
		f := filepath.Join(tmp, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(f, data[p], 0o644); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, manifestName), append(manifest, '\n'), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process composed the same root meanwhile.
		if _, ok := Open(dir); ok {
			return dir, nil
		}
		return "", err
	}
	return dir, nil
}

func realDir(dir, what string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil || !isDir(abs) {
		if err == nil {
			err = errors.New("not a directory")
		}
		return "", fmt.Errorf("%s %s: %v", what, dir, strings.TrimPrefix(err.Error(), "lstat "+abs+": "))
	}
	return abs, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// RecipesRoot is a cluster profile's recipes root: recipes-root (or its
// srt-slurm checkout) as given, or, when the profile names an InferenceX
// checkout, the root composed from it and the srt-slurm checkout.
func RecipesRoot(c *config.Cluster) (string, error) {
	if c.InferenceX == "" {
		return c.RecipesRoot, nil
	}
	cache, err := DefaultCacheDir()
	if err != nil {
		return "", err
	}
	r, err := Compose(c.InferenceX, c.SrtSlurm, cache)
	if err != nil {
		return "", &strictyaml.Error{Pos: strictyaml.Pos{File: strictyaml.DisplayPath(c.Path)}, Field: "inferencex", Msg: err.Error()}
	}
	return r.Dir, nil
}
