"""A small Lambda stand-in that runs duetime's real `functions/*/index.py` handlers as AWS invokes them.

What it emulates:
- An execution environment per function instance: the handler module is imported afresh (its cold start)
  with the environment the CDK stack gives that function (duetime.config.function_environment), and keeps
  its module state between invocations, as a warm Lambda container does. Instances are created on demand
  up to a concurrency limit and reused when free.
- Each invocation gets a fresh context: aws_request_id, function_name, memory_limit_in_mb,
  invoked_function_arn, get_remaining_time_in_millis (counted down from the function's timeout).
- EventBridge: a scheduled event ("Scheduled Event", source aws.events) each tick; ticks never overlap.
- The SQS event source: up to five pollers long-poll ReceiveMessage (20 s), each for a batch an invocation
  slot is free for, of up to the configured batch size with every attribute and the queue's own visibility
  timeout; they build the SQS event Lambda builds (messageId, receiptHandle, body, attributes with
  ApproximateReceiveCount, SentTimestamp, ApproximateFirstReceiveTimestamp, eventSource, eventSourceARN,
  awsRegion), invoke the handler (up to the mapping's concurrency batches at once) and honour
  ReportBatchItemFailures: only the items not reported are deleted; a handler exception (or a malformed
  report) fails the whole batch and deletes nothing. Failed items reappear when their visibility ends; the
  redrive to the DLQ after maxReceiveCount is SQS's own (moto implements the RedrivePolicy).

What it does not emulate: timeouts are not enforced (the context only reports the time left), memory is
not limited, there is no X-Ray daemon (tracing is disabled), no retries of failed scheduled invocations
(EventBridge targets are configured with none), and a stop does not wait for a poller's long poll.

Layers: a function given layers (the worker's handler layer, a copy of the team's handler folder, as the CDK
stack gives the deployed workers) imports at its cold start as Lambda's path would let it: a top-level module
from its layers first (Lambda's /opt/python), else only what the Lambda runtime and duetime's dependency
layer hold (the standard library, duetime, pyproject's runtime dependencies and theirs) and what the layer's
requirements.txt names (installed into the layer at synth; here, from this environment). Anything else (a
package installed in this machine's environment that the folder's requirements.txt does not name, the project
folder itself) is missing, so the import fails and the cold start with it, as on AWS (where the synth's own
import of the modules fails first: duetime.local.handler_layer does the same here). A module this process
imported already is not looked up again, so such a module is not refused; and a handler's child process
runs with this process's path (its module's layer first), so an import inside a handler's function body is
not restricted either.

One process holds every instance, so they share os.environ. A module reads its configuration at import
(every duetime handler does, checked at cold start), so while it is imported, under a lock, `os.environ`
is a copy of the host's with the function's variables added, and the host's own mapping is put back after.
The process environment itself is never written: threads iterating it meanwhile are not disturbed (they
see the copy), and subprocesses never inherit a function's variables. Instances of one function also share
Powertools' process-wide logger, so under concurrency a log line may carry another instance's request id
(on AWS each instance is a process of its own).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import itertools
import json
import logging
import os
import re
import sys
import threading
import time
import tomllib
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

log = logging.getLogger("duetime.local.lambda")

ACCOUNT = "123456789012"  # moto's default account
# Lambda's SQS pollers long-poll for 20 s. A poller waiting in a receive costs nothing (moto answers as soon as a
# message is sent, and checks delayed ones each second); one-second polls were a third of the requests an idle
# `duetime local --backend moto` made. Stopping does not wait for a receive (SqsEventSource.stop).
POLL_SECONDS = 20
# Lambda polls a queue with five pollers at first, however many invocations it runs (SqsEventSource).
RECEIVERS = 5
FUNCTIONS_DIR = Path(__file__).resolve().parents[5] / "functions"
# The runtime dependencies the dependency layer is built from (infra/build_layers.py reads the same list).
PYPROJECT = FUNCTIONS_DIR.parent / "pyproject.toml"
_IMPORT_LOCK = threading.Lock()
_instance_numbers = itertools.count(1)


@dataclass
class LambdaContext:
    """The context object Lambda passes to a Python handler (the attributes duetime and Powertools read)."""

    function_name: str
    memory_limit_in_mb: int
    invoked_function_arn: str
    aws_request_id: str
    deadline: float  # time.monotonic() at which the invocation would time out
    function_version: str = "$LATEST"
    log_group_name: str = ""
    log_stream_name: str = ""

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


# A layer's requirements.txt: the distributions the synth installs into it (infra/handlers.py).
REQUIREMENTS_FILE = "requirements.txt"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(text: str) -> tuple[str, frozenset[str]]:
    """A requirement's normalized distribution name and extras ("aws-lambda-powertools[tracer]==3.37.0")."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", text)
    if match is None:
        return "", frozenset()
    extras = frozenset(_normalized(e.strip()) for e in (match.group(2) or "").split(",") if e.strip())
    return _normalized(match.group(1)), extras


def requirements_of(layer: Path) -> tuple[str, ...]:
    """The requirements a layer's requirements.txt names (comments, options and blank lines left out)."""
    path = layer / REQUIREMENTS_FILE
    if not path.is_file():
        return ()
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return tuple(line for line in lines if line and not line.startswith("-"))


@functools.cache
def runtime_modules(requirements: tuple[str, ...] = (), pyproject: Path = PYPROJECT) -> frozenset[str]:
    """The top-level modules a deployed function finds outside its layers' own folders: the standard
    library, duetime (the core layer), and those of the distributions the dependency layer ships
    (pyproject's runtime dependencies, with their extras, and transitively theirs; boto3 and botocore are the
    runtime's own) and of `requirements` (a handler layer's requirements.txt), as installed here."""
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    wanted = [_requirement(r) for r in (*dependencies, *requirements)]
    closure: dict[str, set[str]] = {}
    while wanted:
        name, extras = wanted.pop()
        if not name or (name in closure and extras <= closure[name]):
            continue
        closure.setdefault(name, set()).update(extras)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for requirement in requires:
            marker = requirement.partition(";")[2]
            extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
            # An extra's requirements come only with that extra (pip installs none otherwise).
            if extra is None or _normalized(extra.group(1)) in closure[name]:
                wanted.append(_requirement(requirement))
    installed = importlib.metadata.packages_distributions()
    shipped = {module for module, dists in installed.items() if any(_normalized(d) in closure for d in dists)}
    return frozenset({*sys.stdlib_module_names, *sys.builtin_module_names, "duetime", *shipped})


class LayerImports(importlib.abc.MetaPathFinder):
    """The imports of one thread as a deployed function's path resolves them: a top-level module from the
    function's layers first, else one of `provided` from this process's path; any other is missing
    (ModuleNotFoundError), though this process could import it. Submodules follow their package."""

    def __init__(self, layers: Sequence[Path], provided: frozenset[str]) -> None:
        self.paths, self.provided = [str(layer) for layer in layers], provided
        self.thread = threading.get_ident()

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if threading.get_ident() != self.thread or path is not None:
            return None  # another thread's import, or a submodule (found on its package's __path__)
        spec = importlib.machinery.PathFinder.find_spec(fullname, self.paths)
        if spec is not None or fullname in self.provided:
            return spec
        raise ModuleNotFoundError(f"No module named {fullname!r} (not in the function's layers)", name=fullname)


@contextlib.contextmanager
def layer_imports(layers: Sequence[Path]) -> Iterator[None]:
    """Imports of this thread, meanwhile, resolve as a function with `layers` resolves them (no layers: as
    this process does)."""
    if not layers:
        yield
        return
    requirements = tuple(sorted({r for layer in layers for r in requirements_of(layer)}))
    finder = LayerImports(layers, runtime_modules(requirements))
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def import_handler_module(
    function: str, environment: dict[str, str], functions_dir: Path = FUNCTIONS_DIR, layers: Sequence[Path] = ()
) -> ModuleType:
    """Import `functions/<function>/index.py` as a new module (a cold start) with `environment` set, its
    imports resolved from `layers` (the directories a layer puts on the path) as on AWS."""
    path = functions_dir / function / "index.py"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: the AWS-faithful mode runs from a duetime checkout")
    spec = importlib.util.spec_from_file_location(f"duetime_lambda_{function}_{next(_instance_numbers)}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with _IMPORT_LOCK:
        # Rebinding, not writing, os.environ: os.getenv and os.environ read the copy during this import, while
        # the real process environment (what subprocesses inherit) stays as it is (B003 is the point here).
        host = os.environ
        os.environ = {**host, **environment}  # type: ignore[assignment]  # noqa: B003
        try:
            with layer_imports(layers):
                spec.loader.exec_module(module)
        finally:
            os.environ = host  # noqa: B003
    return module


@dataclass
class LambdaFunction:
    """One function: its environment, timeout and memory, and its warm instances (imported modules)."""

    name: str  # the directory under functions/
    function_name: str  # the deployed name, as the context reports it
    environment: dict[str, str]
    timeout_seconds: int
    memory_mb: int
    region: str
    max_instances: int = 10
    functions_dir: Path = FUNCTIONS_DIR
    # The `python/` directories of its layers beyond the core and dependencies (the worker's handler layer).
    layers: tuple[Path, ...] = ()
    on_cold_start: Callable[[ModuleType], None] | None = None  # sees each new instance's module (tests)
    instances: list[ModuleType] = field(default_factory=list)
    _free: list[ModuleType] = field(default_factory=list)
    _slots: threading.Semaphore = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._slots = threading.Semaphore(self.max_instances)

    @property
    def arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{ACCOUNT}:function:{self.function_name}"

    def context(self) -> LambdaContext:
        return LambdaContext(
            function_name=self.function_name,
            memory_limit_in_mb=self.memory_mb,
            invoked_function_arn=self.arn,
            aws_request_id=str(uuid.uuid4()),
            deadline=time.monotonic() + self.timeout_seconds,
            log_group_name=f"/aws/lambda/{self.function_name}",
        )

    def invoke(self, event: dict[str, Any]) -> Any:
        """Run the handler on a free instance (a new one, cold, if none is free), with a fresh context.

        An exception is the invocation's failure and the instance stays warm; a BaseException that is not
        one (SystemExit, a simulated crash) ends the instance, as a dead runtime process ends its container.
        """
        with self._slots:
            with self._lock:
                module = self._free.pop() if self._free else None
            if module is None:
                module = self.cold_start()
            try:
                result = module.handler(event, self.context())
            except Exception:
                self._release(module)
                raise
            except BaseException:
                with self._lock:
                    self.instances.remove(module)
                raise
            self._release(module)
            return result

    def cold_start(self) -> ModuleType:
        module = import_handler_module(self.name, self.environment, self.functions_dir, self.layers)
        if self.on_cold_start is not None:
            self.on_cold_start(module)
        with self._lock:
            self.instances.append(module)
        return module

    def _release(self, module: ModuleType) -> None:
        with self._lock:
            self._free.append(module)

    def fresh(self) -> LambdaFunction:
        """The same function with no instances yet (a new deployment of it)."""
        return LambdaFunction(
            name=self.name,
            function_name=self.function_name,
            environment=dict(self.environment),
            timeout_seconds=self.timeout_seconds,
            memory_mb=self.memory_mb,
            region=self.region,
            max_instances=self.max_instances,
            functions_dir=self.functions_dir,
            layers=self.layers,
            on_cold_start=self.on_cold_start,
        )


def scheduled_event(region: str, rule_arn: str) -> dict[str, Any]:
    """The event an EventBridge schedule rule sends its target."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT,
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [rule_arn],
        "detail": {},
    }


class Schedule:
    """An EventBridge rate rule targeting `function`: invoked every `seconds`, from a daemon thread."""

    def __init__(self, function: LambdaFunction, seconds: float, rule_name: str) -> None:
        self.function, self.seconds = function, seconds
        self.rule_arn = f"arn:aws:events:{function.region}:{ACCOUNT}:rule/{rule_name}"
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=function.name, daemon=True)

    def _loop(self) -> None:
        next_tick = time.monotonic()
        while not self.stopped.is_set():
            try:
                self.function.invoke(scheduled_event(self.function.region, self.rule_arn))
            except Exception:  # a failed invocation is logged (CloudWatch) and the next tick comes anyway
                log.exception("%s failed", self.function.function_name)
            next_tick = max(next_tick + self.seconds, time.monotonic())
            self.stopped.wait(next_tick - time.monotonic())

    def start(self) -> Schedule:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()


def sqs_record(message: dict[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """One record of the SQS event Lambda's event source builds from a received message."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": {
            name: {
                "stringValue": value.get("StringValue"),
                "binaryValue": value.get("BinaryValue"),
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": value["DataType"],
            }
            for name, value in message.get("MessageAttributes", {}).items()
        },
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


def failed_items(response: Any, message_ids: set[str]) -> set[str] | None:
    """The message ids a ReportBatchItemFailures response names, or None when the response fails the
    whole batch (an item identifier that is empty or not in the batch, as Lambda reads it)."""
    if not isinstance(response, dict) or not response.get("batchItemFailures"):
        return set()
    failed = set()
    for item in response["batchItemFailures"]:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not identifier or identifier not in message_ids:
            return None
        failed.add(str(identifier))
    return failed


def _receipt_entries(messages: list[dict[str, Any]], **extra: Any) -> Iterator[list[dict[str, Any]]]:
    """The entries of SQS batch calls (DeleteMessageBatch, ChangeMessageVisibilityBatch) for `messages`: ten a
    call, each entry its message's receipt handle and `extra`."""
    for start in range(0, len(messages), 10):
        batch = messages[start : start + 10]
        yield [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], **extra} for i, m in enumerate(batch)]


class SqsEventSource:
    """Lambda's SQS event source mapping: up to `concurrency` batches invoked at once (the function's concurrency
    for the queue), received by at most `receivers` long-polling pollers, each batch handed to `invoke` and
    deleted as its response says.

    Lambda scales a mapping's invocations, not its pollers: it starts five, and a poller receives a batch only
    for an invocation that can start. One long poll per invocation slot (64 at `--workers 64`) made moto scan
    the whole queue on every wake of each of them (43% of its samples), and received batches no instance was free
    to take, which waited hidden while their runs came due."""

    def __init__(
        self,
        client: Any,
        queue_url: str,
        invoke: Callable[[dict[str, Any]], Any],
        batch_size: int,
        concurrency: int,
        region: str,
        wait_seconds: int = POLL_SECONDS,
        name: str = "sqs",
        receivers: int = RECEIVERS,
    ) -> None:
        self.client, self.queue_url, self.invoke = client, queue_url, invoke
        self.batch_size, self.concurrency, self.region = batch_size, concurrency, region
        self.wait_seconds, self.name = wait_seconds, name
        self.queue_arn = client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        self.stopped = threading.Event()
        self.threads = [
            threading.Thread(target=self._loop, name=f"{name}-poller-{n}", daemon=True)
            for n in range(min(receivers, concurrency))
        ]
        # Invocation slots: a poller takes one before it receives, and the batch's invocation gives it back.
        self._slots = threading.BoundedSemaphore(concurrency)
        # Batches handed to `invoke` and not yet deleted: what stop waits for (under `_turn`, with `stopped`).
        self._invoking = 0
        self._turn = threading.Condition()

    def start(self) -> SqsEventSource:
        for thread in self.threads:
            thread.start()
        return self

    def stop(self, timeout: float = 15) -> None:
        """End the mapping: wait (up to `timeout`) for the batches being invoked to be deleted, not for pollers
        waiting in a receive. Those are daemon threads: a batch one receives after this hands its messages
        back at once, and one whose server is gone ends with the error."""
        with self._turn:
            self.stopped.set()
            self._turn.wait_for(lambda: self._invoking == 0, timeout=timeout)

    def _loop(self) -> None:
        while not self.stopped.is_set():
            if not self._slots.acquire(timeout=1):
                continue  # every slot is invoking: look at `stopped` again
            handed = False
            try:
                messages = self._receive()
                if messages and self._begin(messages):
                    threading.Thread(
                        target=self._invoke_then_free, args=(messages,), name=f"{self.name}-invoke", daemon=True
                    ).start()
                    handed = True
            except Exception:  # an unreachable queue must not end the mapping
                if self.stopped.is_set():  # its instance ended with the system: nothing to say
                    return
                log.exception("polling %s failed", self.queue_url)
                self.stopped.wait(1)
            finally:
                if not handed:
                    self._slots.release()

    def poll_once(self) -> int:
        """Receive one batch, invoke the handler with it (in this thread) and delete what succeeded; returns
        the batch size."""
        messages = self._receive()
        if not messages or not self._begin(messages):
            return 0
        return self._invoke_counted(messages)

    def _receive(self) -> list[dict[str, Any]]:
        response = self.client.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=self.batch_size,
            WaitTimeSeconds=self.wait_seconds,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        return list(response.get("Messages", []))

    def _begin(self, messages: list[dict[str, Any]]) -> bool:
        """Count a received batch as being invoked, unless the mapping has ended: then its messages are visible
        again at once, not after their visibility timeout, and this says False."""
        with self._turn:
            stopped = self.stopped.is_set()
            if not stopped:
                self._invoking += 1
        if stopped:
            self._hand_back(messages)
        return not stopped

    def _invoke_counted(self, messages: list[dict[str, Any]]) -> int:
        try:
            return self._invoke(messages)
        finally:
            with self._turn:
                self._invoking -= 1
                self._turn.notify_all()

    def _invoke_then_free(self, messages: list[dict[str, Any]]) -> None:
        try:
            self._invoke_counted(messages)
        finally:
            self._slots.release()

    def _hand_back(self, messages: list[dict[str, Any]]) -> None:
        for entries in _receipt_entries(messages, VisibilityTimeout=0):
            with contextlib.suppress(Exception):  # its server may be stopping too: then the timeout returns them
                self.client.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=entries)

    def _invoke(self, messages: list[dict[str, Any]]) -> int:
        """Invoke the handler with one received batch and delete what succeeded; returns the batch size."""
        event = {"Records": [sqs_record(m, self.queue_arn, self.region) for m in messages]}
        try:
            result = self.invoke(event)
        except Exception:  # the whole batch failed: every message reappears after its visibility timeout
            if not self.stopped.is_set():  # else its instance ended with the system, as a stopping one does
                log.exception("the handler failed a batch of %d from %s", len(messages), self.queue_url)
            return len(messages)
        failed = failed_items(result, {m["MessageId"] for m in messages})
        if failed is None:
            log.warning("malformed batchItemFailures from the handler: the whole batch failed (%s)", json.dumps(result))
            return len(messages)
        done = [m for m in messages if m["MessageId"] not in failed]
        for entries in _receipt_entries(done):
            outcome = self.client.delete_message_batch(QueueUrl=self.queue_url, Entries=entries)
            for failure in outcome.get("Failed", []):
                log.warning("could not delete a handled message: %s", failure.get("Message"))
        return len(messages)
