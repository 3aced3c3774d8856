package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3API is the part of the S3 client the store calls.
type S3API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// S3 is a Store in an S3 bucket, each key under an optional prefix. The
// bucket's encryption (SSE-KMS in the CDK app) applies to every object.
type S3 struct {
	client S3API
	bucket string
	prefix string
}

// NewS3 returns a store in bucket under prefix ("" for the bucket's root).
func NewS3(client S3API, bucket, prefix string) (*S3, error) {
	if client == nil || bucket == "" {
		return nil, errors.New("archive: S3 client and bucket are required")
	}
	return &S3{client: client, bucket: bucket, prefix: strings.Trim(prefix, "/")}, nil
}

func (s *S3) key(key string) string {
	if s.prefix == "" {
		return key
	}
	return path.Join(s.prefix, key)
}

// Put writes the object of key.
func (s *S3) Put(ctx context.Context, key string, body []byte) error {
	if err := validKey(key); err != nil {
		return err
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(s.key(key)), Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))), ContentType: aws.String(ContentType),
	})
	if err != nil {
		return fmt.Errorf("archive: put s3://%s/%s: %w", s.bucket, s.key(key), err)
	}
	return nil
}

// Get reads the object of key.
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	if err := validKey(key); err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.key(key))})
	if err != nil {
		var nsk *types.NoSuchKey
		var api smithy.APIError
		if errors.As(err, &nsk) || (errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NotFound")) {
			return nil, fmt.Errorf("s3://%s/%s: %w", s.bucket, s.key(key), ErrNotFound)
		}
		return nil, fmt.Errorf("archive: get s3://%s/%s: %w", s.bucket, s.key(key), err)
	}
	defer out.Body.Close()
	body, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("archive: read s3://%s/%s: %w", s.bucket, s.key(key), err)
	}
	return body, nil
}
