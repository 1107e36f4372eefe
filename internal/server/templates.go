package server

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/layer"
	"github.com/withruntime/withruntime/internal/manager"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/templates"
)

// collectEvery is how often the library frees what removed templates
// no longer need.
const collectEvery = 15 * time.Second

// openTemplates opens the layers of dataDir and the template library over
// st; the library is told the manager once it exists (SetSandboxes).
// Templates are a single box's: their layers are on its disk.
func openTemplates(cfg Config, dataDir string, st store.Store) (*layer.Store, *templates.Library, error) {
	layers, err := layer.Open(dataDir)
	if err != nil {
		return nil, nil, err
	}
	// What a crash left of an import in progress.
	incoming := filepath.Join(dataDir, "templates", "incoming")
	os.RemoveAll(incoming)
	q := cfg.TemplateQuota
	if q.MaxCount == 0 {
		q.MaxCount = templates.DefaultMaxCount
	}
	if q.MaxBytes == 0 {
		q.MaxBytes = templates.DefaultMaxBytes
	}
	lib := templates.New(templates.Config{
		Store: st, Layers: layers, Quota: q, Logger: cfg.Logger,
		TempDir: incoming, PrivateRegistries: cfg.PrivateRegistries,
		// Layers and imports' archives are written here: checked against
		// its free space less the disk promised to sandboxes (the
		// manager's, told with SetSandboxes).
		DiskDir:  filepath.Join(dataDir, "templates"),
		BuildDir: filepath.Join(dataDir, "templates", "builds"),
		// The built-in image's recipe names what builds on it stand on.
		DefaultImageKey: image.Default.Key(),
		Limits:          layer.Limits{MaxBytes: q.MaxBytes, MaxEntries: templates.DefaultMaxEntries, MaxEntrySize: q.MaxBytes},
	})
	return layers, lib, nil
}

// The manager tells the library the disk its sandboxes were promised.
var _ templates.DiskPromiser = (*manager.Manager)(nil)

// collectTemplates frees removed templates' layers until stop closes.
func collectTemplates(lib *templates.Library, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-stop
		cancel()
	}()
	lib.Run(ctx, collectEvery)
}
