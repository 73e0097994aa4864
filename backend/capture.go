package backend

import (
	"fmt"
	"os"
	"time"

	"github.com/qsplice/qsplice/splice/link"
)

func openCapture(l link.Link, path string) (link.Link, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("backend: capture: %w", err)
	}
	pw, err := link.NewPcapWriter(f)
	if err != nil {
		return nil, fmt.Errorf("backend: capture: %w", err)
	}
	return link.NewRecorder(l, pw, time.Now), nil
}
