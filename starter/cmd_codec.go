package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"

	"github.com/sweepflow/sweepflow/codec"
)

func init() {
	register("codec-server", func() *cobra.Command {
		var fl codecServerFlags
		c := &cobra.Command{Use: "codec-server", Short: "serve the payload codec so the Web UI and temporal CLI can decrypt histories", Args: noArgs,
			RunE: func(*cobra.Command, []string) error { return runCodecServer(fl) }}
		fl.bind(c.Flags())
		return c
	})
}

// codecServerConfig is the parsed command line of codec-server.
type codecServerConfig struct {
	listen  string
	origins []string
	codec   *codec.AESGCM
}

type codecServerFlags struct {
	listen, keyFile, keyB64, origins string
}

func (f *codecServerFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8081", "address to serve /encode and /decode on (anyone who reaches it can decrypt: keep it on a trusted interface)")
	fs.StringVar(&f.keyFile, "key-file", "", "file with the key (base64 of 32 bytes, or 32 raw bytes); default: "+codec.EnvKey+" or "+codec.EnvKeyFile)
	fs.StringVar(&f.keyB64, "key", "", "the key as base64 (visible in the process list: prefer --key-file or "+codec.EnvKey+")")
	fs.StringVar(&f.origins, "ui-origin", "http://127.0.0.1:8233,http://localhost:8233", "comma-separated Web UI origins allowed to call it from a browser (* for any)")
}

func parseCodecServer(f codecServerFlags) (*codecServerConfig, error) {
	listen, keyFile, keyB64, origins := &f.listen, &f.keyFile, &f.keyB64, &f.origins
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

func runCodecServer(f codecServerFlags) error {
	cfg, err := parseCodecServer(f)
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
