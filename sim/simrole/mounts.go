package simrole

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
)

// Mounts maps container paths to host paths (SWEEPFLOW_SIM_MOUNTS): there is
// no container in the emulation, so a role translates /logs, /model,
// /configs, /infmax-workspace ... itself before it opens a file.
type Mounts map[string]string

// ParseMounts reads SWEEPFLOW_SIM_MOUNTS ("" is no mounts).
func ParseMounts(s string) (Mounts, error) {
	if strings.TrimSpace(s) == "" {
		return Mounts{}, nil
	}
	var m Mounts
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object of {container path: host path}: %v", EnvMounts, err)
	}
	for c, h := range m {
		if !strings.HasPrefix(c, "/") || h == "" {
			return nil, fmt.Errorf("%s: mount %q -> %q: the container path must be absolute and the host path set", EnvMounts, c, h)
		}
	}
	return m, nil
}

// Host translates a container path through the longest matching mount;
// a path under no mount is returned unchanged.
func (m Mounts) Host(p string) string {
	clean := path.Clean(p)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, c := range keys {
		cc := path.Clean(c)
		if clean == cc {
			return m[c]
		}
		if rest, ok := strings.CutPrefix(clean, strings.TrimSuffix(cc, "/")+"/"); ok {
			return path.Join(m[c], rest)
		}
	}
	return p
}
