package main

import (
	"testing"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/avro/confluentsr"
)

// Each cluster gets a payload decoder of its own registry, the first cluster's being the
// default; the in-process registry, which serves every cluster, gets one decoder for all.
func TestPayloadDecodersPerCluster(t *testing.T) {
	t.Parallel()
	dial := func(scope string) avro.Registry {
		reg, err := confluentsr.Dial("mock://"+scope, "", "")
		if err != nil {
			t.Fatal(err)
		}
		return reg
	}
	clusters := []clusterConfig{{Name: "eu"}, {Name: "us"}, {Name: "ap"}}
	registries := map[string]avro.Registry{"eu": dial("redrive-decoders-eu"), "us": dial("redrive-decoders-us")}
	s := &service{cfg: serveConfig{Clusters: clusters}}
	def, by, err := s.payloadDecoders(registries)
	if err != nil {
		t.Fatal(err)
	}
	if len(by) != 3 || by["eu"] == nil || by["us"] == nil || by["ap"] == nil {
		t.Fatalf("decoders = %v, want one per cluster", by)
	}
	if by["eu"] == by["us"] || by["us"] == by["ap"] || by["eu"] == by["ap"] {
		t.Error("clusters with registries of their own share a decoder")
	}
	if def != by["eu"] {
		t.Error("the default decoder is not the first cluster's")
	}

	s.cfg.registry = dial("redrive-decoders-demo")
	def, by, err = s.payloadDecoders(registries)
	if err != nil {
		t.Fatal(err)
	}
	if def == nil || by["eu"] != def || by["us"] != def || by["ap"] != def {
		t.Error("the in-process registry's clusters do not share its one decoder")
	}
}
