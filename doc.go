// Package redrive is the domain of redrive, a leaf that imports no other package of the
// module but the MPFE types of package avro: the states of a failure and the transitions
// between them, the failure itself (its summary, detail, source and causing message), its
// group, jobs and their items, audit entries, ordering-guard chains, reactivations, revisions,
// notifications, the failure filter and its validation, the one error vocabulary
// (ErrNotFound, ErrConflict, ErrBadFilter, …, and the *XxxError types that wrap them) and the
// one outcome vocabulary (Outcome) of resends, closes and operator actions.
//
// Package store turns these types into SQL and back: it maps pgx errors to the errors here
// and returns these types. The operator core, the resender, the jobs runner, the intake and
// the translators api and web speak them; api and web never import store. Only api maps the
// errors to HTTP statuses (web to pages).
package redrive
