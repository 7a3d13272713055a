package cmdutil

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// SecretPrompt returns a function that asks for a secret on the terminal,
// with prompt on standard error and without echoing what is typed; nil
// when standard input is not a terminal. A secret is read this way, or
// from a pipe, rather than from a flag, because ps and the shell's history
// show every command line.
func SecretPrompt(f *Factory, prompt string) func() (string, error) {
	in, ok := f.IO.In.(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return nil
	}
	return func() (string, error) {
		fmt.Fprint(f.IO.ErrOut, prompt)
		b, err := term.ReadPassword(int(in.Fd()))
		fmt.Fprintln(f.IO.ErrOut)
		return string(b), err
	}
}

// ReadSecret reads a secret with ask (SecretPrompt) when it is not nil,
// else the first line of standard input, without its line ending.
func ReadSecret(f *Factory, ask func() (string, error)) (string, error) {
	if ask != nil {
		return ask()
	}
	line, err := bufio.NewReader(f.IO.In).ReadString('\n')
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return strings.TrimRight(line, "\r\n"), err
}
