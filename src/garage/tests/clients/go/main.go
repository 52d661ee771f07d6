// Command s3client runs the AWS SDK for Go v2 against a garage node, with
// the SDK's default integrity checksums (CRC32 on uploads, checked on
// downloads): a PutObject, a multipart upload through the transfer
// manager, a listing and deletes. Run by src/garage/tests/clients.rs with
// GARAGE_ENDPOINT, GARAGE_KEY_ID, GARAGE_SECRET and GARAGE_BUCKET set;
// prints "ok" or exits non-zero saying what failed.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/logging"
)

func env(k string) string {
	v := os.Getenv(k)
	if v == "" {
		fail("%s is not set", k)
	}
	return v
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "error: "+format+"\n", args...)
	os.Exit(1)
}

func random(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		fail("random: %v", err)
	}
	return b
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bucket := aws.String(env("GARAGE_BUCKET"))
	client := s3.New(s3.Options{
		BaseEndpoint:     aws.String(env("GARAGE_ENDPOINT")),
		Region:           "garage",
		UsePathStyle:     true,
		Credentials:      credentials.NewStaticCredentialsProvider(env("GARAGE_KEY_ID"), env("GARAGE_SECRET"), ""),
		RetryMaxAttempts: 1,
		// What config.LoadDefaultConfig gives every client (s3.New with
		// hand-made Options leaves them unset).
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported,
		ClientLogMode:              logMode(),
		Logger:                     logging.NewStandardLogger(os.Stderr),
	})
	read := func(key string) []byte {
		out, err := client.GetObject(ctx, &s3.GetObjectInput{
			Bucket: bucket, Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled,
		})
		if err != nil {
			fail("GetObject %s: %v", key, err)
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		if err != nil {
			fail("GetObject %s body (checksum validated by the SDK): %v", key, err)
		}
		return b
	}
	same := func(what string, got, want []byte) {
		if sha256.Sum256(got) != sha256.Sum256(want) {
			fail("%s: %d bytes read back differ from the %d written", what, len(got), len(want))
		}
	}

	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket}); err != nil {
		fail("CreateBucket: %v", err)
	}

	small := random(100_000)
	put, err := client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: bucket, Key: aws.String("small"), Body: bytes.NewReader(small),
	})
	if err != nil {
		fail("PutObject: %v", err)
	}
	if put.ChecksumCRC32 == nil {
		fail("PutObject answered no CRC32 checksum (the SDK sends one by default)")
	}
	same("small", read("small"), small)

	big := random(12*1024*1024 + 3)
	up := manager.NewUploader(client, func(u *manager.Uploader) {
		u.PartSize = 5 * 1024 * 1024
		u.Concurrency = 2
	})
	res, err := up.Upload(ctx, &s3.PutObjectInput{
		Bucket: bucket, Key: aws.String("big"), Body: bytes.NewReader(big),
	})
	if err != nil {
		fail("multipart upload: %v", err)
	}
	if res.ETag == nil || !strings.HasSuffix(strings.Trim(*res.ETag, `"`), "-3") {
		fail("multipart ETag %v is not of 3 parts", res.ETag)
	}
	same("big", read("big"), big)

	list, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: bucket})
	if err != nil {
		fail("ListObjectsV2: %v", err)
	}
	var keys []string
	for _, o := range list.Contents {
		keys = append(keys, *o.Key)
	}
	sort.Strings(keys)
	if strings.Join(keys, ",") != "big,small" {
		fail("listed %v", keys)
	}
	for _, k := range keys {
		if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: aws.String(k)}); err != nil {
			fail("DeleteObject %s: %v", k, err)
		}
	}
	if _, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: aws.String("small")}); err == nil {
		fail("HeadObject found a deleted object")
	}
	fmt.Println("ok")
}

// logMode: request and response headers on standard error when
// GARAGE_CLIENT_DEBUG is set.
func logMode() aws.ClientLogMode {
	if os.Getenv("GARAGE_CLIENT_DEBUG") != "" {
		return aws.LogRequest | aws.LogResponse
	}
	return 0
}
