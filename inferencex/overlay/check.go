package overlay

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Launches refuses a lane its launcher runs without an srt-slurm recipe
// (llm-d's shell launcher), whatever the recipes root.
func Launches(launcher string, l Lane) error {
	if b, ok := BranchFor(launcher, l); ok && b.Shell != "" {
		return fmt.Errorf("runners/launch_%s.sh runs %s through %s, a shell launcher, not an srt-slurm recipe; sweepflow launches srt-slurm recipes only: to launch this key, write its deployment as an srt-slurm recipe and name it in CONFIG_FILE",
			launcher, b.When, b.Shell)
	}
	return nil
}

// Check says whether the recipe a row names (ref, its CONFIG_FILE value) is,
// in the composed root, the file the row's launcher would run: nil when it
// is (or when Branches has no ladder for launcher), else a one-line reason
// that says what the user would have to change. A PinnedTree root gives
// every key the same tree, so only the ladder's shell arms are refused.
func (r *Root) Check(launcher string, l Lane, ref string) error {
	if err := Launches(launcher, l); err != nil {
		return err
	}
	b, ok := BranchFor(launcher, l)
	if !ok || r.Layout != LauncherCopies {
		return nil
	}
	script := "runners/launch_" + launcher + ".sh"
	file, _, _ := strings.Cut(strings.TrimSpace(ref), ":")
	file = path.Clean(file)
	// The power lane is decided from InferenceX's copy of the recipe,
	// wherever the recipe ends up.
	srtRef := b.Ref
	if data, err := os.ReadFile(r.ixFile(strings.TrimPrefix(file, "recipes/"))); err == nil && usesDCGMPower(data) {
		if l.Framework != "dynamo-sglang" {
			return fmt.Errorf("recipe %s enables dcgm-power telemetry, which %s runs for FRAMEWORK=dynamo-sglang only (it exits for %s); disable the recipe's telemetry block or run it under dynamo-sglang",
				file, script, l.Framework)
		}
		if b.PowerRef != "" {
			srtRef = b.PowerRef
		}
	}
	own, ownCopy := false, ""
	for _, c := range b.Copies {
		if rest, ok := under(file, c.To); ok {
			ownCopy = path.Join(RecipesDir, c.From)
			own = own || isFile(r.ixFile(path.Join(c.From, rest)))
		}
	}
	laid := false
	for _, c := range launcherCopies() {
		if rest, ok := under(file, c.To); ok && isFile(r.ixFile(path.Join(c.From, rest))) {
			laid = true
		}
	}
	srtHas := isFile(filepath.Join(r.SrtSlurm, filepath.FromSlash(file)))
	lays := "nothing of InferenceX's"
	if len(b.Copies) > 0 {
		var dirs []string
		for _, c := range b.Copies {
			dirs = append(dirs, c.From)
		}
		lays = "InferenceX's " + strings.Join(dirs, ", ")
	}
	switch {
	case laid && !own:
		runs := "srt-slurm's own " + file
		if !srtHas {
			runs = "a recipe the srt-slurm checkout does not have"
		}
		return fmt.Errorf("recipe %s is InferenceX's only for other keys: %s lays %s over srt-slurm %s for this key (%s), so it would run %s; move the recipe under a directory this key's launcher arm copies, or name another",
			file, script, lays, srtRef, b.When, runs)
	case !laid && !srtHas && ownCopy != "":
		return fmt.Errorf("recipe %s is not in InferenceX's tree: %s lays InferenceX's %s for this key (%s) and it has no such file (deleted?); restore the recipe in InferenceX or drop the row from the master config",
			file, script, ownCopy, b.When)
	case !laid && !srtHas:
		return fmt.Errorf("recipe %s is neither laid by InferenceX for this key nor in the srt-slurm checkout %s: %s runs this key (%s) on srt-slurm %s, and a recipe only that ref has is an InferenceX data problem; add it to InferenceX's tree, or give that ref's checkout as --srt-slurm",
			file, r.SrtSlurm, script, b.When, srtRef)
	}
	return nil
}

func (r *Root) ixFile(rel string) string {
	return filepath.Join(r.InferenceX, filepath.FromSlash(RecipesDir), filepath.FromSlash(rel))
}

// under is p's path below dir ("" for dir itself), if p is inside it.
func under(p, dir string) (string, bool) {
	if p == dir {
		return "", true
	}
	rest, ok := strings.CutPrefix(p, dir+"/")
	return rest, ok
}

// usesDCGMPower is the launchers' power-lane test: a top-level telemetry
// block with the lines `  provider: dcgm-power` and `  enabled: true`.
func usesDCGMPower(data []byte) bool {
	in, provider, enabled := false, false, false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "telemetry:"):
			in = true
			continue
		case in && line != "" && line[0] != ' ':
			in = false
		}
		if in {
			provider = provider || line == "  provider: dcgm-power"
			enabled = enabled || line == "  enabled: true"
		}
	}
	return provider && enabled
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
