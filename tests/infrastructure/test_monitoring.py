"""Monitoring: an alarm topic with the email from context, the alarms of issue 6 and a dashboard."""

from __future__ import annotations

import json

import pytest
from duetime.definitions import JOB_CLASSES, Settings

from tests.infrastructure.conftest import ALARM_EMAIL, Synthesized


def _alarms(synthesized) -> list[dict]:
    return [a["Properties"] for a in synthesized.resources("AWS::CloudWatch::Alarm").values()]


def _alarm(synthesized, metric: str, dimension_ref: str | None = None, namespace: str | None = None) -> dict:
    found = [
        a
        for a in _alarms(synthesized)
        if a.get("MetricName") == metric
        and (namespace is None or a.get("Namespace") == namespace)
        and (dimension_ref is None or dimension_ref in json.dumps(a.get("Dimensions")))
        and a.get("AlarmActions")
    ]
    assert len(found) >= 1, f"an alarm on {metric} {dimension_ref or ''}"
    return found[0]


def _topic_id(synthesized) -> str:
    return synthesized.logical_id(synthesized.stack.alerts.topic)


def test_alarm_topic_is_encrypted_and_subscribes_the_alarm_email(synthesized):
    topics = synthesized.resources("AWS::SNS::Topic")
    assert len(topics) == 1
    assert "KmsMasterKeyId" in next(iter(topics.values()))["Properties"]
    synthesized.template.has_resource_properties(
        "AWS::SNS::Subscription",
        {"Protocol": "email", "Endpoint": ALARM_EMAIL, "TopicArn": {"Ref": _topic_id(synthesized)}},
    )


def test_every_alarm_notifies_the_topic(synthesized):
    ours = [a for a in _alarms(synthesized) if a.get("AlarmDescription", "").startswith(Settings().prefix)]
    assert len(ours) >= 2 * len(JOB_CLASSES) + 2
    for alarm in ours:
        assert alarm["AlarmActions"] == [{"Ref": _topic_id(synthesized)}]


@pytest.mark.parametrize("job_class", sorted(JOB_CLASSES))
def test_dlq_depth_above_zero_alarms(synthesized, job_class):
    dlq = synthesized.logical_id(synthesized.stack.queues.by_class[job_class].dlq)
    alarm = _alarm(synthesized, "ApproximateNumberOfMessagesVisible", dlq)
    assert alarm["Namespace"] == "AWS/SQS"
    assert alarm["Threshold"] == 0 and alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["Period"] == 60 and alarm["EvaluationPeriods"] == 1


@pytest.mark.parametrize("job_class", sorted(JOB_CLASSES))
def test_dead_letters_drained_by_the_notifier_still_alarm(synthesized, job_class):
    dlq = synthesized.logical_id(synthesized.stack.queues.by_class[job_class].dlq)
    alarm = _alarm(synthesized, "NumberOfMessagesReceived", dlq)
    assert alarm["Statistic"] == "Sum" and alarm["Threshold"] == 0


@pytest.mark.parametrize("job_class", sorted(JOB_CLASSES))
def test_age_of_oldest_due_message_alarms(synthesized, job_class):
    due = synthesized.logical_id(synthesized.stack.queues.by_class[job_class].due)
    alarm = _alarm(synthesized, "ApproximateAgeOfOldestMessage", due)
    settings = Settings()
    expected = (
        settings.preload_window_seconds + settings.preload_interval_seconds + JOB_CLASSES[job_class].lease_seconds
    )
    assert alarm["Threshold"] == expected


def test_start_lateness_p99_above_two_seconds_alarms(synthesized):
    alarm = _alarm(synthesized, "StartLatenessMs", namespace="duetime")
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "worker"}]
    assert alarm["ExtendedStatistic"] == "p99"
    assert alarm["Threshold"] == 2000
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


@pytest.mark.parametrize("metric", ["Errors", "Throttles"])
def test_every_function_alarms_on_errors_and_throttles(synthesized, metric):
    functions = synthesized.stack.functions.all
    for function in functions:
        alarm = _alarm(synthesized, metric, synthesized.logical_id(function))
        assert alarm["Namespace"] == "AWS/Lambda" and alarm["Threshold"] == 0


def test_api_5xx_alarms(synthesized):
    alarm = _alarm(synthesized, "5XXError", namespace="AWS/ApiGateway")
    assert alarm["Threshold"] == 0 and alarm["Statistic"] == "Sum"


def test_dashboard_shows_executions_per_second_lateness_percentiles_and_dlq_depth(synthesized):
    dashboards = synthesized.resources("AWS::CloudWatch::Dashboard")
    assert len(dashboards) == 1
    body = json.dumps(next(iter(dashboards.values()))["Properties"]["DashboardBody"])
    for wanted in (
        "Executions per second",
        "StartLatenessMs",
        "p50",
        "p90",
        "p99",
        "DLQ depth",
        "NumberOfMessagesDeleted",
    ):
        assert wanted in body, wanted


def _alarmed_services(synthesized, metric: str) -> set[str]:
    """The `service` dimensions of the alarms (plain or metric math) on duetime's count `metric`."""
    found: set[str] = set()
    for alarm in _alarms(synthesized):
        if not alarm.get("AlarmActions"):
            continue
        stats = (
            [alarm]
            if "MetricName" in alarm
            else [m["MetricStat"]["Metric"] for m in alarm.get("Metrics", []) if "MetricStat" in m]
        )
        for stat in stats:
            if stat.get("MetricName") == metric and stat.get("Namespace") == "duetime":
                found |= {d["Value"] for d in stat.get("Dimensions", []) if d["Name"] == "service"}
    return found


def _services_with(synthesized, variable: str) -> set[str]:
    """The Powertools service names (the EMF `service` dimension) of the functions whose environment has
    `variable`."""
    environments = [
        f["Properties"]["Environment"]["Variables"]
        for f in synthesized.resources("AWS::Lambda::Function").values()
        if "Environment" in f["Properties"]
    ]
    return {e["POWERTOOLS_SERVICE_NAME"] for e in environments if variable in e and "POWERTOOLS_SERVICE_NAME" in e}


def test_a_failed_preload_shard_alarms(synthesized):
    # Issue 29: a shard aborted by an AccessDenied was never dispatched again, and only ShardErrors showed it.
    alarm = _alarm(synthesized, "ShardErrors", namespace="duetime")
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "preloader"}]
    assert alarm["Statistic"] == "Sum" and alarm["Threshold"] == 0


@pytest.mark.parametrize(
    ("metric", "emitted_by"),
    [("EventsFailed", "DUETIME_EVENT_BUS_NAME"), ("NoticesFailed", "DUETIME_ALERT_TOPIC_ARN")],
)
def test_refused_events_and_undelivered_notices_alarm_for_every_function_that_counts_them(
    synthesized, metric, emitted_by
):
    emitters = _services_with(synthesized, emitted_by)
    assert emitters
    assert _alarmed_services(synthesized, metric) >= emitters


@pytest.fixture(scope="module")
def naming_owners(variants: Synthesized) -> Synthesized:
    return variants  # metricOwners payments,reports (conftest.VARIANTS_CONTEXT)


def test_each_owner_the_stack_names_has_a_late_runs_alarm_and_its_functions_know_it(naming_owners, synthesized):
    # Issue 34: the lateness metrics' Owner dimension holds the named owners and `other`; each named owner's
    # late runs alarm the operator. A stack naming none has no such alarm and no such variable.
    late = [a for a in _alarms(naming_owners) if a.get("MetricName") == "RunsLate"]
    assert sorted(a["Dimensions"][0]["Value"] for a in late) == ["payments", "reports"]
    assert all(
        a["Dimensions"] == [{"Name": "Owner", "Value": a["Dimensions"][0]["Value"]}]
        and a["Namespace"] == "duetime"
        and a["Statistic"] == "Sum"
        and a["Threshold"] == 0
        and a["AlarmActions"]
        for a in late
    )
    assert _services_with(naming_owners, "DUETIME_METRIC_OWNERS") >= {"worker", "preloader"}
    environments = [
        f["Properties"]["Environment"]["Variables"]
        for f in naming_owners.resources("AWS::Lambda::Function").values()
        if "DUETIME_METRIC_OWNERS" in f["Properties"].get("Environment", {}).get("Variables", {})
    ]
    assert {e["DUETIME_METRIC_OWNERS"] for e in environments} == {'["payments","reports"]'}
    assert not [a for a in _alarms(synthesized) if a.get("MetricName") == "RunsLate"]
    assert not _services_with(synthesized, "DUETIME_METRIC_OWNERS")
