package api_test

import (
	"log"
	"net/http"

	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/operator"
)

func ExampleNew() {
	var cfg operator.Config // cfg.Store from store.New, cfg.Resender from resend.New
	core, err := operator.New(cfg)
	if err != nil {
		log.Fatal(err) // e.g. "invalid config: Store is required"
	}
	tokens, err := auth.ParseTokens("ops:admin:a-long-random-secret")
	if err != nil {
		log.Fatal(err)
	}
	authn, err := auth.NewAuthenticator(auth.Config{Tokens: tokens})
	if err != nil {
		log.Fatal(err)
	}
	h, err := api.New(api.Config{Core: core, Auth: authn})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(api.Prefix+"/", h) // the handler routes /api/v1/... itself
	log.Fatal(http.ListenAndServe(":8080", mux))
}
