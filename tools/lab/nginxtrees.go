package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/qsplice/qsplice/tools/content"
)

// TreeDataPath is the file nginx on back-end k serves as tree's
// /data/<size> (content.TreePath): the plain DataPath for the full tree.
func (l *Lab) TreeDataPath(k int, size int64, tree int) string {
	if tree >= l.cfg.Trees {
		return l.DataPath(k, size)
	}
	return l.statePath(wwwDir, backendHost(k), "tree"+strconv.Itoa(tree), "data", content.FormatSize(size))
}

// writeTreeContent generates back-end k's lower content trees: for each
// size and tree k < Trees, content.NewTreeBody's bytes. A file of the
// right size is kept, as in writeContent.
func (l *Lab) writeTreeContent(k int) error {
	for tree := 1; tree < l.cfg.Trees; tree++ {
		for _, size := range l.cfg.Files {
			path := l.TreeDataPath(k, size, tree)
			body := content.NewTreeBody(uint32(k), size, tree, l.cfg.Trees)
			if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() == body.Size() {
				continue
			}
			if err := writeBody(path, body); err != nil {
				return fmt.Errorf("lab: tree %d content for %s: %w", tree, filepath.Base(path), err)
			}
		}
	}
	return nil
}

func writeBody(path string, body *content.Body) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = body.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}
