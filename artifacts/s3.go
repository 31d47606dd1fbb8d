package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Store keeps artifacts in an S3-compatible bucket at
// <prefix>/sha256/<aa>/<hash>/<name>, the same layout as DirStore, and
// returns s3://bucket/<key> URIs.
//
// Credentials come only from the environment (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, optional AWS_SESSION_TOKEN): never from a config
// file, so a secret is never in the sweep config, the cluster profile or a
// workflow history.
type S3Store struct {
	client *minio.Client
	bucket string
	prefix string // "" or "a/b/" (always ends in "/")
	tmpDir string
}

// S3Config is a parsed s3:// store URL.
type S3Config struct {
	Bucket   string
	Prefix   string // without leading or trailing "/"
	Endpoint string // host[:port]
	Secure   bool   // https
	Region   string
}

// s3DefaultEndpoint is used when the URL names none (AWS itself).
const s3DefaultEndpoint = "s3.amazonaws.com"

// ParseS3URL parses "s3://bucket/prefix?endpoint=...&region=...". endpoint
// may be "host:port" (https) or "http(s)://host:port"; insecure=true forces
// http for a bare host. Unknown parameters are errors, so a typo does not
// silently send artifacts to AWS.
func ParseS3URL(rawURL string) (S3Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "s3" {
		return S3Config{}, fmt.Errorf("artifacts: store URL %q: want s3://bucket/prefix?endpoint=host:port&region=R", rawURL)
	}
	if u.User != nil {
		return S3Config{}, fmt.Errorf("artifacts: store URL %q: credentials do not belong in the URL; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", redactURL(u))
	}
	c := S3Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/"), Endpoint: s3DefaultEndpoint, Secure: true}
	if c.Bucket == "" {
		return S3Config{}, fmt.Errorf("artifacts: store URL %q has no bucket", rawURL)
	}
	insecure := false
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "endpoint":
			c.Endpoint = v
		case "region":
			c.Region = v
		case "insecure":
			insecure = v == "true" || v == "1"
		default:
			return S3Config{}, fmt.Errorf("artifacts: store URL %q: unknown parameter %q (want endpoint, region, insecure)", rawURL, k)
		}
	}
	switch {
	case strings.HasPrefix(c.Endpoint, "http://"):
		c.Endpoint, c.Secure = strings.TrimPrefix(c.Endpoint, "http://"), false
	case strings.HasPrefix(c.Endpoint, "https://"):
		c.Endpoint = strings.TrimPrefix(c.Endpoint, "https://")
	case strings.Contains(c.Endpoint, "://"):
		return S3Config{}, fmt.Errorf("artifacts: store URL %q: endpoint %q must be host:port or http(s)://host:port", rawURL, c.Endpoint)
	default:
		c.Secure = !insecure
	}
	c.Endpoint = strings.TrimSuffix(c.Endpoint, "/")
	if c.Endpoint == "" || strings.Contains(c.Endpoint, "/") {
		return S3Config{}, fmt.Errorf("artifacts: store URL %q: endpoint %q must be host:port", rawURL, c.Endpoint)
	}
	return c, nil
}

func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// OpenS3 connects to the bucket a URL names with credentials from the
// environment and checks that the bucket exists, so a worker with a wrong
// endpoint, bucket or key fails at start-up rather than at its first upload.
func OpenS3(ctx context.Context, rawURL string) (*S3Store, error) {
	cfg, err := ParseS3URL(rawURL)
	if err != nil {
		return nil, err
	}
	creds := credentials.NewEnvAWS()
	v, err := creds.GetWithContext(nil)
	if err != nil || v.AccessKeyID == "" || v.SecretAccessKey == "" {
		return nil, fmt.Errorf("artifacts: store %s: no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the worker's environment", rawURL)
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{Creds: creds, Secure: cfg.Secure, Region: cfg.Region})
	if err != nil {
		return nil, fmt.Errorf("artifacts: store %s: %v", rawURL, err)
	}
	ok, err := client.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("artifacts: store %s: bucket %q at %s: %v", rawURL, cfg.Bucket, cfg.Endpoint, err)
	}
	if !ok {
		return nil, fmt.Errorf("artifacts: store %s: bucket %q does not exist at %s", rawURL, cfg.Bucket, cfg.Endpoint)
	}
	s := &S3Store{client: client, bucket: cfg.Bucket, tmpDir: os.TempDir()}
	if cfg.Prefix != "" {
		s.prefix = cfg.Prefix + "/"
	}
	return s, nil
}

// Bucket and Prefix say where the store writes.
func (s *S3Store) Bucket() string { return s.bucket }

// Prefix is the key prefix ("" or ending in "/").
func (s *S3Store) Prefix() string { return s.prefix }

// Key is the object key for content with sha256 sum stored under name.
func (s *S3Store) Key(sum, name string) string {
	return s.prefix + "sha256/" + sum[:2] + "/" + sum + "/" + name
}

// Put spools r to a temp file while hashing it (the key is the hash, known
// only at the end), then uploads it unless an object already has that key:
// a HEAD before the PUT makes a retried upload cost one request.
func (s *S3Store) Put(ctx context.Context, name string, r io.Reader) (string, error) {
	if err := checkName(name); err != nil {
		return "", fmt.Errorf("artifacts: put: %w", err)
	}
	tmp, err := os.CreateTemp(s.tmpDir, "sweepflow-s3put-*")
	if err != nil {
		return "", fmt.Errorf("artifacts: put %s: %v", name, err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	h := sha256.New()
	size, err := io.Copy(io.MultiWriter(tmp, h), ctxReader{ctx, r})
	if err != nil {
		return "", fmt.Errorf("artifacts: put %s: %w", name, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	key := s.Key(sum, name)
	uri := "s3://" + s.bucket + "/" + key
	if _, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{}); err == nil {
		return uri, nil // same key, same bytes by construction
	} else if !isNoSuchKey(err) {
		return "", fmt.Errorf("artifacts: put %s: head %s: %v", name, uri, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return "", fmt.Errorf("artifacts: put %s: %v", name, err)
	}
	opts := minio.PutObjectOptions{
		ContentType:  "application/octet-stream",
		UserMetadata: map[string]string{"Sha256": sum},
	}
	var body io.Reader = tmp
	if size == 0 {
		// Over plain HTTP the client signs the payload in aws-chunked
		// streaming mode, which for zero bytes goes out without a
		// Content-Length that S3 requires; an empty body needs no
		// payload signature.
		body, opts.DisableContentSha256 = bytes.NewReader(nil), true
	}
	if _, err := s.client.PutObject(ctx, s.bucket, key, body, size, opts); err != nil {
		return "", fmt.Errorf("artifacts: put %s: upload %s: %v", name, uri, err)
	}
	return uri, nil
}

// Open streams the object behind an s3:// URI of this store and fails with
// ErrCorrupt at EOF if the bytes do not hash to the key.
func (s *S3Store) Open(ctx context.Context, uri string) (io.ReadCloser, error) {
	key, sum, err := s.parseURI(uri)
	if err != nil {
		return nil, err
	}
	if _, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{}); err != nil {
		if isNoSuchKey(err) {
			return nil, fmt.Errorf("artifacts: open %s: %w", uri, ErrNotFound)
		}
		return nil, fmt.Errorf("artifacts: open %s: %v", uri, err)
	}
	obj, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("artifacts: open %s: %v", uri, err)
	}
	return &verifyingReader{r: obj, h: sha256.New(), want: sum, uri: uri}, nil
}

// parseURI checks that uri is s3://<bucket>/<prefix>sha256/<aa>/<hash>/<name>.
func (s *S3Store) parseURI(uri string) (key, sum string, err error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "s3" {
		return "", "", fmt.Errorf("artifacts: %q is not an s3:// artifact URI", uri)
	}
	if u.Host != s.bucket {
		return "", "", fmt.Errorf("artifacts: URI %q is not in bucket %q", uri, s.bucket)
	}
	key = strings.TrimPrefix(u.Path, "/")
	if path.Clean("/"+key) != "/"+key || !strings.HasPrefix(key, s.prefix) {
		return "", "", fmt.Errorf("artifacts: URI %q is not under s3://%s/%s", uri, s.bucket, s.prefix)
	}
	parts := strings.Split(strings.TrimPrefix(key, s.prefix), "/")
	if len(parts) != 4 || parts[0] != "sha256" || len(parts[2]) != sha256.Size*2 || parts[1] != parts[2][:2] {
		return "", "", fmt.Errorf("artifacts: URI %q is not under s3://%s/%s (want sha256/<aa>/<hash>/<name>)", uri, s.bucket, s.prefix)
	}
	if _, err := hex.DecodeString(parts[2]); err != nil {
		return "", "", fmt.Errorf("artifacts: URI %q: key %q is not a sha256 hex digest", uri, parts[2])
	}
	if err := checkName(parts[3]); err != nil {
		return "", "", fmt.Errorf("artifacts: URI %q: %w", uri, err)
	}
	return key, parts[2], nil
}

func isNoSuchKey(err error) bool {
	resp := minio.ToErrorResponse(err)
	return resp.Code == "NoSuchKey" || resp.StatusCode == http.StatusNotFound
}

// openS3Timeout bounds the bucket check of Open (which has no context).
const openS3Timeout = 30 * time.Second

func openS3NoContext(rawURL string) (Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), openS3Timeout)
	defer cancel()
	s, err := OpenS3(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	return s, nil
}
