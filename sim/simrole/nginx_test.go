package simrole

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseNginxConf(t *testing.T) {
	conf := `
worker_processes 1;
events { worker_connections 1024; }
http {
    upstream backends {
        hash $http_x_dynamo_session_id consistent;   # session affinity
        server 10.0.0.2:8180 max_fails=0;
        server 10.0.0.3:8180;
        keepalive 4096;
    }
    server {
        listen 8000;
        location / {
            proxy_pass http://backends;
            proxy_buffering off;
            proxy_set_header Connection "";
        }
    }
}
`
	c, err := ParseNginxConf("/logs/nginx.conf", []byte(conf))
	require.NoError(t, err)
	require.Contains(t, c.Upstreams, "backends")
	assert.Equal(t, []string{"10.0.0.2:8180", "10.0.0.3:8180"}, c.Upstreams["backends"].Servers)
	assert.Equal(t, "$http_x_dynamo_session_id", c.Upstreams["backends"].HashKey)
	require.Len(t, c.Servers, 1)
	assert.Equal(t, []string{"8000"}, c.Servers[0].Listen)
	assert.Equal(t, "http://backends", c.Servers[0].ProxyPass)

	bad := []struct{ name, conf, want string }{
		{"unclosed block", "http { server { listen 1;", "unexpected end of file"},
		{"no server", "http { }", "no server block"},
		{"empty upstream", "upstream u { }\nserver { listen 1; location / { proxy_pass http://u; } }", ":1: upstream u has no server"},
		{"server without proxy", "http {\n server { listen 8000; }\n}", "/x.conf:2: server block needs"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseNginxConf("/x.conf", []byte(tc.conf))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
