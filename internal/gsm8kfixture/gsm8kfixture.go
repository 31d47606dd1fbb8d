// Package gsm8kfixture writes GSM8K-format splits of our own making for tests
// that run a whole eval stage on a machine without the real split: simple
// arithmetic word problems, each with a worked answer ending "#### N", as
// lm-eval's gsm8k task and the simulator expect. Reference tests use the real
// split (SWEEPFLOW_GSM8K_DIR) instead; Dir picks between the two.
package gsm8kfixture

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sweepflow/sweepflow/internal/reftest"
)

var (
	names = []string{"Ada", "Bo", "Chen", "Dara", "Emil", "Farah", "Gus", "Hana", "Ivo", "Juno", "Kofi", "Lena"}
	items = []string{"apples", "pencils", "marbles", "stickers", "cookies", "books", "shells", "coins"}
)

// problem returns the i-th generated question and its worked answer. Every i
// gives a distinct question, because the simulator looks answers up by text.
func problem(i int, split string) (q, a string) {
	name := names[i%len(names)]
	item := items[(i/len(names))%len(items)]
	x := 3 + i%17
	y := 2 + (i/3)%9
	z := 1 + (i/7)%5
	switch i % 3 {
	case 0:
		q = fmt.Sprintf("%s has %d boxes of %s with %d in each box, then gives away %d. How many %s does %s have left? (%s %d)",
			name, x, item, y, z, item, name, split, i)
		total := x * y
		a = fmt.Sprintf("%s starts with %d * %d = <<%d*%d=%d>>%d %s.\nAfter giving away %d, %d - %d = <<%d-%d=%d>>%d remain.\n#### %d",
			name, x, y, x, y, total, total, item, z, total, z, total, z, total-z, total-z, total-z)
	case 1:
		q = fmt.Sprintf("A shop sells %s at $%d each. %s buys %d of them and pays with $%d. How much change does %s get? (%s %d)",
			item, y, name, x, x*y+z*10, name, split, i)
		cost := x * y
		a = fmt.Sprintf("The %s cost %d * %d = <<%d*%d=%d>>%d dollars.\nThe change is %d - %d = <<%d-%d=%d>>%d dollars.\n#### %d",
			item, x, y, x, y, cost, cost, cost+z*10, cost, cost+z*10, cost, z*10, z*10, z*10)
	default:
		q = fmt.Sprintf("%s reads %d pages a day for %d days and then %d more pages. How many pages is that in all? (%s %d)",
			name, x, y, z*100, split, i)
		p := x * y
		a = fmt.Sprintf("In %d days %s reads %d * %d = <<%d*%d=%d>>%d pages.\nIn all, %d + %d = <<%d+%d=%d>>%d pages.\n#### %d",
			y, name, x, y, x, y, p, p, p, z*100, p, z*100, p+z*100, p+z*100, p+z*100)
	}
	return q, a
}

// Problem returns the i-th problem of the generated test split: its
// question, worked answer and gold number.
func Problem(i int) (question, answer, gold string) {
	q, a := problem(i, "test")
	return q, a, a[strings.LastIndex(a, "#### ")+len("#### "):]
}

// Write writes test.jsonl (nTest problems) and train.jsonl (nTrain) into dir.
func Write(dir string, nTest, nTrain int) error {
	for _, s := range []struct {
		name string
		n    int
	}{{"test", nTest}, {"train", nTrain}} {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		for i := 0; i < s.n; i++ {
			q, a := problem(i, s.name)
			if err := enc.Encode(map[string]string{"question": q, "answer": a}); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(dir, s.name+".jsonl"), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Split writes n generated test problems to a temporary test.jsonl and
// returns its path.
func Split(t testing.TB, n int) string {
	t.Helper()
	d := t.TempDir()
	if err := Write(d, n, 0); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(d, "test.jsonl")
}

// Dir returns the real split's directory when SWEEPFLOW_GSM8K_DIR names one,
// else a temporary directory holding a generated split (400 test and 50
// train problems), so whole-eval tests run on a bare clone too.
func Dir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv(reftest.EnvGSM8K); d != "" {
		if _, err := os.Stat(filepath.Join(d, "test.jsonl")); err != nil {
			t.Fatalf("SWEEPFLOW_GSM8K_DIR=%s: %v", d, err)
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	d := t.TempDir()
	if err := Write(d, 400, 50); err != nil {
		t.Fatal(err)
	}
	return d
}
