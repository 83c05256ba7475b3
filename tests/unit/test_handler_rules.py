"""Pure rules of handlers: grants, results and error text that fit a row, groups from tokens, the public
handler API and the configuration that carries grants and the handler manifest."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import jwt
import pytest
from duetime.api.auth import GROUPS_CLAIM, ISSUER, caller_from_event, issue_token
from duetime.config import RuntimeConfig
from duetime.definitions import BUILTIN_HANDLERS, MAX_ERROR_BYTES, MAX_RESULT_BYTES
from duetime.domain.errors import InvalidInput, Unauthorized
from duetime.domain.grants import DEMO_ONLY, EVERYONE, Grants
from duetime.domain.results import ResultRejected, encode_result, truncate_error

RULES = [
    {"owners": ["*"], "handlers": ["demo.*"]},
    {"owners": ["alice", "team-*", "group:billing"], "handlers": ["billing.*", "lambda:billing-*"]},
    {"owners": ["group:hooks"], "handlers": ["https://hooks.example.com/*"]},
]


def test_an_owner_may_use_a_handler_when_one_rule_covers_both():
    grants = Grants.parse(RULES)
    assert grants.allows("alice", (), "billing.generate_invoices")
    assert grants.allows("team-red", (), "lambda:billing-run")
    assert grants.allows("carol", ("ops", "billing"), "billing.x")
    assert grants.allows("carol", ("hooks",), "https://hooks.example.com/run")
    assert grants.allows("anyone", (), "demo.echo")
    assert not grants.allows("carol", ("ops",), "billing.x")
    assert not grants.allows("carol", ("hooks",), "billing.x")  # the group's rule names other handlers
    assert not grants.allows("alice", (), "lambda:payroll-run")
    assert not grants.allows("alice", (), "https://hooks.example.com/run")
    assert grants.denial("carol", "billing.x") == "owner 'carol' is not granted handler 'billing.x'"


def test_the_defaults_are_everything_locally_and_the_demo_handlers_on_aws():
    assert EVERYONE.allows("x", (), "lambda:anything") and EVERYONE.allows("x", (), "billing.y")
    assert DEMO_ONLY.allows("x", (), "demo.sleep") and not DEMO_ONLY.allows("x", (), "billing.y")
    assert RuntimeConfig(endpoint_url="http://127.0.0.1:1").grants() == EVERYONE
    assert RuntimeConfig().grants() == DEMO_ONLY


def test_the_smoke_target_is_granted_to_the_smoke_tests_owners_only_beside_the_configured_rules():
    """DUETIME_SMOKE_TARGET (infra/smoke_target.py): `duetime smoke`'s owners (smoke-*) may use lambda:<it>,
    whatever else the grants say; nobody else may, and other targets stay as the grants have them."""
    config = RuntimeConfig.from_env({"DUETIME_SMOKE_TARGET": "duetime-smoke-target"})
    grants = config.grants()
    assert grants.allows("smoke-1a2b", (), "lambda:duetime-smoke-target")
    assert not grants.allows("3f6c0e1e-user", (), "lambda:duetime-smoke-target")
    assert not grants.allows("smoke-1a2b", (), "lambda:billing")
    assert grants.allows("3f6c0e1e-user", (), "demo.sleep")  # the default rules kept
    configured = RuntimeConfig(handler_grants=RULES, smoke_target="duetime-smoke-target").grants()
    assert configured.rules[: len(Grants.parse(RULES).rules)] == Grants.parse(RULES).rules
    assert configured.allows("smoke-1a2b", (), "lambda:duetime-smoke-target")


def test_grants_and_the_manifest_come_from_the_environment_as_json():
    import json

    env = {
        "DUETIME_HANDLER_GRANTS": json.dumps(RULES),
        "DUETIME_HANDLER_MANIFEST": json.dumps({"default": ["billing.a"], "long": ["billing.b"]}),
    }
    config = RuntimeConfig.from_env(env)
    assert config.grants() == Grants.parse(RULES)
    assert config.manifest() == {"default": frozenset({"billing.a"}), "long": frozenset({"billing.b"})}


@pytest.mark.parametrize(
    "raw",
    [
        {"owners": ["*"]},
        [{"owners": ["*"]}],
        [{"owners": "*", "handlers": ["x"]}],
        [{"owners": ["*"], "handlers": [""]}],
        [{"owners": ["*"], "handlers": ["x"], "extra": 1}],
    ],
)
def test_malformed_grants_are_refused_naming_the_source(raw):
    with pytest.raises(InvalidInput) as refused:
        Grants.parse(raw, source="--grants g.json")
    assert refused.value.field == "--grants g.json"


def test_results_must_be_json_and_fit():
    assert encode_result({"a": [1, "é"]}) == '{"a":[1,"é"]}'
    for bad in ({"at": datetime.now(UTC)}, {"x": math.nan}, {1, 2}):
        with pytest.raises(ResultRejected, match="not JSON"):
            encode_result(bad)
    encode_result("x" * (MAX_RESULT_BYTES - 2))  # the quotes make it exactly the limit
    with pytest.raises(ResultRejected, match=f"{MAX_RESULT_BYTES + 1} bytes"):
        encode_result("x" * (MAX_RESULT_BYTES - 1))


def test_error_text_is_cut_on_a_character_boundary_and_marked():
    short = "é" * (MAX_ERROR_BYTES // 2)
    assert truncate_error(short) == short
    cut = truncate_error("é" * MAX_ERROR_BYTES)
    assert cut.endswith(" [truncated]") and set(cut.removesuffix(" [truncated]")) == {"é"}
    assert len(cut.encode()) <= MAX_ERROR_BYTES


def rest_event(claims: dict[str, object]) -> dict[str, object]:
    return {"requestContext": {"authorizer": {"claims": claims}}}


@pytest.mark.parametrize(
    ("claim", "groups"),
    [("billing,ops", ("billing", "ops")), ("[billing ops]", ("billing", "ops")), (["billing"], ("billing",)), ("", ())],
)
def test_groups_come_from_the_cognito_claim_in_each_form_api_gateway_passes(claim, groups):
    caller = caller_from_event(rest_event({"sub": "alice", GROUPS_CLAIM: claim}), None)
    assert caller.owner == "alice" and caller.groups == groups


def test_local_tokens_carry_groups_and_a_malformed_claim_is_refused():
    secret = "s" * 32
    event = {"headers": {"Authorization": f"Bearer {issue_token(secret, 'carol', groups=['billing'])}"}}
    assert caller_from_event(event, secret).groups == ("billing",)
    bad = jwt.encode({"sub": "carol", "iss": ISSUER, "exp": 4102444800, GROUPS_CLAIM: {"a": 1}}, secret)
    with pytest.raises(Unauthorized, match="groups"):
        caller_from_event({"headers": {"Authorization": f"Bearer {bad}"}}, secret)


def test_the_public_handler_api_is_importable_from_the_package():
    import duetime
    from duetime import JobContext, PermanentFailure, handler
    from duetime.worker.registry import registered_names

    assert set(duetime.__all__) == {"JobContext", "PermanentFailure", "handler", "StaleAttempt", "CheckpointRejected"}
    assert callable(handler) and issubclass(PermanentFailure, Exception)
    assert "owner" in JobContext.__dataclass_fields__
    assert set(registered_names()) >= BUILTIN_HANDLERS


URL_RULES = [
    {
        "owners": ["*"],
        "handlers": ["https://*.example.com/*", "https://hooks.example.org/duetime/*", "http://127.0.0.1:*/hook"],
    }
]


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.test/.example.com/x",  # the glob's host part met in the path
        "https://evil.test?.example.com/",  # ... in the query
        "https://evil.test#.example.com/",
        "https://a.example.com@evil.test/",  # ... in user info
        "https://a.example.com.evil.test/",
        "https://example.com/x",  # `*.` is a subdomain, not the name itself
        "http://a.example.com/x",  # another scheme
        "https://a.example.com:8443/x",  # another port than the scheme's default
        "https://hooks.example.org/duetimex",
        "https://hooks.example.org/duetime/../admin",  # a prefix a server would resolve elsewhere
        "https://hooks.example.org/duetime/%2e%2e/admin",
        "https://hooks.example.org/duetime/..%2fadmin",
        "https://hooks.example.org/duetime\\..\\admin",
        "http://127.0.0.1:9/hook2",
    ],
)
def test_a_url_grant_is_matched_on_the_parsed_url_not_the_string(url):
    assert not Grants.parse(URL_RULES).allows("alice", (), url)


@pytest.mark.parametrize(
    "url",
    [
        "https://a.example.com/x",
        "https://a.b.example.com/x?y=1",
        "https://A.Example.COM./y",  # hosts compare as DNS names
        "https://a.example.com:443/",
        "https://hooks.example.org/duetime/invoices",
        "http://127.0.0.1:18943/hook",
    ],
)
def test_a_url_grant_covers_its_hosts_ports_and_path_prefix(url):
    assert Grants.parse(URL_RULES).allows("alice", (), url)


def test_only_the_everything_pattern_covers_urls_among_globs():
    assert Grants.parse([{"owners": ["*"], "handlers": ["*"]}]).allows("a", (), "https://x.test/")
    for glob in ("https*", "*example.com*", "*://*"):
        assert not Grants.parse([{"owners": ["*"], "handlers": [glob]}]).allows("a", (), "https://example.com/")


@pytest.mark.parametrize(
    "pattern",
    ["https://*/x", "https://a*.example.com/", "https://x@example.com/", "https://example.com/a*b", "https://:1/"],
)
def test_a_url_grant_that_is_not_a_host_port_and_path_is_refused_naming_the_source(pattern):
    with pytest.raises(InvalidInput) as refused:
        Grants.parse([{"owners": ["*"], "handlers": [pattern]}], source="--grants g.json")
    assert refused.value.field == "--grants g.json"
