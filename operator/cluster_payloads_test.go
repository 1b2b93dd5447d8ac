package operator_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/google/uuid"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro/confluentsr"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/payload"
	"github.com/redrive/redrive/resend/resendtype"
)

// revisionRecorder is a Resender that keeps the value of each revision it is asked to send.
type revisionRecorder struct {
	mu     sync.Mutex
	values map[uuid.UUID][]byte
}

func (r *revisionRecorder) ResendIDs(context.Context, []uuid.UUID, resendtype.ManualRequest) (resendtype.ManualResult, error) {
	return resendtype.ManualResult{}, errors.New("not used")
}

func (r *revisionRecorder) ResendRevision(_ context.Context, id uuid.UUID, rev resendtype.Revision, _ resendtype.ManualRequest) (resendtype.ItemResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.values[id] = rev.Value
	return resendtype.ItemResult{ID: id, Outcome: resendtype.OutcomeResent}, nil
}

func (r *revisionRecorder) MaxIDs() int { return 100 }

func (r *revisionRecorder) FollowChains(context.Context, resendtype.ChainRequest) ([]resendtype.ChainFollowed, error) {
	return nil, nil
}

func (r *revisionRecorder) value(id uuid.UUID) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.values[id]
}

// clusterDecoder returns a decoder whose own mock registry holds schema as the first schema of
// subject, and the schema's id there.
func clusterDecoder(t *testing.T, scope, subject, schema string) (*payload.Decoder, int) {
	t.Helper()
	reg, err := schemaregistry.NewClient(schemaregistry.NewConfig("mock://" + scope))
	if err != nil {
		t.Fatal(err)
	}
	id, err := reg.Register(subject, schemaregistry.SchemaInfo{Schema: schema}, false)
	if err != nil {
		t.Fatal(err)
	}
	d, err := payload.New(payload.Config{Registry: confluentsr.New(reg)})
	if err != nil {
		t.Fatal(err)
	}
	return d, id
}

// Each failure's payload is decoded, offered for repair and re-encoded with the schema registry
// of its own cluster, where its schema id means its own schema; a failure of a cluster without
// a decoder of its own is decoded with the default one.
func TestPayloadsOfEachCluster(t *testing.T) {
	t.Parallel()
	eu, euID := clusterDecoder(t, "operator-cluster-payloads-eu", "parcels-value",
		`{"type":"record","name":"Card","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"pan","type":"string"}]}`)
	us, usID := clusterDecoder(t, "operator-cluster-payloads-us", "parcels-value",
		`{"type":"record","name":"Parcel","namespace":"ship","fields":[{"name":"weight","type":"long"},{"name":"label","type":"string"}]}`)
	if euID != usID {
		t.Fatalf("schema ids %d and %d differ; the test wants one id meaning two schemas", euID, usID)
	}
	rec := &revisionRecorder{values: map[uuid.UUID][]byte{}}
	c, s := newCore(t, func(cfg *operator.Config) {
		cfg.Payloads, cfg.Resender = eu, rec
		cfg.ClusterPayloads = map[string]*payload.Decoder{"eu": eu, "us": us}
	})
	pool := s.Pool()
	// One Avro datum (7, "4111") in the Confluent framing, with the id both registries share.
	framed := append([]byte{0, 0, 0, 0, 0, 0x0e, 0x08}, "4111"...)
	binary.BigEndian.PutUint32(framed[1:5], uint32(euID))
	insert := func(cluster string) uuid.UUID {
		id := testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: "parcels", Value: framed, State: redrive.StatePermanent})
		if _, err := pool.Exec(context.Background(), `UPDATE failures SET cluster = $2 WHERE id = $1`, id, cluster); err != nil {
			t.Fatal(err)
		}
		return id
	}
	card, parcel := `{"id":7,"pan":"4111"}`, `{"weight":7,"label":"4111"}`
	for _, tc := range []struct {
		cluster, want, repair, wrongRepair string
	}{
		{"eu", card, `{"id":8,"pan":"5500"}`, `{"weight":8,"label":"5500"}`},
		{"us", parcel, `{"weight":8,"label":"5500"}`, `{"id":8,"pan":"5500"}`},
		{"ap", card, `{"id":8,"pan":"5500"}`, `{"weight":8,"label":"5500"}`}, // no decoder of its own: the default's
	} {
		t.Run(tc.cluster, func(t *testing.T) {
			ctx := context.Background()
			id := insert(tc.cluster)
			d, err := c.DecodedPayload(ctx, id, operator.PartValue, admin, payload.FormatAvro)
			if err != nil {
				t.Fatal(err)
			}
			if string(d.JSON) != tc.want {
				t.Errorf("decoded payload = %s, want %s", d.JSON, tc.want)
			}
			v, err := c.Failure(ctx, id, admin)
			if err != nil {
				t.Fatal(err)
			}
			seen, err := c.DecodeFailure(v)
			if err != nil {
				t.Fatal(err)
			}
			if string(seen.JSON) != tc.want {
				t.Errorf("decoded view = %s, want %s", seen.JSON, tc.want)
			}
			st, err := c.RepairStart(ctx, v)
			if err != nil {
				t.Fatal(err)
			}
			if st.Format != operator.EditAvro || compactJSON(t, st.Value) != tc.want {
				t.Errorf("repair starts from %q in %q, want %s in avro", st.Value, st.Format, tc.want)
			}
			_, err = c.Repair(ctx, operator.RepairRequest{ID: id, Principal: "ada", Reason: "fix", Value: []byte(tc.wrongRepair), ValueFormat: operator.EditAvro, Payload: true})
			var ie *operator.InputError
			if !errors.As(err, &ie) {
				t.Errorf("repair in another cluster's schema: error %v, want an *operator.InputError", err)
			}
			if _, err := c.Repair(ctx, operator.RepairRequest{ID: id, Principal: "ada", Reason: "fix", Value: []byte(tc.repair), ValueFormat: operator.EditAvro, Payload: true}); err != nil {
				t.Fatal(err)
			}
			sent := rec.value(id)
			wantSent := append(append([]byte(nil), framed[:5]...), 0x10, 0x08)
			wantSent = append(wantSent, "5500"...)
			if string(sent) != string(wantSent) {
				t.Errorf("repair sent % x, want % x", sent, wantSent)
			}
		})
	}
}

// compactJSON returns the JSON document b without insignificant space.
func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return out.String()
}
