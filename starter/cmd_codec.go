package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sweepflow/sweepflow/codec"
)

func init() {
	register(command{name: "codec-server", summary: "serve the payload codec so the Web UI and temporal CLI can decrypt histories", run: runCodecServer})
}

// codecServerConfig is the parsed command line of codec-server.
type codecServerConfig struct {
	listen  string
	origins []string
	codec   *codec.AESGCM
}

func parseCodecServer(args []string) (*codecServerConfig, error) {
	fs := flag.NewFlagSet("codec-server", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8081", "address to serve /encode and /decode on (anyone who reaches it can decrypt: keep it on a trusted interface)")
	keyFile := fs.String("key-file", "", "file with the key (base64 of 32 bytes, or 32 raw bytes); default: "+codec.EnvKey+" or "+codec.EnvKeyFile)
	keyB64 := fs.String("key", "", "the key as base64 (visible in the process list: prefer --key-file or "+codec.EnvKey+")")
	origins := fs.String("ui-origin", "http://127.0.0.1:8233,http://localhost:8233", "comma-separated Web UI origins allowed to call it from a browser (* for any)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		return nil, &exitError{code: 2, msg: "usage: starter codec-server [--listen ADDR] [--key-file FILE | --key BASE64] [--ui-origin URL,...]"}
	}
	var key []byte
	var err error
	switch {
	case *keyFile != "" && *keyB64 != "":
		return nil, &exitError{code: 2, msg: "give --key-file or --key, not both"}
	case *keyFile != "":
		key, err = codec.ReadKeyFile(*keyFile)
	case *keyB64 != "":
		if key, err = codec.ParseKey([]byte(*keyB64)); err != nil {
			err = fmt.Errorf("--key: %w", err)
		}
	default:
		var ok bool
		key, ok, err = codec.LoadKey()
		if err == nil && !ok {
			return nil, &exitError{code: 2, msg: "no key: pass --key-file or set " + codec.EnvKey + " (the same key the worker and starter use)"}
		}
	}
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	c, err := codec.New(key)
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	cfg := &codecServerConfig{listen: *listen, codec: c}
	for _, o := range strings.Split(*origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.origins = append(cfg.origins, o)
		}
	}
	return cfg, nil
}

func runCodecServer(args []string) error {
	cfg, err := parseCodecServer(args)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: codec.Handler(cfg.codec, cfg.origins), ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("codec server on http://%s (key %s); Web UI origins %s\n", ln.Addr(), cfg.codec.KeyID(), strings.Join(cfg.origins, ", "))
	fmt.Printf("  Web UI: Settings > Codec Server > http://%s ; CLI: temporal workflow show --codec-endpoint http://%s -w ID\n", ln.Addr(), ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
