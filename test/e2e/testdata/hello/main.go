// hello is the program of the end-to-end test image: it proves that a binary built here runs
// as a pod on the real kubelet, and that its output reaches `kubectl logs`.
package main

import (
	"fmt"
	"os"
)

func main() {
	host, _ := os.Hostname()
	fmt.Printf("hello from sunk e2e, pod %s, message %s\n", host, os.Getenv("SUNK_MESSAGE"))
}
