package auth_test

import (
	"fmt"
	"log"

	"github.com/redrive/redrive/auth"
)

func ExampleParseTokens() {
	tokens, err := auth.ParseTokens("ci:operator:" + auth.HashToken("a-long-random-secret") + ",grafana:viewer:another-long-secret")
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
