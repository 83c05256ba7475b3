"""Schemathesis fuzzes `duetime local` from the OpenAPI document it serves: no input gives a 500, and no
response breaks the document. Bounded: 30 examples per operation, the bearer token of an owner of its own on
every request."""

from __future__ import annotations

import schemathesis
from duetime.api.openapi import openapi_document
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

FUZZ_OWNER = "fuzzer"
# The largest batch a fuzzed request sends (see below).
FUZZED_BATCH_JOBS = 20
CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance, content_type_conformance]


# The document is built in-process (the same function GET /openapi.json serves, which test_api_http
# checks); schemathesis' lazy `from_fixture` loader does not work with pytest 9.
# Valid and invalid data both ("all" modes). Unexpected HTTP methods (TRACE...) are not probed: the local
# bridge's http.server answers those itself (501), and API Gateway answers them before the handler on AWS.
CONFIG = SchemathesisConfig.from_dict(
    {"generation": {"mode": "all"}, "phases": {"coverage": {"unexpected-methods": []}}}
)
schema = schemathesis.openapi.from_dict(openapi_document(), config=CONFIG)


@schema.parametrize()
@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_no_input_gives_a_500_or_a_response_outside_the_schema(case, local_system):
    jobs = case.body.get("jobs") if case.path == "/jobs/batch" and isinstance(case.body, dict) else None
    if isinstance(jobs, list) and len(jobs) > FUZZED_BATCH_JOBS:
        # The coverage phase sends maxItems (500) copies of a valid job: on moto that is a minute of
        # transactions, not a bug. The batch's size limit has tests of its own (test_batch_api.py).
        case.body = {**case.body, "jobs": jobs[:FUZZED_BATCH_JOBS]}
    case.call_and_validate(
        base_url=local_system.api_url,
        # An owner of its own: a fuzzed POST /jobs/bulk ({"action": "resume", "filter": {}}, say) changes every
        # job of its caller, and the session's other tests keep theirs under alice (paused_jobs, every minute).
        headers={"Authorization": f"Bearer {local_system.token(FUZZ_OWNER)}"},
        checks=CHECKS,
        timeout=30,
    )
