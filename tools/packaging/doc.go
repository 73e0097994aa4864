// Package packaging holds no code: its tests check what an operator gets
// from `make install` (issue 12, items 3 and 4). They build every binary
// with the Makefile (VERSION set, so -version must print it), install
// into a temporary DESTDIR and check the tree, verify the systemd units
// with systemd-analyze, run `qsplice-frontend validate` on every example,
// and run each binary with flags it must refuse before it creates
// anything.
//
// The tests need make and Go on PATH (as `make test` has); systemd-analyze
// (Debian package systemd) for the units, which fail rather than skip
// without it when CI=true.
package packaging
