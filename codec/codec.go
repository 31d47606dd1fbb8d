// Package codec encrypts Temporal payloads with AES-256-GCM, so workflow
// inputs, results, activity arguments, heartbeats, memos, user metadata and
// failure messages reach the Temporal server (and its database) only as
// ciphertext. It is on when a key is configured: SWEEPFLOW_CODEC_KEY (base64
// of 32 bytes) or SWEEPFLOW_CODEC_KEY_FILE. Search attributes are never
// encoded by Temporal, so nothing secret may go into one.
//
// The Web UI and the Temporal CLI decode through a codec server
// (`starter codec-server`), which serves Handler.
package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

// Environment variables that configure the key.
const (
	EnvKey     = "SWEEPFLOW_CODEC_KEY"
	EnvKeyFile = "SWEEPFLOW_CODEC_KEY_FILE"
)

// Payload metadata of an encrypted payload.
const (
	// Encoding marks a payload this codec produced.
	Encoding = "binary/encrypted"
	// MetaKeyID names the key (a hash of it, never the key) so a decode with
	// the wrong key says which key it needs.
	MetaKeyID = "encryption-key-id"
	// MetaCipher records the algorithm for future key rotation or changes.
	MetaCipher = "encryption-cipher"
	cipherName = "AES-256-GCM"
)

// KeySize is the AES-256 key length in bytes.
const KeySize = 32

// AESGCM is a converter.PayloadCodec. The whole payload (metadata and data)
// is marshalled and sealed, so not even the original encoding leaks.
type AESGCM struct {
	aead  cipher.AEAD
	keyID string
}

var _ converter.PayloadCodec = (*AESGCM)(nil)

// New builds the codec from a 32-byte key.
func New(key []byte) (*AESGCM, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("codec: key must be %d bytes (AES-256), got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("codec: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("codec: %w", err)
	}
	return &AESGCM{aead: aead, keyID: KeyID(key)}, nil
}

// KeyID is the public name of a key: the first 16 hex digits of its SHA-256.
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:8])
}

// KeyID is the public name of this codec's key.
func (c *AESGCM) KeyID() string { return c.keyID }

// Encode seals every payload. The key ID is bound as associated data, so a
// ciphertext relabelled with another key's ID fails to open.
func (c *AESGCM) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("codec: marshal payload: %w", err)
		}
		nonce := make([]byte, c.aead.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return nil, fmt.Errorf("codec: nonce: %w", err)
		}
		sealed := c.aead.Seal(nonce, nonce, plain, []byte(c.keyID))
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(Encoding),
				MetaKeyID:                  []byte(c.keyID),
				MetaCipher:                 []byte(cipherName),
			},
			Data: sealed,
		}
	}
	return out, nil
}

// Decode opens the payloads this codec sealed and passes any other payload
// through unchanged, so histories written before the key was configured stay
// readable.
func (c *AESGCM) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != Encoding {
			out[i] = p
			continue
		}
		if id := string(p.GetMetadata()[MetaKeyID]); id != c.keyID {
			return nil, fmt.Errorf("codec: payload was encrypted with key %s, this codec has key %s", id, c.keyID)
		}
		data := p.GetData()
		ns := c.aead.NonceSize()
		if len(data) < ns+c.aead.Overhead() {
			return nil, errors.New("codec: encrypted payload is too short")
		}
		plain, err := c.aead.Open(nil, data[:ns], data[ns:], []byte(c.keyID))
		if err != nil {
			return nil, fmt.Errorf("codec: payload with key %s does not authenticate: %w", c.keyID, err)
		}
		var dec commonpb.Payload
		if err := proto.Unmarshal(plain, &dec); err != nil {
			return nil, fmt.Errorf("codec: decrypted payload: %w", err)
		}
		out[i] = &dec
	}
	return out, nil
}

// ParseKey reads a key given as base64 (standard or URL alphabet, padded or
// not), or as exactly 32 raw bytes (a key file written with head -c 32).
func ParseKey(b []byte) ([]byte, error) {
	if len(b) == KeySize && !isBase64Text(b) {
		return b, nil
	}
	s := strings.TrimSpace(string(b))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != KeySize {
				return nil, fmt.Errorf("key decodes to %d bytes, want %d (generate one with: head -c 32 /dev/urandom | base64)", len(k), KeySize)
			}
			return k, nil
		}
	}
	return nil, fmt.Errorf("key is not base64 (generate one with: head -c 32 /dev/urandom | base64)")
}

func isBase64Text(b []byte) bool {
	for _, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("+/-_=\n\r ", c) >= 0) {
			return false
		}
	}
	return true
}

// LoadKey reads the configured key: the base64 value of SWEEPFLOW_CODEC_KEY,
// else the file SWEEPFLOW_CODEC_KEY_FILE names. ok is false when neither is
// set (payloads then travel unencrypted).
func LoadKey() (key []byte, ok bool, err error) {
	if v := os.Getenv(EnvKey); v != "" {
		k, err := ParseKey([]byte(v))
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", EnvKey, err)
		}
		return k, true, nil
	}
	if path := os.Getenv(EnvKeyFile); path != "" {
		k, err := ReadKeyFile(path)
		return k, err == nil, err
	}
	return nil, false, nil
}

// ReadKeyFile reads a key file (base64 text or 32 raw bytes).
func ReadKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("codec key file: %w", err)
	}
	k, err := ParseKey(b)
	if err != nil {
		return nil, fmt.Errorf("codec key file %s: %w", path, err)
	}
	return k, nil
}

// Converters are the client options that route every payload through the
// codec: the data converter, and a failure converter that also encrypts
// error messages and stack traces (which may quote inputs).
type Converters struct {
	DataConverter    converter.DataConverter
	FailureConverter converter.FailureConverter
}

// NewConverters wraps the SDK's default data converter with c.
func NewConverters(c converter.PayloadCodec) Converters {
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
	return Converters{
		DataConverter: dc,
		FailureConverter: temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
			DataConverter: dc, EncodeCommonAttributes: true,
		}),
	}
}

// FromEnv returns the converters for the configured key; ok is false when no
// key is configured.
func FromEnv() (conv Converters, keyID string, ok bool, err error) {
	key, ok, err := LoadKey()
	if err != nil || !ok {
		return Converters{}, "", false, err
	}
	c, err := New(key)
	if err != nil {
		return Converters{}, "", false, err
	}
	return NewConverters(c), c.KeyID(), true, nil
}
