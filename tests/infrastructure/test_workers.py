"""Workers: the `long` class runs `duetime worker` on ECS Fargate (arm64), scaled on its queue's backlog."""

from __future__ import annotations

from duetime.definitions import JOB_CLASSES

from tests.infrastructure.helpers import actions_of, actions_on

ECS_CLASSES = {n for n, c in JOB_CLASSES.items() if c.worker_kind == "ecs"}


def test_one_fargate_service_per_ecs_class(synthesized):
    assert {"long"} == ECS_CLASSES
    assert set(synthesized.stack.workers.services) == ECS_CLASSES
    service = next(iter(synthesized.resources("AWS::ECS::Service").values()))["Properties"]
    assert service["LaunchType"] == "FARGATE"
    network = service["NetworkConfiguration"]["AwsvpcConfiguration"]
    assert network["AssignPublicIp"] == "DISABLED"
    assert service["DeploymentConfiguration"]["DeploymentCircuitBreaker"] == {"Enable": True, "Rollback": True}


def test_task_runs_duetime_worker_for_the_long_class_on_arm64(synthesized):
    task = next(iter(synthesized.resources("AWS::ECS::TaskDefinition").values()))["Properties"]
    assert task["RuntimePlatform"] == {"CpuArchitecture": "ARM64", "OperatingSystemFamily": "LINUX"}
    container = task["ContainerDefinitions"][0]
    assert container["Command"][:4] == ["duetime", "worker", "--job-class", "long"]
    env = {e["Name"]: e["Value"] for e in container["Environment"]}
    assert env["DUETIME_JOB_CLASS"] == "long"
    assert {"DUETIME_PREFIX", "DUETIME_QUEUE_URLS", "DUETIME_DLQ_URLS", "DUETIME_SHARDS"} <= set(env)
    assert container["LogConfiguration"]["LogDriver"] == "awslogs"
    assert "Fn::Sub" in str(container["Image"]) or "Fn::Join" in str(container["Image"])  # the built asset


def test_image_comes_from_the_repo_dockerfile_staged_without_docker(synthesized):
    assets = (synthesized.outdir / "DuetimeStack.assets.json").read_text()
    assert '"dockerImages"' in assets and '"dockerFile": "Dockerfile"' in assets
    assert '"platform": "linux/arm64"' in assets


def test_service_scales_on_the_long_queue_backlog(synthesized):
    targets = synthesized.resources("AWS::ApplicationAutoScaling::ScalableTarget")
    target = next(iter(targets.values()))["Properties"]
    assert target["MinCapacity"] == 1 and target["MaxCapacity"] == 10
    policies = synthesized.resources("AWS::ApplicationAutoScaling::ScalingPolicy")
    assert {p["Properties"]["PolicyType"] for p in policies.values()} == {"StepScaling"}
    long_queue = synthesized.logical_id(synthesized.stack.queues.by_class["long"].due)
    backlog_alarms = [
        a["Properties"]
        for a in synthesized.resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "ApproximateNumberOfMessagesVisible"
        and long_queue in str(a["Properties"]["Dimensions"])
        and any(policy_id in str(a["Properties"].get("AlarmActions")) for policy_id in policies)
    ]
    assert len(backlog_alarms) == 2  # scale out and scale in


def test_task_role_consumes_only_the_long_queue(synthesized):
    role = synthesized.stack.workers.services["long"].task_definition.task_role
    queues = synthesized.stack.queues.by_class
    own = actions_on(synthesized, role, synthesized.logical_id(queues["long"].due))
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"} <= own
    assert not actions_on(synthesized, role, synthesized.logical_id(queues["default"].due))
    assert "dynamodb:Scan" not in actions_of(synthesized, role)


def test_vpc_keeps_workers_private_and_logs_rejected_traffic(synthesized):
    synthesized.template.resource_count_is("AWS::EC2::FlowLog", 1)
    synthesized.template.resource_count_is("AWS::EC2::NatGateway", 1)
    synthesized.template.has_resource_properties("AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Gateway"})


def test_task_role_may_complete_jobs_and_count_them_off(synthesized):
    # A bounded job's last run, auto-pause and a one-off's end: the job's row and the owner's active-jobs counter
    # (control) in one TransactWriteItems (issue 29: denied before, so bounded jobs never completed).
    for role in synthesized.stack.workers.task_roles:
        for table in ("jobs", "control"):
            table_id = synthesized.logical_id(synthesized.stack.storage.tables[table])
            assert "dynamodb:UpdateItem" in actions_on(synthesized, role, table_id), table
