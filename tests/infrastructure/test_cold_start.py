"""Every function of the synthesized stack imports the way a Lambda cold start does: a process whose sys.path is
exactly its asset, its layers (the same pinned distributions), the standard library and the runtime's boto3, as
duetime.local.lambda_process builds it for `duetime local --backend moto`, never the development venv, which
holds modules (aws_xray_sdk, through moto) no layer ships."""

from __future__ import annotations

import pytest
from duetime.local.lambda_process import ColdStartFailed, DeployedFunction, deployed_functions

from tests.integration.test_lambda_process import process_function

# Credentials that reach nothing: a call made at cold start (a worker announces its handlers) fails at once on a
# closed port instead of waiting on the network.
NOWHERE = {
    "AWS_ACCESS_KEY_ID": "cold-start",
    "AWS_SECRET_ACCESS_KEY": "cold-start",
    "AWS_SESSION_TOKEN": "cold-start",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "AWS_MAX_ATTEMPTS": "1",
}


@pytest.fixture(scope="module")
def deployed(synthesized) -> list[DeployedFunction]:
    functions = deployed_functions(synthesized.raw, synthesized.outdir)
    ours = {synthesized.logical_id(f) for f in synthesized.stack.functions.all}
    assert {f.logical_id for f in functions} == ours
    return functions


def test_every_function_imports_with_only_its_asset_its_layers_and_the_runtime_boto3(synthesized, deployed):
    failures = {}
    for function in deployed:
        process = process_function(function, synthesized.raw, **NOWHERE)
        try:
            report = process.cold_start().report()  # its handler's module imported, and from where
        except ColdStartFailed as failed:
            failures[function.logical_id] = str(failed)
            continue
        finally:
            process.stop()
        # Nothing came from anywhere else (the venv, the worktree): the child's sys.path was exactly these.
        assert tuple(report["path"]) == process.lambda_path.path
        outside = [f for f in report["files"] if not any(f.startswith(f"{root}/") for root in report["path"])]
        assert not outside, (function.logical_id, outside[:5])
        # The core came from its layer; botocore from the runtime, beside its boto3 (aws-xray-sdk, of the
        # layer's Powertools tracer extra, requires botocore: the layer leaves it out again).
        assert any("/asset." in f and f.endswith("/duetime/__init__.py") for f in report["files"])
        botocore = {root for root in report["path"] if f"{root}/botocore/__init__.py" in report["files"]}
        assert botocore == {str(process.lambda_path.runtime_dir)}, botocore
    assert not failures, "\n\n".join(f"{name}:\n{output}" for name, output in failures.items())
