"""Where the JVMs this package starts find java."""

from __future__ import annotations

import pytest

from tiering.errors import JavaNotFoundError
from tiering.java import find_java

pytestmark = pytest.mark.unit


def test_java_falls_back_to_path_when_java_home_is_wrong(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert find_java().endswith("java")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaNotFoundError, match="no java at \\$JAVA_HOME/bin/java"):
        find_java()
