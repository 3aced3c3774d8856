package cli

import (
	"fmt"
	"io"
)

// maxDefinitionBytes bounds a definition read from standard input.
const maxDefinitionBytes = 8 << 20

func readAll(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxDefinitionBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxDefinitionBytes {
		return nil, fmt.Errorf("the definition is larger than %d bytes", maxDefinitionBytes)
	}
	return b, nil
}
