package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

func init() {
	register("sim checkpoint", newSimCheckpointCmd)
}

// newSimCheckpointCmd writes deterministic shard files so checkpoint staging
// has real bytes to copy, hash and verify on a machine without the model.
func newSimCheckpointCmd() *cobra.Command {
	c := &cobra.Command{Use: "checkpoint", Short: "write a small simulated checkpoint (safetensors-like shards) for the simulated cluster", Args: noArgs}
	fs := c.Flags()
	dir := fs.String("dir", "", "checkpoint directory to create (e.g. <shared-root>/deepseek-ai/DeepSeek-V4-Pro-0813)")
	shards := fs.Int("shards", 8, "number of shard files")
	shardMiB := fs.Int("shard-mib", 8, "size of each shard in MiB")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if *dir == "" || *shards <= 0 || *shardMiB <= 0 {
			return usageError("--dir is required, --shards and --shard-mib must be >= 1 (usage: %s)", c.UseLine())
		}
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			return err
		}
		meta := `{"simulated": true, "note": "sweepflow simulated checkpoint: random bytes, not model weights"}` + "\n"
		if err := os.WriteFile(filepath.Join(*dir, "config.json"), []byte(meta), 0o644); err != nil {
			return err
		}
		written := 0
		for i := 1; i <= *shards; i++ {
			path := filepath.Join(*dir, fmt.Sprintf("model-%05d-of-%05d.safetensors", i, *shards))
			want := int64(*shardMiB) << 20
			if st, err := os.Stat(path); err == nil && st.Size() == want {
				continue // already there: the same seed writes the same bytes
			}
			if err := writeShard(path, want, uint64(i)); err != nil {
				return err
			}
			written++
		}
		fmt.Printf("simulated checkpoint at %s: %d shards x %d MiB (%d written)\n", *dir, *shards, *shardMiB, written)
		return nil
	}
	return c
}

func writeShard(path string, size int64, seed uint64) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	w := bufio.NewWriterSize(f, 1<<20)
	buf := make([]byte, 8)
	for n := int64(0); n < size; n += 8 {
		v := rng.Uint64()
		for j := range buf {
			buf[j] = byte(v >> (8 * j))
		}
		if _, err := w.Write(buf[:min(8, size-n)]); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
