package api_test

import (
	"fmt"
	"log"
	"net/http"

	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/store"
)

func ExampleParseTokens() {
	tokens, err := api.ParseTokens("ci:operator:" + api.HashToken("a-long-random-secret") + ",grafana:viewer:another-long-secret")
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tokens {
		fmt.Println(t.Name, t.Role)
	}
	// Output:
	// ci operator
	// grafana viewer
}

func ExampleNew() {
	var st *store.Store // from store.New
	tokens, err := api.ParseTokens("ops:admin:a-long-random-secret")
	if err != nil {
		log.Fatal(err)
	}
	h, err := api.New(api.Config{Store: st, Auth: api.AuthConfig{Tokens: tokens}})
	if err != nil {
		log.Fatal(err) // e.g. "invalid config: Store is required"
	}
	mux := http.NewServeMux()
	mux.Handle(api.Prefix+"/", h) // the handler routes /api/v1/... itself
	log.Fatal(http.ListenAndServe(":8080", mux))
}
