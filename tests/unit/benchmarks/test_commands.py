"""Every benchmark still starts: its module imports, its command line parses, and each mode of
``bench_tiering`` names a function that exists. The benchmarks run for minutes and outside the
suite, so a broken import or flag would otherwise show only when someone measures."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

from benchmarks import bench_tiering

pytestmark = pytest.mark.unit

BENCHMARKS = Path(bench_tiering.__file__).resolve().parent
#: The modules run with ``python -m benchmarks.<name>``.
COMMANDS = sorted(p.stem for p in BENCHMARKS.glob("bench_*.py") if "def main(" in p.read_text()) + ["run_all"]
#: Scripts spark-submit runs by path: free of the package, they import none of it.
SUBMITTED = ("cluster_baseline_copy", "cluster_floor_job")


def test_the_commands_are_the_benchmarks_with_a_main():
    assert COMMANDS == [
        "bench_amplification",
        "bench_cluster",
        "bench_failover",
        "bench_fluss",
        "bench_soak",
        "bench_store",
        "bench_store_load",
        "bench_tiering",
        "run_all",
    ]


@pytest.mark.parametrize("name", COMMANDS)
def test_a_benchmarks_help_parses(name, monkeypatch, capsys):
    module = importlib.import_module(f"benchmarks.{name}")
    monkeypatch.setattr(sys, "argv", [name, "--help"])
    with pytest.raises(SystemExit) as exited:
        module.main()
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("usage:")


@pytest.mark.parametrize("mode", sorted(bench_tiering.MODES))
def test_each_mode_names_a_function_of_its_module(mode):
    module, function = bench_tiering.MODES[mode]
    assert callable(getattr(importlib.import_module(module), function))


def test_the_older_name_of_driver_max_changes_sets_it_and_says_what_replaced_it(capsys):
    args = bench_tiering.parse_args(["changelog", "--merge-max-changes", "0"])
    assert args.driver_max_changes == 0
    assert "--merge-max-changes is now --driver-max-changes" in capsys.readouterr().err


def test_each_mode_gets_its_own_defaults():
    assert (bench_tiering.parse_args(["leases"]).buckets, bench_tiering.parse_args(["leases"]).repeat) == (1000, 10)
    assert (bench_tiering.parse_args(["changelog"]).buckets, bench_tiering.parse_args(["changelog"]).repeat) == (8, 3)
    assert bench_tiering.parse_args(["planning"]).buckets == 16
    group = bench_tiering.parse_args(["group"])
    assert (group.tables, group.repeat, group.members) == (600, 4, "1,2,3")
    assert bench_tiering.parse_args(["leases"]).tables == 1000


def test_the_cluster_mode_takes_the_flags_of_bench_cluster():
    assert bench_tiering.parse_args(["cluster", "--rows", "10", "--logs", "/tmp/logs"]).logs == Path("/tmp/logs")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return found | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}


@pytest.mark.parametrize("path", sorted(BENCHMARKS.glob("*.py")), ids=lambda p: p.name)
def test_no_benchmark_imports_another_benchmark_or_edits_sys_path(path):
    assert "sys.path" not in path.read_text()
    imported = _imports(path)
    assert not {name for name in imported if name.startswith("benchmarks.bench_")}
    if path.stem in SUBMITTED:
        assert not {name for name in imported if name.split(".")[0] in ("benchmarks", "tiering", "tests")}


def test_a_full_run_replaces_the_summary_table_and_keeps_the_sections_under_it():
    from benchmarks.run_all import with_history

    previous = "# Benchmark summary\n\n| old |\n\n## Issue 7\n\nfigures\n\n## Issue 9\n\nmore\n"
    assert with_history("# Benchmark summary\n\n| new |\n", previous) == (
        "# Benchmark summary\n\n| new |\n\n## Issue 7\n\nfigures\n\n## Issue 9\n\nmore\n"
    )
    assert with_history("# Benchmark summary\n\n| new |\n", "") == "# Benchmark summary\n\n| new |\n"
