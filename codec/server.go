package codec

import (
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
)

// Handler serves POST /encode and /decode (the Temporal remote codec
// protocol that the Web UI and `temporal --codec-endpoint` speak) for c.
// Browsers may call it only from allowedOrigins (the Web UI's origin, e.g.
// http://127.0.0.1:8233); "*" allows any origin, which is only sensible on a
// loopback address. Anyone who can reach /decode can read payloads: listen on
// a trusted interface.
func Handler(c converter.PayloadCodec, allowedOrigins []string) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(c)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" {
			if !originAllowed(origin, allowedOrigins) {
				http.Error(w, "origin "+origin+" is not allowed to use this codec server", http.StatusForbidden)
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		inner.ServeHTTP(w, r)
	})
}

func originAllowed(origin string, allowed []string) bool {
	origin = strings.TrimSuffix(origin, "/")
	return slices.ContainsFunc(allowed, func(a string) bool { return a == "*" || strings.TrimSuffix(a, "/") == origin })
}
