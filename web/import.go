package web

import (
	"errors"
	"net/http"

	"github.com/redrive/redrive/operator"
)

func init() { pageNames = append(pageNames, "import") }

// maxImportUpload bounds a file imported through the UI; larger files go through the API
// (POST /api/v1/failures/import) or the command line (redrive failures import).
const maxImportUpload = 256 << 20

// importPage is the data of the import page.
type importPage struct {
	// Done says an import (or a dry run, DryRun) ran; Read, Inserted and Skipped count it.
	Done                    bool
	DryRun                  bool
	Read, Inserted, Skipped int64
	// Error says why the file was refused; nothing of it was stored.
	Error string
	// MaxBytes bounds the file.
	MaxBytes int
}

func (h *handler) getImport(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "import", "Import failures", importPage{MaxBytes: maxImportUpload})
}

// postImport imports the uploaded NDJSON file as operator.Core.Import does (one transaction,
// idempotent, the intake's rules), or runs it dry.
func (h *handler) postImport(w http.ResponseWriter, r *http.Request) {
	p := importPage{MaxBytes: maxImportUpload, DryRun: r.PostFormValue("dry_run") != ""}
	file, _, err := r.FormFile("file")
	if err != nil {
		p.Error = "Choose an NDJSON file, as an export writes it."
		h.render(w, r, http.StatusBadRequest, "import", "Import failures", p)
		return
	}
	defer file.Close()
	res, err := h.core.Import(r.Context(), file, p.DryRun, sessionFrom(r.Context()).principal.Name)
	var ie *operator.InputError
	switch {
	case errors.As(err, &ie):
		p.Error = "Nothing was imported. " + sentence(ie.Error())
		h.render(w, r, ie.Status(), "import", "Import failures", p)
		return
	case err != nil:
		h.serverError(w, r, "import", err)
		return
	}
	p.Done, p.Read, p.Inserted, p.Skipped = true, res.Read, res.Inserted, res.Skipped
	h.render(w, r, http.StatusOK, "import", "Import failures", p)
}
