// Command hello prints its arguments, for testbuild's own test.
package main

import (
	"fmt"
	"os"
)

func main() { fmt.Println(os.Args[1:]) }
