"""Functions: Python 3.12 on arm64 with the two layers, traced, logged with retention, least privilege each."""

from __future__ import annotations

import json

import pytest
from duetime.definitions import JOB_CLASSES, TABLES, Settings

from tests.infrastructure.helpers import actions_of, actions_on, statements_of

PREFIX = Settings().prefix


def _functions(synthesized) -> dict:
    """duetime's own functions (CDK adds a custom-resource function that restricts the VPC's default group)."""
    ours = {synthesized.logical_id(f) for f in synthesized.stack.functions.all}
    return {k: v for k, v in synthesized.resources("AWS::Lambda::Function").items() if k in ours}


def _names(synthesized) -> list[str]:
    return ["api", "preloader", "dlq_notifier", *(f"worker_{n}" for n in synthesized.stack.functions.workers)]


def _function(synthesized, name: str):
    functions = synthesized.stack.functions
    return functions.workers[name.removeprefix("worker_")] if name.startswith("worker_") else getattr(functions, name)


def _props(synthesized, name: str) -> dict:
    return synthesized.raw["Resources"][synthesized.logical_id(_function(synthesized, name))]["Properties"]


def _queue_id(synthesized, job_class: str, dlq: bool = False) -> str:
    queues = synthesized.stack.queues.by_class[job_class]
    return synthesized.logical_id(queues.dlq if dlq else queues.due)


def _table_id(synthesized, logical_name: str) -> str:
    return synthesized.logical_id(synthesized.stack.storage.tables[logical_name])


def test_every_handler_has_a_function_and_lambda_classes_a_worker(synthesized):
    lambda_classes = {n for n, c in JOB_CLASSES.items() if c.worker_kind == "lambda"}
    assert set(synthesized.stack.functions.workers) == lambda_classes
    assert len(_functions(synthesized)) == 3 + len(lambda_classes)


def test_runtime_is_python_312_or_newer_on_arm64_with_core_and_deps_layers(synthesized):
    layers = synthesized.resources("AWS::Lambda::LayerVersion")
    assert len(layers) == 2
    for props in (f["Properties"] for f in _functions(synthesized).values()):
        runtime = props["Runtime"]
        assert runtime.startswith("python3.") and int(runtime.split(".")[1]) >= 12
        assert props["Architectures"] == ["arm64"]
        assert props["Handler"] == "index.handler"
        assert sorted(layer["Ref"] for layer in props["Layers"]) == sorted(layers)
    for layer in layers.values():
        assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_functions_are_traced_and_log_to_groups_with_retention(synthesized):
    groups = synthesized.resources("AWS::Logs::LogGroup")
    for props in (f["Properties"] for f in _functions(synthesized).values()):
        assert props["TracingConfig"] == {"Mode": "Active"}
        group_id = props["LoggingConfig"]["LogGroup"]["Ref"]
        assert groups[group_id]["Properties"]["RetentionInDays"] == 90


@pytest.mark.parametrize("name", ["api", "preloader", "dlq_notifier", "worker_default"])
def test_each_function_has_its_own_role(synthesized, name):
    roles = [f["Properties"]["Role"]["Fn::GetAtt"][0] for f in _functions(synthesized).values()]
    assert len(set(roles)) == len(roles)
    assert (
        "ManagedPolicyArns"
        not in synthesized.raw["Resources"][_props(synthesized, name)["Role"]["Fn::GetAtt"][0]]["Properties"]
    )


def test_environment_carries_the_runtime_config(synthesized):
    for name in _names(synthesized):
        env = _props(synthesized, name)["Environment"]["Variables"]
        assert env["DUETIME_PREFIX"] == PREFIX
        assert env["DUETIME_SHARDS"] == str(Settings().shards)
        assert env["DUETIME_PRELOAD_WINDOW_SECONDS"] == str(Settings().preload_window_seconds)
        assert env["DUETIME_HISTORY_RETENTION_DAYS"] == str(Settings().history_retention_days)
        for key in ("DUETIME_QUEUE_URLS", "DUETIME_DLQ_URLS"):
            rendered = json.dumps(env[key])
            for job_class in JOB_CLASSES:
                assert _queue_id(synthesized, job_class, dlq=key == "DUETIME_DLQ_URLS") in rendered
    worker_env = _props(synthesized, "worker_default")["Environment"]["Variables"]
    assert worker_env["DUETIME_JOB_CLASS"] == "default"
    assert "DUETIME_HANDLER_MODULES" in worker_env
    assert "DUETIME_ALERT_TOPIC_ARN" in _props(synthesized, "dlq_notifier")["Environment"]["Variables"]
    assert "DUETIME_ALERT_TOPIC_ARN" not in _props(synthesized, "api")["Environment"]["Variables"]


def test_worker_consumes_its_queue_with_report_batch_item_failures(synthesized):
    synthesized.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [_queue_id(synthesized, "default"), "Arn"]},
            "FunctionName": {"Ref": synthesized.logical_id(synthesized.stack.functions.workers["default"])},
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "BatchSize": 10,
            "MaximumBatchingWindowInSeconds": 0,
        },
    )
    assert len(synthesized.resources("AWS::Lambda::EventSourceMapping")) == 1


def test_no_role_scans_or_holds_wildcard_actions(synthesized):
    for name in _names(synthesized):
        actions = actions_of(synthesized, _function(synthesized, name).role)
        assert "dynamodb:Scan" not in actions
        assert not any(a.endswith(":*") or a == "*" for a in actions), name


def test_preloader_sends_but_cannot_receive_or_delete_messages(synthesized):
    actions = actions_of(synthesized, synthesized.stack.functions.preloader.role)
    assert "sqs:SendMessage" in actions
    assert not {"sqs:DeleteMessage", "sqs:ReceiveMessage", "sqs:ChangeMessageVisibility"} & actions
    assert "dynamodb:DeleteItem" not in actions
    assert "sns:Publish" not in actions


def test_api_cannot_receive_or_delete_messages(synthesized):
    actions = actions_of(synthesized, synthesized.stack.functions.api.role)
    assert not {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"} & actions
    assert "sns:Publish" not in actions
    for job_class in JOB_CLASSES:
        assert actions_on(synthesized, synthesized.stack.functions.api.role, _queue_id(synthesized, job_class)) == {
            "sqs:SendMessage"
        }


def test_api_reads_and_edits_control_records_for_idempotency_keys_calendars_and_shard_counts(synthesized):
    assert actions_on(synthesized, synthesized.stack.functions.api.role, _table_id(synthesized, "control")) == {
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
    }


def test_worker_consumes_only_its_own_class(synthesized):
    role = synthesized.stack.functions.workers["default"].role
    own = actions_on(synthesized, role, _queue_id(synthesized, "default"))
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:SendMessage"} <= own
    assert actions_on(synthesized, role, _queue_id(synthesized, "default", dlq=True)) == {"sqs:SendMessage"}
    for other in set(JOB_CLASSES) - {"default"}:
        assert not actions_on(synthesized, role, _queue_id(synthesized, other))
        assert not actions_on(synthesized, role, _queue_id(synthesized, other, dlq=True))
    # Workers announce the handlers they serve in the control table, and read what others announce; a retry
    # reads (and may fix) the shard count of the hour it moves a row to.
    assert actions_on(synthesized, role, _table_id(synthesized, "control")) == {
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
    }


def test_dlq_notifier_drains_dlqs_only_and_publishes_alerts(synthesized):
    role = synthesized.stack.functions.dlq_notifier.role
    for job_class in JOB_CLASSES:
        assert actions_on(synthesized, role, _queue_id(synthesized, job_class, dlq=True)) == {
            "sqs:ReceiveMessage",
            "sqs:DeleteMessage",
        }
        assert not actions_on(synthesized, role, _queue_id(synthesized, job_class))
    assert "sns:Publish" in actions_of(synthesized, role)
    assert "dynamodb:PutItem" not in actions_of(synthesized, role)


def test_table_grants_name_tables_and_indexes_not_wildcards(synthesized):
    index_names = {i.name for t in TABLES for i in t.indexes}
    for name in _names(synthesized):
        for statement in _statements(synthesized, name):
            if any(a.startswith("dynamodb:") for a in _list(statement["Action"])):
                rendered = json.dumps(statement["Resource"])
                assert "*" not in rendered
                for part in rendered.split("/index/")[1:]:
                    assert part.split('"')[0] in index_names


def _statements(synthesized, name):
    return statements_of(synthesized, _function(synthesized, name).role)


def _list(value):
    return [value] if isinstance(value, str) else value


# Issue 29: what the code calls, as counted while the end-to-end suite ran (each call attributed to the function
# that makes it). Ending a job (a bounded job's last run, auto-pause, a one-off's end) updates its row and the
# owner's active-jobs counter in the control table in one TransactWriteItems, which needs UpdateItem on both.
COMPLETES_JOBS = {"jobs": {"dynamodb:UpdateItem"}, "control": {"dynamodb:UpdateItem"}}


@pytest.mark.parametrize("name", ["preloader", "worker_default", "dlq_notifier"])
def test_every_part_that_ends_runs_may_complete_jobs_and_count_them_off(synthesized, name):
    role = _function(synthesized, name).role
    for table, actions in COMPLETES_JOBS.items():
        assert actions <= actions_on(synthesized, role, _table_id(synthesized, table)), (name, table)


def test_preloader_resends_failure_notices_to_every_dlq(synthesized):
    role = synthesized.stack.functions.preloader.role
    for job_class in JOB_CLASSES:
        assert actions_on(synthesized, role, _queue_id(synthesized, job_class, dlq=True)) == {"sqs:SendMessage"}


def test_dlq_notifier_reads_shard_counts_and_ends_jobs_but_writes_no_new_rows(synthesized):
    role = synthesized.stack.functions.dlq_notifier.role
    assert actions_on(synthesized, role, _table_id(synthesized, "control")) == {
        "dynamodb:BatchGetItem",
        "dynamodb:UpdateItem",
    }
    # BatchGetItem: a job read with its timings record, to find its runs by their slots' keys (domain/history.py)
    assert actions_on(synthesized, role, _table_id(synthesized, "jobs")) == {
        "dynamodb:BatchGetItem",
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
    }


def test_the_smoke_target_sleeps_for_duetime_smoke_and_only_the_workers_may_invoke_it(synthesized, hardened):
    """infra/smoke_target.py, on by default: named from the prefix, in the output the smoke test reads, its role
    writing its logs only; every worker (Lambda and ECS) may invoke it, and the API and workers know its name
    (their grants give it to the smoke test's owners)."""
    from duetime.definitions import SMOKE_TARGET_TIMEOUT_SECONDS, smoke_target_name

    name = smoke_target_name(PREFIX)
    for variant in (synthesized, hardened):
        target = variant.stack.smoke_target
        logical_id = variant.logical_id(target.function)
        props = variant.raw["Resources"][logical_id]["Properties"]
        assert props["FunctionName"] == name and props["Timeout"] == SMOKE_TARGET_TIMEOUT_SECONDS
        assert "Layers" not in props  # the standard library only
        assert variant.raw["Outputs"]["SmokeTargetFunction"]["Value"] == {"Ref": logical_id}
        own = {a.split(":")[0] for a in actions_of(variant, target.function.role)}
        assert own <= {"logs", "xray", "kms"}, own
        roles = [f.role for f in variant.stack.functions.workers.values()] + list(variant.stack.workers.task_roles)
        for role in roles:
            invokes = [s for s in statements_of(variant, role) if s["Action"] == "lambda:InvokeFunction"]
            assert any(f"function:{name}" in json.dumps(s["Resource"]) for s in invokes), variant.logical_id(role)
        for function in (variant.stack.functions.api, *variant.stack.functions.workers.values()):
            variables = variant.raw["Resources"][variant.logical_id(function)]["Properties"]["Environment"]["Variables"]
            assert variables["DUETIME_SMOKE_TARGET"] == name
    # No other role may invoke it.
    for role in (synthesized.stack.functions.api.role, synthesized.stack.functions.preloader.role):
        assert "lambda:InvokeFunction" not in actions_of(synthesized, role)


def test_context_smoke_target_false_leaves_it_out_of_the_lambda_targets():
    import aws_cdk as cdk

    from infra.context import DeployContext

    assert DeployContext.from_node(cdk.App().node).lambda_targets == [f"{PREFIX}-smoke-target"]
    off = DeployContext.from_node(cdk.App(context={"smokeTarget": "false", "handlerFunctions": "billing"}).node)
    assert off.lambda_targets == ["billing"] and not off.smoke_target
