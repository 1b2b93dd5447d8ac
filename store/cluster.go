package store

import "github.com/redrive/redrive"

// DefaultCluster is redrive.DefaultCluster.
//
// Deprecated: use redrive.DefaultCluster.
const DefaultCluster = redrive.DefaultCluster

// MaxClusterNameLen is redrive.MaxClusterNameLen.
//
// Deprecated: use redrive.MaxClusterNameLen.
const MaxClusterNameLen = redrive.MaxClusterNameLen

// ValidateClusterName is redrive.ValidateClusterName.
//
// Deprecated: use redrive.ValidateClusterName.
func ValidateClusterName(name string) error { return redrive.ValidateClusterName(name) }

// sourceCluster returns the source's cluster, DefaultCluster for the zero value.
func sourceCluster(s Source) string { return s.ClusterOf() }
