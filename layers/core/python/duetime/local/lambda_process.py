"""Functions run from what `cdk synth` ships: each instance a process whose sys.path is what Lambda gives it.

`deployed_functions` reads the synthesized template and its cloud assembly (duetime.local.synth): each Python
function's handler, runtime, asset folder (/var/task on AWS) and layer folders (/opt). `lambda_path` makes the
path a cold start imports with, exactly: the asset, each layer's `python/` folder in order (a layer built with
another platform's wheels preceded by the same pinned versions installed for this machine, `--no-deps`:
infra.build_layers.install_here, cached under build/here/), the interpreter's standard library, and a folder
holding only the Lambda runtime's boto3 and its dependencies (/var/runtime). Nothing from the development
venv or the checkout: a module a layer lacks fails the cold start here as it fails on AWS.

`ProcessFunction` runs a function's instances as `python -S -I lambda_bootstrap.py` processes of the
function's runtime version (python3.12, when this machine has one) and hands them invocations over a pipe
(duetime.local.lambda_bootstrap), with the interface of duetime.local.lambda_mode.LambdaFunction: instances
made on demand up to a concurrency limit, reused warm, fresh context per invocation; an exception is the
invocation's failure, a dead process (a SystemExit, a crash) the end of its instance.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from duetime.local.synth import ROOT, SYNTH_DIR
from duetime.local.template_stack import LocalStack

ACCOUNT = "123456789012"
BOOTSTRAP = Path(__file__).with_name("lambda_bootstrap.py")
# How long an instance has to end after SIGTERM before SIGKILL (Lambda gives a runtime about as long).
SHUTDOWN_GRACE_SECONDS = 2.0
_numbers = itertools.count(1)


@dataclass(frozen=True)
class DeployedFunction:
    """One Python function of the synthesized template, as cdk.out holds it."""

    logical_id: str
    handler: str  # "index.handler"
    runtime: str  # "python3.12"
    asset: Path
    layers: tuple[Path, ...]  # each layer's folder, as extracted under /opt
    variables: Mapping[str, Any]  # the template's environment, intrinsic functions unresolved
    service: str  # POWERTOOLS_SERVICE_NAME: "api", "preloader", "worker", "dlq_notifier"
    job_class: str | None = None


def _asset_dir(code: Mapping[str, Any], outdir: Path) -> Path:
    folder = outdir / f"asset.{str(code['S3Key']).removesuffix('.zip')}"
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not in the cloud assembly")
    return folder


def resolved_environment(function: DeployedFunction, stack: LocalStack) -> dict[str, str]:
    """The function's variables as the template gives them, their Refs and GetAtts resolved to the local
    resources (duetime.local.template_stack.LocalStack)."""
    return {name: str(stack.resolve(value)) for name, value in function.variables.items()}


def deployed_functions(template: Mapping[str, Any], outdir: Path) -> list[DeployedFunction]:
    """Every Python function of `template` with a service name (duetime's, not a custom resource's provider)."""
    found = []
    for logical_id, resource in template["Resources"].items():
        props = resource.get("Properties") or {}
        if resource["Type"] != "AWS::Lambda::Function" or not str(props.get("Runtime", "")).startswith("python"):
            continue
        service = ((props.get("Environment") or {}).get("Variables") or {}).get("POWERTOOLS_SERVICE_NAME")
        if isinstance(service, str):
            found.append(deployed_function(template, outdir, logical_id, service))
    return found


def deployed_function(template: Mapping[str, Any], outdir: Path, logical_id: str, service: str) -> DeployedFunction:
    """The Python function `logical_id` of `template`, as `service` (what it runs)."""
    resources = template["Resources"]
    props = resources[logical_id].get("Properties") or {}
    variables = dict((props.get("Environment") or {}).get("Variables") or {})
    layers = tuple(
        _asset_dir(resources[layer["Ref"]]["Properties"]["Content"], outdir) for layer in props.get("Layers", [])
    )
    job_class = variables.get("DUETIME_JOB_CLASS")
    return DeployedFunction(
        logical_id=logical_id,
        handler=str(props["Handler"]),
        runtime=str(props["Runtime"]),
        asset=_asset_dir(props["Code"], outdir),
        layers=layers,
        variables=variables,
        service=service,
        job_class=job_class if isinstance(job_class, str) else None,
    )


def runtime_python(runtime: str) -> tuple[str, str]:
    """An interpreter of the function's runtime version (python3.12: the one Lambda runs), else this one; and the
    version the installs are made for."""
    wanted = runtime.removeprefix("python")
    candidates = [shutil.which(f"python{wanted}")]
    candidates += [
        str(p) for p in sorted(Path(os.path.expanduser("~/.pyenv/versions")).glob(f"{wanted}.*/bin/python{wanted}"))
    ]
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "-c", ""], capture_output=True).returncode == 0:
            return candidate, wanted
    return sys.executable, f"{sys.version_info.major}.{sys.version_info.minor}"


@dataclass(frozen=True)
class LambdaPath:
    python: str
    path: tuple[str, ...]  # sys.path, exactly, in order
    runtime_dir: Path  # the runtime's boto3 (the last entry)


def _build_tools() -> Any:
    """infra.build_layers, from the checkout (a build tool: never shipped, so never imported at module level)."""
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))
    return importlib.import_module("infra.build_layers")


def lambda_path(
    function: DeployedFunction, extra_layers: tuple[Path, ...] = (), lock_dir: Path = SYNTH_DIR
) -> LambdaPath:
    """The sys.path `function` imports with (module docstring); `extra_layers` are layer folders added after its
    own (the staged handler layer of `duetime local --handlers`)."""
    tools = _build_tools()
    python, version = runtime_python(function.runtime)
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / ".install-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel `duetime local` starts install each pin set once
        path: list[str] = [str(function.asset)]
        for layer in (*function.layers, *extra_layers):
            layer_python = layer / "python"
            if pins := tools.pinned_distributions(layer_python):
                path.append(str(tools.install_here(pins, "layer", version, no_deps=True)))
            path.append(str(layer_python))
        runtime = Path(tools.install_here([tools.runtime_boto3()], "runtime-boto3", version, no_deps=False))
    stdlib = json.loads(
        subprocess.run(
            [python, "-S", "-I", "-c", "import json, sys; print(json.dumps(sys.path))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    return LambdaPath(python=python, path=(*path, *stdlib, str(runtime)), runtime_dir=runtime)


class ColdStartFailed(RuntimeError):
    """The instance's import failed (Runtime.ImportModuleError on AWS)."""


class InvocationFailed(RuntimeError):
    """The handler raised: the invocation failed (the instance stays warm)."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        super().__init__(f"{error.get('errorType')}: {error.get('errorMessage')}")
        self.error = dict(error)


class InstanceDied(RuntimeError):
    """The instance's process ended during an invocation."""


_OUTPUT_LOCK = threading.Lock()


def _relay(output: IO[bytes], sink: Callable[[bytes], None] | None = None) -> None:
    """An instance's log lines onto this process's stdout, whole lines at a time (several instances writing
    one pipe would interleave lines longer than the pipe's atomic write); with a `sink`, to it instead (the
    function's log group, as a reader of CloudWatch Logs sees it)."""
    for line in output:
        if sink is not None:
            sink(line)
            continue
        with _OUTPUT_LOCK:
            binary = getattr(sys.stdout, "buffer", None)
            if binary is not None:
                sys.stdout.flush()
                binary.write(line)
                binary.flush()
            else:  # a replaced stdout (a test's capture)
                sys.stdout.write(line.decode("utf-8", "replace"))
                sys.stdout.flush()


class Instance:
    """One runtime process: its pipes, and the cold start it answered."""

    def __init__(
        self,
        python: str,
        setup: Mapping[str, Any],
        environment: Mapping[str, str],
        cwd: Path,
        log_sink: Callable[[bytes], None] | None = None,
    ) -> None:
        request_read, self._request_write = os.pipe()
        self._response_read, response_write = os.pipe()
        self.process = subprocess.Popen(
            [python, "-S", "-I", str(BOOTSTRAP), str(request_read), str(response_write), json.dumps(dict(setup))],
            env={**environment, "PYTHONUNBUFFERED": "1"},
            cwd=cwd,
            pass_fds=(request_read, response_write),
            stdout=subprocess.PIPE,
            # Captured, stderr is the log too (Lambda sends both streams to the function's log group).
            stderr=subprocess.STDOUT if log_sink is not None else None,
        )
        assert self.process.stdout is not None
        threading.Thread(target=_relay, args=(self.process.stdout, log_sink), daemon=True).start()
        os.close(request_read)
        os.close(response_write)
        self.requests: IO[str] = os.fdopen(self._request_write, "w", encoding="utf-8")
        self.responses: IO[str] = os.fdopen(self._response_read, "r", encoding="utf-8")
        # One question at a time, as a Lambda instance takes one invocation at a time: the function hands an
        # instance to one invocation, but a report (a test's look at what the process imported) may come while
        # one runs, and two threads reading one pipe split each other's answer lines.
        self._asking = threading.Lock()
        first = self._answer()
        if "initError" in first or "ready" not in first:
            self.stop()
            error = first.get("initError") or {}
            raise ColdStartFailed(f"{error.get('errorType')}: {error.get('errorMessage')}")

    def _answer(self) -> dict[str, Any]:
        line = self.responses.readline()
        if not line:
            self.process.wait()
            raise InstanceDied(f"the runtime process ended (exit status {self.process.returncode})")
        return dict(json.loads(line))

    def report(self) -> dict[str, Any]:
        """The process's sys.path and the files of every module it imported."""
        return dict(self._ask({"report": True}))

    def invoke(self, event: Any, context: Mapping[str, Any]) -> Any:
        return self._ask({"event": event, "context": dict(context)})

    def _ask(self, message: Mapping[str, Any]) -> Any:
        with self._asking:
            try:
                self.requests.write(json.dumps(dict(message)) + "\n")
                self.requests.flush()
            except (BrokenPipeError, ValueError) as exc:
                raise InstanceDied("the runtime process ended") from exc
            answer = self._answer()
        if answer.get("fatal"):
            self.process.wait(timeout=30)
            raise InstanceDied(f"{answer['error'].get('errorType')}: {answer['error'].get('errorMessage')}")
        if "error" in answer:
            raise InvocationFailed(answer["error"])
        return answer.get("result")

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, grace_seconds: float = SHUTDOWN_GRACE_SECONDS) -> None:
        self.terminate()
        self.wait_or_kill(time.monotonic() + grace_seconds)

    def terminate(self) -> None:
        """SIGTERM, as Lambda's shutdown phase sends it. The pipes stay open until the process has ended: a thread
        inside an invocation reads the response pipe, and closing it meanwhile waits for that read (for as long
        as a handler sleeps: a minute, where the instance was meant to end at once)."""
        if self.process.poll() is None:
            self.process.terminate()

    def wait_or_kill(self, deadline: float) -> None:
        """SIGKILL at `deadline` if the process has not ended (Lambda kills a runtime a moment after SIGTERM);
        then its pipes close, the invocation reading them, if any, having met their end."""
        try:
            self.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for stream in (self.requests, self.responses):
            with contextlib.suppress(OSError):
                stream.close()


@dataclass
class ProcessFunction:
    """A function whose instances are runtime processes (module docstring)."""

    name: str  # the directory under functions/ ("worker")
    function_name: str
    environment: dict[str, str]
    timeout_seconds: int
    memory_mb: int
    region: str
    deployed: DeployedFunction
    lambda_path: LambdaPath
    max_instances: int = 10
    on_cold_start: Callable[[Instance], None] | None = None
    # Where the instances' log lines (stdout and stderr) go; None: this process's stdout.
    log_sink: Callable[[bytes], None] | None = None
    instances: list[Instance] = field(default_factory=list)
    _free: list[Instance] = field(default_factory=list)
    _slots: threading.Semaphore = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._slots = threading.Semaphore(self.max_instances)

    @property
    def arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{ACCOUNT}:function:{self.function_name}"

    def context(self) -> dict[str, Any]:
        return {
            "function_name": self.function_name,
            "memory_limit_in_mb": self.memory_mb,
            "invoked_function_arn": self.arn,
            "aws_request_id": str(uuid.uuid4()),
            "remaining_ms": self.timeout_seconds * 1000,
            "log_group_name": f"/aws/lambda/{self.function_name}",
        }

    def process_environment(self) -> dict[str, str]:
        """What the Lambda runtime sets, Powertools' own settings of the environment `duetime local` runs in
        (POWERTOOLS_LOGGER_LOG_EVENT...: a deployed function may be given them too), and the function's own
        variables. Nothing else of this process's environment: no credentials, no PYTHONPATH."""
        powertools = {name: value for name, value in os.environ.items() if name.startswith("POWERTOOLS_")}
        return {
            **powertools,
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "TZ": ":UTC",
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_EXECUTION_ENV": f"AWS_Lambda_{self.deployed.runtime}",
            "AWS_LAMBDA_FUNCTION_NAME": self.function_name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self.memory_mb),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{self.function_name}",
            "LAMBDA_TASK_ROOT": str(self.deployed.asset),
            "LAMBDA_RUNTIME_DIR": str(self.lambda_path.runtime_dir),
            "_HANDLER": self.deployed.handler,
            "PYTHONDONTWRITEBYTECODE": "1",
            **self.environment,
        }

    def cold_start(self) -> Instance:
        setup = {"path": list(self.lambda_path.path), "handler": self.deployed.handler}
        instance = Instance(
            self.lambda_path.python, setup, self.process_environment(), self.deployed.asset, self.log_sink
        )
        if self.on_cold_start is not None:
            self.on_cold_start(instance)
        with self._lock:
            self.instances.append(instance)
        return instance

    def invoke(self, event: dict[str, Any]) -> Any:
        """Run the handler on a free instance (a new one, cold, if none is free), with a fresh context."""
        with self._slots:
            with self._lock:
                instance = self._free.pop() if self._free else None
            if instance is None:
                instance = self.cold_start()
            try:
                result = instance.invoke(event, self.context())
            except InstanceDied:
                with self._lock:  # not there if the function was stopped meanwhile
                    if instance in self.instances:
                        self.instances.remove(instance)
                instance.stop()
                raise
            except Exception:
                self._release(instance)
                raise
            self._release(instance)
            return result

    def _release(self, instance: Instance) -> None:
        with self._lock:
            self._free.append(instance)

    def stop(self) -> None:
        """End every instance (the function's containers), all at once: each gets SHUTDOWN_GRACE_SECONDS."""
        with self._lock:
            instances, self.instances, self._free = list(self.instances), [], []
        for instance in instances:
            instance.terminate()
        deadline = time.monotonic() + SHUTDOWN_GRACE_SECONDS
        for instance in instances:
            instance.wait_or_kill(deadline)
