package microvm

import (
	"fmt"
	"io"
)

// cpioWriter writes the "newc" cpio format the kernel unpacks an
// initramfs from.
type cpioWriter struct {
	w   io.Writer
	ino int
	n   int64
}

func (c *cpioWriter) header(name string, mode uint32, size int) error {
	c.ino++
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, 1, 0, size, 0, 0, 0, 0, len(name)+1, 0)
	if err := c.write([]byte(hdr + name + "\x00")); err != nil {
		return err
	}
	return c.pad()
}

func (c *cpioWriter) write(b []byte) error {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return err
}

func (c *cpioWriter) pad() error {
	if r := c.n % 4; r != 0 {
		return c.write(make([]byte, 4-r))
	}
	return nil
}

// dir adds a directory.
func (c *cpioWriter) dir(name string) error { return c.header(name, 0o040755, 0) }

// file adds a regular file.
func (c *cpioWriter) file(name string, mode uint32, data []byte) error {
	if err := c.header(name, 0o100000|mode, len(data)); err != nil {
		return err
	}
	if err := c.write(data); err != nil {
		return err
	}
	return c.pad()
}

// close writes the trailer.
func (c *cpioWriter) close() error { return c.header("TRAILER!!!", 0, 0) }
