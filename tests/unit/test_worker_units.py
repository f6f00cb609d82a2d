"""The xdist work units (tests/support/worker_units.py): the modules named as sharing a session
fixture exist and ask for it, so a rename cannot silently split them across workers again."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.worker_units import SHARED_FIXTURE_UNITS, unit_of

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("module", sorted(SHARED_FIXTURE_UNITS))
def test_a_module_of_a_shared_unit_exists_and_asks_for_a_fixture_its_unit_names(module):
    source = (REPO / module).read_text()
    fixtures = SHARED_FIXTURE_UNITS[module].split(", ")
    assert any(f"{fixture}," in source or f"{fixture})" in source for fixture in fixtures), module


def test_the_shared_modules_are_one_unit_and_every_other_module_its_own():
    assert len({unit_of(f"{m}::test_x") for m in SHARED_FIXTURE_UNITS}) == 1
    other = "tests/integration/demo/test_demo.py"
    assert unit_of(f"{other}::test_a[p]") == unit_of(f"{other}::test_b") == other
