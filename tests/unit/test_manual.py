"""The manual (mkdocs.yml, docs/): its generated reference pages are current and the site builds strictly."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tiering.cli import _parser
from tiering.conf.reference import config_reference_markdown
from tiering.kvstore.types import SUPPORTED_TYPES

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reference_pages_are_current(gen_docs: ModuleType) -> None:
    stale = gen_docs.stale_pages()
    assert not stale, f"stale: {sorted(p.name for p in stale)}; run python scripts/gen_docs.py"


def test_check_fails_until_the_pages_are_written(gen_docs: ModuleType, tmp_path: Path) -> None:
    assert gen_docs.main(["--check", "--dir", str(tmp_path)]) == 1
    assert list(tmp_path.iterdir()) == []
    assert gen_docs.main(["--dir", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cli.md", "configuration.md", "http-api.md", "types.md"]
    assert gen_docs.main(["--check", "--dir", str(tmp_path)]) == 0
    (tmp_path / "cli.md").write_text("edited by hand\n")
    assert gen_docs.main(["--check", "--dir", str(tmp_path)]) == 1


def test_configuration_page_holds_the_whole_reference(gen_docs: ModuleType) -> None:
    assert gen_docs.configuration_page().endswith(config_reference_markdown())


def test_cli_page_has_every_command_and_its_help(gen_docs: ModuleType) -> None:
    page = gen_docs.cli_page()
    headings = [line[len("## `") : -1] for line in page.splitlines() if line.startswith("## `")]
    assert headings == [parser.prog for parser in gen_docs._parsers(_parser())]
    assert {"tiering run", "tiering leases drop", "tiering kv-store serve", "tiering submit"} <= set(headings)
    assert "lead the job and run the tiering query (a standby waits)" in page
    assert "--available-now" in page.split("## `tiering run`")[1].split("## `")[0]


def test_http_page_has_every_route_and_schema(gen_docs: ModuleType) -> None:
    document = gen_docs._openapi_document()
    page = gen_docs.http_api_page()
    routes = [line for line in page.splitlines() if line.startswith("### `")]
    assert routes == [f"### `{m.upper()} {p}`" for p, ops in document["paths"].items() for m in ops]
    assert "### `POST /v1/leases/{lease_id}/acquire`" in routes
    for name in document["components"]["schemas"]:
        assert f"\n### {name}\n" in page
    create = page.split("### `POST /v1/tables`")[1].split("### `")[0]
    assert "Request body: `application/json`: [TableSpec](#tablespec)" in create
    assert "| 409 | FENCED_EPOCH" in create


def test_site_builds_strictly(tmp_path: Path) -> None:
    site = tmp_path / "site"
    mkdocs = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"), "-d", str(site)]
    result = subprocess.run(
        mkdocs, capture_output=True, text=True, timeout=120, env={"NO_MKDOCS_2_WARNING": "1", "PATH": ""}
    )
    assert result.returncode == 0, result.stderr
    for page in ("index.html", "getting-started/index.html", "reference/http-api/index.html", "DESIGN/index.html"):
        assert (site / page).is_file(), page


def test_readme_links_point_at_files_that_exist() -> None:
    readme = (REPO / "README.md").read_text()
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)]+)\)", readme) if "://" not in t]
    assert "docs/getting-started.md" in targets
    missing = [t for t in targets if not (REPO / t).exists()]
    assert not missing, f"README links to missing files: {missing}"
    assert len(readme.splitlines()) <= 150, "the README is an entry point; the manual holds the rest"


#: Pages a new user installs from: the README and the manual.
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_no_page_installs_kv_tiering_from_a_package_index() -> None:
    """kv-tiering is on no package index: `pip install kv-tiering` fails; the checkout or the wheel."""
    from_index = re.compile(r"pip install +['\"]?kv-tiering\b")
    found = [f"{page.name}: {m.group(0)}" for page in PAGES for m in from_index.finditer(page.read_text())]
    assert not found, found


def test_getting_started_says_how_tiering_gets_on_the_path_before_using_it() -> None:
    """Its setup line runs `.venv/bin/tiering`, its steps `tiering`: activating the virtualenv is said first."""
    page = (REPO / "docs" / "getting-started.md").read_text()
    first_bare = re.search(r"^tiering ", page, re.MULTILINE)
    assert first_bare is not None
    assert "source .venv/bin/activate" in page[: first_bare.start()], "no activation before the first `tiering`"


def test_types_page_lists_every_column_type_its_json_and_its_delta_type(gen_docs: ModuleType) -> None:
    """A new user's first table needs the type names, how a row writes each in JSON, and what each
    becomes in Delta; and that an upsert is a whole row."""
    page = gen_docs.types_page()
    rows = {line.split("|")[1].strip(" `"): line for line in page.splitlines() if line.startswith("| `")}
    assert list(rows) == [*SUPPORTED_TYPES]
    assert "`long`" in rows["bigint"] and "`timestamp`" in rows["timestamp"] and "`byte`" in rows["tinyint"]
    assert "UTC" in rows["timestamp"] and "base64" in rows["binary"] and "string" in rows["decimal(p,s)"]
    assert "missing columns become null" in page
    http = gen_docs.http_api_page()
    assert "[column types](types.md)" in http, "the HTTP reference describes a column's type"


def test_where_the_site_is_built_is_said_where_building_it_is() -> None:
    """`mkdocs build` writes mkdocs.yml's `site_dir`: the README and the development page, which
    tell how to build the site, name that folder."""
    [site_dir] = re.findall(r"^site_dir: *(\S+)$", (REPO / "mkdocs.yml").read_text(), re.MULTILINE)
    for page in (REPO / "README.md", REPO / "docs" / "development.md"):
        text = " ".join(page.read_text().split())
        assert "mkdocs build" in text, page.name
        assert f"`{site_dir}/`" in text, f"{page.name} does not say mkdocs build writes {site_dir}/"
