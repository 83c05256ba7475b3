"""What an AWS API request asks IAM for: its (action, resource ARN, condition keys), one per resource it touches.

duetime.local.moto_server.IamEnforcement reads the request moto is about to serve (the service from the
signature's credential scope, the operation from X-Amz-Target, the query/form `Action` or the REST path) and
asks duetime.local.iam about each of these. A request it cannot map is denied (`requests_of` returns None):
never allowed unread.

- DynamoDB: the operation on TableName's table ARN, `.../index/<IndexName>` for a Query or Scan of an index;
  BatchGetItem and BatchWriteItem on every table they name; TransactWriteItems as the PutItem, UpdateItem,
  DeleteItem and ConditionCheckItem it holds, each on its table, and TransactGetItems as GetItem (as IAM
  authorizes transactions). Condition keys dynamodb:Attributes (from the projection or AttributesToGet) and
  dynamodb:Select, dynamodb:ReturnValues.
- SQS: the operation (a batch as its single action) on the queue ARN of QueueUrl (GetQueueUrl: of QueueName).
- SNS: Publish (and the others) on TopicArn; CreateTopic on the ARN of Name.
- EventBridge: PutEvents on each entry's event bus (the default bus when none is named).
- KMS: the operation on KeyId's key ARN. Lambda: InvokeFunction on the function's ARN. Secrets Manager: the
  operation on SecretId. CloudWatch: PutMetricData (no resource: "*").
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, unquote

from duetime.local.iam import Request

ACCOUNT = "123456789012"  # moto's account
TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}
# SQS batch operations are authorized as their single-message action.
SQS_BATCH = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}
CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/[^/]+/([^/]+)/([^/]+)/")


def credential_scope(authorization: str) -> tuple[str, str, str] | None:
    """(access key id, region, service) of a SigV4 Authorization header."""
    match = CREDENTIAL.search(authorization or "")
    return (match.group(1), match.group(2), match.group(3)) if match else None


def table_arn(region: str, table: str) -> str:
    return f"arn:aws:dynamodb:{region}:{ACCOUNT}:table/{table}"


def queue_arn_of_url(region: str, url: str) -> str:
    """arn:aws:sqs:<region>:<account>:<name> of a queue URL (`.../<account>/<name>`)."""
    account, name = url.rstrip("/").split("/")[-2:]
    return f"arn:aws:sqs:{region}:{account}:{name}"


def _projected(body: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The top-level attributes a read names (ProjectionExpression, with its #names, or AttributesToGet)."""
    if "AttributesToGet" in body:
        return tuple(str(a) for a in body["AttributesToGet"])
    expression = body.get("ProjectionExpression")
    if not expression:
        return None
    names = body.get("ExpressionAttributeNames") or {}
    attributes = []
    for path in str(expression).split(","):
        top = re.split(r"[.\[]", path.strip(), maxsplit=1)[0]
        attributes.append(str(names.get(top, top)))
    return tuple(attributes)


def _dynamodb_context(body: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    context: dict[str, tuple[str, ...]] = {}
    if (attributes := _projected(body)) is not None:
        context["dynamodb:Attributes"] = attributes
    for key in ("Select", "ReturnValues"):
        if body.get(key):
            context[f"dynamodb:{key}"] = (str(body[key]),)
    return context


def dynamodb_requests(operation: str, body: Mapping[str, Any], region: str) -> list[Request]:
    if operation in ("BatchGetItem", "BatchWriteItem"):
        requests = []
        for table, items in dict(body.get("RequestItems") or {}).items():
            context = _dynamodb_context(items) if operation == "BatchGetItem" and isinstance(items, dict) else {}
            requests.append(Request(f"dynamodb:{operation}", table_arn(region, table), context))
        return requests
    if operation in ("TransactWriteItems", "TransactGetItems"):
        requests = []
        for item in body.get("TransactItems") or []:
            for kind, part in dict(item).items():
                action = "GetItem" if operation == "TransactGetItems" else TRANSACT_ACTIONS.get(kind, kind)
                requests.append(
                    Request(f"dynamodb:{action}", table_arn(region, str(part["TableName"])), _dynamodb_context(part))
                )
        return requests
    if "TableName" not in body:  # ListTables and the like: no resource
        return [Request(f"dynamodb:{operation}", "*")]
    arn = table_arn(region, str(body["TableName"]))
    if body.get("IndexName"):
        arn += f"/index/{body['IndexName']}"
    return [Request(f"dynamodb:{operation}", arn, _dynamodb_context(body))]


def sqs_requests(operation: str, body: Mapping[str, Any], region: str) -> list[Request]:
    action = f"sqs:{SQS_BATCH.get(operation, operation)}"
    if "QueueUrl" in body:
        return [Request(action, queue_arn_of_url(region, str(body["QueueUrl"])))]
    if "QueueName" in body:
        owner = str(body.get("QueueOwnerAWSAccountId") or ACCOUNT)
        return [Request(action, f"arn:aws:sqs:{region}:{owner}:{body['QueueName']}")]
    return [Request(action, "*")]


def sns_requests(operation: str, body: Mapping[str, Any], region: str) -> list[Request]:
    action = f"sns:{operation}"
    if operation == "CreateTopic" and "Name" in body:
        return [Request(action, f"arn:aws:sns:{region}:{ACCOUNT}:{body['Name']}")]
    for key in ("TopicArn", "TargetArn"):
        if body.get(key):
            return [Request(action, str(body[key]))]
    return [Request(action, "*")]


def events_requests(operation: str, body: Mapping[str, Any], region: str) -> list[Request]:
    action = f"events:{operation}"
    if operation != "PutEvents":
        return [Request(action, "*")]
    buses = {str(entry.get("EventBusName") or "default") for entry in body.get("Entries") or []}
    return [
        Request(action, bus if bus.startswith("arn:") else f"arn:aws:events:{region}:{ACCOUNT}:event-bus/{bus}")
        for bus in sorted(buses)
    ]


def kms_requests(operation: str, body: Mapping[str, Any], region: str) -> list[Request]:
    key = str(body.get("KeyId") or "")
    if not key:
        return [Request(f"kms:{operation}", "*")]
    arn = key if key.startswith("arn:") else f"arn:aws:kms:{region}:{ACCOUNT}:key/{key}"
    return [Request(f"kms:{operation}", arn)]


def secretsmanager_requests(operation: str, body: Mapping[str, Any], region: str) -> list[Request]:
    secret = str(body.get("SecretId") or "")
    arn = secret if secret.startswith("arn:") else f"arn:aws:secretsmanager:{region}:{ACCOUNT}:secret:{secret}"
    return [Request(f"secretsmanager:{operation}", arn if secret else "*")]


JSON_SERVICES = {
    "dynamodb": dynamodb_requests,
    "sqs": sqs_requests,
    "events": events_requests,
    "kms": kms_requests,
    "secretsmanager": secretsmanager_requests,
}
LAMBDA_INVOKE = re.compile(r"^/2015-03-31/functions/([^/]+)/invocations$")


def requests_of(
    service: str, region: str, method: str, path: str, headers: Mapping[str, str], body: bytes
) -> list[Request] | None:
    """The IAM requests of one HTTP request to `service` (the signature's scope); None when it cannot be read
    (the caller denies it). `headers` are keyed in lower case."""
    target = headers.get("x-amz-target", "")
    if service in JSON_SERVICES and target:
        try:
            parsed = json.loads(body or b"{}")
        except ValueError:
            return None
        return JSON_SERVICES[service](target.rpartition(".")[2], parsed if isinstance(parsed, dict) else {}, region)
    if service == "monitoring" and "/operation/" in path:  # CloudWatch's CBOR protocol: the path names it
        return [Request(f"cloudwatch:{path.rstrip('/').rpartition('/')[2]}", "*")]
    if service in ("sns", "sqs", "monitoring"):  # the query protocol: form-encoded Action=...
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        operation = form.get("Action", "")
        if not operation:
            return None
        if service == "sns":
            return sns_requests(operation, form, region)
        if service == "sqs":
            return sqs_requests(operation, form, region)
        return [Request(f"cloudwatch:{operation}", "*")]
    if service == "lambda" and method == "POST" and (match := LAMBDA_INVOKE.match(path)):
        name = unquote(match.group(1))
        arn = name if name.startswith("arn:") else f"arn:aws:lambda:{region}:{ACCOUNT}:function:{name}"
        return [Request("lambda:InvokeFunction", arn)]
    return None
