package archive_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/maestro-aws/maestro/engine/archive"
	"github.com/maestro-aws/maestro/localstack"
)

func TestKeyPartitionsByWorkflowAndDate(t *testing.T) {
	t.Parallel()
	ended := time.Date(2026, 11, 27, 23, 30, 0, 0, time.FixedZone("X", -3*3600)) // 02:30 UTC on the 28th
	got := archive.Key("wf/with space", ended, "b1")
	if want := "runs/workflow_id=wf%2Fwith%20space/date=2026-11-28/b1.jsonl.gz"; got != want {
		t.Fatalf("key %s, want %s", got, want)
	}
}

func TestEncodeDecode(t *testing.T) {
	t.Parallel()
	in := []json.RawMessage{json.RawMessage(`{"a": 1,
	  "b": "x"}`), json.RawMessage(`{"a":2}`), json.RawMessage(`{"a":3}`)}
	body, err := archive.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if err := archive.Decode(body, func(l json.RawMessage) bool { out = append(out, string(l)); return len(out) < 2 }); err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0] != `{"a":1,"b":"x"}` || out[1] != `{"a":2}` {
		t.Fatalf("decoded %q (and stopped when asked)", out)
	}
	if _, err := archive.Encode([]json.RawMessage{json.RawMessage(`{`)}); err == nil {
		t.Fatal("a record that is not JSON was encoded")
	}
	if err := archive.Decode([]byte("plain"), func(json.RawMessage) bool { return true }); err == nil {
		t.Fatal("a body that is not gzip decoded")
	}
}

// exercise puts, reads back, replaces and misses objects of a store.
func exercise(t *testing.T, s archive.Store) {
	t.Helper()
	ctx := context.Background()
	key := archive.Key("wf", time.Now(), "batch-1")
	if err := s.Put(ctx, key, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, key, []byte("two")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, key)
	if err != nil || string(got) != "two" {
		t.Fatalf("get: %q, %v", got, err)
	}
	if _, err := s.Get(ctx, archive.Key("wf", time.Now(), "missing")); !errors.Is(err, archive.ErrNotFound) {
		t.Fatalf("missing object: %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"", "/abs", "a/../b", "a//b"} {
		if err := s.Put(ctx, bad, nil); err == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
}

func TestDir(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d, err := archive.NewDir(filepath.Join(root, "archive"))
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, d)
	left, _ := filepath.Glob(filepath.Join(d.Root(), "runs", "*", "*", ".put-*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if _, err := os.Stat(filepath.Join(root, "archive", "runs", "workflow_id=wf")); err != nil {
		t.Fatal(err)
	}
}

// TestS3 runs the S3 store against the emulator with the real client.
func TestS3(t *testing.T) {
	t.Parallel()
	client := s3.NewFromConfig(localstack.Config(t), func(o *s3.Options) { o.UsePathStyle = true })
	bucket := fmt.Sprintf("maestro-archive-test-%d", time.Now().UnixNano())
	if _, err := client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	s, err := archive.NewS3(client, bucket, "/prod/")
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, s)
	key := archive.Key("wf", time.Now(), "batch-1")
	out, err := client.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("prod/" + key)})
	if err != nil {
		t.Fatalf("the object is not under the prefix: %v", err)
	}
	if aws.ToString(out.ContentType) != archive.ContentType {
		t.Fatalf("content type %q", aws.ToString(out.ContentType))
	}
	if _, err := archive.NewS3(nil, bucket, ""); err == nil {
		t.Fatal("a store without a client was built")
	}
}
