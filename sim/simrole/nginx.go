package simrole

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// NginxConf is what the simulated nginx takes from nginx.conf: upstream
// groups and the servers that proxy to them.
type NginxConf struct {
	Upstreams map[string]*Upstream
	Servers   []NginxServer
}

// Upstream is an `upstream NAME { server ADDR; ... }` block; HashKey is the
// `hash KEY` directive's key ("" = round robin).
type Upstream struct {
	Name    string
	Servers []string
	HashKey string
}

// NginxServer is a `server { listen PORT; location / { proxy_pass URL; } }`.
type NginxServer struct {
	Listen    []string // "8000", "0.0.0.0:8000", "[::]:8000"
	ProxyPass string   // http://UPSTREAM or http://HOST:PORT
	Line      int
}

type nginxDirective struct {
	args  []string
	block []nginxDirective
	line  int
}

// ParseNginxConf reads the subset of nginx.conf syntax srt-slurm writes
// (directives, blocks, quotes, # comments). Errors name the file and line.
func ParseNginxConf(name string, src []byte) (*NginxConf, error) {
	toks, err := nginxTokens(name, string(src))
	if err != nil {
		return nil, err
	}
	pos := 0
	ds, err := nginxBlock(name, toks, &pos, false)
	if err != nil {
		return nil, err
	}
	c := &NginxConf{Upstreams: map[string]*Upstream{}}
	var walk func(ds []nginxDirective) error
	walk = func(ds []nginxDirective) error {
		for _, d := range ds {
			switch d.args[0] {
			case "upstream":
				if len(d.args) != 2 {
					return fmt.Errorf("%s:%d: upstream needs one name", name, d.line)
				}
				u := &Upstream{Name: d.args[1]}
				for _, x := range d.block {
					switch x.args[0] {
					case "server":
						if len(x.args) < 2 {
							return fmt.Errorf("%s:%d: server needs an address", name, x.line)
						}
						u.Servers = append(u.Servers, x.args[1])
					case "hash":
						if len(x.args) >= 2 {
							u.HashKey = x.args[1]
						}
					}
				}
				if len(u.Servers) == 0 {
					return fmt.Errorf("%s:%d: upstream %s has no server", name, d.line, u.Name)
				}
				c.Upstreams[u.Name] = u
			case "server":
				s := NginxServer{Line: d.line}
				var find func(ds []nginxDirective)
				find = func(ds []nginxDirective) {
					for _, x := range ds {
						switch x.args[0] {
						case "listen":
							if len(x.args) >= 2 {
								s.Listen = append(s.Listen, x.args[1])
							}
						case "proxy_pass":
							if len(x.args) >= 2 && s.ProxyPass == "" {
								s.ProxyPass = x.args[1]
							}
						case "location":
							find(x.block)
						}
					}
				}
				find(d.block)
				if len(s.Listen) == 0 || s.ProxyPass == "" {
					return fmt.Errorf("%s:%d: server block needs listen and a location with proxy_pass", name, d.line)
				}
				c.Servers = append(c.Servers, s)
			default:
				if err := walk(d.block); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(ds); err != nil {
		return nil, err
	}
	if len(c.Servers) == 0 {
		return nil, fmt.Errorf("%s: no server block with listen and proxy_pass", name)
	}
	return c, nil
}

type nginxTok struct {
	s    string
	line int
	word bool // false for { } ;
}

func nginxTokens(name, s string) ([]nginxTok, error) {
	var out []nginxTok
	line := 1
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '{' || c == '}' || c == ';':
			out = append(out, nginxTok{s: string(c), line: line})
			i++
		case c == '"' || c == '\'':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("%s:%d: unterminated quote", name, line)
			}
			w := s[i+1 : i+1+j]
			out = append(out, nginxTok{s: w, line: line, word: true})
			line += strings.Count(w, "\n")
			i += j + 2
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\r\n{};#\"'", rune(s[j])) {
				j++
			}
			out = append(out, nginxTok{s: s[i:j], line: line, word: true})
			i = j
		}
	}
	return out, nil
}

func nginxBlock(name string, toks []nginxTok, pos *int, inBlock bool) ([]nginxDirective, error) {
	var ds []nginxDirective
	for *pos < len(toks) {
		t := toks[*pos]
		if !t.word {
			if t.s == "}" {
				if !inBlock {
					return nil, fmt.Errorf("%s:%d: unexpected }", name, t.line)
				}
				*pos++
				return ds, nil
			}
			return nil, fmt.Errorf("%s:%d: unexpected %q", name, t.line, t.s)
		}
		d := nginxDirective{line: t.line}
		for *pos < len(toks) && toks[*pos].word {
			d.args = append(d.args, toks[*pos].s)
			*pos++
		}
		if *pos >= len(toks) {
			return nil, fmt.Errorf("%s:%d: directive %q not terminated by ; or {", name, d.line, d.args[0])
		}
		switch toks[*pos].s {
		case ";":
			*pos++
		case "{":
			*pos++
			b, err := nginxBlock(name, toks, pos, true)
			if err != nil {
				return nil, err
			}
			d.block = b
		default:
			return nil, fmt.Errorf("%s:%d: unexpected }", name, toks[*pos].line)
		}
		ds = append(ds, d)
	}
	if inBlock {
		return nil, fmt.Errorf("%s: unexpected end of file, expecting }", name)
	}
	return ds, nil
}

// nginxConfPath reads `nginx -c FILE ...` from the rendered command.
func nginxConfPath(argv []string) (string, error) {
	words, err := EntryWords(argv)
	if err != nil {
		return "", fmt.Errorf("nginx: %v", err)
	}
	for i := 0; i+1 < len(words); i++ {
		if words[i] == "-c" {
			return words[i+1], nil
		}
	}
	return "/etc/nginx/nginx.conf", nil
}

func runNginx(ctx context.Context, argv []string, o Options, mounts Mounts) error {
	cpath, err := nginxConfPath(argv)
	if err != nil {
		return err
	}
	host := mounts.Host(cpath)
	src, err := os.ReadFile(host)
	if err != nil {
		return fmt.Errorf("nginx: [emerg] open() %q (host path %s) failed: %v", cpath, host, err)
	}
	conf, err := ParseNginxConf(cpath, src)
	if err != nil {
		return fmt.Errorf("nginx: [emerg] %v", err)
	}
	var servers []*server
	for i, s := range conf.Servers {
		h, err := conf.handler(s)
		if err != nil {
			return fmt.Errorf("nginx: [emerg] %s:%d: %v", cpath, s.Line, err)
		}
		for _, l := range s.Listen {
			port := l
			if _, p, err := net.SplitHostPort(l); err == nil {
				port = p
			}
			n, err := strconv.Atoi(port)
			if err != nil {
				return fmt.Errorf("nginx: [emerg] %s:%d: invalid listen %q", cpath, s.Line, l)
			}
			srv, err := listenIdle(fmt.Sprintf("nginx-%d-%d", i, n), o.bind(n), h, frontIdleTimeout)
			if err != nil {
				for _, x := range servers {
					x.ln.Close()
				}
				return fmt.Errorf("nginx: [emerg] %v", err)
			}
			servers = append(servers, srv)
		}
	}
	return serveAll(ctx, o, servers, nil)
}

// handler proxies one server block to its upstream.
func (c *NginxConf) handler(s NginxServer) (http.Handler, error) {
	u, err := url.Parse(s.ProxyPass)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("proxy_pass %q: want http://UPSTREAM or http://HOST:PORT", s.ProxyPass)
	}
	up := c.Upstreams[u.Host]
	if up == nil {
		up = &Upstream{Name: u.Host, Servers: []string{u.Host}}
	}
	proxies := make([]*streamingProxy, len(up.Servers))
	for i, a := range up.Servers {
		proxies[i] = newStreamingProxy(&url.URL{Scheme: "http", Host: a})
	}
	var rr atomic.Uint64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int((rr.Add(1) - 1) % uint64(len(proxies)))
		if key := up.HashKey; key != "" {
			if v := nginxVar(r, key); v != "" {
				h := fnv.New64a()
				_, _ = io.WriteString(h, v)
				i = int(h.Sum64() % uint64(len(proxies)))
			}
		}
		proxies[i].ServeHTTP(w, r)
	}), nil
}

// nginxVar evaluates the $http_* and $remote_addr variables a hash key uses.
func nginxVar(r *http.Request, key string) string {
	switch {
	case strings.HasPrefix(key, "$http_"):
		return r.Header.Get(strings.ReplaceAll(strings.TrimPrefix(key, "$http_"), "_", "-"))
	case key == "$remote_addr":
		h, _, _ := net.SplitHostPort(r.RemoteAddr)
		return h
	}
	return ""
}
