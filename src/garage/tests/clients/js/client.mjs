// The AWS SDK for JavaScript v3 against a garage node, with the SDK's
// default integrity checksums (CRC32 on uploads, checked on downloads):
// a PutObject, a multipart upload through lib-storage, presigned GET and
// PUT URLs used with fetch, a listing and a batch delete. Run by
// src/garage/tests/clients.rs with GARAGE_ENDPOINT, GARAGE_KEY_ID,
// GARAGE_SECRET and GARAGE_BUCKET set; prints "ok" or fails.
import { createHash, randomBytes } from "node:crypto";
import {
  S3Client, CreateBucketCommand, PutObjectCommand, GetObjectCommand,
  HeadObjectCommand, ListObjectsV2Command, DeleteObjectsCommand,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const Bucket = env("GARAGE_BUCKET");
const s3 = new S3Client({
  endpoint: env("GARAGE_ENDPOINT"),
  region: "garage",
  forcePathStyle: true,
  credentials: { accessKeyId: env("GARAGE_KEY_ID"), secretAccessKey: env("GARAGE_SECRET") },
  maxAttempts: 1,
});
const sha = (b) => createHash("sha256").update(b).digest("hex");
const same = (what, got, want) => {
  if (sha(got) !== sha(want)) {
    throw new Error(`${what}: ${got.length} bytes read back differ from the ${want.length} written`);
  }
};
const read = async (Key) => {
  const out = await s3.send(new GetObjectCommand({ Bucket, Key, ChecksumMode: "ENABLED" }));
  return Buffer.from(await out.Body.transformToByteArray());
};

await s3.send(new CreateBucketCommand({ Bucket }));

// PutObject: the SDK adds x-amz-checksum-crc32 by default.
const small = randomBytes(100_000);
const put = await s3.send(new PutObjectCommand({ Bucket, Key: "small", Body: small }));
if (!put.ChecksumCRC32) throw new Error("PutObject answered no CRC32 checksum");
same("small", await read("small"), small);
const head = await s3.send(new HeadObjectCommand({ Bucket, Key: "small", ChecksumMode: "ENABLED" }));
if (head.ChecksumCRC32 !== put.ChecksumCRC32) {
  throw new Error(`HeadObject CRC32 ${head.ChecksumCRC32}, PutObject said ${put.ChecksumCRC32}`);
}

// lib-storage: 12 MiB in 5 MiB parts, two at a time.
const big = randomBytes(12 * 1024 * 1024 + 7);
const up = new Upload({
  client: s3,
  params: { Bucket, Key: "big", Body: big },
  partSize: 5 * 1024 * 1024,
  queueSize: 2,
});
const done = await up.done();
if (!/-3"?$/.test(done.ETag)) throw new Error(`multipart ETag ${done.ETag} is not of 3 parts`);
same("big", await read("big"), big);

// Presigned URLs, used with plain fetch.
const getUrl = await getSignedUrl(s3, new GetObjectCommand({ Bucket, Key: "small" }), { expiresIn: 300 });
const got = await fetch(getUrl);
if (got.status !== 200) throw new Error(`presigned GET answered ${got.status}`);
same("presigned GET", Buffer.from(await got.arrayBuffer()), small);
const body = randomBytes(5000);
const putUrl = await getSignedUrl(s3, new PutObjectCommand({ Bucket, Key: "presigned" }), { expiresIn: 300 });
const putRes = await fetch(putUrl, { method: "PUT", body });
if (putRes.status !== 200) throw new Error(`presigned PUT answered ${putRes.status}: ${await putRes.text()}`);
same("presigned PUT", await read("presigned"), body);

// Listing and batch delete.
const list = await s3.send(new ListObjectsV2Command({ Bucket }));
const keys = (list.Contents ?? []).map((o) => o.Key).sort();
if (keys.join(",") !== "big,presigned,small") throw new Error(`listed ${keys}`);
const del = await s3.send(new DeleteObjectsCommand({
  Bucket, Delete: { Objects: keys.map((Key) => ({ Key })) },
}));
if ((del.Deleted ?? []).length !== 3 || (del.Errors ?? []).length) {
  throw new Error(`DeleteObjects: ${JSON.stringify(del)}`);
}
const after = await s3.send(new ListObjectsV2Command({ Bucket }));
if ((after.KeyCount ?? 0) !== 0) throw new Error(`${after.KeyCount} objects left`);
console.log("ok");
