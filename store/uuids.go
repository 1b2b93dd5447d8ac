package store

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// google/uuid's UUID is a driver.Valuer whose value is its text form: pgx encodes a []uuid.UUID
// parameter element by element through that text, after trying and failing a binary encoding
// for each (an error value built and dropped per element). For the arrays of a batch (hundreds
// of ids) that costs more client CPU than the rest of the statement. The statements of the
// resend and job paths pass their ids through these instead, which pgx encodes in binary.

// uuidArray returns ids as a uuid[] parameter.
func uuidArray(ids []uuid.UUID) [][16]byte {
	out := make([][16]byte, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// nullableUUIDArray returns ids as a uuid[] parameter; a nil element is NULL.
func nullableUUIDArray(ids []*uuid.UUID) []pgtype.UUID {
	out := make([]pgtype.UUID, len(ids))
	for i, id := range ids {
		if id != nil {
			out[i] = pgtype.UUID{Bytes: *id, Valid: true}
		}
	}
	return out
}

// collectUUIDs reads the uuid in the first column of each row.
func collectUUIDs(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close()
}) ([]uuid.UUID, error) {
	defer rows.Close()
	var (
		out []uuid.UUID
		b   [16]byte
	)
	for rows.Next() {
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}
