"""checkov over the synthesized template, with and without a data key: no failed check outside infra.checkov_skips."""

from __future__ import annotations

import pytest

from infra.checkov_skips import SKIPPED, WITHOUT_DATA_KEY, skipped
from tests.infrastructure.helpers import verdict


@pytest.mark.parametrize("variant", ["without data key", "with data key"])
def test_checkov_finds_nothing_that_is_not_skipped_with_a_reason(variant, checkov, capsys):
    with_key = variant == "with data key"
    unexpected, skips = verdict(checkov.failed[variant], skipped(with_key))
    with capsys.disabled():
        print(
            f"\ncheckov {checkov.version} {variant}: {len(unexpected)} failed, "
            f"{sum(skips.values())} skipped ({dict(sorted(skips.items()))}); {checkov.passed} passed over every variant"
        )
    assert not unexpected, "\n".join(unexpected)
    # A skip that no longer matches anything is stale: drop it rather than keep excusing nothing.
    assert set(skips) == set(skipped(with_key)), set(skipped(with_key)) - set(skips)


def test_a_data_key_makes_the_encryption_checks_pass_instead_of_skipped():
    assert not set(SKIPPED) & set(WITHOUT_DATA_KEY)
    assert all(len(reason) > 40 for reason in {**SKIPPED, **WITHOUT_DATA_KEY}.values())
