package httpapi

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/accounts"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/template"
)

// maxBuildSpec bounds a build's JSON specification (build.MaxSpecBytes).
const maxBuildSpec = 8 << 20

// BuildView is a build as the API shows it.
func BuildView(b *template.Build) api.TemplateBuild {
	out := api.TemplateBuild{
		ID: b.ID, Template: b.Template, State: b.State, Steps: b.Steps, Step: b.Step, CachedSteps: b.Cached,
		CreatedAt: b.CreatedAt, StartedAt: b.StartedAt, EndedAt: b.EndedAt,
	}
	if b.Err != nil {
		d := ErrorDetail(b.Err)
		out.Error = &d
	}
	if b.Result != nil {
		t := TemplateView(b.Result)
		out.Result = &t
	}
	return out
}

// buildTemplate starts a build. The body is the JSON specification, or a
// tar whose first entry (api.BuildSpecEntry) is the specification and the
// rest the build context; the library reads the context whole, bounded,
// before it answers.
func (s *server) buildTemplate(w http.ResponseWriter, r *http.Request, c caller) error {
	lib, err := s.templates()
	if err != nil {
		return err
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var spec []byte
	var context io.Reader
	switch mt {
	case "application/json", "":
		if r.ContentLength > maxBuildSpec {
			return tooLarge(maxBuildSpec)
		}
		spec, err = io.ReadAll(http.MaxBytesReader(w, r.Body, maxBuildSpec))
		if err != nil {
			var tl *http.MaxBytesError
			if errors.As(err, &tl) {
				return tooLarge(maxBuildSpec)
			}
			return sandbox.Wrap(sandbox.KindInvalid, err, "reading the build specification")
		}
	case "application/x-tar":
		// The bytes the spec's entry took are kept and sent on before the
		// rest of the body: the library reads the whole archive (and
		// skips that first entry), checking every entry as it goes.
		var head bytes.Buffer
		tr := tar.NewReader(io.TeeReader(r.Body, &head))
		hdr, err := tr.Next()
		if err != nil || hdr.Name != api.BuildSpecEntry || hdr.Typeflag != tar.TypeReg {
			return sandbox.Errorf(sandbox.KindInvalid, "a build sent as application/x-tar starts with the file %s (the build specification)", api.BuildSpecEntry)
		}
		if hdr.Size > maxBuildSpec {
			return tooLarge(maxBuildSpec)
		}
		if spec, err = io.ReadAll(tr); err != nil {
			return sandbox.Wrap(sandbox.KindInvalid, err, "reading the build specification")
		}
		context = io.MultiReader(bytes.NewReader(head.Bytes()), r.Body)
	default:
		return sandbox.Errorf(sandbox.KindInvalid, "a build is application/json (the specification) or application/x-tar (the specification, then the build context), not %q", mt)
	}
	// A trial account's build sandboxes are cut to the trial's size, as
	// its creates are (the spec's own mistakes are the library's to say).
	var sizes struct {
		VCPUs     int `json:"vcpus"`
		MemoryMiB int `json:"memory_mib"`
	}
	json.Unmarshal(spec, &sizes)
	size := accounts.SizeRequest{VCPUs: sizes.VCPUs, MemoryMiB: sizes.MemoryMiB}
	if err := s.accounts.CutToTrial(r.Context(), c.account, &size); err != nil {
		return err
	}
	b, err := lib.Build(r.Context(), c.account, c.keyID, spec, context, template.BuildSize{VCPUs: size.VCPUs, MemoryMiB: size.MemoryMiB, DiskGiB: size.DiskGiB})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, BuildView(b))
	return nil
}

func (s *server) getBuild(w http.ResponseWriter, r *http.Request, c caller) error {
	lib, err := s.templates()
	if err != nil {
		return err
	}
	b, err := lib.GetBuild(r.Context(), c.account, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, BuildView(b))
	return nil
}

// buildLogs streams a build's log as NDJSON, following it until the build
// ends unless ?follow=false.
func (s *server) buildLogs(w http.ResponseWriter, r *http.Request, c caller) error {
	lib, err := s.templates()
	if err != nil {
		return err
	}
	follow := true
	if v := r.URL.Query().Get("follow"); v != "" {
		if follow, err = strconv.ParseBool(v); err != nil {
			return sandbox.Errorf(sandbox.KindInvalid, "follow must be true or false, got %q", v)
		}
	}
	id := r.PathValue("id")
	// Not found is answered as an error, before the stream starts.
	if _, err := lib.GetBuild(r.Context(), c.account, id); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	enc := json.NewEncoder(w)
	err = lib.BuildLogs(r.Context(), c.account, id, follow, func(e template.BuildEvent) error {
		ev := api.BuildLogEvent{
			Time: e.Time, Type: e.Type, Step: e.Step, Steps: e.Steps, Cached: e.Cached,
			Message: e.Message, State: e.State, Dropped: e.Dropped,
		}
		if e.Err != nil {
			d := ErrorDetail(e.Err)
			ev.Error = &d
		}
		if err := enc.Encode(ev); err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil {
		// The status is sent: only the client going away ends it early.
		s.log.Debug("build log stream ended", "build_id", id, "err", err)
	}
	return nil
}
