package simrole

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// ShellWords splits a POSIX shell word list the way bash does for the
// simple scripts srt-slurm renders (single and double quotes, backslash
// escapes, blanks). It does not expand anything.
func ShellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated single quote in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated double quote in %q", s)
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// EntryWords is what entry-point matching looks at (contract §2): the
// command's words, or for `bash -c|-lc SCRIPT` the words of SCRIPT.
func EntryWords(argv []string) ([]string, error) {
	if len(argv) >= 3 && (argv[0] == "bash" || argv[0] == "/bin/bash" || argv[0] == "sh") && (argv[1] == "-c" || argv[1] == "-lc") {
		return ShellWords(argv[2])
	}
	return argv, nil
}

// flagArgs is an argparse-like reading of `--name value...`, `--name=value`
// and `--flag` words: each occurrence is kept in order, so the last one
// wins as in argparse, and unknown flags are accepted and listed.
type flagArgs struct {
	occ []flagOcc
	// errs collects what setStr, setInt and isSet could not read, so a
	// parser reads every field and then reports.
	errs []error
}

// setStr sets *dst to the flag's value when given; ok says it was.
func (f *flagArgs) setStr(dst *string, names ...string) bool {
	v, ok, err := f.str(*dst, names...)
	f.errs = append(f.errs, err)
	*dst = v
	return ok
}

// setInt sets *dst to the flag's integer when given and valid.
func (f *flagArgs) setInt(dst *int, names ...string) bool {
	v, ok, err := f.int(*dst, names...)
	f.errs = append(f.errs, err)
	if ok && err == nil {
		*dst = v
	}
	return ok
}

// isSet reads a boolean flag.
func (f *flagArgs) isSet(names ...string) bool {
	v, err := f.flag(names...)
	f.errs = append(f.errs, err)
	return v
}

type flagOcc struct {
	name   string
	values []string
}

func isValueWord(w string) bool {
	if !strings.HasPrefix(w, "-") || w == "-" {
		return true
	}
	_, err := strconv.ParseFloat(w, 64) // negative numbers are values
	return err == nil
}

// parseFlags reads words (the part of argv after the entry point).
func parseFlags(words []string) (*flagArgs, error) {
	fa := &flagArgs{}
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "--") || w == "--" {
			return nil, fmt.Errorf("unrecognized arguments: %s", w)
		}
		name, val, hasEq := strings.Cut(w[2:], "=")
		o := flagOcc{name: name}
		if hasEq {
			o.values = []string{val}
		} else {
			for i+1 < len(words) && isValueWord(words[i+1]) {
				i++
				o.values = append(o.values, words[i])
			}
		}
		fa.occ = append(fa.occ, o)
	}
	return fa, nil
}

// last returns the last occurrence among names (aliases of one option).
func (f *flagArgs) last(names ...string) (flagOcc, bool) {
	for i := len(f.occ) - 1; i >= 0; i-- {
		for _, n := range names {
			if f.occ[i].name == n {
				return f.occ[i], true
			}
		}
	}
	return flagOcc{}, false
}

// str returns the single value of the option (argparse: "expected one argument").
func (f *flagArgs) str(def string, names ...string) (string, bool, error) {
	o, ok := f.last(names...)
	if !ok {
		return def, false, nil
	}
	if len(o.values) != 1 {
		return "", true, fmt.Errorf("argument --%s: expected one argument", names[0])
	}
	return o.values[0], true, nil
}

func (f *flagArgs) int(def int, names ...string) (int, bool, error) {
	s, ok, err := f.str("", names...)
	if err != nil || !ok {
		return def, ok, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, true, fmt.Errorf("argument --%s: invalid int value: '%s'", names[0], s)
	}
	return n, true, nil
}

// flag reports a store_true option; a value after it is an error, as argparse's.
func (f *flagArgs) flag(names ...string) (bool, error) {
	o, ok := f.last(names...)
	if !ok {
		return false, nil
	}
	if len(o.values) > 0 {
		return false, fmt.Errorf("argument --%s: ignored explicit argument '%s'", names[0], strings.Join(o.values, " "))
	}
	return true, nil
}

// names lists every flag name seen, in first-seen order.
func (f *flagArgs) names() []string {
	seen := map[string]bool{}
	var out []string
	for _, o := range f.occ {
		if !seen[o.name] {
			seen[o.name] = true
			out = append(out, o.name)
		}
	}
	return out
}

// flagsAfterEntry drops the entry-point words (python3 -m MODULE, python3
// SCRIPT, or the program name) and returns the option words.
func flagsAfterEntry(words []string) []string {
	if len(words) == 0 {
		return nil
	}
	i := 1
	if strings.HasPrefix(path.Base(words[0]), "python") && len(words) > 1 {
		switch {
		case words[1] == "-m":
			i = 3
		case !strings.HasPrefix(words[1], "-"):
			i = 2
		}
	}
	if i > len(words) {
		i = len(words)
	}
	return words[i:]
}
