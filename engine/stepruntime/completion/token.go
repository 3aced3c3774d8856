package completion

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A job calls back (output-data, step-completion) with a per-attempt step
// token: an HMAC of the attempt's step_instance_uuid with a server key
// kept in the database (migration 00120). The uuid alone proves nothing:
// any reader sees it among the step's params. The token is computed, not
// stored, so no read API can return it; the engine hands it only to the
// attempt's job (Attempt.CallbackToken).

// TokenHeader carries the step token of a callback; the body field
// step_token is the alternative, for a job that sends back the identity it
// received.
const TokenHeader = "X-Maestro-Step-Token"

// ErrBadToken reports a callback without the attempt's step token.
var ErrBadToken = errors.New("the step token does not match the step attempt")

const sqlCallbackKey = `SELECT key FROM step_callback_key WHERE id = 1`

// Tokens computes and checks step tokens; it reads the key once.
type Tokens struct {
	db  *pgxpool.Pool
	mu  sync.Mutex
	key []byte
}

// NewTokens returns tokens keyed by the key stored in db.
func NewTokens(db *pgxpool.Pool) *Tokens { return &Tokens{db: db} }

func (t *Tokens) loadKey(ctx context.Context) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.key != nil {
		return t.key, nil
	}
	var key []byte
	err := t.db.QueryRow(ctx, sqlCallbackKey).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errors.New("read the step callback key: step_callback_key is empty")
	}
	if err != nil {
		return nil, fmt.Errorf("read the step callback key: %w", err)
	}
	t.key = key
	return key, nil
}

// Token returns the step token of the attempt with stepUUID.
func (t *Tokens) Token(ctx context.Context, stepUUID string) (string, error) {
	key, err := t.loadKey(ctx)
	if err != nil {
		return "", err
	}
	return sign(key, stepUUID), nil
}

// Verify returns nil when token is the step token of stepUUID, else an
// error wrapping ErrBadToken.
func (t *Tokens) Verify(ctx context.Context, stepUUID, token string) error {
	if token == "" {
		return fmt.Errorf("%w: no step token (the %s header or step_token); the attempt's job receives it", ErrBadToken, TokenHeader)
	}
	key, err := t.loadKey(ctx)
	if err != nil {
		return err
	}
	if !hmac.Equal([]byte(sign(key, stepUUID)), []byte(token)) {
		return ErrBadToken
	}
	return nil
}

func sign(key []byte, stepUUID string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("maestro step callback\x00" + stepUUID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Signer reads the key (once) and returns a function that computes step
// tokens without further I/O, for the engine to hand to every attempt.
func (t *Tokens) Signer(ctx context.Context) (func(stepUUID string) string, error) {
	key, err := t.loadKey(ctx)
	if err != nil {
		return nil, err
	}
	return func(stepUUID string) string { return sign(key, stepUUID) }, nil
}
