// Package sse reads OpenAI-style text/event-stream responses and extracts the
// few chunk fields a load generator needs, without allocating per event.
package sse

import (
	"bytes"
	"errors"
	"io"
	"time"
)

// MaxLineBytes bounds one SSE line so a server that never sends a newline
// cannot make the client buffer without limit.
const MaxLineBytes = 16 << 20

// ErrLineTooLong is returned when a single line exceeds MaxLineBytes.
var ErrLineTooLong = errors.New("sse: line longer than 16 MiB")

// Event is one dispatched SSE event.
type Event struct {
	// Data is the event's data lines joined by '\n'. It aliases the Reader's
	// buffer and is valid only until the next call to Next.
	Data []byte
	// Type is the value of the last "event:" field, empty when absent.
	Type []byte
	// At is the time, in nanoseconds since the Reader's epoch, at which the
	// underlying Read that delivered the event's final byte returned.
	At int64
	// Read numbers the underlying Read that delivered the event's final
	// byte (1 for the stream's first). Two events with the same Read were
	// both waiting in the buffer when the client read: the client did not
	// see the later one arrive, so At is an upper bound for it, not its
	// arrival time.
	Read uint64
}

// Reader splits a byte stream into SSE events.
//
// Framing follows the WHATWG rules with two documented leniencies: lines end
// in "\n" or "\r\n" (a bare "\r" is not a line terminator), and an event still
// pending at EOF is dispatched instead of dropped, because some servers close
// the stream right after the last "data:" line.
type Reader struct {
	src   io.Reader
	epoch time.Time
	now   func() int64

	buf  []byte
	r, w int
	// lastRead is when the most recent successful Read returned. Because the
	// Reader only reads when no complete line is buffered, every line it hands
	// out was completed by the bytes of that most recent Read.
	lastRead int64
	reads    uint64 // successful Reads so far
	eof      bool
	err      error
	started  bool

	data    []byte
	hasData bool
	typ     []byte
}

// NewReader returns a Reader over src. Timestamps are nanoseconds since epoch,
// measured with the monotonic clock that time.Time carries.
func NewReader(src io.Reader, epoch time.Time) *Reader {
	rd := &Reader{}
	rd.Reset(src, epoch)
	return rd
}

// Reset reuses the Reader (and its buffers) for a new stream.
func (rd *Reader) Reset(src io.Reader, epoch time.Time) {
	rd.src = src
	rd.epoch = epoch
	if rd.now == nil {
		rd.now = func() int64 { return int64(time.Since(rd.epoch)) }
	}
	if rd.buf == nil {
		rd.buf = make([]byte, 8<<10)
	}
	rd.r, rd.w = 0, 0
	rd.lastRead = 0
	rd.reads = 0
	rd.eof = false
	rd.err = nil
	rd.started = false
	rd.data = rd.data[:0]
	rd.hasData = false
	rd.typ = rd.typ[:0]
}

// SetClock replaces the clock (nanoseconds since epoch); tests use it.
func (rd *Reader) SetClock(now func() int64) { rd.now = now }

// Next returns the next event. At the end of the stream it returns io.EOF
// (after dispatching any pending event); a read error is returned as is.
func (rd *Reader) Next() (Event, error) {
	for {
		line, ok, err := rd.line()
		if err != nil {
			return Event{}, err
		}
		if !ok {
			// End of stream: flush a pending event once, then report EOF.
			if rd.hasData {
				return rd.dispatch(), nil
			}
			return Event{}, io.EOF
		}
		if !rd.started {
			rd.started = true
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) == 0 {
			if rd.hasData {
				return rd.dispatch(), nil
			}
			rd.typ = rd.typ[:0]
			continue
		}
		if line[0] == ':' {
			continue // comment / keep-alive
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if rd.hasData {
				rd.data = append(rd.data, '\n')
			}
			rd.data = append(rd.data, value...)
			rd.hasData = true
		case "event":
			rd.typ = append(rd.typ[:0], value...)
		}
	}
}

func (rd *Reader) dispatch() Event {
	ev := Event{Data: rd.data, Type: rd.typ, At: rd.lastRead, Read: rd.reads}
	// The slices stay valid until the next call: reset lengths only then.
	rd.data = rd.data[:0]
	rd.typ = rd.typ[:0]
	rd.hasData = false
	return ev
}

// line returns the next line without its '\n'. ok is false at end of stream;
// a final unterminated line is returned as a line.
func (rd *Reader) line() (line []byte, ok bool, err error) {
	for {
		if i := bytes.IndexByte(rd.buf[rd.r:rd.w], '\n'); i >= 0 {
			line = rd.buf[rd.r : rd.r+i]
			rd.r += i + 1
			return line, true, nil
		}
		if rd.eof {
			if rd.err != nil {
				// A broken connection: a partial line is not a line.
				return nil, false, rd.err
			}
			if rd.r < rd.w {
				line = rd.buf[rd.r:rd.w]
				rd.r = rd.w
				return line, true, nil
			}
			return nil, false, nil
		}
		if rd.r > 0 {
			rd.w = copy(rd.buf, rd.buf[rd.r:rd.w])
			rd.r = 0
		}
		if rd.w == len(rd.buf) {
			if len(rd.buf) >= MaxLineBytes {
				return nil, false, ErrLineTooLong
			}
			nb := make([]byte, min(2*len(rd.buf), MaxLineBytes))
			copy(nb, rd.buf[:rd.w])
			rd.buf = nb
		}
		n, rerr := rd.src.Read(rd.buf[rd.w:])
		if n > 0 {
			rd.lastRead = rd.now()
			rd.reads++
			rd.w += n
		}
		if rerr != nil {
			rd.eof = true
			if rerr != io.EOF {
				rd.err = rerr
			}
		}
	}
}
