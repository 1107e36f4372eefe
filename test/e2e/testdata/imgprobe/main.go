// Command imgprobe is the one program of the tiny OCI image the template
// tests import: an image with no shell, no libc and no Python. It prints
// what a sandbox of that image gives it: its working directory, its user,
// one environment variable, and the contents of the files it is named
// ("-" for one that does not exist).
package main

import (
	"fmt"
	"os"
)

func main() {
	wd, _ := os.Getwd()
	fmt.Printf("cwd=%s uid=%d FOO=%s\n", wd, os.Getuid(), os.Getenv("FOO"))
	for _, name := range os.Args[1:] {
		data, err := os.ReadFile(name)
		if err != nil {
			fmt.Printf("%s: -\n", name)
			continue
		}
		fmt.Printf("%s: %s\n", name, data)
	}
}
