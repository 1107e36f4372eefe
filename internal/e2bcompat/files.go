package e2bcompat

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// envd's plain HTTP /files: GET reads a file's bytes, POST writes files
// (multipart, one part per file, or one octet-stream body).

// maxFilesPerUpload bounds the parts of one multipart write (every part,
// files or not); each file is
// bounded by the files API itself (api.MaxFileBody).
const maxFilesPerUpload = 1000

// maxOtherPart bounds a part of an upload that is not a file (skipped).
const maxOtherPart = 64 << 10

func init() { envdRoutes = append(envdRoutes, registerFiles) }

func registerFiles(s *Server, mux *http.ServeMux) {
	mux.HandleFunc("GET /files", s.readFile)
	mux.HandleFunc("POST /files", s.writeFiles)
}

// writtenFile is one element of the answer to a write.
type writtenFile struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
	// Metadata is what the upload set (envd 0.6.2).
	Metadata map[string]string `json:"metadata,omitempty"`
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	sb, err := s.sandbox(r)
	if err != nil {
		writeFilesError(w, err)
		return
	}
	q := r.URL.Query()
	if err := checkSigned(r, "read"); err != nil {
		writeFilesError(w, err)
		return
	}
	if q.Get("path") == "" {
		writeE2BError(w, http.StatusBadRequest, "path is required")
		return
	}
	rc, err := openAs(r.Context(), sb, resolvePath(sb.User, q.Get("path")))
	if err != nil {
		writeFilesError(w, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	// A file that fits the first read goes with its length (the JS client
	// reads "content-length: 0" as empty); a larger one streams.
	head := make([]byte, 32<<10)
	n, err := io.ReadFull(rc, head)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write(head[:n])
		return
	}
	if err != nil {
		writeFilesError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
	w.Write(head)
	io.Copy(w, rc) // a read that breaks midway can only cut the body short
}

func (s *Server) writeFiles(w http.ResponseWriter, r *http.Request) {
	sb, err := s.sandbox(r)
	if err != nil {
		writeFilesError(w, err)
		return
	}
	if err := checkSigned(r, "write"); err != nil {
		writeFilesError(w, err)
		return
	}
	attrs := uploadMetadata(r.Header)
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var out []writtenFile
	switch mt {
	case "multipart/form-data":
		out, err = writeMultipart(r, sb, params["boundary"], attrs)
	case "application/octet-stream", "":
		out, err = writeOctets(r, sb, attrs)
	default:
		err = &Error{Status: http.StatusBadRequest, Message: "Content-Type must be multipart/form-data or application/octet-stream"}
	}
	if err != nil {
		writeFilesError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// writeOctets writes the body, gzip-decoded if so encoded, to ?path=.
func writeOctets(r *http.Request, sb *Sandbox, attrs map[string]string) ([]writtenFile, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return nil, &Error{Status: http.StatusBadRequest, Message: "path is required for an application/octet-stream upload"}
	}
	var body io.Reader = r.Body
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, &Error{Status: http.StatusBadRequest, Message: "body is not gzip: " + err.Error()}
		}
		defer zr.Close()
		body = zr
	default:
		return nil, &Error{Status: http.StatusBadRequest, Message: "unsupported Content-Encoding " + enc}
	}
	fi, err := writeAs(r.Context(), sb, resolvePath(sb.User, p), body, attrs)
	if err != nil {
		return nil, err
	}
	return []writtenFile{written(fi)}, nil
}

// writeMultipart writes each part named "file" to the path its filename
// holds; ?path=, sent with a single file, names the first one.
func writeMultipart(r *http.Request, sb *Sandbox, boundary string, attrs map[string]string) ([]writtenFile, error) {
	if boundary == "" {
		return nil, &Error{Status: http.StatusBadRequest, Message: "multipart body without a boundary"}
	}
	mr := multipart.NewReader(r.Body, boundary)
	qpath := r.URL.Query().Get("path")
	var out []writtenFile
	parts := 0
	for {
		part, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &Error{Status: http.StatusBadRequest, Message: "invalid multipart body: " + err.Error()}
		}
		if parts++; parts > maxFilesPerUpload {
			return nil, &Error{Status: http.StatusBadRequest, Message: "more than 1000 parts in one upload"}
		}
		field, name := partNames(part)
		if field != "file" {
			// Skipped, but read: bounded like a part that counts.
			n, err := io.Copy(io.Discard, io.LimitReader(part, maxOtherPart+1))
			part.Close()
			if err != nil {
				return nil, &Error{Status: http.StatusBadRequest, Message: "invalid multipart body: " + err.Error()}
			}
			if n > maxOtherPart {
				return nil, &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("a part not named \"file\" is over %d bytes", maxOtherPart)}
			}
			continue
		}
		target := name
		if len(out) == 0 && qpath != "" {
			target = qpath
		}
		if target == "" {
			return nil, &Error{Status: http.StatusBadRequest, Message: "a file part has no filename (the path to write)"}
		}
		fi, err := writeAs(r.Context(), sb, resolvePath(sb.User, target), part, attrs)
		part.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, written(fi))
	}
	if len(out) == 0 {
		return nil, &Error{Status: http.StatusBadRequest, Message: `no file in the upload: send parts named "file"`}
	}
	return out, nil
}

// partNames are a part's form field and filename. The filename is the
// whole path the client sent: Part.FileName would keep only its base.
func partNames(p *multipart.Part) (field, filename string) {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		return "", ""
	}
	return params["name"], params["filename"]
}

func written(fi *api.FileInfo) writtenFile {
	t := "file"
	if fi.Type == api.FileTypeDir {
		t = "dir"
	}
	return writtenFile{Name: fi.Name, Type: t, Path: fi.Path, Metadata: fileMetadata(fi.Attrs)}
}

// checkSigned verifies a pre-signed URL's signature when the request has
// one. The signature is made with the access token the request carries:
// the token is what authorizes, so a signature never stands in for it (a
// request without a token was refused before).
func checkSigned(r *http.Request, op string) error {
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" {
		return nil
	}
	err := checkFileSignature(sig, q.Get("signature_expiration"), q.Get("path"), op, q.Get("username"),
		r.Header.Get(headerAccessToken), time.Now())
	if err != nil {
		return &Error{Status: http.StatusUnauthorized, Message: err.Error()}
	}
	return nil
}

// writeFilesError answers err the way E2B's /files does: a full disk is
// 507, which the clients raise as NotEnoughSpace.
func writeFilesError(w http.ResponseWriter, err error) {
	var apiErr *client.APIError
	if errors.As(err, &apiErr) && apiErr.Code == client.CodePayloadTooLarge && diskFull(apiErr.Message) {
		writeE2BError(w, http.StatusInsufficientStorage, message(err))
		return
	}
	writeError(w, err)
}

func diskFull(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "no space left") || strings.Contains(m, "quota exceeded")
}
