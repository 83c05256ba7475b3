"""A team's handler code on AWS: the handler folder as a layer of the worker functions only and in the `long`
image, the manifest and grants in the API's environment, the workers' read of owners' webhook secrets; the
stack used as a construct from a team's own CDK app; context keys parsed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

import aws_cdk as cdk
import pytest
from duetime.definitions import JOB_CLASSES, Settings

from infra.context import DeployContext
from infra.handlers import HandlerCode, api_handler_environment, handler_manifest, stage_layer
from tests.infrastructure.conftest import ROOT
from tests.infrastructure.helpers import statements_of

DEMO = ["demo.count", "demo.echo", "demo.fail", "demo.sleep"]
SECRETS_PREFIX = f"secret:{Settings().prefix}/webhook-secrets/*"
GRANTS = [{"owners": ["alice", "group:billing"], "handlers": ["billing.*", "https://hooks.example.com/*"]}]
# What a team writes: its own folder with its own packages, the construct imported from a duetime checkout.
TEAM_APP = """
import sys
sys.path.insert(0, {checkout!r})

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra import DuetimeStack

app = cdk.App(context={flags!r})
DuetimeStack(
    app,
    "BillingScheduler",
    handler_path="handlers",
    handler_modules=["billing.handlers"],
    handler_grants={grants!r},
)
cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
app.synth()
"""


def _functions(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        k: v["Properties"]
        for k, v in raw["Resources"].items()
        if v["Type"] == "AWS::Lambda::Function" and "Functions" in k
    }


def _role_statements(raw: dict[str, Any], role_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for resource in raw["Resources"].values():
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in resource["Properties"]["Roles"]:
            found += resource["Properties"]["PolicyDocument"]["Statement"]
    return found


def _secret_reads(statements: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(s["Resource"]) for s in statements if "secretsmanager" in json.dumps(s["Action"])]


@pytest.fixture(scope="session")
def team_app(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The template of a tiny team CDK app that instantiates DuetimeStack with its own handler folder."""
    project = tmp_path_factory.mktemp("team-app")
    shutil.copytree(ROOT / "examples" / "handlers", project / "handlers")
    flags = json.loads((ROOT / "cdk.json").read_text())["context"]
    (project / "app.py").write_text(TEAM_APP.format(checkout=str(ROOT), flags=flags, grants=GRANTS))
    outdir = project / "cdk.out"
    # As `cdk synth` runs an app: a process of its own in the project folder, writing to CDK_OUTDIR.
    env = {**os.environ, "CDK_OUTDIR": str(outdir), "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "app.py"], cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]  # cdk-nag fails the synth on any unacknowledged finding
    template = json.loads((outdir / "BillingScheduler.template.json").read_text())
    return {"raw": template, "key": HandlerCode(project / "handlers").key}


def test_the_handler_layer_is_on_the_worker_functions_only(team_app):
    raw = team_app["raw"]
    layers = {k: v for k, v in raw["Resources"].items() if v["Type"] == "AWS::Lambda::LayerVersion"}
    [handler_layer] = [k for k, v in layers.items() if "handlers" in v["Properties"]["Description"]]
    for logical_id, props in _functions(raw).items():
        attached = {layer["Ref"] for layer in props["Layers"]}
        assert (handler_layer in attached) == ("Worker" in logical_id), logical_id
    workers = [p for k, p in _functions(raw).items() if "Worker" in k]
    assert workers and all(
        p["Environment"]["Variables"]["DUETIME_HANDLER_MODULES"] == "billing.handlers" for p in workers
    )


def test_the_layer_holds_the_team_folder_as_python_packages(team_app):
    staged = sorted(
        p.name for p in (ROOT / "build" / "layers" / f"handlers-{team_app['key']}").glob("python/billing/*")
    )
    assert staged == ["__init__.py", "__pycache__", "handlers.py"]  # with their bytecode for the runtime


def test_the_api_reads_the_manifest_and_grants_and_imports_no_user_code(team_app):
    [api] = [p for k, p in _functions(team_app["raw"]).items() if "Api" in k]
    env = api["Environment"]["Variables"]
    manifest = json.loads(env["DUETIME_HANDLER_MANIFEST"])
    assert manifest == {c: ["billing.generate_invoices", *DEMO] for c in JOB_CLASSES}
    assert json.loads(env["DUETIME_HANDLER_GRANTS"]) == GRANTS
    assert "DUETIME_HANDLER_MODULES" not in env
    workers = [p for k, p in _functions(team_app["raw"]).items() if "Worker" in k]
    assert all(json.loads(p["Environment"]["Variables"]["DUETIME_HANDLER_GRANTS"]) == GRANTS for p in workers)


def test_the_long_image_gets_the_handler_folder_and_imports_the_modules(team_app):
    resources = team_app["raw"]["Resources"].values()
    [task] = [v["Properties"] for v in resources if v["Type"] == "AWS::ECS::TaskDefinition"]
    container = task["ContainerDefinitions"][0]
    assert container["Command"][-2:] == ["--handlers", "billing.handlers"]
    env = {e["Name"]: e["Value"] for e in container["Environment"]}
    assert env["DUETIME_HANDLER_MODULES"] == "billing.handlers" and json.loads(env["DUETIME_HANDLER_GRANTS"]) == GRANTS
    context = ROOT / "build" / "images" / f"worker-{team_app['key']}" / "handlers" / "billing"
    assert (context / "handlers.py").read_text() == (ROOT / "examples/handlers/billing/handlers.py").read_text()
    assert "COPY ${HANDLER_DIR} /app/handlers" in (context.parents[1] / "Dockerfile").read_text()


def test_workers_read_only_the_owner_secret_prefix_and_the_api_reads_no_secret(synthesized):
    functions = synthesized.stack.functions
    for role in [f.role for f in functions.workers.values()] + [
        s.task_definition.task_role for s in synthesized.stack.workers.services.values()
    ]:
        statements = [s for s in statements_of(synthesized, role) if "secretsmanager" in json.dumps(s["Action"])]
        assert [s["Action"] for s in statements] == ["secretsmanager:GetSecretValue"]
        assert SECRETS_PREFIX in json.dumps(statements[0]["Resource"])
    for role in (functions.api.role, functions.preloader.role):
        assert _secret_reads(statements_of(synthesized, role)) == []
    # The DLQ notifier signs owners' webhook failure notices as their webhook requests are signed: it reads
    # those secrets only.
    notifier_reads = _secret_reads(statements_of(synthesized, functions.dlq_notifier.role))
    assert len(notifier_reads) == 1 and SECRETS_PREFIX in notifier_reads[0]


def test_without_a_handler_folder_there_is_no_handler_layer_and_the_manifest_lists_the_demo(synthesized):
    layers = synthesized.resources("AWS::Lambda::LayerVersion")
    assert len(layers) == 2 and synthesized.stack.functions.handler_layer is None
    api_env = synthesized.raw["Resources"][synthesized.logical_id(synthesized.stack.functions.api)]["Properties"]
    env = api_env["Environment"]["Variables"]
    assert json.loads(env["DUETIME_HANDLER_MANIFEST"]) == {c: DEMO for c in JOB_CLASSES}
    assert "DUETIME_HANDLER_GRANTS" not in env


def test_context_keys_name_the_folder_modules_and_grants(tmp_path):
    ctx = DeployContext.from_node(
        cdk.App(
            context={
                "handlerPath": str(ROOT / "examples" / "handlers"),
                "handlerModules": "billing.handlers, billing.more",
                "handlerGrants": '[{"owners": ["alice"], "handlers": ["billing.*"]}]',
            }
        ).node
    )
    assert ctx.handler_code == HandlerCode(ROOT / "examples" / "handlers", ["billing.handlers", "billing.more"])
    assert ctx.handler_modules == "billing.handlers,billing.more"  # DUETIME_HANDLER_MODULES of the workers
    assert json.loads(ctx.handler_grants or "") == [{"owners": ["alice"], "handlers": ["billing.*"]}]
    with pytest.raises(ValueError, match="handlerGrants must be JSON"):
        DeployContext.from_node(cdk.App(context={"handlerGrants": "{alice"}).node)
    with pytest.raises(ValueError, match="does not exist"):
        DeployContext.from_node(cdk.App(context={"handlerPath": str(tmp_path / "absent")}).node)


def test_a_module_that_does_not_import_fails_the_synth_with_its_error(tmp_path):
    (tmp_path / "broken.py").write_text("import not_installed_anywhere\n")
    with pytest.raises(ValueError, match="not_installed_anywhere"):
        handler_manifest(HandlerCode(tmp_path, ["broken"]))


def test_a_manifest_and_grants_too_large_for_lambdas_environment_fail_the_synth():
    few = json.dumps([{"owners": ["alice"], "handlers": ["billing.*"]}])
    assert json.loads(api_handler_environment(HandlerCode(), few)["DUETIME_HANDLER_GRANTS"])[0]["owners"] == ["alice"]
    many = json.dumps([{"owners": [f"user-{i}"], "handlers": [f"team-{i}.*"]} for i in range(200)])
    with pytest.raises(ValueError, match="4 KB"):
        api_handler_environment(HandlerCode(), many)


def test_a_module_importing_what_no_layer_ships_fails_the_synth_though_this_environment_has_it(tmp_path):
    # Issue 29: the manifest's import ran with this environment's site-packages, which hold PyYAML (cfn-lint's);
    # a handler importing it passed the synth and failed every cold start.
    import yaml  # noqa: F401  (here, in the development environment)

    (tmp_path / "reports.py").write_text("import yaml\n\nfrom duetime.worker.registry import handler\n")
    with pytest.raises(ValueError, match="No module named 'yaml'"):
        handler_manifest(HandlerCode(tmp_path, ["reports"]))


def test_a_requirements_txt_beside_the_handlers_is_installed_into_the_layer_for_the_functions(tmp_path):
    (tmp_path / "reports.py").write_text(
        "import yaml\n\nfrom duetime.worker.registry import handler\n\n\n"
        "@handler('reports.render')\ndef render(ctx):\n    return yaml.safe_dump(ctx.payload)\n"
    )
    # pydantic is the dependency layer's already: its pin holds, and the handler layer does not ship it again.
    (tmp_path / "requirements.txt").write_text("PyYAML==6.0.2\npydantic\n")
    manifest = handler_manifest(HandlerCode(tmp_path, ["reports"]))
    assert all("reports.render" in names for names in manifest.values())
    layer = stage_layer(HandlerCode(tmp_path, ["reports"])) / "python"
    assert (layer / "reports.py").is_file() and (layer / "yaml" / "__init__.py").is_file()
    # Built for the functions: arm64 CPython 3.12, whatever this machine is.
    assert any("aarch64" in p.name and "312" in p.name for p in layer.rglob("*.so"))
    assert not (layer / "pydantic").exists() and not (layer / "botocore").exists()
