package operator

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/jsonstrict"
	"github.com/redrive/redrive/store"
)

// TransferFormat names the NDJSON format of exported failures; each line carries it.
const TransferFormat = "redrive.failure.v1"

// MaxTransferLine bounds one line of an import, in bytes.
const MaxTransferLine = 64 << 20

// Audit actions of transfers.
const (
	AuditActionExport = "export"
	AuditActionImport = "import"
)

// TransferRecord is one exported failure, a line of NDJSON: every stored field, bytes in
// base64 (null for a null key, value or header value), headers in order, offsets as decimal
// strings, and the group's kind, ticket and note.
type TransferRecord struct {
	Format           string           `json:"format"`
	ID               uuid.UUID        `json:"id"`
	State            redrive.State    `json:"state"`
	StateReason      *string          `json:"state_reason"`
	Temporality      avro.Temporality `json:"temporality"`
	ErrorCode        string           `json:"error_code"`
	ErrorMessage     string           `json:"error_message"`
	ErrorDescription *string          `json:"error_description"`
	StackTrace       *string          `json:"stack_trace"`
	StackTraceHash   *string          `json:"stack_trace_hash"`
	EventID          string           `json:"event_id"`
	IdempotenceID    string           `json:"idempotence_id"`
	EventCreated     time.Time        `json:"event_created"`
	PublisherSystem  string           `json:"publisher_system"`
	PublisherService string           `json:"publisher_service"`
	ProcessID        *string          `json:"process_id"`
	Topic            string           `json:"topic"`
	Partition        int32            `json:"partition"`
	Offset           string           `json:"offset"`
	Key              *[]byte          `json:"key"`
	Value            *[]byte          `json:"value"`
	Headers          []transferHeader `json:"headers"`
	// PayloadHidden is true when the exporter could not read payloads: key, value and header
	// values are null and must not be imported as such.
	PayloadHidden bool `json:"payload_hidden,omitzero"`
	// Masked is true when masking rules changed the value or header values.
	Masked          bool        `json:"masked,omitzero"`
	Message         transferMsg `json:"message"`
	CausingMessage  string      `json:"causing_message"`
	Attempt         int         `json:"attempt"`
	NextAttemptAt   *time.Time  `json:"next_attempt_at"`
	ResendFailures  int         `json:"resend_failures"`
	LastResendError *string     `json:"last_resend_error"`
	ResentAt        *time.Time  `json:"resent_at"`
	ClosedReason    *string     `json:"closed_reason"`
	ClosedBy        *string     `json:"closed_by"`
	ClosedAt        *time.Time  `json:"closed_at"`
	Source          transferSrc `json:"source"`
	// Cluster is the Kafka cluster the failure was read from (its resends go there); a line
	// without it, as exports before clusters had names wrote them, imports as
	// redrive.DefaultCluster.
	Cluster   string        `json:"cluster,omitempty"`
	Group     transferGroup `json:"group"`
	CreatedAt time.Time     `json:"created_at"`
	UpdatedAt time.Time     `json:"updated_at"`
}

type transferHeader struct {
	Name  string  `json:"name"`
	Value *[]byte `json:"value"`
}

type transferMsg struct {
	ID            *string    `json:"id"`
	IdempotenceID *string    `json:"idempotence_id"`
	Created       *time.Time `json:"created"`
	System        *string    `json:"system"`
	Service       *string    `json:"service"`
	Type          *string    `json:"type"`
	TypeVersion   *string    `json:"type_version"`
}

type transferSrc struct {
	Format    redrive.SourceFormat `json:"format"`
	Topic     *string              `json:"topic"`
	Partition *int32               `json:"partition"`
	Offset    *string              `json:"offset"`
}

type transferGroup struct {
	PublisherService string  `json:"publisher_service"`
	MessageType      string  `json:"message_type"`
	ErrorCode        string  `json:"error_code"`
	StackTraceHash   string  `json:"stack_trace_hash"`
	Ticket           *string `json:"ticket"`
	Note             *string `json:"note"`
}

func optBytes(b []byte) *[]byte {
	if b == nil {
		return nil
	}
	return &b
}

// newTransferRecord returns the export line of r as reader may see it.
func (c *Core) newTransferRecord(r *store.TransferRecord, reader Reader) *TransferRecord {
	f := &r.Failure
	out := &TransferRecord{Format: TransferFormat, ID: f.ID, State: f.State, StateReason: r.StateReason,
		Temporality: f.Temporality, ErrorCode: f.ErrorCode, ErrorMessage: f.ErrorMessage, ErrorDescription: f.ErrorDescription,
		StackTrace: f.StackTrace, StackTraceHash: f.StackTraceHash, EventID: f.EventID, IdempotenceID: f.IdempotenceID,
		EventCreated: f.EventCreated, PublisherSystem: f.PublisherSystem, PublisherService: f.PublisherService,
		ProcessID: f.ProcessID, Topic: f.Topic, Partition: f.Partition, Offset: strconv.FormatInt(f.Offset, 10),
		Message: transferMsg{ID: f.MessageID, IdempotenceID: f.MessageIdempotenceID, Created: f.MessageCreated,
			System: f.MessageSystem, Service: f.MessageService, Type: f.MessageType, TypeVersion: f.MessageTypeVersion},
		CausingMessage: f.CausingMessage, Attempt: f.Attempt, NextAttemptAt: f.NextAttemptAt, ResendFailures: f.ResendFailures,
		LastResendError: f.LastResendError, ResentAt: f.ResentAt, ClosedReason: f.ClosedReason, ClosedBy: f.ClosedBy,
		ClosedAt: f.ClosedAt, Source: transferSrc{Format: f.SourceFormat, Topic: f.SourceTopic, Partition: f.SourcePartition},
		Group: transferGroup{PublisherService: r.Group.PublisherService, MessageType: r.Group.MessageType,
			ErrorCode: r.Group.ErrorCode, StackTraceHash: r.Group.StackTraceHash, Ticket: r.Group.Ticket, Note: r.Group.Note},
		CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt, Headers: make([]transferHeader, len(f.Headers)), Cluster: f.Cluster}
	if out.Cluster == "" {
		out.Cluster = redrive.DefaultCluster
	}
	if f.SourceOffset != nil {
		s := strconv.FormatInt(*f.SourceOffset, 10)
		out.Source.Offset = &s
	}
	rv := c.viewRecord(f.Key, f.Value, f.Headers, reader, f.Topic)
	out.PayloadHidden, out.Masked = rv.Hidden, rv.Masked
	out.Key, out.Value = optBytes(rv.Key), optBytes(rv.Value)
	for i, h := range rv.Headers {
		out.Headers[i] = transferHeader{Name: h.Name, Value: optBytes(h.Value)}
	}
	return out
}

// ExportResult counts an export.
type ExportResult struct {
	Records int64
}

// Export writes every failure f selects to w as NDJSON (TransferRecord, one per line, oldest
// first), streaming: memory stays constant whatever the count. A criterion reader may not
// search by is a forbidden *InputError and exports nothing. Without the payload permission
// the lines carry no payload bytes (payload_hidden); with it the masking rules apply. The
// export is audited (who, the filter, how many). write is called with each line; its error
// stops the export.
func (c *Core) Export(ctx context.Context, f redrive.Filter, reader Reader, write func(line []byte) error) (ExportResult, error) {
	if err := c.checkFilter(f, reader); err != nil {
		return ExportResult{}, err
	}
	var (
		res ExportResult
		buf bytes.Buffer
	)
	sqlPart, match := f, f.PayloadFieldMatch()
	if match != nil {
		// A decoded field search: each record of the rest of the filter decoded and matched
		// here. The filter is bounded (Filter.Validate), as a payload search's is.
		if err := f.Validate(); err != nil {
			return ExportResult{}, fromStore(err)
		}
		sqlPart = f.SQLPart()
	}
	err := c.store.ExportFailures(ctx, sqlPart, func(r *store.TransferRecord) error {
		if match != nil {
			if ok, _ := c.fieldMatches(match, &redrive.FailureSummary{ID: r.Failure.ID, Topic: r.Failure.Topic, Cluster: r.Failure.Cluster}, r.Failure.Value); !ok {
				return nil
			}
		}
		buf.Reset()
		if err := jsonEncode(&buf, c.newTransferRecord(r, reader)); err != nil {
			return err
		}
		res.Records++
		return write(buf.Bytes())
	})
	if err != nil {
		return res, fromStore(err)
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.QueryTimeout)
	defer cancel()
	if err := c.store.AppendAudit(actx, []redrive.AuditEntry{{Action: AuditActionExport, Principal: reader.Principal,
		Details: map[string]any{"filter": describeFilter(f), "records": res.Records, "payload": reader.Payload}}}, c.cfg.Now()); err != nil {
		return res, err
	}
	return res, nil
}

// Import reads NDJSON failures from r (as Export writes them) and stores them in one
// transaction: a record whose id or idempotence id is already stored is skipped, so importing
// twice stores once; with dryRun nothing is stored and the result says what would be. A line
// that is not a valid record is an *InputError naming its line number (and the field at
// fault), and nothing is stored. A record is held to the intake's own rules
// (store.ValidateTransfer: text without NUL, in UTF-8, within the sizes of the indexed texts
// and of an event) and a group's ticket and note to the limits PATCH /groups/{id} applies. A
// record exported without the payload permission (payload_hidden) is refused, as it has no
// bytes to resend, and so is one exported masked (masked), whose asterisks are not the
// original. The import is audited.
func (c *Core) Import(ctx context.Context, r io.Reader, dryRun bool, principal string) (store.ImportResult, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	line := 0
	next := func() (*store.TransferRecord, error) {
		for {
			b, err := readLine(br, MaxTransferLine)
			if errors.Is(err, io.EOF) && len(b) == 0 {
				return nil, nil
			}
			line++
			if errors.Is(err, errLineTooLong) {
				return nil, invalid(fmt.Sprintf("line %d", line), "longer than %d bytes", MaxTransferLine)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("read line %d: %w", line, err)
			}
			if len(bytes.TrimSpace(b)) == 0 {
				continue
			}
			rec, err := parseTransferRecord(b)
			if err != nil {
				return nil, invalid(fmt.Sprintf("line %d", line), "%v", err)
			}
			return rec, nil
		}
	}
	res, err := c.store.ImportFailures(ctx, dryRun, next)
	var bde *redrive.BadDataError
	if errors.As(err, &bde) {
		// The records passed the intake's rules, yet the database refused a batch of them.
		return res, unprocessable("body", "%s", bde.Error())
	}
	if err != nil {
		return res, fromStore(err)
	}
	if !dryRun {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.QueryTimeout)
		defer cancel()
		if err := c.store.AppendAudit(actx, []redrive.AuditEntry{{Action: AuditActionImport, Principal: principal,
			Details: map[string]any{"read": res.Read, "inserted": res.Inserted, "skipped": res.Skipped}}}, c.cfg.Now()); err != nil {
			return res, err
		}
	}
	return res, nil
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line (without its newline) of at most limit bytes.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var out []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(out)+len(chunk) > limit+1 {
			// Skip the rest of the line so that the error names it, then stop.
			return nil, errLineTooLong
		}
		out = append(out, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(out, "\r\n"), err
	}
}

// parseTransferRecord reads and checks one line.
func parseTransferRecord(b []byte) (*store.TransferRecord, error) {
	var t TransferRecord
	if err := jsonstrict.Unmarshal(b, &t); err != nil {
		return nil, err
	}
	switch {
	case t.Format != TransferFormat:
		return nil, fmt.Errorf("format %q is not %s", t.Format, TransferFormat)
	case t.ID == uuid.Nil:
		return nil, errors.New("id is missing")
	case !t.State.Valid():
		return nil, fmt.Errorf("state %q is not a state", t.State)
	case !t.Temporality.Valid():
		return nil, fmt.Errorf("temporality %q is not a temporality", t.Temporality)
	case t.PayloadHidden:
		return nil, errors.New("the record was exported without the payload permission (payload_hidden): it has no payload to import")
	case t.Masked:
		return nil, errors.New("the record was exported masked (masked: true): its asterisks are not the original bytes; export it with a role that sees the payload unmasked")
	case t.EventID == "" || t.IdempotenceID == "" || t.CausingMessage == "" || t.Topic == "" || t.ErrorCode == "":
		return nil, errors.New("event_id, idempotence_id, causing_message, topic and error_code are required")
	case t.Attempt < 1:
		return nil, errors.New("attempt must be at least 1")
	case t.Group.PublisherService == "" || t.Group.ErrorCode == "":
		return nil, errors.New("group.publisher_service and group.error_code are required")
	}
	sf := t.Source.Format
	if sf == "" {
		sf = redrive.SourceMPFE
	}
	if !sf.Valid() {
		return nil, fmt.Errorf("source.format %q is not a source format", sf)
	}
	cluster := t.Cluster
	if cluster == "" {
		cluster = redrive.DefaultCluster
	} else if err := redrive.ValidateClusterName(cluster); err != nil {
		return nil, fmt.Errorf("cluster: %v", err)
	}
	off, err := strconv.ParseInt(t.Offset, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("offset %q is not a decimal integer", t.Offset)
	}
	r := &store.TransferRecord{StateReason: t.StateReason, Group: redrive.GroupKind{
		PublisherService: t.Group.PublisherService, MessageType: t.Group.MessageType, ErrorCode: t.Group.ErrorCode,
		StackTraceHash: t.Group.StackTraceHash, Ticket: t.Group.Ticket, Note: t.Group.Note}}
	f := &r.Failure
	*f = redrive.Failure{ID: t.ID, State: t.State, Temporality: t.Temporality, ErrorCode: t.ErrorCode, ErrorMessage: t.ErrorMessage,
		ErrorDescription: t.ErrorDescription, StackTrace: t.StackTrace, StackTraceHash: t.StackTraceHash, EventID: t.EventID,
		IdempotenceID: t.IdempotenceID, EventCreated: t.EventCreated, PublisherSystem: t.PublisherSystem,
		PublisherService: t.PublisherService, ProcessID: t.ProcessID, Topic: t.Topic, Partition: t.Partition, Offset: off,
		MessageID: t.Message.ID, MessageIdempotenceID: t.Message.IdempotenceID, MessageCreated: t.Message.Created,
		MessageSystem: t.Message.System, MessageService: t.Message.Service, MessageType: t.Message.Type,
		MessageTypeVersion: t.Message.TypeVersion, CausingMessage: t.CausingMessage, Attempt: t.Attempt,
		NextAttemptAt: t.NextAttemptAt, ResendFailures: t.ResendFailures, LastResendError: t.LastResendError,
		ResentAt: t.ResentAt, ClosedReason: t.ClosedReason, ClosedBy: t.ClosedBy, ClosedAt: t.ClosedAt,
		SourceFormat: sf, SourceTopic: t.Source.Topic, SourcePartition: t.Source.Partition, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		Cluster: cluster}
	if t.Source.Offset != nil {
		so, err := strconv.ParseInt(*t.Source.Offset, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("source.offset %q is not a decimal integer", *t.Source.Offset)
		}
		f.SourceOffset = &so
	}
	if t.Key != nil {
		f.Key = *t.Key
	}
	if t.Value != nil {
		f.Value = *t.Value
	} else {
		f.ValueNull = true
	}
	f.Headers = make([]avro.Header, len(t.Headers))
	for i, h := range t.Headers {
		f.Headers[i] = avro.Header{Name: h.Name}
		if h.Value != nil {
			f.Headers[i].Value = *h.Value
		}
	}
	if f.CreatedAt.IsZero() {
		f.CreatedAt = time.Now()
	}
	if f.UpdatedAt.IsZero() {
		f.UpdatedAt = f.CreatedAt
	}
	if err := validateTransfer(r); err != nil {
		return nil, err
	}
	return r, nil
}

// validateTransfer applies the intake's rules to an imported record (store.ValidateTransfer)
// and the rules of a group's ticket and note as PATCH /groups/{id} applies them.
func validateTransfer(r *store.TransferRecord) error {
	if err := store.ValidateTransfer(r); err != nil {
		return err
	}
	if _, _, err := checkGroupText(GroupUpdate{Ticket: r.Group.Ticket, Note: r.Group.Note}); err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			return fmt.Errorf("group.%s: %s", ie.Field, ie.Detail)
		}
		return err
	}
	return nil
}

// jsonEncode writes v as one line of JSON (no HTML escaping: the bytes are exact).
func jsonEncode(w *bytes.Buffer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
