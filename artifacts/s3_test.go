package artifacts

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// There is no S3 on this machine: these tests run gofakes3, an in-process
// S3-compatible server (in-memory backend) behind httptest, and talk to it
// with the real client over HTTP. Requests are counted to check that a
// repeated put is a HEAD and no PUT.
type fakeS3 struct {
	url     string
	backend *s3mem.Backend
	puts    atomic.Int64
	heads   atomic.Int64
}

func startFakeS3(t *testing.T, buckets ...string) *fakeS3 {
	t.Helper()
	f := &fakeS3{backend: s3mem.New()}
	for _, b := range buckets {
		require.NoError(t, f.backend.CreateBucket(b))
	}
	h := gofakes3.New(f.backend).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPut:
			f.puts.Add(1)
		case http.MethodHead:
			f.heads.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func setCreds(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "sweepflow-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "sweepflow-test-secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
}

func TestParseS3URL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		url     string
		want    S3Config
		wantErr string
	}{
		{name: "aws default", url: "s3://arts/sweepflow", want: S3Config{Bucket: "arts", Prefix: "sweepflow", Endpoint: "s3.amazonaws.com", Secure: true}},
		{name: "http endpoint and region", url: "s3://arts/a/b/?endpoint=http://127.0.0.1:9000&region=us-east-1",
			want: S3Config{Bucket: "arts", Prefix: "a/b", Endpoint: "127.0.0.1:9000", Region: "us-east-1"}},
		{name: "bare host is https", url: "s3://arts?endpoint=minio.lab:9000", want: S3Config{Bucket: "arts", Endpoint: "minio.lab:9000", Secure: true}},
		{name: "bare host insecure", url: "s3://arts?endpoint=minio.lab:9000&insecure=true", want: S3Config{Bucket: "arts", Endpoint: "minio.lab:9000"}},
		{name: "https endpoint", url: "s3://arts/p?endpoint=https://s3.lab/", want: S3Config{Bucket: "arts", Prefix: "p", Endpoint: "s3.lab", Secure: true}},
		{name: "no bucket", url: "s3:///p", wantErr: "has no bucket"},
		{name: "typo parameter", url: "s3://arts?endpont=x", wantErr: `unknown parameter "endpont"`},
		{name: "credentials in url", url: "s3://key:secret@arts/p", wantErr: "credentials do not belong in the URL"},
		{name: "endpoint with path", url: "s3://arts?endpoint=http://h:1/x", wantErr: "must be host:port"},
		{name: "endpoint other scheme", url: "s3://arts?endpoint=ftp://h", wantErr: "must be host:port or http(s)://host:port"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseS3URL(tc.url)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				assert.NotContains(t, err.Error(), "secret")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestOpenS3Errors(t *testing.T) {
	f := startFakeS3(t, "arts")
	tests := []struct {
		name    string
		creds   bool
		url     string
		wantErr string
	}{
		{name: "no credentials in env", url: "s3://arts/p?endpoint=" + f.url, wantErr: "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
		{name: "missing bucket", creds: true, url: "s3://nope/p?endpoint=" + f.url, wantErr: `bucket "nope" does not exist`},
		{name: "unreachable endpoint", creds: true, url: "s3://arts/p?endpoint=http://127.0.0.1:1", wantErr: `bucket "arts" at 127.0.0.1:1`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_ACCESS_KEY_ID", "")
			t.Setenv("AWS_ACCESS_KEY", "")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "")
			t.Setenv("AWS_SECRET_KEY", "")
			if tc.creds {
				setCreds(t)
			}
			_, err := Open(tc.url)
			require.ErrorContains(t, err, tc.wantErr)
			assert.NotContains(t, err.Error(), "sweepflow-test-secret")
		})
	}
}

func TestS3PutIsContentAddressedAndIdempotent(t *testing.T) {
	setCreds(t)
	ctx := context.Background()
	f := startFakeS3(t, "arts")
	st, err := Open("s3://arts/nightly/v1?region=us-east-1&endpoint=" + f.url)
	require.NoError(t, err)
	s := st.(*S3Store)
	assert.Equal(t, "nightly/v1/", s.Prefix())

	big := make([]byte, 3<<20)
	_, err = rand.Read(big)
	require.NoError(t, err)
	tests := []struct {
		name    string
		file    string
		content []byte
	}{
		{name: "json", file: "agg.json", content: []byte(`{"output_tput_per_gpu": 1234.5}`)},
		{name: "empty", file: "empty.log", content: nil},
		{name: "3 MiB", file: "requests.jsonl", content: big},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sum := sha256.Sum256(tc.content)
			hexSum := hex.EncodeToString(sum[:])
			putsBefore := f.puts.Load()
			uri, err := s.Put(ctx, tc.file, bytes.NewReader(tc.content))
			require.NoError(t, err)
			assert.Equal(t, "s3://arts/nightly/v1/sha256/"+hexSum[:2]+"/"+hexSum+"/"+tc.file, uri)
			assert.Equal(t, putsBefore+1, f.puts.Load(), "first put uploads once")

			got, err := SHA256(uri)
			require.NoError(t, err)
			assert.Equal(t, hexSum, got)

			// Again: HEAD finds it, no second upload, same URI.
			headsBefore := f.heads.Load()
			again, err := s.Put(ctx, tc.file, bytes.NewReader(tc.content))
			require.NoError(t, err)
			assert.Equal(t, uri, again)
			assert.Equal(t, putsBefore+1, f.puts.Load(), "repeat put must not upload")
			assert.Greater(t, f.heads.Load(), headsBefore)

			rc, err := s.Open(ctx, uri)
			require.NoError(t, err)
			back, err := io.ReadAll(rc)
			require.NoError(t, err)
			require.NoError(t, rc.Close())
			assert.True(t, bytes.Equal(tc.content, back), "content round-trips")
		})
	}

	// The bucket holds exactly the content-addressed keys.
	cl := rawClient(t, f.url)
	var keys []string
	for obj := range cl.ListObjects(ctx, "arts", minio.ListObjectsOptions{Recursive: true}) {
		require.NoError(t, obj.Err)
		keys = append(keys, obj.Key)
	}
	assert.Len(t, keys, len(tests))
	for _, k := range keys {
		assert.True(t, strings.HasPrefix(k, "nightly/v1/sha256/"), k)
	}
}

func TestS3ConcurrentPutsOfSameContent(t *testing.T) {
	setCreds(t)
	f := startFakeS3(t, "arts")
	st, err := Open("s3://arts?endpoint=" + f.url)
	require.NoError(t, err)
	content := []byte(strings.Repeat("record\n", 1000))
	var wg sync.WaitGroup
	uris := make([]string, 6)
	errs := make([]error, len(uris))
	for i := range uris {
		wg.Add(1)
		go func() {
			defer wg.Done()
			uris[i], errs[i] = st.Put(context.Background(), "r.jsonl", bytes.NewReader(content))
		}()
	}
	wg.Wait()
	for i := range uris {
		require.NoError(t, errs[i])
		assert.Equal(t, uris[0], uris[i])
	}
	rc, err := st.Open(context.Background(), uris[0])
	require.NoError(t, err)
	defer rc.Close()
	back, err := io.ReadAll(rc)
	require.NoError(t, err)
	assert.Equal(t, content, back)
}

func TestS3OpenRejectsCorruptMissingAndForeign(t *testing.T) {
	setCreds(t)
	ctx := context.Background()
	f := startFakeS3(t, "arts", "other")
	st, err := Open("s3://arts/p?endpoint=" + f.url)
	require.NoError(t, err)
	s := st.(*S3Store)
	uri, err := s.Put(ctx, "agg.json", strings.NewReader(`{"a":1}`))
	require.NoError(t, err)
	sum, err := SHA256(uri)
	require.NoError(t, err)

	// Damage the stored object behind the store's back.
	cl := rawClient(t, f.url)
	bad := []byte(`{"a":2}`)
	_, err = cl.PutObject(ctx, "arts", s.Key(sum, "agg.json"), bytes.NewReader(bad), int64(len(bad)), minio.PutObjectOptions{})
	require.NoError(t, err)
	rc, err := s.Open(ctx, uri)
	require.NoError(t, err)
	_, err = io.ReadAll(rc)
	rc.Close()
	require.ErrorIs(t, err, ErrCorrupt)

	zero := strings.Repeat("0", 64)
	tests := []struct {
		name    string
		uri     string
		wantErr string
		is      error
	}{
		{name: "missing object", uri: "s3://arts/p/sha256/00/" + zero + "/x.json", is: ErrNotFound},
		{name: "other bucket", uri: "s3://other/p/sha256/00/" + zero + "/x.json", wantErr: `not in bucket "arts"`},
		{name: "outside prefix", uri: "s3://arts/q/sha256/00/" + zero + "/x.json", wantErr: "is not under s3://arts/p/"},
		{name: "dot-dot", uri: "s3://arts/p/../q/sha256/00/" + zero + "/x.json", wantErr: "is not under"},
		{name: "not content addressed", uri: "s3://arts/p/logs/x.json", wantErr: "want sha256/<aa>/<hash>/<name>"},
		{name: "file uri", uri: "file:///tmp/x", wantErr: "is not an s3:// artifact URI"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Open(ctx, tc.uri)
			require.Error(t, err)
			if tc.is != nil {
				assert.True(t, errors.Is(err, tc.is), "%v", err)
			}
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
			}
		})
	}
}

func rawClient(t *testing.T, endpoint string) *minio.Client {
	t.Helper()
	cl, err := minio.New(strings.TrimPrefix(endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4("sweepflow-test", "sweepflow-test-secret", ""),
	})
	require.NoError(t, err)
	return cl
}
