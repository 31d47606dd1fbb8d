// Package jsonesc appends JSON string bodies without allocating: the load
// generator builds request bodies and the simulator SSE chunks with it on
// their hot paths, where encoding/json costs an allocation per value.
package jsonesc

import (
	"unicode/utf8"
	"unsafe"
)

const hexDigits = "0123456789abcdef"

// Append appends s escaped as the inside of a JSON string. Invalid UTF-8
// becomes U+FFFD, as in encoding/json.
func Append(dst []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	return append(dst, s[start:]...)
}

// AppendBytes is Append for a byte slice, without copying it.
func AppendBytes(dst, b []byte) []byte {
	if len(b) == 0 {
		return dst
	}
	return Append(dst, unsafe.String(unsafe.SliceData(b), len(b)))
}
