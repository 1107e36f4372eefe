// Command imgprobe is the one program of the tiny OCI image the template
// tests import: an image with no shell, no libc and no Python. It prints
// what a sandbox of that image gives it: its working directory, its user,
// one environment variable, and the contents of the files it is named
// ("-" for one that does not exist). As "imgprobe start" (the image's
// command, which a sandbox starts) it writes started.txt in its working
// directory and stays.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "start" {
		os.WriteFile("started.txt", []byte("yes"), 0o644)
		for {
			time.Sleep(time.Hour)
		}
	}
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
