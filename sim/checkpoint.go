package sim

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// WriteCheckpoint writes a deterministic simulated checkpoint to dir: a
// config.json and shards safetensors-like shard files of shardMiB MiB of
// seeded random bytes, so checkpoint staging has real bytes to copy, hash
// and verify on a machine without the model. Shards already there at full
// size are kept; written counts the others.
func WriteCheckpoint(dir string, shards, shardMiB int) (written int, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	meta := `{"simulated": true, "note": "sweepflow simulated checkpoint: random bytes, not model weights"}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(meta), 0o644); err != nil {
		return 0, err
	}
	for i := 1; i <= shards; i++ {
		path := filepath.Join(dir, fmt.Sprintf("model-%05d-of-%05d.safetensors", i, shards))
		want := int64(shardMiB) << 20
		if st, err := os.Stat(path); err == nil && st.Size() == want {
			continue // already there: the same seed writes the same bytes
		}
		if err := writeShard(path, want, uint64(i)); err != nil {
			return written, err
		}
		written++
	}
	return written, nil
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
