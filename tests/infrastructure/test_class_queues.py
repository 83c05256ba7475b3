"""A job class spread over several due queues by shard (context classQueues): its queues, worker functions, grants."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from duetime.config import RuntimeConfig
from duetime.definitions import JOB_CLASSES, MAX_RECEIVE_COUNT, Settings

from infra.context import DeployContext
from tests.infrastructure.conftest import Synthesized
from tests.infrastructure.helpers import cfn_lint_errors

PREFIX = Settings().prefix
DEFAULT = JOB_CLASSES["default"]
# The logical ids a one-queue `default` class had before classes could be spread (kept: no replacement).
QUEUE_0_ID_PREFIX = "QueuesDuedefault"
WORKER_0_ID_PREFIX = "FunctionsWorkerdefault"


@pytest.fixture(scope="module")
def spread(variants: Synthesized) -> Synthesized:
    # classQueues default:3,long:2 (conftest.VARIANTS_CONTEXT): the long (ECS) class spread too, so its task role
    # and backlog scaling cover both of its queues.
    return variants


def _queues(synthesized: Synthesized) -> dict[str, tuple[str, dict]]:
    return {
        q["Properties"]["QueueName"]: (logical_id, q)
        for logical_id, q in synthesized.resources("AWS::SQS::Queue").items()
    }


def _worker_functions(synthesized: Synthesized) -> dict[str, dict]:
    return {
        logical_id: f
        for logical_id, f in synthesized.resources("AWS::Lambda::Function").items()
        if f["Properties"].get("Environment", {}).get("Variables", {}).get("DUETIME_JOB_CLASS") == "default"
    }


def _event_sources(synthesized: Synthesized) -> dict[str, str]:
    """Each event source mapping's function logical id -> its queue's logical id."""
    return {
        m["Properties"]["FunctionName"]["Ref"]: m["Properties"]["EventSourceArn"]["Fn::GetAtt"][0]
        for m in synthesized.resources("AWS::Lambda::EventSourceMapping").values()
    }


def test_three_due_queues_of_default_redrive_to_its_one_dlq(spread):
    queues = _queues(spread)
    names = [DEFAULT.queue_name(PREFIX, i) for i in range(3)]
    assert names == [f"{PREFIX}-due-default", f"{PREFIX}-due-default-1", f"{PREFIX}-due-default-2"]
    assert set(names) | {DEFAULT.dlq_name(PREFIX)} <= set(queues)
    assert not [n for n in queues if n.startswith(f"{PREFIX}-due-default-3")]
    assert [n for n in queues if n.startswith(f"{PREFIX}-dlq-default")] == [DEFAULT.dlq_name(PREFIX)]
    dlq_id = queues[DEFAULT.dlq_name(PREFIX)][0]
    for name in names:
        assert queues[name][1]["Properties"]["RedrivePolicy"] == {
            "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
            "maxReceiveCount": MAX_RECEIVE_COUNT,
        }
    assert queues[names[0]][0].startswith(QUEUE_0_ID_PREFIX)  # queue 0 keeps its construct id


def test_three_worker_functions_each_with_the_event_source_of_its_own_queue(spread):
    queues = _queues(spread)
    workers = _worker_functions(spread)
    assert len(workers) == 3
    sources = _event_sources(spread)
    by_queue = {sources[w]: w for w in workers}
    assert set(by_queue) == {queues[DEFAULT.queue_name(PREFIX, i)][0] for i in range(3)}
    assert by_queue[queues[DEFAULT.queue_name(PREFIX)][0]].startswith(WORKER_0_ID_PREFIX)
    mappings = [m for m in spread.resources("AWS::Lambda::EventSourceMapping").values()]
    limits = {m["Properties"]["ScalingConfig"]["MaximumConcurrency"] for m in mappings}
    assert limits == {DeployContext.from_node(cdk.App().node).worker_max_concurrency}
    # Every function of the class has the same settings; each is told the class's three queues.
    settings = {
        (f["Properties"]["Timeout"], f["Properties"]["MemorySize"], f["Properties"].get("ReservedConcurrentExecutions"))
        for f in workers.values()
    }
    assert len(settings) == 1
    for function in workers.values():
        env = function["Properties"]["Environment"]["Variables"]
        assert json.loads(env[RuntimeConfig.env_name("class_queues")]) == {"default": 3, "long": 2}


def test_each_worker_consumes_its_own_queue_and_may_send_to_every_queue_of_its_class(spread):
    queues = _queues(spread)
    ids = [queues[DEFAULT.queue_name(PREFIX, i)][0] for i in range(3)]
    sources = _event_sources(spread)
    policies = spread.resources("AWS::IAM::Policy").values()
    for function_id, queue_id in sources.items():
        role = spread.raw["Resources"][function_id]["Properties"]["Role"]["Fn::GetAtt"][0]
        statements = [
            s
            for p in policies
            if {"Ref": role} in p["Properties"].get("Roles", [])
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        ]

        def queues_for(action: str, statements: list[dict] = statements) -> set[str]:
            found = set()
            for s in statements:
                actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
                resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
                if action in actions:
                    found |= {r["Fn::GetAtt"][0] for r in resources if isinstance(r, dict) and "Fn::GetAtt" in r}
            return found

        assert queues_for("sqs:ReceiveMessage") & set(ids) == {queue_id}
        assert queues_for("sqs:SendMessage") >= set(ids)


def test_one_dlq_alarm_and_an_age_alarm_per_queue(spread):
    alarms = [a["Properties"]["AlarmDescription"] for a in spread.resources("AWS::CloudWatch::Alarm").values()]
    assert len([a for a in alarms if "'default' DLQ" in a]) == 1
    assert len([a for a in alarms if "'default' due queue" in a]) == 3


def test_the_ecs_class_reads_and_scales_on_both_of_its_queues(spread):
    queues = _queues(spread)
    ids = {queues[JOB_CLASSES["long"].queue_name(PREFIX, i)][0] for i in range(2)}
    [policy] = [
        p
        for name, p in spread.resources("AWS::IAM::Policy").items()
        if name.startswith("WorkersTaskRolelong") and "DefaultPolicy" in name
    ]
    receivers = {
        r["Fn::GetAtt"][0]
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if "sqs:ReceiveMessage" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
        for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
        if isinstance(r, dict) and "Fn::GetAtt" in r
    }
    assert receivers == ids
    # Step scaling's alarms (one for each direction) watch the sum of both queues' visible messages (the other
    # math alarms, on counts summed over functions, are monitoring's)
    expressions = [
        m["Expression"]
        for a in spread.resources("AWS::CloudWatch::Alarm").values()
        for m in a["Properties"].get("Metrics", [])
        if "Expression" in m and "FILL(" not in m["Expression"]
    ]
    assert expressions and set(expressions) == {"q0+q1"}


def test_the_dashboard_counts_and_shows_every_due_queue(spread):
    [dashboard] = spread.resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    # executions/s sums the deletes of all five due queues (default 0..2, long 0..1)
    assert "(c0 + c1 + c2 + c3 + c4) / PERIOD(c0)" in body
    for label in ("default visible", "default-1 visible", "default-2 oldest", "long-1 visible"):
        assert label in body


def test_the_spread_template_passes_cfn_lint(spread, tmp_path):
    errors, output = cfn_lint_errors(spread, tmp_path)
    assert not errors, output


def test_the_default_context_keeps_one_queue_and_function_per_class_with_their_ids(synthesized):
    queues = _queues(synthesized)
    assert [n for n in queues if n.startswith(f"{PREFIX}-due-default")] == [DEFAULT.queue_name(PREFIX)]
    assert queues[DEFAULT.queue_name(PREFIX)][0].startswith(QUEUE_0_ID_PREFIX)
    [worker_id] = _worker_functions(synthesized)
    assert worker_id.startswith(WORKER_0_ID_PREFIX)
    env = synthesized.raw["Resources"][worker_id]["Properties"]["Environment"]["Variables"]
    assert RuntimeConfig.env_name("class_queues") not in env  # a stack without spread classes: env unchanged


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("default:0", r"context classQueues: the queues of job class 'default' must be 1\.\.10, got 0"),
        ("default:11", r"must be 1\.\.10, got 11"),
        ("default:two", r"context classQueues: 'default:two' is not CLASS:COUNT"),
        ("default=2", r"'default=2' is not CLASS:COUNT"),
        ("nightly:2", r"context classQueues: unknown job class 'nightly'"),
        ("default:2,default:3", r"'default' is given twice"),
    ],
)
def test_class_queues_context_refuses_bad_input_naming_the_key(raw, message):
    with pytest.raises(ValueError, match=message):
        DeployContext.from_node(cdk.App(context={"classQueues": raw}).node)


def test_class_queues_context_sets_each_class():
    ctx = DeployContext.from_node(cdk.App(context={"classQueues": "default:4, long:2"}).node)
    assert {n: c.queues for n, c in ctx.settings.job_classes.items()} == {"default": 4, "long": 2}
    assert DeployContext.from_node(cdk.App().node).settings.class_queues() == {}
