// The AWS SDK for Java v2 against a garage node, with the SDK's default
// integrity checksums (CRC32 on uploads, sent as a trailer of an
// aws-chunked body over plain HTTP; checked on downloads): a PutObject, a
// multipart upload with a checksum per part, GetObject, a listing and
// deletes. Run by src/garage/tests/clients.rs with GARAGE_ENDPOINT,
// GARAGE_KEY_ID, GARAGE_SECRET and GARAGE_BUCKET set; prints "ok" or exits
// non-zero saying what failed.
package garage;

import java.net.URI;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.model.ChecksumAlgorithm;
import software.amazon.awssdk.services.s3.model.ChecksumMode;
import software.amazon.awssdk.services.s3.model.CompletedMultipartUpload;
import software.amazon.awssdk.services.s3.model.CompletedPart;
import software.amazon.awssdk.services.s3.model.CreateMultipartUploadResponse;
import software.amazon.awssdk.services.s3.model.PutObjectResponse;
import software.amazon.awssdk.services.s3.model.S3Object;
import software.amazon.awssdk.services.s3.model.UploadPartResponse;

public final class Client {
    static String env(String k) {
        String v = System.getenv(k);
        if (v == null || v.isEmpty()) {
            throw new IllegalStateException(k + " is not set");
        }
        return v;
    }

    static byte[] sha(byte[] b) throws Exception {
        return MessageDigest.getInstance("SHA-256").digest(b);
    }

    static void same(String what, byte[] got, byte[] want) throws Exception {
        if (!Arrays.equals(sha(got), sha(want))) {
            throw new IllegalStateException(what + ": " + got.length + " bytes read back differ from the "
                    + want.length + " written");
        }
    }

    public static void main(String[] args) throws Exception {
        String bucket = env("GARAGE_BUCKET");
        SecureRandom rnd = new SecureRandom();
        try (S3Client s3 = S3Client.builder()
                .endpointOverride(URI.create(env("GARAGE_ENDPOINT")))
                .region(Region.of("garage"))
                .forcePathStyle(true)
                .credentialsProvider(StaticCredentialsProvider.create(
                        AwsBasicCredentials.create(env("GARAGE_KEY_ID"), env("GARAGE_SECRET"))))
                .httpClient(UrlConnectionHttpClient.create())
                .build()) {
            s3.createBucket(b -> b.bucket(bucket));

            byte[] small = new byte[100_000];
            rnd.nextBytes(small);
            PutObjectResponse put = s3.putObject(b -> b.bucket(bucket).key("small"), RequestBody.fromBytes(small));
            if (put.checksumCRC32() == null) {
                throw new IllegalStateException("PutObject answered no CRC32 checksum (the SDK sends one by default)");
            }
            same("small", s3.getObjectAsBytes(b -> b.bucket(bucket).key("small")
                    .checksumMode(ChecksumMode.ENABLED)).asByteArray(), small);

            // Multipart: three parts, each with its CRC32.
            int part = 5 * 1024 * 1024;
            byte[] big = new byte[2 * part + 12345];
            rnd.nextBytes(big);
            CreateMultipartUploadResponse up = s3.createMultipartUpload(b -> b.bucket(bucket).key("big")
                    .checksumAlgorithm(ChecksumAlgorithm.CRC32));
            List<CompletedPart> parts = new ArrayList<>();
            for (int i = 0; i * part < big.length; i++) {
                int n = i + 1;
                byte[] chunk = Arrays.copyOfRange(big, i * part, Math.min(big.length, (i + 1) * part));
                UploadPartResponse r = s3.uploadPart(b -> b.bucket(bucket).key("big").uploadId(up.uploadId())
                        .partNumber(n).checksumAlgorithm(ChecksumAlgorithm.CRC32), RequestBody.fromBytes(chunk));
                parts.add(CompletedPart.builder().partNumber(n).eTag(r.eTag()).checksumCRC32(r.checksumCRC32()).build());
            }
            String etag = s3.completeMultipartUpload(b -> b.bucket(bucket).key("big").uploadId(up.uploadId())
                    .multipartUpload(CompletedMultipartUpload.builder().parts(parts).build())).eTag();
            if (!etag.replace("\"", "").endsWith("-3")) {
                throw new IllegalStateException("multipart ETag " + etag + " is not of 3 parts");
            }
            same("big", s3.getObjectAsBytes(b -> b.bucket(bucket).key("big")
                    .checksumMode(ChecksumMode.ENABLED)).asByteArray(), big);

            List<String> keys = new ArrayList<>();
            for (S3Object o : s3.listObjectsV2(b -> b.bucket(bucket)).contents()) {
                keys.add(o.key());
            }
            if (!keys.equals(List.of("big", "small"))) {
                throw new IllegalStateException("listed " + keys);
            }
            for (String k : keys) {
                s3.deleteObject(b -> b.bucket(bucket).key(k));
            }
            if (s3.listObjectsV2(b -> b.bucket(bucket)).keyCount() != 0) {
                throw new IllegalStateException("objects left after the deletes");
            }
        }
        System.out.println("ok");
    }
}
