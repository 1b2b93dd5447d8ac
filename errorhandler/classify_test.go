package errorhandler_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/redrive/redrive/avro"
	eh "github.com/redrive/redrive/errorhandler"
)

func TestDefaultClassification(t *testing.T) {
	pe := &eh.PanicError{Value: "x"}
	for _, tc := range []struct {
		phase eh.Phase
		err   error
		want  eh.Classification
	}{
		{eh.PhaseDecode, errors.New("x"), eh.Classification{Code: avro.CodeDeserializationFailed, Temporality: avro.Permanent}},
		{eh.PhaseProcess, errors.New("x"), eh.Classification{Code: avro.CodeUnknownException, Temporality: avro.Unknown}},
		{eh.PhaseProcess, pe, eh.Classification{Code: eh.CodePanic, Temporality: avro.Unknown}},
		{eh.PhaseProcess, fmt.Errorf("a: %w", fmt.Errorf("b: %w", eh.Temporary(errors.New("x"), "T1"))), eh.Classification{Code: "T1", Temporality: avro.Temporary}},
		{eh.PhaseDecode, eh.Permanent(errors.New("x"), "WRONG_EVENT_TYPE"), eh.Classification{Code: "WRONG_EVENT_TYPE", Temporality: avro.Permanent}},
		{eh.PhaseProcess, eh.Classify(errors.New("x"), "", "bogus"), eh.Classification{Code: avro.CodeUnknownException, Temporality: avro.Unknown}},
		{eh.PhaseProcess, &eh.PanicError{Value: eh.Temporary(errors.New("x"), "T2")}, eh.Classification{Code: "T2", Temporality: avro.Temporary}},
	} {
		if got := eh.DefaultClassification(tc.phase, tc.err); got != tc.want {
			t.Errorf("DefaultClassification(%s, %v) = %+v, want %+v", tc.phase, tc.err, got, tc.want)
		}
		if got := eh.ClassifyWith(nil, tc.phase, tc.err); got != tc.want {
			t.Errorf("ClassifyWith(nil, %s, %v) = %+v, want %+v", tc.phase, tc.err, got, tc.want)
		}
	}
	if eh.Temporary(nil, "x") != nil || eh.Permanent(nil, "x") != nil {
		t.Error("classifying nil must give nil")
	}
	override := func(_ eh.Phase, _ error, def eh.Classification) eh.Classification {
		return eh.Classification{Code: "MINE", Temporality: def.Temporality}
	}
	if c := eh.ClassifyWith(override, eh.PhaseDecode, errors.New("x")); c != (eh.Classification{Code: "MINE", Temporality: avro.Permanent}) {
		t.Errorf("classifier override gave %+v", c)
	}
	empty := func(eh.Phase, error, eh.Classification) eh.Classification { return eh.Classification{} }
	if c := eh.ClassifyWith(empty, eh.PhaseDecode, errors.New("x")); c != (eh.Classification{Code: avro.CodeDeserializationFailed, Temporality: avro.Permanent}) {
		t.Errorf("an empty override must fall back to the default, got %+v", c)
	}
}
