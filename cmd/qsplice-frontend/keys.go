package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/qsplice/qsplice/proto"
)

// The key subcommands: the front-end holds the master key, each back-end
// only the key derived from it for its id (proto.DeriveKey), so a
// back-end whose key leaks cannot speak for another.

const keysUsage = `Usage: qsplice-frontend genkey -o FILE
       qsplice-frontend derivekey -master FILE -backend N -o FILE

genkey writes a new random master key for the control protocol (hex,
mode 0600) for the front-end's -key (or control.key_file). derivekey
writes back-end N's key, derived from the master key, for that back-end's
qsplice-backend -id N -key FILE. Neither replaces an existing file.
`

// genkey is `qsplice-frontend genkey`.
func genkey(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("genkey", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, keysUsage); fs.PrintDefaults() }
	out := fs.String("o", "", "file to write the master key to (must not exist)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *out == "" || fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	if err := proto.WriteKeyFile(*out, proto.GenerateKey()); err != nil {
		fmt.Fprintf(stderr, "qsplice-frontend genkey: %v\n", err)
		return 1
	}
	return 0
}

// derivekey is `qsplice-frontend derivekey`.
func derivekey(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("derivekey", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, keysUsage); fs.PrintDefaults() }
	master := fs.String("master", "", "the master key file (genkey)")
	id := fs.Uint("backend", 0, "the back-end's id (its -id), 1..4294967295")
	out := fs.String("o", "", "file to write the back-end's key to (must not exist)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *master == "" || *out == "" || *id == 0 || *id > 1<<32-1 || fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	if err := writeBackendKey(*master, uint32(*id), *out); err != nil {
		fmt.Fprintf(stderr, "qsplice-frontend derivekey: %v\n", err)
		return 1
	}
	return 0
}

func writeBackendKey(masterFile string, id uint32, out string) error {
	master, err := proto.LoadKey(masterFile)
	if err != nil {
		return err
	}
	key, err := proto.DeriveKey(master, id)
	if err != nil {
		return err
	}
	return proto.WriteKeyFile(out, key)
}

func init() {
	// Dispatched before the front-end's own flags are parsed.
	subcommands["genkey"] = func(args []string) int { return genkey(args, os.Stderr) }
	subcommands["derivekey"] = func(args []string) int { return derivekey(args, os.Stderr) }
}
