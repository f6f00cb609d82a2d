"""scripts/setup.sh compiles the package: it is installed editable, for which pip writes no bytecode,
and where PYTHONDONTWRITEBYTECODE is set (CI's environment) Python never caches it either, so every
driver, store and Spark Python worker would compile the modules it imports at each start."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("package", ["tiering", "jobs"])
def test_every_module_of_the_package_has_bytecode_for_this_python(package):
    sources = sorted((ROOT / package).rglob("*.py"))
    missing = [str(s.relative_to(ROOT)) for s in sources if not _has_bytecode(s)]
    assert sources
    assert not missing, f"no bytecode for {len(missing)} of {len(sources)} (run scripts/setup.sh): {missing[:5]}"


def _has_bytecode(source: Path) -> bool:
    return Path(importlib.util.cache_from_source(str(source))).is_file()
