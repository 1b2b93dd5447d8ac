package redrive

import (
	"fmt"
	"regexp"
)

// DefaultCluster is the name of the Kafka cluster of a single-cluster configuration (the
// -kafka-bootstrap flags), and the cluster of every failure stored before clusters had names.
const DefaultCluster = "default"

// MaxClusterNameLen bounds a cluster's name.
const MaxClusterNameLen = 63

// clusterNameRE is the form of a cluster's name: lower-case letters, digits, '-' and '_',
// starting with a letter or digit; it is a metrics label value, a URL query value and a part
// of log lines, so it stays plain.
var clusterNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// ValidateClusterName returns an error saying what is wrong with name as a cluster's name, or
// nil.
func ValidateClusterName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("is empty")
	case len(name) > MaxClusterNameLen:
		return fmt.Errorf("%q is longer than %d characters", name[:MaxClusterNameLen]+"…", MaxClusterNameLen)
	case !clusterNameRE.MatchString(name):
		return fmt.Errorf("%q is not a cluster name: lower-case letters, digits, '-' and '_', starting with a letter or digit", name)
	}
	return nil
}

// ClusterOf returns the cluster of a source: DefaultCluster for the zero value.
func (s Source) ClusterOf() string {
	if s.Cluster == "" {
		return DefaultCluster
	}
	return s.Cluster
}

// validateClusters checks the filter's cluster names.
func (f *Filter) validateClusters() error {
	for _, c := range f.Clusters {
		if err := ValidateClusterName(c); err != nil {
			return &FilterError{Field: "cluster", Detail: clipText(err.Error())}
		}
	}
	return nil
}
