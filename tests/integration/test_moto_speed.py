"""duetime.local.moto_speed answers what moto's own serializer answers: every member of every answer of a workload
over DynamoDB's and SQS's operations (each attribute type, indexes, conditional failures with the old item,
cancelled transactions, batches, table and queue descriptions, messages with attributes) is picked both ways and
compared, and so are the whole answers, with and without the fast path."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from duetime.local import moto_speed
from moto import mock_aws
from moto.core import serialize

REGION = "us-east-1"
ITEM = {
    "pk": {"S": "p#1"},
    "sk": {"S": "0001#a"},
    "n": {"N": "42"},
    "b": {"B": b"\x00\x01bytes"},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2.5"]},
    "bs": {"BS": [b"x", b"y"]},
    "m": {"M": {"inner": {"S": "v"}, "deep": {"L": [{"N": "1"}, {"NULL": True}, {"BOOL": False}]}}},
    "l": {"L": [{"S": "one"}, {"M": {"k": {"BOOL": True}}}]},
    "nul": {"NULL": True},
    "yes": {"BOOL": True},
    "openJob": {"S": "job-1"},
}


def _without_ids(value: Any) -> Any:
    """`value` less the ids moto draws at random (a message's)."""
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k != "MessageId"}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def _workload() -> list[Any]:
    """Calls of the kinds duetime makes (and a few more), with their answers less what differs run to run."""
    answers: list[Any] = []
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)

    def kept(call: Callable[..., Any], **kwargs: Any) -> None:
        try:
            answer = call(**kwargs)
        except ClientError as exc:
            answer = exc.response
        answer.pop("ResponseMetadata", None)
        answers.append(json.loads(json.dumps(_without_ids(answer), default=str, sort_keys=True)))

    dynamodb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": name, "AttributeType": "S"} for name in ("pk", "sk", "openJob")],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "openByJob",
                "KeySchema": [
                    {"AttributeName": "openJob", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    kept(dynamodb.put_item, TableName="t", Item=ITEM)
    for i in range(3):
        kept(dynamodb.put_item, TableName="t", Item={**ITEM, "sk": {"S": f"000{i + 2}#b"}, "n": {"N": str(i)}})
    kept(dynamodb.get_item, TableName="t", Key={"pk": ITEM["pk"], "sk": ITEM["sk"]}, ConsistentRead=True)
    kept(dynamodb.get_item, TableName="t", Key={"pk": ITEM["pk"], "sk": {"S": "none"}})
    kept(
        dynamodb.query,
        TableName="t",
        KeyConditionExpression="pk = :p AND sk BETWEEN :lo AND :hi",
        ExpressionAttributeValues={":p": ITEM["pk"], ":lo": {"S": "0"}, ":hi": {"S": "9"}},
        Limit=2,
    )
    _by_job(kept, dynamodb, "job-1", ReturnConsumedCapacity="TOTAL")
    kept(dynamodb.scan, TableName="t", ProjectionExpression="pk, sk, n")
    key = {"pk": ITEM["pk"], "sk": ITEM["sk"]}
    for update, values, asked in (
        (
            "SET n = n + :one, l = list_append(l, :more) REMOVE nul",
            {":one": {"N": "1"}, ":more": {"L": [{"S": "two"}]}},
            {"ReturnValues": "ALL_NEW"},
        ),
        ("SET yes = :no", {":no": {"BOOL": False}}, {"ReturnValues": "UPDATED_OLD"}),
        (
            "SET n = :n",
            {":n": {"N": "0"}},
            {"ConditionExpression": "attribute_not_exists(pk)", "ReturnValuesOnConditionCheckFailure": "ALL_OLD"},
        ),
    ):
        kept(
            dynamodb.update_item,
            TableName="t",
            Key=key,
            UpdateExpression=update,
            ExpressionAttributeValues=values,
            **asked,
        )
    kept(
        dynamodb.transact_write_items,
        TransactItems=[
            {"Put": {"TableName": "t", "Item": {**ITEM, "sk": {"S": "0009#c"}}}},
            {
                "Update": {
                    "TableName": "t",
                    "Key": {"pk": ITEM["pk"], "sk": ITEM["sk"]},
                    "UpdateExpression": "SET n = :n",
                    "ConditionExpression": "n = :never",
                    "ExpressionAttributeValues": {":n": {"N": "1"}, ":never": {"N": "-1"}},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
        ],
    )
    kept(dynamodb.scan, TableName="t")  # the failed transaction's put undone
    _transactions(kept, dynamodb)
    kept(
        dynamodb.batch_get_item,
        RequestItems={"t": {"Keys": [{"pk": ITEM["pk"], "sk": {"S": f"000{i}#b"}} for i in range(2, 5)]}},
    )
    kept(dynamodb.delete_item, TableName="t", Key={"pk": ITEM["pk"], "sk": {"S": "0002#b"}}, ReturnValues="ALL_OLD")
    described = dynamodb.describe_table(TableName="t")["Table"]
    for moving in ("CreationDateTime", "TableArn", "TableId", "LatestStreamArn", "LatestStreamLabel"):
        described.pop(moving, None)
    for index in described.get("GlobalSecondaryIndexes", []):
        index.pop("IndexArn", None)
    answers.append(json.loads(json.dumps(described, default=str, sort_keys=True)))
    kept(dynamodb.list_tables)
    answers.append(_stream_records(described["TableName"]))

    url = sqs.create_queue(QueueName="q", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    kept(
        sqs.send_message_batch,
        QueueUrl=url,
        Entries=[
            {
                "Id": str(i),
                "MessageBody": json.dumps({"i": i}),
                "MessageAttributes": {"kind": {"DataType": "String", "StringValue": "due"}},
            }
            for i in range(3)
        ],
    )
    received = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
    )["Messages"]
    answers.append(sorted((m["Body"], m["MD5OfBody"], json.dumps(m.get("MessageAttributes"))) for m in received))
    handles = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(received)]
    kept(
        sqs.change_message_visibility_batch,
        QueueUrl=url,
        Entries=[{**h, "VisibilityTimeout": 5} for h in handles]
        + [{"Id": "x", "ReceiptHandle": "bad", "VisibilityTimeout": 1}],
    )
    kept(sqs.delete_message_batch, QueueUrl=url, Entries=handles)
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout", "DelaySeconds"])
    answers.append(attributes["Attributes"])
    return answers


def _by_job(kept: Callable[..., None], dynamodb: Any, job: str, **asked: Any) -> None:
    """The keys of `job`'s rows, from the index."""
    kept(
        dynamodb.query,
        TableName="t",
        IndexName="openByJob",
        KeyConditionExpression="openJob = :j",
        ExpressionAttributeValues={":j": {"S": job}},
        **asked,
    )


def _transactions(kept: Callable[..., None], dynamodb: Any) -> None:
    """A transaction that succeeds (a put, an update, a delete), then one that fails at its last item after
    writing the others (moto applies them in turn): the table and its index as they were after the first."""
    key = {"pk": ITEM["pk"], "sk": ITEM["sk"]}
    update = {"TableName": "t", "Key": key, "UpdateExpression": "SET n = :n", "ExpressionAttributeValues": {}}
    kept(
        dynamodb.transact_write_items,
        TransactItems=[
            {"Put": {"TableName": "t", "Item": {**ITEM, "sk": {"S": "0010#d"}, "openJob": {"S": "job-2"}}}},
            {"Update": {**update, "ExpressionAttributeValues": {":n": {"N": "7"}}}},
            {"Delete": {"TableName": "t", "Key": {"pk": ITEM["pk"], "sk": {"S": "0003#b"}}}},
        ],
    )
    kept(
        dynamodb.transact_write_items,
        TransactItems=[
            {"Delete": {"TableName": "t", "Key": {"pk": ITEM["pk"], "sk": {"S": "0010#d"}}}},
            {"Update": {**update, "ExpressionAttributeValues": {":n": {"N": "8"}}}},
            {"Put": {"TableName": "t", "Item": {**ITEM, "sk": {"S": "0011#e"}}}},
            {
                "ConditionCheck": {
                    "TableName": "t",
                    "Key": {"pk": ITEM["pk"], "sk": {"S": "0004#b"}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        ],
    )
    kept(dynamodb.scan, TableName="t")
    _by_job(kept, dynamodb, "job-2")


def _stream_records(table: str) -> list[Any]:
    """What the table's stream holds: each record's event and keys, in order (a failed transaction adds none).
    Read off moto's backend: its DynamoDB Streams API is not served under mock_aws."""
    from moto.dynamodb.models import dynamodb_backends

    shard = dynamodb_backends["123456789012"][REGION].tables[table].stream_shard
    return [(r.record["eventName"], json.dumps(r.record["dynamodb"]["Keys"], sort_keys=True)) for r in shard.items]


def test_a_transaction_copies_the_items_it_names_not_their_tables() -> None:
    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table

    table = Table(
        "t",
        "123456789012",
        REGION,
        schema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        attr=[{"AttributeName": "pk", "AttributeType": "S"}],
    )
    assert models.copy.deepcopy(table) is table  # TransactWriteItems's backup of a whole table
    # anything else is copied as ever (an update's old item, which it compares with the new)
    item = {"a": [1]}
    copied = models.copy.deepcopy(item)
    assert copied == item and copied is not item and copied["a"] is not item["a"]


@pytest.fixture
def moto_path() -> Iterator[None]:
    moto_speed.uninstall()
    yield
    moto_speed.install()


def test_every_member_is_picked_as_moto_picks_it() -> None:
    """Each member the fast path answers is also asked of moto's own path, and must be the same object."""
    compared = 0

    def checked(self: Any, value: Any, key: str, shape: Any) -> Any:
        nonlocal compared
        fast = moto_speed._get_value(self, value, key, shape)
        slow = moto_speed._moto_get_value(self, value, key, shape)
        assert fast is slow or fast == slow, (self.path, key, fast, slow)
        compared += type(value) is dict
        return fast

    serialize.ResponseSerializer.get_value = checked  # type: ignore[method-assign]
    try:
        with mock_aws():
            _workload()
    finally:
        moto_speed.install()
    assert compared > 1000  # the plain-dict path was taken, member by member


def test_the_answers_are_the_same_with_and_without_it(moto_path: None) -> None:
    with mock_aws():
        slow = _workload()
    moto_speed.install()
    with mock_aws():
        fast = _workload()
    assert fast == slow


def test_a_receive_tells_a_message_past_its_queue_s_retention_as_moto_does(moto_path: None) -> None:
    from moto.core.utils import unix_time
    from moto.sqs.models import sqs_backends

    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        sqs.create_queue(QueueName="kept", Attributes={"MessageRetentionPeriod": "60"})
        sqs.send_message(QueueUrl=sqs.get_queue_url(QueueName="kept")["QueueUrl"], MessageBody="m")
        backend = sqs_backends["123456789012"][REGION]
        [message] = list(backend.get_queue("kept")._messages)
        verdicts = []
        for sent_ago in (0, 59, 61, 3600):
            message.sent_timestamp = int((unix_time() - sent_ago) * 1000)
            fast = moto_speed._within_retention(backend, "kept", message)
            assert fast == moto_speed._moto_retention_check(backend, "kept", message), sent_ago
            verdicts.append(fast)
    assert verdicts == [True, True, False, False]
