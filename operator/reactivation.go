package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redrive/redrive/internal/clip"

	"github.com/redrive/redrive"
)

// ReactivateRequest asks to feed the service's own dead-letter topic back through the intake:
// up to Limit records, or (UpToNow) up to its end as it is now, from where the last run
// stopped. What still fails stays on the topic.
type ReactivateRequest struct {
	Principal string
	Reason    string
	Limit     int64
	UpToNow   bool
	// Cluster is the Kafka cluster whose dead-letter topic to read; "" is the first configured
	// (Config.Clusters).
	Cluster string
}

// MaxReactivateLimit bounds the records one reactivation reads when given a limit.
const MaxReactivateLimit = 10_000_000

// Reactivate starts a reactivation run in the background (on this instance) and returns it;
// Reactivation shows its progress. Bad input is an *InputError; a run already going (on any
// instance) wraps redrive.ErrConflict; a service without a reactivator wraps redrive.ErrUnavailable.
func (c *Core) Reactivate(ctx context.Context, req ReactivateRequest) (*redrive.Reactivation, error) {
	reason, err := CheckText("reason", req.Reason, MaxReasonLen)
	if err != nil {
		return nil, err
	}
	switch {
	case req.Limit != 0 && req.UpToNow:
		return nil, invalid("limit", "give a limit or up_to_now, not both")
	case req.Limit == 0 && !req.UpToNow:
		return nil, invalid("limit", "give a limit (1 to %d records) or up_to_now", MaxReactivateLimit)
	case req.Limit < 0 || req.Limit > MaxReactivateLimit:
		return nil, invalid("limit", "%d is not from 1 to %d", req.Limit, MaxReactivateLimit)
	case c.cfg.Reactivate == nil:
		return nil, fmt.Errorf("%w: this server does not reactivate its dead-letter topic", redrive.ErrUnavailable)
	}
	clusters := c.Clusters()
	if req.Cluster == "" {
		req.Cluster = clusters[0]
	}
	if !slices.Contains(clusters, req.Cluster) {
		return nil, invalid("cluster", "%q is not a configured cluster (%s)", clip.Text(req.Cluster, clip.Default), strings.Join(clusters, ", "))
	}
	req.Reason = reason
	run, err := c.cfg.Reactivate(context.WithoutCancel(ctx), req)
	if errors.Is(err, redrive.ErrConflict) {
		return nil, fmt.Errorf("%w: %s", redrive.ErrConflict, err.Error())
	}
	return run, err
}

// ReactivationPage is a page of reactivation runs, newest first.
type ReactivationPage struct {
	Items []redrive.Reactivation
	// Next is the cursor of the next (older) page; empty on the last.
	Next string
}

// Reactivations returns a page of the reactivation runs of the own dead-letter topic, newest
// first: the first page when cursor is empty, else the page after the one whose Next it is.
func (c *Core) Reactivations(ctx context.Context, limit int, cursor string) (*ReactivationPage, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return nil, err
	}
	var before int64
	if cursor != "" {
		if before, err = decodeReactivationCursor(cursor); err != nil {
			return nil, err
		}
	}
	page := &ReactivationPage{Items: []redrive.Reactivation{}}
	topic := c.cfg.DeadLetterTopic
	if len(c.cfg.Clusters) > 1 {
		topic = "" // every cluster's
	} else if topic == "" {
		return page, nil
	}
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	runs, more, err := c.store.ListReactivations(ctx, topic, before, limit)
	if err != nil {
		return nil, err
	}
	page.Items = runs
	if more && len(runs) > 0 {
		page.Next = encodeReactivationCursor(runs[len(runs)-1].ID)
	}
	return page, nil
}

// ReactivationView is a reactivation run with its audit entries.
type ReactivationView struct {
	*redrive.Reactivation
	Audit []redrive.AuditEntry
}

// Reactivation returns a run with its progress and audit, or an error wrapping redrive.ErrNotFound.
func (c *Core) Reactivation(ctx context.Context, id int64) (*ReactivationView, error) {
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	r, err := c.store.ReactivationByID(ctx, id)
	if err != nil {
		return nil, fromStore(err)
	}
	audit, err := c.store.ReactivationAudit(ctx, id)
	if err != nil {
		return nil, err
	}
	return &ReactivationView{Reactivation: r, Audit: audit}, nil
}

// Clusters returns the names of the configured Kafka clusters (Config.Clusters), at least
// redrive.DefaultCluster.
func (c *Core) Clusters() []string {
	if len(c.cfg.Clusters) == 0 {
		return []string{redrive.DefaultCluster}
	}
	return slices.Clone(c.cfg.Clusters)
}
