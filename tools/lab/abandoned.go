package lab

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/qsplice/qsplice/tools/netns"
)

// Abandoned labs. Down removes a lab also when its run failed, but a run
// that is killed (SIGKILL, a test binary's timeout, a machine's session
// ending under a long make test) never gets to it: its namespaces, with
// their veths, bridge and TAPs, stay behind under the run's unique name.
// Nothing runs in them any more, since the kernel killed every process
// with the run, so a later run can tell them apart from a live lab and
// remove them with Down.

// Abandoned returns the names of the labs for which want(name) holds
// whose namespaces (qs-NAME-*) hold no process and were all made more
// than olderThan before now. The age keeps a lab that another run is
// building, whose namespaces are empty until its processes start, off
// the list.
func Abandoned(want func(name string) bool, olderThan time.Duration, now time.Time) ([]string, error) {
	const every = "qs-" // nsPrefix of any lab
	namespaces, err := netns.List(every)
	if err != nil {
		return nil, err
	}
	byLab := map[string][]string{}
	for _, ns := range namespaces {
		name, _, ok := strings.Cut(strings.TrimPrefix(ns, every), "-")
		if !ok || checkName(name) != nil || !want(name) {
			continue
		}
		byLab[name] = append(byLab[name], ns)
	}
	var names []string
	var errs []error
	for name, nss := range byLab {
		live := false
		for _, ns := range nss {
			fi, err := os.Stat(netns.Path(ns))
			if err != nil {
				live = true // gone or unreadable: not ours to judge
				break
			}
			if now.Sub(fi.ModTime()) <= olderThan {
				live = true
				break
			}
			pids, err := netns.Pids(ns)
			if err != nil {
				errs = append(errs, err)
				live = true
				break
			}
			if len(pids) > 0 {
				live = true
				break
			}
		}
		if !live {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, errors.Join(errs...)
}

// Prune removes with Down every lab Abandoned finds, and returns the
// names of those it removed; the errors of the others are joined.
func Prune(want func(name string) bool, olderThan time.Duration, now time.Time) ([]string, error) {
	names, err := Abandoned(want, olderThan, now)
	errs := []error{err}
	var removed []string
	for _, name := range names {
		if err := Down(name, ""); err != nil {
			errs = append(errs, fmt.Errorf("lab %s: %w", name, err))
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}
