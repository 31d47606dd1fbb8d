package srtlaunch

import (
	"sort"
	"strings"

	"github.com/sweepflow/sweepflow/config"
)

// Our own setup preamble for workers and frontends. srt-slurm also runs a
// setup script and installs dynamo before the engine starts (and fingerprints
// the container); its script text is its own, so this is a functional
// equivalent written here and the reference test does not compare it.

func installCommand(s *spec) string {
	src := s.Dynamo.Source
	switch src.Kind {
	case config.SourceWheel:
		// srt-slurm's runtime script (mounted at /srtctl-runtime) installs the
		// staged ai-dynamo and ai-dynamo-runtime wheels named by DYNAMO_VERSION.
		return "python3 /srtctl-runtime/dynamo_wheels.py install"
	case config.SourcePyPI:
		v := src.Value
		return "pip install --break-system-packages --quiet --extra-index-url https://pypi.nvidia.com ai-dynamo-runtime==" + v + " ai-dynamo==" + v
	default:
		ref := src.Value // a commit; the repository's head for top_of_tree
		if src.Kind == config.SourceTopOfTree {
			ref = "main"
		}
		// A source build: the runtime bindings need maturin, then the package.
		return "pip install --break-system-packages --quiet maturin && rm -rf /tmp/sweepflow-dynamo && " +
			"git clone https://github.com/ai-dynamo/dynamo.git /tmp/sweepflow-dynamo && cd /tmp/sweepflow-dynamo && git checkout " + shQuote(ref) +
			" && (cd lib/bindings/python && maturin build --release -o /tmp/sweepflow-dynamo-wheels) && " +
			"pip install --break-system-packages /tmp/sweepflow-dynamo-wheels/*.whl && pip install --break-system-packages . && cd /"
	}
}

func preambleParts(s *spec, install bool) []string {
	var parts []string
	if s.SetupScript != "" {
		q := shQuote(s.SetupScript)
		parts = append(parts, "if [ -f /configs/"+q+" ]; then bash /configs/"+q+"; elif [ -f /configs/patches/"+q+" ]; then bash /configs/patches/"+q+"; else echo 'setup script "+strings.ReplaceAll(s.SetupScript, "'", "")+" not found' >&2; fi")
	}
	if install {
		// One install per container even when several steps share it.
		parts = append(parts, "( flock -x 9; [ -f /tmp/.sweepflow-dynamo-installed ] || { "+installCommand(s)+" && touch /tmp/.sweepflow-dynamo-installed; } ) 9>/tmp/.sweepflow-dynamo-install.lock")
	}
	return parts
}

func ourPreamble(s *spec) *string {
	parts := preambleParts(s, s.installsDynamo())
	if len(parts) == 0 {
		return nil
	}
	p := strings.Join(parts, " && ")
	return &p
}

func frontendPreamble(s *spec) *string {
	parts := preambleParts(s, s.Dynamo.Install)
	if len(parts) == 0 {
		return nil
	}
	p := strings.Join(parts, " && ")
	return &p
}

// sortStrings sorts like Python's sorted() on str keys (code point order).
func sortStrings(xs []string) { sort.Strings(xs) }
