"""The Lambda emulation of the AWS-faithful local mode against a moto server: the SQS event source's
batches, partial and whole-batch failures, SQS's own redrive, and cold starts with their environment."""

from __future__ import annotations

import importlib
import json
import os
import secrets
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from duetime.adapters.aws.client import make_client
from duetime.domain.errors import InvalidInput
from duetime.local.backends import MOTO
from duetime.local.handler_layer import stage_handler_layer
from duetime.local.lambda_mode import LambdaFunction, SqsEventSource, runtime_modules
from duetime.local.moto_server import EmbeddedMoto
from duetime.local.system import LocalSystem

REGION = "us-east-1"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sqs() -> Iterator[Any]:
    server = EmbeddedMoto().start()
    yield make_client("sqs", REGION, server.endpoint_url)
    server.stop()


def make_queue(sqs: Any, visibility: int = 1, max_receive_count: int = 50) -> tuple[str, str]:
    """A due queue with its DLQ and redrive policy; returns (queue URL, DLQ URL)."""
    name = f"lm-{secrets.token_hex(4)}"
    dlq_url = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count})
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": str(visibility), "RedrivePolicy": redrive})[
        "QueueUrl"
    ]
    return url, dlq_url


def send(sqs: Any, url: str, count: int) -> list[str]:
    bodies = [f"m{n}" for n in range(count)]
    for start in range(0, count, 10):
        entries = [{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies[start : start + 10])]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    return bodies


def depth(sqs: Any, url: str) -> int:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attributes[n]) for n in names)


def drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    """Every message visible on `url` now (received with a long visibility, so each appears once)."""
    found: list[dict[str, Any]] = []
    while batch := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60, MessageSystemAttributeNames=["All"]
    ).get("Messages", []):
        found.extend(batch)
    return found


class Recorder:
    """A handler that records each event and answers as told."""

    def __init__(self, answer: Any = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.answer = answer
        self.lock = threading.Lock()

    def __call__(self, event: dict[str, Any]) -> Any:
        with self.lock:
            self.events.append(event)
        return self.answer(event) if callable(self.answer) else self.answer

    @property
    def records(self) -> list[dict[str, Any]]:
        return [r for e in self.events for r in e["Records"]]


def test_batches_hold_up_to_the_batch_size_in_the_sqs_event_shape_and_handled_ones_are_deleted(sqs):
    url, _ = make_queue(sqs, visibility=30)
    bodies = send(sqs, url, 25)
    handler = Recorder()
    source = SqsEventSource(sqs, url, handler, batch_size=10, concurrency=1, region=REGION, wait_seconds=0)
    while source.poll_once():
        pass
    sizes = [len(e["Records"]) for e in handler.events]
    assert max(sizes) == 10 and sum(sizes) == 25, sizes
    assert sorted(r["body"] for r in handler.records) == sorted(bodies)
    record = handler.records[0]
    assert record["eventSource"] == "aws:sqs" and record["awsRegion"] == REGION
    assert record["eventSourceARN"] == source.queue_arn and record["eventSourceARN"].endswith(url.rsplit("/", 1)[1])
    assert record["messageId"] and record["receiptHandle"]
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert int(record["attributes"]["SentTimestamp"]) <= int(record["attributes"]["ApproximateFirstReceiveTimestamp"])
    assert depth(sqs, url) == 0


def test_a_partial_failure_leaves_only_the_failed_item_which_reappears_after_its_visibility(sqs):
    url, _ = make_queue(sqs, visibility=1)
    send(sqs, url, 3)

    def fail_m1(event: dict[str, Any]) -> dict[str, Any]:
        return {
            "batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"] if r["body"] == "m1"]
        }

    source = SqsEventSource(sqs, url, Recorder(fail_m1), batch_size=10, concurrency=1, region=REGION, wait_seconds=0)
    handled = 0
    while handled < 3:
        handled += source.poll_once()
    assert depth(sqs, url) == 1
    time.sleep(1.5)  # the failed one's visibility ends
    [again] = drain(sqs, url)
    assert again["Body"] == "m1" and again["Attributes"]["ApproximateReceiveCount"] == "2"


def test_a_handler_exception_or_a_malformed_report_fails_the_whole_batch(sqs):
    for answer in (ZeroDivisionError, {"batchItemFailures": [{"itemIdentifier": "not-in-this-batch"}]}):
        url, _ = make_queue(sqs, visibility=1)
        send(sqs, url, 4)

        def handler(event: dict[str, Any], answer: Any = answer) -> Any:
            if answer is ZeroDivisionError:
                raise ZeroDivisionError("the handler crashed")
            return answer

        source = SqsEventSource(sqs, url, handler, batch_size=10, concurrency=1, region=REGION, wait_seconds=0)
        handled = 0
        while handled < 4:
            handled += source.poll_once()
        time.sleep(1.5)
        assert sorted(m["Body"] for m in drain(sqs, url)) == ["m0", "m1", "m2", "m3"], answer


def test_sqs_redrives_a_message_to_the_dlq_after_max_receive_count_failed_batches(sqs):
    url, dlq_url = make_queue(sqs, visibility=1, max_receive_count=2)
    send(sqs, url, 1)
    handler = Recorder(lambda event: {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]})
    source = SqsEventSource(sqs, url, handler, batch_size=10, concurrency=2, region=REGION).start()
    try:
        deadline = time.monotonic() + 15
        while depth(sqs, dlq_url) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        source.stop()
    assert [r["attributes"]["ApproximateReceiveCount"] for r in handler.records] == ["1", "2"]
    [dead] = drain(sqs, dlq_url)
    assert dead["Body"] == "m0"
    assert depth(sqs, url) == 0


def test_concurrent_pollers_invoke_at_once_up_to_their_number(sqs):
    url, _ = make_queue(sqs, visibility=30)
    send(sqs, url, 3)
    running, peak, lock = [0], [0], threading.Lock()

    def slow(event: dict[str, Any]) -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(1.5)
        with lock:
            running[0] -= 1

    source = SqsEventSource(sqs, url, slow, batch_size=1, concurrency=2, region=REGION).start()
    try:
        deadline = time.monotonic() + 15
        while depth(sqs, url) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        source.stop()
    assert peak[0] == 2 and depth(sqs, url) == 0


def test_one_poller_feeds_invocations_up_to_the_concurrency_and_receives_no_batch_beyond_it(sqs):
    """Lambda scales a mapping's invocations, not its pollers: one poller here keeps three invocations running,
    and while all three run it receives nothing more (the other messages stay visible, for another consumer)."""
    url, _ = make_queue(sqs, visibility=30)
    send(sqs, url, 5)
    running, peak, lock = [0], [0], threading.Lock()
    full, release = threading.Event(), threading.Event()

    def held(event: dict[str, Any]) -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            if running[0] == 3:
                full.set()
        release.wait(10)
        with lock:
            running[0] -= 1

    source = SqsEventSource(sqs, url, held, batch_size=1, concurrency=3, region=REGION, receivers=1)
    assert len(source.threads) == 1
    source.start()
    try:
        assert full.wait(10), "three invocations never ran at once"
        time.sleep(0.5)  # a poller that received past its slots would have invoked a fourth by now
        visible = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
        assert peak[0] == 3 and int(visible["Attributes"]["ApproximateNumberOfMessages"]) == 2
        release.set()
        deadline = time.monotonic() + 15
        while depth(sqs, url) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        release.set()
        source.stop()
    assert peak[0] == 3 and depth(sqs, url) == 0


def test_stopping_waits_for_a_batch_being_invoked_but_not_for_a_receive_and_a_late_batch_is_handed_back(sqs):
    """Pollers long-poll (20 s, as Lambda's do): stop waits for the batch in an invocation to be deleted, not for
    a poller waiting in a receive; a batch such a poller receives after the stop is never invoked and is visible
    again at once, not after its visibility timeout (30 s here)."""
    url, _ = make_queue(sqs, visibility=30)
    send(sqs, url, 1)
    started, release = threading.Event(), threading.Event()
    invoked: list[str] = []

    def slow(event: dict[str, Any]) -> None:
        invoked.extend(r["body"] for r in event["Records"])
        started.set()
        release.wait(10)

    source = SqsEventSource(sqs, url, slow, batch_size=1, concurrency=2, region=REGION).start()
    stopper = threading.Thread(target=source.stop)
    try:
        assert started.wait(10)
        stopper.start()
        stopper.join(1)
        assert stopper.is_alive(), "stop returned while a batch was being invoked"
        release.set()
        stopper.join(10)
        assert not stopper.is_alive(), "stop waited for the poller that is still in its 20 s receive"
        assert depth(sqs, url) == 0  # the invoked batch was deleted before stop returned
        send(sqs, url, 1)  # the other poller, still waiting in its receive, takes it, and must hand it back
        time.sleep(1)
        again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=5).get("Messages", [])
        assert [m["Body"] for m in again] == ["m0"], "the late batch stayed hidden for its visibility timeout"
        assert invoked == ["m0"]  # the first batch only: the late one was never invoked
    finally:
        release.set()
        source.stop()


FUNCTION = '''
"""A test function: what it saw of the environment at import, and each invocation's context."""
import os
SEEN_AT_IMPORT = os.environ.get("LM_SETTING")
# os.environb shares the process environment's own data: a write to the real environment would show here.
IN_PROCESS_ENVIRONMENT = b"LM_SETTING" in os.environb
CALLS = []


def handler(event, context):
    if event.get("die"):
        raise SystemExit("the runtime died")
    CALLS.append(context.aws_request_id)
    return {
        "setting": SEEN_AT_IMPORT,
        "requestId": context.aws_request_id,
        "functionName": context.function_name,
        "arn": context.invoked_function_arn,
        "memory": context.memory_limit_in_mb,
        "remainingMs": context.get_remaining_time_in_millis(),
    }
'''


@pytest.fixture
def functions_dir(tmp_path: Path) -> Path:
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "index.py").write_text(textwrap.dedent(FUNCTION))
    return tmp_path


def test_an_instance_imports_its_module_once_with_its_environment_and_each_call_gets_a_fresh_context(functions_dir):
    assert "LM_SETTING" not in os.environ
    probe = LambdaFunction(
        name="probe",
        function_name="lm-probe",
        environment={"LM_SETTING": "from-cdk"},
        timeout_seconds=30,
        memory_mb=512,
        region=REGION,
        functions_dir=functions_dir,
    )
    first, second = probe.invoke({}), probe.invoke({})
    assert "LM_SETTING" not in os.environ  # seen by the cold start only
    assert probe.instances[0].IN_PROCESS_ENVIRONMENT is False  # threads and subprocesses never see it
    assert len(probe.instances) == 1 and [first["requestId"], second["requestId"]] == probe.instances[0].CALLS
    assert first["setting"] == "from-cdk" and first["requestId"] != second["requestId"]
    assert first["functionName"] == "lm-probe" and first["memory"] == 512
    assert first["arn"] == "arn:aws:lambda:us-east-1:123456789012:function:lm-probe"
    assert 0 < first["remainingMs"] <= 30_000
    # A runtime that dies takes its instance with it: the next call starts cold
    with pytest.raises(SystemExit):
        probe.invoke({"die": True})
    assert probe.instances == []
    probe.invoke({})
    assert len(probe.instances) == 1 and len(probe.instances[0].CALLS) == 1


LAYERED_FUNCTION = """
import {package}

VALUE = {package}.VALUE


def handler(event, context):
    return VALUE
"""


def layered(functions_dir: Path, layer: Path, package: str) -> LambdaFunction:
    """A function whose cold start imports `package`, with `layer` as its handler layer."""
    (functions_dir / package).mkdir()
    (functions_dir / package / "index.py").write_text(LAYERED_FUNCTION.format(package=package))
    return LambdaFunction(
        name=package,
        function_name=f"lm-{package}",
        environment={},
        timeout_seconds=30,
        memory_mb=512,
        region=REGION,
        functions_dir=functions_dir,
        layers=(layer,),
    )


def package_in(folder: Path, package: str, body: str) -> None:
    (folder / package).mkdir(parents=True)
    (folder / package / "__init__.py").write_text(body)


def test_a_function_imports_its_layers_code_before_a_same_named_package_on_this_process_path(
    functions_dir, tmp_path, monkeypatch
):
    package = f"team_{secrets.token_hex(4)}"
    layer = tmp_path / "layer" / "python"
    package_in(tmp_path / "project", package, "VALUE = 'the project folder'\n")
    package_in(layer, package, "from . import helper\nVALUE = helper.WHERE\n")
    (layer / package / "helper.py").write_text("WHERE = 'the layer'\n")
    monkeypatch.syspath_prepend(str(tmp_path / "project"))  # as `duetime local` makes its folder importable
    assert layered(functions_dir, layer, package).invoke({}) == "the layer"


def test_a_module_outside_the_layers_and_the_dependency_layer_fails_the_cold_start_as_on_aws(
    functions_dir, tmp_path, monkeypatch
):
    package, dependency = f"team_{secrets.token_hex(4)}", f"installed_{secrets.token_hex(4)}"
    layer = tmp_path / "layer" / "python"
    package_in(layer, package, f"import {dependency}\nVALUE = 1\n")
    # Installed in this process's environment, but in none of the function's layers
    package_in(tmp_path / "site", dependency, "")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    function = layered(functions_dir, layer, package)
    with pytest.raises(ModuleNotFoundError, match=f"No module named '{dependency}'"):
        function.invoke({})
    assert function.instances == [] and package not in sys.modules  # the next invocation starts cold again
    with pytest.raises(ModuleNotFoundError, match=f"No module named '{dependency}'"):
        function.invoke({})
    importlib.import_module(dependency)  # this process has it: only the function's imports go without

    # The standard library, duetime and its dependencies (dateutil) are the runtime's and the dependency layer's
    fine = f"team_{secrets.token_hex(4)}"
    package_in(layer, fine, "import json, dateutil.tz\nfrom duetime import handler\nVALUE = 'imported'\n")
    assert layered(functions_dir, layer, fine).invoke({}) == "imported"


def test_a_manifest_and_grants_too_large_for_the_apis_environment_stop_local_moto_as_they_fail_the_synth(tmp_path):
    grants = [{"owners": [f"user-{i}"], "handlers": [f"team-{i}.*"]} for i in range(200)]
    system = LocalSystem(
        tmp_path / "data",
        backend=MOTO,
        handler_modules=["billing.handlers"],
        handler_path=ROOT / "examples" / "handlers",
        grants=grants,
    )
    with pytest.raises(InvalidInput, match="4 KB") as refused:
        system.start()  # before anything starts
    assert refused.value.field == "handlers" and system.local_backend is None


def test_the_folder_is_staged_without_what_is_never_shipped_nor_the_data_dir_inside_it(tmp_path):
    folder = tmp_path / "project"
    package_in(folder, "billing", "")
    package_in(folder, "tests", "")
    (folder / "requirements.txt").write_text("croniter\n")
    data_dir = folder / ".duetime"  # `duetime local`'s default data dir, in the folder it stages
    (data_dir / "local.json").parent.mkdir()
    (data_dir / "local.json").write_text("{}")
    layer = stage_handler_layer(folder, data_dir / "lambda" / "handlers", also_skip=[data_dir])
    assert layer == data_dir / "lambda" / "handlers" / "python"
    assert sorted(p.name for p in layer.iterdir()) == ["billing", "requirements.txt"]


def test_a_function_finds_the_dependency_layers_distributions_with_their_extras_and_what_requirements_name():
    shipped = runtime_modules()
    assert {"duetime", "json", "pydantic", "boto3", "botocore", "dateutil", "jwt"} <= shipped
    assert "aws_xray_sdk" in shipped  # aws-lambda-powertools[tracer]: the extra's requirements too
    assert "croniter" not in shipped and "moto" not in shipped and "pytest" not in shipped  # this environment's
    assert "croniter" in runtime_modules(("croniter>=1  ",))  # a handler layer's requirements.txt names it
