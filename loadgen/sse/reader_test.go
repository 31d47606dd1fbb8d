package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type ev struct {
	Data, Type string
}

func collect(t testing.TB, r io.Reader) ([]ev, error) {
	t.Helper()
	rd := NewReader(r, time.Now())
	var out []ev
	for {
		e, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev{string(e.Data), string(e.Type)})
	}
}

func TestReaderFraming(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   string
		want []ev
	}{
		{"basic", "data: a\n\ndata: b\n\n", []ev{{"a", ""}, {"b", ""}}},
		{"no space after colon", "data:a\n\n", []ev{{"a", ""}}},
		{"only first space stripped", "data:  a\n\n", []ev{{" a", ""}}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []ev{{"a", ""}, {"b", ""}}},
		{"comments skipped", ": ping\n\ndata: a\n: keep-alive\n\n", []ev{{"a", ""}}},
		{"multi-line data joined", "data: {\"a\":\ndata: 1}\n\n", []ev{{"{\"a\":\n1}", ""}}},
		{"event type", "event: error\ndata: x\n\n", []ev{{"x", "error"}}},
		{"id and retry ignored", "id: 7\nretry: 10\ndata: x\n\n", []ev{{"x", ""}}},
		{"blank lines without data dispatch nothing", "\n\n\nevent: e\n\ndata: x\n\n", []ev{{"x", ""}}},
		{"field without colon", "data\n\n", []ev{{"", ""}}},
		{"pending event at EOF", "data: [DONE]", []ev{{"[DONE]", ""}}},
		{"pending event at EOF after newline", "data: x\n", []ev{{"x", ""}}},
		{"bom", "\xEF\xBB\xBFdata: x\n\n", []ev{{"x", ""}}},
		{"unknown field", "foo: bar\ndata: x\n\n", []ev{{"x", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, r := range []io.Reader{
				strings.NewReader(tc.in),
				iotest.OneByteReader(strings.NewReader(tc.in)),
				iotest.HalfReader(strings.NewReader(tc.in)),
				iotest.DataErrReader(strings.NewReader(tc.in)),
			} {
				got, err := collect(t, r)
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
			}
		})
	}
}

func TestReaderLongLine(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 100_000)
	got, err := collect(t, strings.NewReader("data: "+big+"\n\ndata: y\n\n"))
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, big, got[0].Data)
	assert.Equal(t, "y", got[1].Data)
}

func TestReaderReadErrorDropsPartialEvent(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: {\"trunc"), iotest.ErrReader(boom))
	rd := NewReader(r, time.Now())
	e, err := rd.Next()
	require.NoError(t, err)
	assert.Equal(t, "a", string(e.Data))
	_, err = rd.Next()
	assert.ErrorIs(t, err, boom)
}

// scriptedReader returns the given pieces one per Read and advances a fake
// clock by one tick per Read.
type scriptedReader struct {
	pieces []string
	clock  *int64
}

func (s *scriptedReader) Read(p []byte) (int, error) {
	if len(s.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.pieces[0])
	s.pieces[0] = s.pieces[0][n:]
	if s.pieces[0] == "" {
		s.pieces = s.pieces[1:]
	}
	*s.clock += 10
	return n, nil
}

func TestReaderTimestampIsReadThatCompletedTheEvent(t *testing.T) {
	t.Parallel()
	var clock int64
	src := &scriptedReader{clock: &clock, pieces: []string{
		"data: a\n\ndata: b\n", // read at t=10: "a" complete, "b" not yet
		"\ndata: c\n\n",        // t=20: completes b and c
		": ping\n\n",           // t=30
		"data: d",              // t=40
		"\n\n",                 // t=50
	}}
	rd := NewReader(src, time.Now())
	rd.SetClock(func() int64 { return clock })
	var at []int64
	var reads []uint64
	var data []string
	for {
		e, err := rd.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		at = append(at, e.At)
		reads = append(reads, e.Read)
		data = append(data, string(e.Data))
	}
	assert.Equal(t, []string{"a", "b", "c", "d"}, data)
	assert.Equal(t, []int64{10, 20, 20, 50}, at)
	// b and c came with the same Read: c was already buffered, so the
	// client never saw it arrive.
	assert.Equal(t, []uint64{1, 2, 2, 5}, reads)
}
