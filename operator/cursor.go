package operator

import (
	"encoding/base64"
	"encoding/binary"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"
)

// Cursors are opaque to clients: base64url (no padding) of a version byte, a kind byte, and the
// sort key of the last row of the previous page. A failure cursor also holds its sort order, so
// that it cannot be used with the other one.
const (
	cursorVersion        = 1
	cursorFailuresNew    = 'n' // failures, newest first: created_at µs (8), id (16)
	cursorFailuresOld    = 'o' // failures, oldest first: created_at µs (8), id (16)
	cursorGroups         = 'g' // groups: last_seen µs (8), id (8)
	cursorJobs           = 'j' // jobs, newest first: created_at µs (8), id (16)
	cursorRuns           = 'r' // reactivation runs, newest first: id (8)
	cursorAudit          = 'a' // audit entries, oldest first: at µs (8), id (8)
	cursorAuditItem      = 'i' // the entry of one item of a job's batch: at µs (8), id (8), item seq (8)
	failureCursorBytes   = 2 + 8 + 16
	groupCursorBytes     = 2 + 8 + 8 // also audit cursors: a time and an id
	runCursorBytes       = 2 + 8
	auditItemCursorBytes = 2 + 8 + 8 + 8

	// A cursor's time lies between the years 1 and 9999, well inside PostgreSQL's range.
	minCursorMicros = -62135596800000000
	maxCursorMicros = 253402300799999999
)

// encodeFailureCursor returns the cursor of the page after p in order o.
func encodeFailureCursor(p redrive.Position, o redrive.Order) string {
	b := make([]byte, failureCursorBytes)
	b[0] = cursorVersion
	b[1] = cursorFailuresNew
	if o == redrive.OldestFirst {
		b[1] = cursorFailuresOld
	}
	binary.BigEndian.PutUint64(b[2:10], uint64(p.CreatedAt.UnixMicro()))
	copy(b[10:], p.ID[:])
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeFailureCursor validates a failure cursor for order o.
func decodeFailureCursor(s string, o redrive.Order) (*redrive.Position, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != failureCursorBytes || b[0] != cursorVersion {
		return nil, invalid("cursor", "not a cursor of this API: pass next_cursor unchanged")
	}
	want := byte(cursorFailuresNew)
	if o == redrive.OldestFirst {
		want = cursorFailuresOld
	}
	switch b[1] {
	case want:
	case cursorFailuresNew, cursorFailuresOld:
		return nil, invalid("cursor", "made for the other sort order: keep the sort of the first page")
	default:
		return nil, invalid("cursor", "not a failure list cursor")
	}
	micros := int64(binary.BigEndian.Uint64(b[2:10]))
	if micros < minCursorMicros || micros > maxCursorMicros {
		return nil, invalid("cursor", "not a cursor of this API: pass next_cursor unchanged")
	}
	id, _ := uuid.FromBytes(b[10:])
	return &redrive.Position{CreatedAt: time.UnixMicro(micros).UTC(), ID: id}, nil
}

// encodeTimeIDCursor returns a cursor of kind whose sort key is a time and a positive id.
func encodeTimeIDCursor(kind byte, t time.Time, id int64) string {
	b := make([]byte, groupCursorBytes)
	b[0], b[1] = cursorVersion, kind
	binary.BigEndian.PutUint64(b[2:10], uint64(t.UnixMicro()))
	binary.BigEndian.PutUint64(b[10:], uint64(id))
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeTimeIDCursor validates a cursor of kind made by encodeTimeIDCursor; what names the
// list in the error.
func decodeTimeIDCursor(s string, kind byte, what string) (time.Time, int64, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err == nil && len(b) == groupCursorBytes && b[0] == cursorVersion && b[1] == kind {
		id := int64(binary.BigEndian.Uint64(b[10:]))
		micros := int64(binary.BigEndian.Uint64(b[2:10]))
		if id > 0 && micros >= minCursorMicros && micros <= maxCursorMicros {
			return time.UnixMicro(micros).UTC(), id, nil
		}
	}
	return time.Time{}, 0, invalid("cursor", "not %s cursor of this API: pass next_cursor unchanged", what)
}

// encodeGroupCursor returns the cursor of the group page after p.
func encodeGroupCursor(p redrive.GroupPosition) string {
	return encodeTimeIDCursor(cursorGroups, p.LastSeen, p.ID)
}

// decodeGroupCursor validates a group cursor.
func decodeGroupCursor(s string) (*redrive.GroupPosition, error) {
	t, id, err := decodeTimeIDCursor(s, cursorGroups, "a group list")
	if err != nil {
		return nil, err
	}
	return &redrive.GroupPosition{LastSeen: t, ID: id}, nil
}

// encodeAuditCursor returns the cursor of the audit page after p.
func encodeAuditCursor(p redrive.AuditPosition) string {
	if p.Seq == 0 {
		return encodeTimeIDCursor(cursorAudit, p.At, p.ID)
	}
	b := make([]byte, auditItemCursorBytes)
	b[0], b[1] = cursorVersion, cursorAuditItem
	binary.BigEndian.PutUint64(b[2:10], uint64(p.At.UnixMicro()))
	binary.BigEndian.PutUint64(b[10:18], uint64(p.ID))
	binary.BigEndian.PutUint64(b[18:], uint64(p.Seq))
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeAuditCursor validates an audit cursor.
func decodeAuditCursor(s string) (*redrive.AuditPosition, error) {
	if b, err := base64.RawURLEncoding.Strict().DecodeString(s); err == nil && len(b) == auditItemCursorBytes &&
		b[0] == cursorVersion && b[1] == cursorAuditItem {
		micros, id, seq := int64(binary.BigEndian.Uint64(b[2:10])), int64(binary.BigEndian.Uint64(b[10:18])), int64(binary.BigEndian.Uint64(b[18:]))
		if id > 0 && seq > 0 && micros >= minCursorMicros && micros <= maxCursorMicros {
			return &redrive.AuditPosition{At: time.UnixMicro(micros).UTC(), ID: id, Seq: seq}, nil
		}
		return nil, invalid("cursor", "not an audit list cursor of this API: pass next_cursor unchanged")
	}
	t, id, err := decodeTimeIDCursor(s, cursorAudit, "an audit list")
	if err != nil {
		return nil, err
	}
	return &redrive.AuditPosition{At: t, ID: id}, nil
}

// encodeReactivationCursor returns the cursor of the reactivation page after the run id.
func encodeReactivationCursor(id int64) string {
	b := make([]byte, runCursorBytes)
	b[0], b[1] = cursorVersion, cursorRuns
	binary.BigEndian.PutUint64(b[2:], uint64(id))
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeReactivationCursor validates a reactivation cursor and returns its run id.
func decodeReactivationCursor(s string) (int64, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != runCursorBytes || b[0] != cursorVersion || b[1] != cursorRuns {
		return 0, invalid("cursor", "not a reactivation list cursor of this API: pass next_cursor unchanged")
	}
	id := int64(binary.BigEndian.Uint64(b[2:]))
	if id <= 0 {
		return 0, invalid("cursor", "not a reactivation list cursor of this API: pass next_cursor unchanged")
	}
	return id, nil
}

// encodeJobCursor returns the cursor of the job page after p.
func encodeJobCursor(p redrive.JobPosition) string {
	b := make([]byte, failureCursorBytes)
	b[0], b[1] = cursorVersion, cursorJobs
	binary.BigEndian.PutUint64(b[2:10], uint64(p.CreatedAt.UnixMicro()))
	copy(b[10:], p.ID[:])
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeJobCursor validates a job cursor.
func decodeJobCursor(s string) (*redrive.JobPosition, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != failureCursorBytes || b[0] != cursorVersion || b[1] != cursorJobs {
		return nil, invalid("cursor", "not a job list cursor of this API: pass next_cursor unchanged")
	}
	micros := int64(binary.BigEndian.Uint64(b[2:10]))
	if micros < minCursorMicros || micros > maxCursorMicros {
		return nil, invalid("cursor", "not a job list cursor of this API: pass next_cursor unchanged")
	}
	id, _ := uuid.FromBytes(b[10:])
	return &redrive.JobPosition{CreatedAt: time.UnixMicro(micros).UTC(), ID: id}, nil
}
