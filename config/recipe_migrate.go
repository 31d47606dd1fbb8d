package config

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config/strictyaml"
)

// MigrateRecipe rewrites a schema-1 recipe (a plain file or an override file
// with base and variants) in schema 2, as srt-slurm 2.x's `srtctl migrate`
// does (src/srtctl/core/migrate.py): per-role resources, environments and
// engine configs fold into roles, dedicated-node flags into placement,
// infra into the etcd and NATS services, backend.mooncake_kv_store into a
// mooncake-master service, dynamo's install fields into dynamo.source,
// backend into engine, and benchmark fields the benchmark type never reads
// are dropped. The result resolves to the recipe the original resolves to.
// Two places differ from srt-slurm's migration, so that it does: schema 1's
// kv_events_config: true enables prefill and decode only (v1.0.68's
// meaning), and frontend.type sglang becomes sglang-router.
func MigrateRecipe(display string, data []byte) ([]byte, error) {
	root, err := strictyaml.Parse(display, data)
	if err != nil {
		return nil, err
	}
	var errs strictyaml.Errors
	d := &decoder{&strictyaml.Decoder{File: display, Errs: &errs}}
	if _, err := d.recipeSchema(root); err != nil {
		return nil, err
	}
	root = deepCopy(root)
	if root.Kind != yaml.MappingNode {
		return nil, &strictyaml.Error{Pos: d.Pos(root), Msg: "expected a mapping, got " + strictyaml.KindName(root)}
	}
	base := root
	variants := []*yaml.Node{root}
	overrides := map[*yaml.Node]bool{}
	if b := mapGet(root, "base"); b != nil && b.Kind == yaml.MappingNode {
		base, variants = b, []*yaml.Node{b}
		for i := 0; i+1 < len(root.Content); i += 2 {
			k, v := root.Content[i].Value, root.Content[i+1]
			if (strings.HasPrefix(k, "override_") || strings.HasPrefix(k, "zip_override_")) && v.Kind == yaml.MappingNode {
				variants = append(variants, v)
				overrides[v] = true
			}
		}
	}
	for _, v := range variants {
		engineKey := migrateEngineKey(v, base)
		migrateRoles(v, engineKey)
		for _, b := range [][3]string{{"frontend", "orchestrator_placement", "dedicated_node"}, {"benchmark", "client_placement", "client_dedicated_node"}} {
			if sec := mapGet(v, b[0]); sec != nil && sec.Kind == yaml.MappingNode {
				migratePlacement(sec, b[1], b[2])
			}
		}
		migrateInfra(v, base, overrides[v])
		migrateDynamoSource(v)
		migrateBenchmark(v, base)
		migrateMooncake(v)
		migrateEngine(v, base, engineKey)
		if fe := mapGet(v, "frontend"); fe != nil {
			if t := mapGet(fe, "type"); t != nil && t.Kind == yaml.ScalarNode && t.Value == FrontendSGLang {
				t.Value = FrontendSGLangRouter
			}
		}
		for _, k := range []string{"resources", "dynamo", "frontend"} {
			if n := mapGet(v, k); n != nil && n.Kind == yaml.MappingNode && len(n.Content) == 0 {
				n.Style = yaml.FlowStyle // kept as {}: a variant's null may delete it
			}
		}
	}
	if i := keyIndex(root, "schema"); i >= 0 {
		root.Content[i+1] = scalarNode("2")
	} else {
		root.Content = append([]*yaml.Node{scalarNode("schema"), scalarNode("2")}, root.Content...)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("%s: writing schema 2: %v", display, err)
	}
	return b.Bytes(), enc.Close()
}

// scalarNode is a plain scalar (typed as YAML reads it).
func scalarNode(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

func keyIndex(m *yaml.Node, key string) int {
	if m == nil || m.Kind != yaml.MappingNode {
		return -1
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	return -1
}

// popKey removes key from m and returns its key and value nodes.
func popKey(m *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	i := keyIndex(m, key)
	if i < 0 {
		return nil, nil
	}
	k, v := m.Content[i], m.Content[i+1]
	m.Content = append(m.Content[:i:i], m.Content[i+2:]...)
	return k, v
}

// insertAfter puts key: val into m after the key after ("" or missing: at the end).
func insertAfter(m *yaml.Node, after string, k, v *yaml.Node) {
	i := keyIndex(m, after)
	if i < 0 {
		m.Content = append(m.Content, k, v)
		return
	}
	m.Content = slices.Insert(m.Content, i+2, k, v)
}

// childMap returns m[key] as a mapping, created after the key after if missing.
func childMap(m *yaml.Node, key, after string) *yaml.Node {
	if c := mapGet(m, key); c != nil && c.Kind == yaml.MappingNode {
		return c
	}
	c := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if i := keyIndex(m, key); i >= 0 {
		m.Content[i+1] = c
		return c
	}
	insertAfter(m, after, scalarNode(key), c)
	return c
}

// moveKey moves src[key] to dst[newKey], keeping the value node (and its comments).
func moveKey(src *yaml.Node, key string, dst *yaml.Node, newKey string) {
	k, v := popKey(src, key)
	if k == nil {
		return
	}
	k.Value = newKey
	if i := keyIndex(dst, newKey); i >= 0 {
		dst.Content[i+1] = v
		return
	}
	dst.Content = append(dst.Content, k, v)
}

func isTrue(n *yaml.Node) bool {
	v, err := strictyaml.ScalarValue(strictyaml.Deref(n))
	return err == nil && v == true
}

func migrateEngineKey(v, base *yaml.Node) string {
	for _, src := range []*yaml.Node{v, base} {
		if t := mapGet(mapGet(src, "backend"), "type"); t != nil && t.Value != "" && !strictyaml.IsNull(t) {
			return t.Value + "_config"
		}
	}
	if be := mapGet(v, "backend"); be != nil {
		for _, k := range []string{"sglang_config", "vllm_config", "trtllm_config", "mocker_config", "atom_config"} {
			if keyIndex(be, k) >= 0 {
				return k
			}
		}
	}
	return "sglang_config"
}

func migrateRoles(v *yaml.Node, engineKey string) {
	res, be := mapGet(v, "resources"), mapGet(v, "backend")
	cfg := mapGet(be, engineKey)
	var roles *yaml.Node
	for _, role := range RoleNames {
		mode := (&Role{Name: role}).Mode()
		type move struct {
			src      *yaml.Node
			key, new string
		}
		var moves []move
		for _, m := range [][2]string{{role + "_nodes", "nodes"}, {role + "_workers", "workers"}, {"gpus_per_" + role, "gpus"}} {
			if keyIndex(res, m[0]) >= 0 {
				moves = append(moves, move{res, m[0], m[1]})
			}
		}
		for _, m := range [][2]string{{mode + "_environment", "env"}, {mode + "_extra_args", "extra_args"}} {
			if keyIndex(be, m[0]) >= 0 {
				moves = append(moves, move{be, m[0], m[1]})
			}
		}
		if keyIndex(cfg, mode) >= 0 {
			moves = append(moves, move{cfg, mode, "args"})
		}
		if len(moves) == 0 {
			continue
		}
		if roles == nil {
			after := ""
			if keyIndex(v, "backend") >= 0 {
				after = "backend"
			} else if keyIndex(v, "resources") >= 0 {
				after = "resources"
			}
			roles = childMap(v, "roles", after)
		}
		spec := childMap(roles, role, "")
		for _, m := range moves {
			if keyIndex(spec, m.new) >= 0 {
				popKey(m.src, m.key)
				continue
			}
			moveKey(m.src, m.key, spec, m.new)
		}
		// Schema 2 spells decode_nodes: 0 (share the prefill nodes) as colocate.
		if n := mapGet(spec, "nodes"); role == RoleDecode && n != nil && n.Kind == yaml.ScalarNode {
			if x, err := strictyaml.ScalarValue(n); err == nil && x == int64(0) {
				spec.Content[keyIndex(spec, "nodes")+1] = scalarNode(NodeColocate)
			}
		}
	}
	if cfg != nil && cfg.Kind == yaml.MappingNode && len(cfg.Content) == 0 {
		popKey(be, engineKey)
	}
}

func migratePlacement(sec *yaml.Node, placeKey, dedicatedKey string) {
	if keyIndex(sec, placeKey) < 0 && keyIndex(sec, dedicatedKey) < 0 {
		return
	}
	_, ded := popKey(sec, dedicatedKey)
	_, place := popKey(sec, placeKey)
	node := NodeHead
	if place != nil && !strictyaml.IsNull(place) {
		node = place.Value
	}
	if ded != nil && isTrue(ded) {
		node = NodeDedicated
	}
	childMap(sec, "placement", "").Content = []*yaml.Node{scalarNode("node"), scalarNode(node)}
}

// serviceEntry returns the services entry named name, appended if missing.
func serviceEntry(services *yaml.Node, name string) *yaml.Node {
	for _, e := range services.Content {
		if n := mapGet(e, "name"); n != nil && n.Value == name {
			return e
		}
	}
	e := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{scalarNode("name"), scalarNode(name), scalarNode("type"), scalarNode(name)}}
	services.Content = append(services.Content, e)
	return e
}

func servicesList(v *yaml.Node, near string) *yaml.Node {
	if s := mapGet(v, "services"); s != nil && s.Kind == yaml.SequenceNode {
		return s
	}
	s := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	insertAfter(v, near, scalarNode("services"), s)
	return s
}

func setPlacement(e *yaml.Node, node string) {
	childMap(e, "placement", "").Content = []*yaml.Node{scalarNode("node"), scalarNode(node)}
}

// migrateInfra folds infra into etcd and NATS services, but only where the
// frontend uses that discovery plane (dynamo); under a router that runs
// without it the payload knob is dropped and a dedicated node stays in the
// schema-1 spelling, as srt-slurm's migration leaves it.
func migrateInfra(v, base *yaml.Node, override bool) {
	i := keyIndex(v, "infra")
	if i < 0 {
		return
	}
	infra := v.Content[i+1]
	if strictyaml.IsNull(infra) {
		// A variant deleting the base's infra: the default placement, spelled
		// out so the variant's list replaces the base's services. (srt-slurm's
		// migration leaves the null under a router, where it no longer
		// deletes anything.)
		if override {
			services := servicesList(v, "infra")
			for _, name := range []string{"etcd", "nats"} {
				setPlacement(serviceEntry(services, name), NodeInfra)
			}
		}
		popKey(v, "infra")
		return
	}
	plane := true
	for _, src := range []*yaml.Node{v, base} {
		if t := mapGet(mapGet(src, "frontend"), "type"); t != nil && !strictyaml.IsNull(t) {
			plane = t.Value == FrontendDynamo
			break
		}
	}
	if !plane {
		if infra.Kind == yaml.MappingNode {
			popKey(infra, "nats_max_payload_mb")
			if ded := mapGet(infra, "etcd_nats_dedicated_node"); ded != nil && !isTrue(ded) {
				popKey(infra, "etcd_nats_dedicated_node")
			}
			if len(infra.Content) == 0 {
				popKey(v, "infra")
			}
		}
		return
	}
	if infra.Kind != yaml.MappingNode {
		return
	}
	var dedicated *bool
	if _, n := popKey(infra, "etcd_nats_dedicated_node"); n != nil {
		b := isTrue(n)
		dedicated = &b
	}
	if _, p := popKey(infra, "placement"); p != nil {
		b := mapGet(p, "node") != nil && mapGet(p, "node").Value == NodeDedicated
		dedicated = &b
	}
	_, payload := popKey(infra, "nats_max_payload_mb")
	if (dedicated != nil && *dedicated) || payload != nil || (dedicated != nil && override) {
		services := servicesList(v, "infra")
		if dedicated != nil {
			node := NodeInfra
			if *dedicated {
				node = NodeDedicated
			}
			for _, name := range []string{"etcd", "nats"} {
				setPlacement(serviceEntry(services, name), node)
			}
		}
		if payload != nil {
			opts := childMap(serviceEntry(services, "nats"), "options", "")
			opts.Content = append(opts.Content, scalarNode("max_payload_mb"), payload)
		}
	}
	if len(infra.Content) == 0 {
		popKey(v, "infra")
	}
}

func migrateDynamoSource(v *yaml.Node) {
	dy := mapGet(v, "dynamo")
	if dy == nil || dy.Kind != yaml.MappingNode || keyIndex(dy, "source") >= 0 || isTrue(mapGet(dy, "top_of_tree")) {
		return
	}
	present := func(k string) bool { n := mapGet(dy, k); return n != nil && !strictyaml.IsNull(n) }
	git, wheel, version := present("hash"), present("wheel"), present("version")
	if !git && !wheel && !version {
		return
	}
	after := ""
	if keyIndex(dy, "install") >= 0 {
		after = "install"
	}
	src := childMap(dy, "source", after)
	switch {
	case git:
		moveKey(dy, "hash", src, SourceRev)
		moveKey(dy, "cargo_patches", src, "patches")
		popKey(dy, "version")
	case wheel:
		moveKey(dy, "wheel", src, SourceWheel)
		popKey(dy, "version")
	default:
		moveKey(dy, "version", src, SourcePyPI)
	}
}

func migrateBenchmark(v, base *yaml.Node) {
	b := mapGet(v, "benchmark")
	if b == nil || b.Kind != yaml.MappingNode {
		return
	}
	typ := "manual"
	if t := mapGet(b, "type"); t != nil {
		typ = t.Value
	} else if t := mapGet(mapGet(base, "benchmark"), "type"); t != nil {
		typ = t.Value
	}
	reads, known := benchmarkReads[typ]
	if !known {
		return
	}
	for i := 0; i+1 < len(b.Content); {
		k := b.Content[i].Value
		if slices.Contains(reads, k) || slices.Contains(benchmarkShared, k) {
			i += 2
			continue
		}
		b.Content = append(b.Content[:i:i], b.Content[i+2:]...)
	}
}

func migrateMooncake(v *yaml.Node) {
	be := mapGet(v, "backend")
	store := mapGet(be, "mooncake_kv_store")
	if store == nil || store.Kind != yaml.MappingNode {
		return
	}
	var specs []*yaml.Node
	if roles := mapGet(v, "roles"); roles != nil {
		for i := 1; i < len(roles.Content); i += 2 {
			if roles.Content[i].Kind == yaml.MappingNode {
				specs = append(specs, roles.Content[i])
			}
		}
	}
	env := mapGet(store, "env")
	if env != nil && len(env.Content) > 0 && len(specs) == 0 {
		return // no role to carry its environment: left as is, as srt-slurm leaves it
	}
	near := ""
	if keyIndex(v, "roles") >= 0 {
		near = "roles"
	}
	entry := serviceEntry(servicesList(v, near), "mooncake-master")
	moveKey(store, "container", entry, "container")
	moveKey(store, "master_extra_args", entry, "args")
	if keyIndex(store, "store_config") >= 0 {
		moveKey(store, "store_config", childMap(entry, "options", ""), "store_config")
	}
	if _, env := popKey(store, "env"); env != nil && env.Kind == yaml.MappingNode {
		for _, spec := range specs {
			re := childMap(spec, "env", "")
			for i := 0; i+1 < len(env.Content); i += 2 {
				k := env.Content[i].Value
				if j := keyIndex(re, k); j >= 0 {
					re.Content[j+1] = deepCopy(env.Content[i+1])
				} else {
					re.Content = append(re.Content, scalarNode(k), deepCopy(env.Content[i+1]))
				}
			}
		}
	}
	if len(store.Content) == 0 {
		popKey(be, "mooncake_kv_store")
	}
}

func migrateEngine(v, base *yaml.Node, engineKey string) {
	i := keyIndex(v, "backend")
	if i < 0 {
		return
	}
	be := v.Content[i+1]
	if be.Kind != yaml.MappingNode {
		return
	}
	specs := map[string]*yaml.Node{}
	if roles := mapGet(v, "roles"); roles != nil {
		for j := 0; j+1 < len(roles.Content); j += 2 {
			if roles.Content[j+1].Kind == yaml.MappingNode {
				specs[roles.Content[j].Value] = roles.Content[j+1]
			}
		}
	}
	var engineType *yaml.Node
	if t := mapGet(be, "type"); t != nil && !strictyaml.IsNull(t) {
		engineType = t
	} else if len(be.Content) == 0 && mapGet(base, "engine") == nil && mapGet(mapGet(base, "backend"), "type") == nil {
		// Only an emptied backend gets the implicit default spelled out, so a
		// variant's null can still delete it.
		engineType = scalarNode(strings.TrimSuffix(engineKey, "_config"))
	}
	if kv := mapGet(be, "kv_events_config"); kv != nil && len(specs) > 0 {
		switch {
		case kv.Kind == yaml.MappingNode:
			all := true
			for _, role := range RoleNames {
				mode := (&Role{Name: role}).Mode()
				val := mapGet(kv, mode)
				if val == nil && keyIndex(kv, mode) < 0 {
					continue
				}
				if spec := specs[role]; spec != nil {
					spec.Content = append(spec.Content, scalarNode("kv_events"), deepCopy(kv.Content[keyIndex(kv, mode)+1]))
				} else {
					all = false
				}
			}
			if all {
				popKey(be, "kv_events_config")
			}
		case isTrue(kv):
			for _, role := range []string{RolePrefill, RoleDecode} { // v1.0.68: true enables prefill and decode
				if spec := specs[role]; spec != nil {
					spec.Content = append(spec.Content, scalarNode("kv_events"), scalarNode("true"))
					spec.Content[len(spec.Content)-1].Tag = "!!bool"
				}
			}
			popKey(be, "kv_events_config")
		}
	}
	popKey(be, "type")
	var val *yaml.Node
	switch {
	case len(be.Content) > 0:
		val = be
		if engineType != nil {
			be.Content = append([]*yaml.Node{scalarNode("type"), engineType}, be.Content...)
		}
	case engineType != nil:
		val = engineType
	}
	k := v.Content[i]
	v.Content = append(v.Content[:i:i], v.Content[i+2:]...)
	if val != nil {
		k.Value = "engine"
		v.Content = slices.Insert(v.Content, i, k, val)
	}
}
