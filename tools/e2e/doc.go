// Package e2e holds the end-to-end tests: real Linux kernels as client and
// servers (curl, wrk, nginx, the project's test server) talking through
// qsplice-frontend and qsplice-backend in a network-namespace lab built by
// package lab. They need root; CI runs as root.
//
// One lab serves the whole package (building it takes seconds; the 64 MB
// files are generated once). Tests restore any per-namespace setting they
// change.
package e2e
