package store

// sourceFormat returns the source's format, SourceMPFE for the zero value.
func sourceFormat(s Source) SourceFormat {
	if s.Format == "" {
		return SourceMPFE
	}
	return s.Format
}
