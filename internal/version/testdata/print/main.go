// Command print prints the version it was built as, for the linker test
// of internal/version.
package main

import (
	"fmt"

	"github.com/bindery-dev/bindery/internal/version"
)

func main() { fmt.Println(version.String()) }
