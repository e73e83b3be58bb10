// SPDX-License-Identifier: MIT

// Go's net package, for smc_go.sh. It makes its socket calls as system calls
// of its own, not through libc, so smcr sees none of them.
//
//	go_net echo-server ADDR           echo every connection back
//	go_net echo-client ADDR FILE      send FILE while reading the echo;
//	                                  print "BYTES SHA256" of what came back
//	go_net banner-client ADDR FILE    the same after reading the server's
//	                                  first line, which must be "HELLO"
package main

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

func main() {
	mode, addr := os.Args[1], os.Args[2]
	if mode == "echo-server" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			panic(err)
		}
		for {
			c, err := l.Accept()
			if err != nil {
				panic(err)
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}
	data, err := os.ReadFile(os.Args[3])
	if err != nil {
		panic(err)
	}
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		panic(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	if mode == "banner-client" {
		line, err := r.ReadString('\n')
		if err != nil || line != "HELLO\n" {
			fmt.Fprintf(os.Stderr, "banner %q: %v\n", line, err)
			os.Exit(1)
		}
	}
	go func() { c.Write(data); c.(*net.TCPConn).CloseWrite() }()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%d %x\n", n, h.Sum(nil))
}
