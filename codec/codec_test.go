package codec

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func TestRoundTripHidesPlaintext(t *testing.T) {
	t.Parallel()
	c, err := New(key(7))
	require.NoError(t, err)
	dc := NewConverters(c).DataConverter
	secret := map[string]string{"fingerprint": "f00dfeed", "token": "hf_supersecret"}
	p, err := dc.ToPayload(secret)
	require.NoError(t, err)
	assert.Equal(t, Encoding, string(p.Metadata[converter.MetadataEncoding]))
	assert.Equal(t, c.KeyID(), string(p.Metadata[MetaKeyID]))
	raw, err := p.Marshal()
	require.NoError(t, err)
	for _, plain := range []string{"f00dfeed", "hf_supersecret", "json/plain", "fingerprint"} {
		assert.NotContains(t, string(raw), plain)
	}
	var back map[string]string
	require.NoError(t, dc.FromPayload(p, &back))
	assert.Equal(t, secret, back)

	// Two encodings of the same value differ (random nonce).
	p2, err := dc.ToPayload(secret)
	require.NoError(t, err)
	assert.NotEqual(t, p.Data, p2.Data)
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	a, err := New(key(1))
	require.NoError(t, err)
	b, err := New(key(2))
	require.NoError(t, err)
	enc, err := a.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"x"`)}})
	require.NoError(t, err)

	tampered := &commonpb.Payload{Metadata: enc[0].Metadata, Data: bytes.Clone(enc[0].Data)}
	tampered.Data[len(tampered.Data)-1] ^= 1
	relabelled := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte(Encoding), MetaKeyID: []byte(b.KeyID())}, Data: enc[0].Data}
	short := &commonpb.Payload{Metadata: enc[0].Metadata, Data: []byte("abc")}

	cases := []struct {
		name  string
		codec *AESGCM
		in    *commonpb.Payload
		want  string
	}{
		{"wrong key", b, enc[0], "encrypted with key " + a.KeyID()},
		{"tampered", a, tampered, "does not authenticate"},
		{"relabelled key id", b, relabelled, "does not authenticate"},
		{"too short", a, short, "too short"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.codec.Decode([]*commonpb.Payload{tc.in})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	// Unencrypted payloads (older histories) pass through.
	plain := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`1`)}
	out, err := a.Decode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	assert.Same(t, plain, out[0])
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	k := key(9)
	raw := append([]byte{0xff}, k[1:]...) // not base64 text
	cases := []struct {
		name string
		in   []byte
		want []byte
		err  string
	}{
		{"std base64", []byte(base64.StdEncoding.EncodeToString(k)), k, ""},
		{"with newline", []byte(base64.StdEncoding.EncodeToString(k) + "\n"), k, ""},
		{"raw url base64", []byte(base64.RawURLEncoding.EncodeToString(k)), k, ""},
		{"raw 32 bytes", raw, raw, ""},
		{"16-byte key", []byte(base64.StdEncoding.EncodeToString(k[:16])), nil, "decodes to 16 bytes"},
		{"not base64", []byte("not a key!"), nil, "not base64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseKey(tc.in)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := New(k[:16])
	assert.ErrorContains(t, err, "must be 32 bytes")
}

func TestLoadKey(t *testing.T) {
	k := key(3)
	file := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(file, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600))

	t.Setenv(EnvKey, "")
	t.Setenv(EnvKeyFile, "")
	_, ok, err := LoadKey()
	require.NoError(t, err)
	assert.False(t, ok, "no key configured: codec off")

	t.Setenv(EnvKeyFile, file)
	got, ok, err := LoadKey()
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, k, got)

	t.Setenv(EnvKey, "bogus!")
	_, _, err = LoadKey()
	assert.ErrorContains(t, err, EnvKey)

	t.Setenv(EnvKey, "")
	t.Setenv(EnvKeyFile, filepath.Join(t.TempDir(), "missing"))
	_, _, err = LoadKey()
	assert.ErrorContains(t, err, "codec key file")
}

func TestHandlerCORSAndDecode(t *testing.T) {
	t.Parallel()
	c, err := New(key(5))
	require.NoError(t, err)
	srv := httptest.NewServer(Handler(c, []string{"http://127.0.0.1:8233"}))
	defer srv.Close()

	enc, err := c.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`{"model":"DeepSeek"}`)}})
	require.NoError(t, err)
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: enc})
	require.NoError(t, err)

	post := func(origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Namespace", "default")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp
	}

	// Preflight from the UI origin.
	req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/decode", nil)
	req.Header.Set("Origin", "http://127.0.0.1:8233")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type,x-namespace")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, "http://127.0.0.1:8233", resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, resp.Header.Get("Access-Control-Allow-Headers"), "X-Namespace")

	resp = post("http://127.0.0.1:8233")
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	var out commonpb.Payloads
	require.NoError(t, protojson.Unmarshal(data, &out))
	require.Len(t, out.Payloads, 1)
	assert.Equal(t, `{"model":"DeepSeek"}`, string(out.Payloads[0].Data))

	resp = post("http://evil.example")
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	// Non-browser clients (the CLI) send no Origin.
	resp = post("")
	data, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, strings.Contains(string(data), base64.StdEncoding.EncodeToString([]byte(`{"model":"DeepSeek"}`))), string(data))
}
