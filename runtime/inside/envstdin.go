package inside

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// maxEnvPreamble bounds the environment an exec may send this way.
const maxEnvPreamble = 1 << 20

// WriteEnvPreamble writes env as ReadEnvPreamble reads it: a decimal length,
// a newline, then that many bytes of a JSON array of K=V strings. A backend
// whose exec puts its command in a URL and in the process's argv
// (Kubernetes) sends an exec's environment this way, on the exec's standard
// input, so that no key or token is in an audit log or in /proc/PID/cmdline,
// which every user of the container may read.
func WriteEnvPreamble(w io.Writer, env []string) error {
	body, err := json.Marshal(env)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, strconv.Itoa(len(body))+"\n"); err != nil {
		return err
	}
	_, err = w.Write(body)
	return err
}

// ReadEnvPreamble reads the environment WriteEnvPreamble wrote from r, and
// not one byte more: what follows is the command's own input, and r (the
// process's standard input, unbuffered) passes on to it.
func ReadEnvPreamble(r io.Reader) ([]string, error) {
	var digits []byte
	one := make([]byte, 1)
	for {
		if _, err := io.ReadFull(r, one); err != nil {
			return nil, fmt.Errorf("read the environment from standard input: %w", err)
		}
		if one[0] == '\n' {
			break
		}
		if one[0] < '0' || one[0] > '9' || len(digits) == 8 {
			return nil, errors.New("read the environment from standard input: not a length")
		}
		digits = append(digits, one[0])
	}
	n, err := strconv.Atoi(string(digits))
	if err != nil || n > maxEnvPreamble {
		return nil, fmt.Errorf("read the environment from standard input: length %q", digits)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("read the environment from standard input: %w", err)
	}
	var env []string
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("read the environment from standard input: %w", err)
	}
	return env, nil
}
