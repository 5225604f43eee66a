"""The documentation site builds with `mkdocs build --strict` (every page in the nav, no broken link or anchor),
the README stays a README (a screen's worth, its test command the one CI runs), and the schema tables of
docs/reports.md name every top-level key of the published JSON Schemas."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.paths import ROOT


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(site.parent)})


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("material", reason="mkdocs-material not installed: pip install -e '.[test]'")
    out = tmp_path_factory.mktemp("site")
    done = mkdocs_build(ROOT / "mkdocs.yml", out / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    return out / "site"


def test_the_site_builds_strict_with_every_page_in_the_nav(site: Path) -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.SafeLoader)
    assert config["theme"]["name"] == "material" and config["strict"] is True

    def pages(nav: list) -> list[str]:
        return [p for item in nav for v in item.values() for p in (pages(v) if isinstance(v, list) else [v])]

    listed = pages(config["nav"])
    assert sorted(listed) == sorted(p.name for p in (ROOT / "docs").glob("*.md")), "every page in the nav, once"
    for page in listed:
        built = site / ("index.html" if page == "index.md" else f"{page.removesuffix('.md')}/index.html")
        assert built.is_file(), page
    home = (site / "index.html").read_text()
    assert "Quick start" in home and "guide-pre-release/" in home and "facts/" in home


def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    """The check bites: the same site with one link to a missing anchor does not build."""
    pytest.importorskip("material", reason="mkdocs-material not installed: pip install -e '.[test]'")
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    with (docs / "index.md").open("a") as page:
        page.write("\nSee [the drift levels](baselines.md#no-such-section).\n")
    config = (ROOT / "mkdocs.yml").read_text().replace("docs_dir: docs", f"docs_dir: {docs}")
    (tmp_path / "mkdocs.yml").write_text(config)
    done = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "no-such-section" in done.stdout + done.stderr


def test_mkdocs_material_is_in_the_test_extra_that_ci_installs() -> None:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(re.match(r"mkdocs-material\b", req) for req in extra)
    assert "pip install -q -e '.[test]'" in (ROOT / ".ci/run").read_text()


def test_the_readme_fits_a_screen_and_its_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    main_job, tests = blocks[0].strip(), blocks[1].strip()
    assert "ami-auditor scan local" in main_job and "python3 -m venv" in main_job and "--format html" in main_job
    assert tests.endswith("&& python3 -m pytest -q")  # the whole suite
    assert "`python3 -m pytest -q tests/unit`" in readme  # its unit tier
    ci = (ROOT / ".ci/run").read_text().split("# README's test command", 1)[1]
    runs = [line for line in ci.splitlines() if line.startswith("python3 -m pytest")]
    assert runs == ["python3 -m pytest -q tests/unit", "python3 -m pytest -q tests/system"]  # the suite, tier by tier
    # every test sits in one of the two tiers (tests/conftest.py fails any other), so the two runs are the suite
    assert not list((ROOT / "tests").glob("test_*.py"))


def test_the_schema_tables_name_every_top_level_key() -> None:
    text = (ROOT / "docs/reports.md").read_text()
    for name, heading in (("snapshot", "**Snapshot**"), ("report", "**Report**")):
        schema = json.loads((ROOT / "auditor/schemas" / f"{name}.schema.json").read_text())
        table = text.split(heading, 1)[1].split("\n\n", 2)[1]
        documented = re.findall(r"^\| `(\w+)` \|", table, re.M)
        assert sorted(documented) == sorted(schema["properties"]), name


def test_the_inventory_table_names_every_key_of_its_schema() -> None:
    text = (ROOT / "docs/targets.md").read_text()
    schema = json.loads((ROOT / "auditor/schemas/inventory.schema.json").read_text())
    keys = {*schema["$defs"]["host"]["properties"], *(f"ssh.{k}" for k in schema["$defs"]["ssh"]["properties"])}
    documented = set(re.findall(r"^\| `([\w.]+)` \|", text.split("## Inventory", 1)[1].split("\n## ", 1)[0], re.M))
    assert documented == keys
    assert set(schema["properties"]["defaults"]["properties"]) == {"ssh", "labels"}  # what the text says of defaults


def test_the_rule_and_waiver_tables_name_every_key_of_their_schemas() -> None:
    text = (ROOT / "docs/rule-format.md").read_text()
    documented = set(re.findall(r"^\| `([\w.\[\]]+)` \|", text, re.M))
    pack = json.loads((ROOT / "auditor/schemas/rule-pack.schema.json").read_text())
    waiver = json.loads((ROOT / "auditor/schemas/waivers.schema.json").read_text())["$defs"]["waiver"]
    keys = {*pack["properties"], *(f"rules[].{k}" for k in pack["$defs"]["rule"]["properties"]), *waiver["properties"]}
    assert documented == keys


def test_the_baseline_table_names_every_key_of_its_schema() -> None:
    text = (ROOT / "docs/baselines.md").read_text()
    schema = json.loads((ROOT / "auditor/schemas/baseline.schema.json").read_text())
    assert set(re.findall(r"^\| `(\w+)` \|", text, re.M)) == set(schema["properties"])
