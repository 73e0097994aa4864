package frontend

import (
	"strings"
	"testing"

	"github.com/qsplice/qsplice/internal/gather"
)

// A configuration with a bad -gather is refused with the flag's name.
func TestConfigRefusesABadGather(t *testing.T) {
	cfg := Config{Gather: gather.Config{Below: 0.5, Above: 0.8}}
	err := cfg.validate()
	if err == nil || !strings.Contains(err.Error(), "-gather") {
		t.Fatalf("validate = %v, want an error naming -gather", err)
	}
}
