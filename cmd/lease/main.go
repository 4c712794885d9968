// Entry point: run the command tree (cli.go).

package main

import "os"

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "devel"

func main() {
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
