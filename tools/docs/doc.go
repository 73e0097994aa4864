// Package docs checks that the repository's documents tell the truth
// about the repository (issue 12, item 5: every README command and path
// works as written). It reads README.md, SECURITY.md, examples/README.md
// and docs/*.md and finds what they name:
//
//   - repository paths in backquotes (`splice/shard.go`, `tools/e2e`,
//     `frontend/conf/testdata/example.yaml`) and relative Markdown links,
//     which must exist; anything leading out of the repository
//     (`../shared/...`) is an error;
//   - Go test, fuzz and benchmark names (`TestShardedFrontEnd`,
//     `TestAdversarial*`), which must be functions of some _test.go file;
//   - `make X` commands, whose targets must be in the Makefile;
//   - qsplice binaries (`qsplice-lab up ...`), which must be under cmd/,
//     and the flags a command names, which its -h must list;
//   - `go test ./pkg -run P`, whose package must exist and P match a test;
//   - references to docs/architecture.md sections, here and in Go
//     comments, which must name a section that exists.
//
// The tests (docs_test.go) also run what is safe to run: `make -n` of
// every make command, every binary's -h and -version, and the README's
// key-making block into a temporary directory; each shell line that is
// not run says why.
//
// Place in the data flow: none; documentation checks only.
package docs
