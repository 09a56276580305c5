"""The report's statistics as pure functions."""

from __future__ import annotations

import pytest

from omds_ld.scenarios.report import pass_hat_k, wilson


def test_wilson_interval() -> None:
    low, high = wilson(3, 3)
    assert low == pytest.approx(0.438, abs=0.001) and high == 1.0
    low, high = wilson(5, 10)
    assert low == pytest.approx(0.237, abs=0.001) and high == pytest.approx(0.763, abs=0.001)
    assert wilson(0, 0) == (0.0, 1.0)


def test_pass_hat_k_is_the_chance_that_k_runs_all_pass() -> None:
    assert pass_hat_k(4, 4, 2) == 1.0
    assert pass_hat_k(3, 4, 1) == 0.75
    assert pass_hat_k(3, 4, 2) == pytest.approx(0.5)
    assert pass_hat_k(3, 4, 4) == 0.0
    assert pass_hat_k(2, 3, 4) is None
