"""checkov's checks this stack does not pass on purpose, each with its reason; every other failure fails `make test`.

tests/infrastructure/test_checkov.py runs checkov over the synthesized template and counts a failed check as
skipped only when its id is here (SKIPPED, or WITHOUT_DATA_KEY for a stack deployed without context kmsKey).
"""

from __future__ import annotations

SKIPPED = {
    "CKV_AWS_116": "Lambda DLQ: no function is invoked asynchronously with an event worth keeping. The API answers "
    "API Gateway synchronously; the workers and the DLQ notifier drain SQS queues that hold the message (with a "
    "redrive to each class's DLQ); the pre-loader's missed tick is redone by the next one; CDK's custom resource "
    "handler is called by CloudFormation, which reports a failure itself.",
    "CKV_AWS_117": "Lambda in a VPC: the functions call only DynamoDB, SQS, SNS, Secrets Manager and X-Ray through "
    "their IAM-authorized public endpoints; a VPC would add NAT and interface endpoints and cold-start latency "
    "and protect nothing that IAM does not (ECS workers, which run user containers, are in private subnets).",
    "CKV_AWS_115": "Reserved concurrency: every duetime function has one (context apiReservedConcurrency, "
    "workerMaxConcurrency); those left are CDK's RestrictDefaultSG custom resource handler, run once per deploy, "
    "and the smoke target, invoked by `duetime smoke` once per run (a reservation would take from the account's "
    "pool for a function idle all day).",
    "CKV_AWS_120": "API Gateway caching: every answer is an owner's own, current data (jobs, executions, run-now); "
    "a cache would serve stale states and, keyed wrongly, another owner's.",
}

# Without context kmsKey the stack encrypts with AWS managed keys (AWS owned for SQS): encrypted at rest, just
# not with a key the team administers. With kmsKey these checks pass and are not skipped.
WITHOUT_DATA_KEY = {
    "CKV_AWS_119": "DynamoDB tables are encrypted with the AWS managed key (aws/dynamodb); a customer-managed "
    "key is context kmsKey.",
    "CKV_AWS_27": "SQS queues use SSE-SQS (SqsManagedSseEnabled), encryption at rest that checkov does not "
    "recognize; a customer-managed key is context kmsKey.",
    "CKV_AWS_158": "Log groups are encrypted by CloudWatch Logs' own keys; a customer-managed key is context kmsKey.",
    "CKV_AWS_173": "Lambda environments hold resource names and URLs only and are encrypted by Lambda's AWS "
    "managed key; a customer-managed key is context kmsKey.",
}


def skipped(with_data_key: bool) -> dict[str, str]:
    """The skipped checks, with their reasons, of a stack deployed with or without a data key."""
    return dict(SKIPPED) if with_data_key else {**SKIPPED, **WITHOUT_DATA_KEY}


# The web console's resources (context console=true, infra.console): checked by tests/infrastructure/test_console.py.
CONSOLE = {
    "CKV_AWS_18": "The console bucket holds the repository's static files, written only by the stack's deployment "
    "and read only by CloudFront; there is no access worth a log of its own.",
    "CKV_AWS_86": "CloudFront standard logs need a bucket with ACLs enabled; the console's files are public code and "
    "every API call through the distribution is already in the API's access log.",
    "CKV_AWS_68": "A WAF web ACL for CloudFront must live in us-east-1 while the stack deploys to any region; the "
    "API behind the distribution keeps its regional web ACL (rate limits per IP and per token).",
    "CKV_AWS_174": "The default *.cloudfront.net certificate takes no minimum protocol version; a custom domain and "
    "certificate set TLSv1.2_2021.",
    "CKV_AWS_111": "CDK's BucketDeployment handler creates CloudFront invalidations, an action with no resource ARN "
    "narrower than '*' in its policy as CDK writes it.",
}
