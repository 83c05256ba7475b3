"""Every function of the synthesized stack imports the way a Lambda cold start does: with only its asset, its
layers (the same pinned distributions) and the runtime's boto3 on sys.path (tests/infrastructure/lambda_runtime.py),
never the development venv, which holds modules (aws_xray_sdk, through moto) no layer ships."""

from __future__ import annotations

import pytest

from tests.infrastructure.lambda_runtime import cold_start, functions_of


@pytest.fixture(scope="module")
def deployed(synthesized):
    functions = functions_of(synthesized.raw, synthesized.outdir)
    ours = {synthesized.logical_id(f) for f in synthesized.stack.functions.all}
    assert {f.logical_id for f in functions} == ours
    return functions


def test_every_function_imports_with_only_its_asset_its_layers_and_the_runtime_boto3(deployed):
    failures = {}
    for function in deployed:
        result = cold_start(function)
        if result.returncode != 0:
            failures[function.logical_id] = result.output
            continue
        # Nothing came from anywhere else (the venv, the worktree): the child's sys.path was exactly these.
        outside = [f for f in result.files if not any(f.startswith(f"{root}/") for root in result.roots)]
        assert not outside, (function.logical_id, outside[:5])
        # The core came from its layer; botocore from the runtime, beside its boto3 (aws-xray-sdk, of the
        # layer's Powertools tracer extra, requires botocore: the layer leaves it out again).
        assert any("/asset." in f and f.endswith("/duetime/__init__.py") for f in result.files)
        botocore = {str(root) for root in result.roots if f"{root}/botocore/__init__.py" in result.files}
        assert botocore == {str(result.roots[-1])}, botocore
    assert not failures, "\n\n".join(f"{name}:\n{output}" for name, output in failures.items())
