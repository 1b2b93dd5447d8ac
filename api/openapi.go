package api

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 document of every route (paths relative to /api/v1).
// TestOpenAPIMatchesRoutes checks that it lists exactly the routes the router serves.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns a copy of the API's OpenAPI 3.1 document, as served at
// /api/v1/openapi.json.
func OpenAPI() []byte { return append([]byte(nil), openAPIDocument...) }

// openAPI serves GET /openapi.json. It needs no authentication: it holds no data.
func (a *api) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}
