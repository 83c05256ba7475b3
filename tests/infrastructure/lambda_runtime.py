"""A Lambda cold start's import, rebuilt from what `cdk synth` wrote (cdk.out), never from the development venv.

Each function runs in a `python -S -I` process whose sys.path is exactly what Lambda gives it: its asset folder
(/var/task), its layers in order (/opt/python), the interpreter's standard library, and a folder with only what
the Lambda Python runtime ships (/var/runtime: boto3 and its dependencies). A layer's distributions are built for
arm64; each is installed again, the same pinned version, for this machine (`pip install --no-deps`) and put just
before the layer's own folder, so compiled extensions load here and a module missing from the layer is missing
here too (infra.build_layers.install_here, cached under build/here/).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from duetime.local.lambda_process import runtime_python

from infra.build_layers import install_here, pinned_distributions, runtime_boto3

REGION = "us-east-1"
ACCOUNT = "123456789012"
PSEUDO = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "DuetimeStack",
}
# The child: put exactly the given folders (and the standard library) on sys.path, import the handler's module,
# and report where every imported module came from.
CHILD = r"""
import importlib, json, sys
paths, stdlib, runtime, module_name, attribute = json.loads(sys.argv[1])
sys.path[:] = [*paths, *stdlib, runtime]
module = importlib.import_module(module_name)
handler = getattr(module, attribute)
files = sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())} - {""})
print(json.dumps({"callable": callable(handler), "files": files}))
"""


@dataclass(frozen=True)
class LambdaFunction:
    logical_id: str
    handler: str
    runtime: str  # "python3.12"
    asset: Path
    layers: list[Path]  # each layer's folder as extracted under /opt
    environment: dict[str, str]


def functions_of(raw: dict[str, Any], outdir: Path) -> list[LambdaFunction]:
    """Every Python function of the synthesized template, with its asset and layer folders in `outdir`."""
    resources = raw["Resources"]
    found = []
    for logical_id, resource in resources.items():
        props = resource["Properties"]
        if resource["Type"] != "AWS::Lambda::Function" or not str(props.get("Runtime", "")).startswith("python"):
            continue
        layers = [_asset_dir(resources[layer["Ref"]]["Properties"]["Content"], outdir) for layer in props["Layers"]]
        variables = props.get("Environment", {}).get("Variables", {})
        found.append(
            LambdaFunction(
                logical_id=logical_id,
                handler=props["Handler"],
                runtime=props["Runtime"],
                asset=_asset_dir(props["Code"], outdir),
                layers=layers,
                environment={name: resolve(value, resources) for name, value in variables.items()},
            )
        )
    return found


def _asset_dir(code: dict[str, Any], outdir: Path) -> Path:
    folder = outdir / f"asset.{code['S3Key'].removesuffix('.zip')}"
    assert folder.is_dir(), f"{folder} is not in cdk.out"
    return folder


def resolve(value: Any, resources: dict[str, Any]) -> str:
    """A template value as a string, with plausible stand-ins for what CloudFormation fills in at deploy time."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return str(value)
    (function, argument), *_ = value.items()
    if function == "Ref":
        if argument in PSEUDO:
            return PSEUDO[argument]
        if resources[argument]["Type"] == "AWS::SQS::Queue":  # a queue's Ref is its URL
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{argument}"
        return str(argument)
    if function == "Fn::GetAtt":
        return f"arn:aws:{argument[0].lower()}:{REGION}:{ACCOUNT}:{argument[0]}/{argument[1]}"
    if function == "Fn::Join":
        separator, parts = argument
        return separator.join(resolve(part, resources) for part in parts)
    if function == "Fn::Select":
        index, items = argument
        listed = items if isinstance(items, list) else resolve(items, resources).split(",")
        return resolve(listed[int(index)], resources)
    if function == "Fn::Split":
        separator, text = argument
        return ",".join(resolve(text, resources).split(separator))
    if function == "Fn::Sub":
        return re.sub(r"\$\{([^}]+)\}", lambda m: PSEUDO.get(m.group(1), m.group(1)), argument)
    raise AssertionError(f"no stand-in for {function} in a function's environment")


@dataclass(frozen=True)
class ColdStart:
    returncode: int
    output: str
    files: list[str]  # every imported module's file
    roots: list[Path]  # the whole sys.path the import had


def cold_start(function: LambdaFunction) -> ColdStart:
    """Import `function`'s handler module the way a Lambda cold start does; its outcome."""
    python, version = runtime_python(function.runtime)
    path = [function.asset]
    for layer in function.layers:
        layer_python = layer / "python"
        if pins := pinned_distributions(layer_python):
            path.append(install_here(pins, "layer", version, no_deps=True))
        path.append(layer_python)
    runtime = install_here([runtime_boto3()], "runtime-boto3", version, no_deps=False)
    stdlib_paths = json.loads(
        subprocess.run(
            [python, "-S", "-I", "-c", "import json, sys; print(json.dumps(sys.path))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    module, attribute = function.handler.rsplit(".", 1)
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        **function.environment,
        # What the Lambda runtime sets, and credentials that reach nothing: a call made at cold start (a worker
        # announces its handlers) fails at once on a closed port instead of waiting on the network.
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EXECUTION_ENV": f"AWS_Lambda_{function.runtime}",
        "AWS_LAMBDA_FUNCTION_NAME": function.logical_id,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "LAMBDA_TASK_ROOT": str(function.asset),
        "_HANDLER": function.handler,
        "AWS_ACCESS_KEY_ID": "cold-start",
        "AWS_SECRET_ACCESS_KEY": "cold-start",
        "AWS_SESSION_TOKEN": "cold-start",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_MAX_ATTEMPTS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    argument = json.dumps([[str(p) for p in path], stdlib_paths, str(runtime), module, attribute])
    result = subprocess.run(
        [python, "-S", "-I", "-c", CHILD, argument],
        capture_output=True,
        text=True,
        env=environment,
        cwd=function.asset,
        timeout=120,
        check=False,
    )
    report = json.loads(result.stdout.splitlines()[-1]) if result.returncode == 0 else {"files": []}
    roots = [*path, *(Path(p) for p in stdlib_paths), runtime]
    if result.returncode == 0 and not report["callable"]:
        return ColdStart(1, f"{function.handler} is not callable", report["files"], roots)
    return ColdStart(result.returncode, result.stderr[-3000:], report["files"], roots)
