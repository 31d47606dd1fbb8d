package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Rendered is what a launch needs: the processes in launch order and the
// files srt-slurm writes into the log directory (mounted at /logs) before
// it starts them, by file name.
type Rendered struct {
	Processes []*Process        `json:"processes"`
	Files     map[string]string `json:"files"`
	// Frontend is frontend.type: dynamo (frontends answer /health) or
	// sglang (routers answer /workers).
	Frontend string `json:"-"`
}

// nginxTemplate is srt-slurm's nginx.conf template, read from the checkout
// the job runs (its text is srt-slurm's, so we render it rather than keep a
// copy): Options.TemplateDir, else <SrtRoot>/src/srtctl/templates.
func nginxTemplate(opt Options) (string, error) {
	dir := opt.TemplateDir
	if dir == "" {
		dir = filepath.Join(opt.Paths.SrtRoot, "src", "srtctl", "templates")
	}
	data, err := os.ReadFile(filepath.Join(dir, "nginx.conf.j2"))
	if err != nil {
		return "", err
	}
	return string(data), nil
}

// nginxConf renders nginx.conf for nginx on the head in front of the
// frontends (srt-slurm FrontendStageMixin._generate_nginx_config). Without
// srt-slurm's template (no checkout on this host) it writes sweepflow's own
// equivalent: same upstreams, ports and keepalive, its own wording.
func nginxConf(s *spec, opt Options, hosts []string, backendPort, listenPort int) (string, error) {
	vars := map[string]any{
		"frontend_hosts": hosts, "backend_port": backendPort, "listen_port": listenPort,
		"nginx_raise_ulimit": s.nginxRaiseUlimit, "nginx_session_affinity": s.nginxSessionAffinity,
		"nginx_session_affinity_header": s.nginxAffinityHeader, "nginx_keepalive_timeout": s.nginxKeepalive,
	}
	if tpl, err := nginxTemplate(opt); err == nil {
		out, err := jinjaRender(tpl, vars)
		if err != nil {
			return "", fmt.Errorf("srt-slurm nginx.conf.j2: %v", err)
		}
		return out, nil
	}
	var sb strings.Builder
	sb.WriteString("# Written by sweepflow: nginx in front of the dynamo frontends (srt-slurm's template was not found).\n")
	sb.WriteString("worker_processes auto;\n")
	if s.nginxRaiseUlimit {
		sb.WriteString("worker_rlimit_nofile 1048576;\n")
	}
	sb.WriteString("events { worker_connections 65535; multi_accept on; use epoll; }\nhttp {\n  client_max_body_size 45m;\n  access_log off;\n")
	key := "$http_" + strings.ReplaceAll(strings.ToLower(s.nginxAffinityHeader), "-", "_")
	if s.nginxSessionAffinity {
		sb.WriteString("  map " + key + " $frontend_hash_key {\n    default " + key + ";\n    \"\" $request_id;\n  }\n")
	}
	sb.WriteString("  keepalive_timeout " + s.nginxKeepalive + ";\n  upstream backend_servers {\n")
	if s.nginxSessionAffinity {
		sb.WriteString("    hash $frontend_hash_key consistent;\n")
	}
	for _, h := range hosts {
		fmt.Fprintf(&sb, "    server %s:%d;\n", h, backendPort)
	}
	sb.WriteString("    keepalive 512;\n    keepalive_timeout " + s.nginxKeepalive + ";\n  }\n")
	fmt.Fprintf(&sb, "  server {\n    listen %d;\n    location / {\n      proxy_pass http://backend_servers;\n", listenPort)
	sb.WriteString("      proxy_buffering off;\n      proxy_read_timeout 24h;\n      proxy_send_timeout 24h;\n")
	sb.WriteString("      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n    }\n  }\n}\n")
	return sb.String(), nil
}
