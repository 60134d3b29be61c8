"""Every object of a bucket, read with boto3 (AWS's own client, not lab's): one JSON object
{key: {"size": bytes, "sha256": hex of the bytes read}}. With --create, makes the bucket
first. For tests/integration/artifacts_s3.rs.

    python3 tests/s3_objects.py ENDPOINT BUCKET [--create]
"""
import hashlib
import json
import sys

import boto3

endpoint, bucket = sys.argv[1], sys.argv[2]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="lab-test", aws_secret_access_key="lab-test-secret")
if "--create" in sys.argv[3:]:
    s3.create_bucket(Bucket=bucket)
out = {}
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
    for o in page.get("Contents", []):
        body = s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        out[o["Key"]] = {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
json.dump(out, sys.stdout, sort_keys=True)
