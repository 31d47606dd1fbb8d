package simrole

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
)

// Infra ports on the head node, as srt-slurm's setup_head.py uses them.
const (
	EtcdPort = 2379
	NATSPort = 4222
)

// infraArgs are setup_head.py's flags.
type infraArgs struct {
	name, logDir string
	natsMaxMB    int
}

func parseInfra(argv []string) (infraArgs, error) {
	var a infraArgs
	fa, err := parseFlags(flagsAfterEntry(argv))
	if err != nil {
		return a, fmt.Errorf("setup_head.py: error: %v", err)
	}
	var e1, e2, e3 error
	a.name, _, e1 = fa.str("", "name")
	a.logDir, _, e2 = fa.str("", "log-dir")
	a.natsMaxMB, _, e3 = fa.int(64, "nats-max-payload-mb")
	if err := errors.Join(e1, e2, e3); err != nil {
		return a, fmt.Errorf("setup_head.py: error: %v", err)
	}
	if a.natsMaxMB <= 0 {
		return a, fmt.Errorf("setup_head.py: error: argument --nats-max-payload-mb: must be > 0, got %d", a.natsMaxMB)
	}
	return a, nil
}

func runInfra(ctx context.Context, argv []string, o Options, mounts Mounts) error {
	a, err := parseInfra(argv)
	if err != nil {
		return err
	}
	httpAddr, natsAddr := o.InfraHTTP, o.InfraNATS
	if httpAddr == "" {
		httpAddr = o.bind(EtcdPort)
	}
	if natsAddr == "" {
		natsAddr = o.bind(NATSPort)
	}
	reg := NewRegistry()
	etcd, err := listen("etcd", httpAddr, reg.Handler())
	if err != nil {
		return err
	}
	nl, err := net.Listen("tcp", natsAddr)
	if err != nil {
		etcd.ln.Close()
		return fmt.Errorf("nats: listen %s: %w", natsAddr, err)
	}
	fmt.Fprintf(o.Stdout, "sweepflow-sim: SIMULATED infra for %q (log dir %s, nats max payload %d MB)\n", a.name, mounts.Host(a.logDir), a.natsMaxMB)
	natsDone := make(chan error, 1)
	ns := &natsServer{conns: map[net.Conn]bool{}}
	go func() { natsDone <- ns.serve(nl, int64(a.natsMaxMB)<<20) }()
	o2 := o
	ready := o.Ready
	o2.Ready = func(addrs map[string]string) {
		addrs["nats"] = nl.Addr().String()
		fmt.Fprintf(o.Stdout, "sweepflow-sim: SIMULATED nats listening on %s\n", nl.Addr())
		if ready != nil {
			ready(addrs)
		}
	}
	err = serveAll(ctx, o2, []*server{etcd}, natsDone)
	nl.Close()
	ns.closeAll()
	return err
}

// serveNATS accepts NATS clients: it greets with INFO and answers PING, so
// a client's connect succeeds; messages are not routed (the simulator's
// request plane is HTTP).
type natsServer struct {
	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func (s *natsServer) closeAll() {
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *natsServer) serve(ln net.Listener, maxPayload int64) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("nats: %w", err)
		}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			fmt.Fprintf(c, "INFO {\"server_id\":\"sweepflow-simulated\",\"version\":\"simulated\",\"max_payload\":%d}\r\n", maxPayload)
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				if strings.HasPrefix(strings.ToUpper(sc.Text()), "PING") {
					if _, err := c.Write([]byte("PONG\r\n")); err != nil {
						return
					}
				}
			}
		}()
	}
}
