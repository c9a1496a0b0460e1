"""The Snakemake-catalog layout: workflow/Snakefile, envs per rule group, lint and snakefmt clean, .test run."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

pytestmark = pytest.mark.workflow

CPU_RULES = {"prepare_data", "collect_results", "grid_table"}


def rules_and_envs() -> dict[str, str]:
    """rule name -> the conda environment file it declares (from the rule files' text)."""
    found = {}
    for path in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        for match in re.finditer(r"^rule (\w+):\n(.*?)(?=^rule |\Z)", path.read_text(), re.M | re.S):
            env = re.search(r'^    conda:\n        "([^"]+)"', match.group(2), re.M)
            found[match.group(1)] = env.group(1) if env else None
    return found


def test_every_rule_names_its_group_environment_and_the_files_are_complete():
    envs = rules_and_envs()
    assert len(envs) >= 17 and None not in envs.values(), envs
    for rule, env in envs.items():
        assert env == ("../envs/cpu.yaml" if rule in CPU_RULES else "../envs/models.yaml"), rule
    for name in ("models", "cpu"):
        spec = yaml.safe_load((REPO / "workflow" / "envs" / f"{name}.yaml").read_text())
        assert spec["channels"][0] == "conda-forge"
        deps = " ".join(spec["dependencies"])
        assert "python =3.11" in deps and "pytorch >=2.4,<3" in deps and "pip" in deps
        deploy = REPO / "workflow" / "envs" / f"{name}.post-deploy.sh"
        assert os.access(deploy, os.X_OK) and 'python -m pip install --no-input "$source"' in deploy.read_text()
    assert "=*cpu*" in (REPO / "workflow" / "envs" / "cpu.yaml").read_text()  # no CUDA build for CPU rules
    # the post-deploy script installs the package, whose dependencies pyproject.toml pins (one list)
    assert yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())["usage"]["report"] is True
    assert (REPO / "LICENSE").read_text().lstrip().startswith("Apache License")


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "AUGSBERT_DEVICE": "cpu"}
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.fixture
def checkout(tmp_path) -> Path:
    for item in ("workflow", "config", "profiles", ".test"):
        shutil.copytree(REPO / item, tmp_path / item, symlinks=True)
    return tmp_path


def test_lint_and_snakefmt_are_clean(checkout):
    proc = snakemake(checkout, "--lint")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Lints for" not in out and "in a good condition" in out, out
    snakefmt = Path(sys.executable).with_name("snakefmt")
    proc = subprocess.run([str(snakefmt), "--config", str(REPO / "pyproject.toml"), "--check", "workflow"],
                          cwd=checkout, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_test_config_runs_from_the_repository_root(checkout):
    """`snakemake --cores 2 --directory .test`: the catalog's small real run (packaged MiniLM, Lee corpus)."""
    proc = snakemake(checkout, "--cores", "2", "--directory", ".test")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((checkout / ".test" / "results" / "demo_zeroshot.json").read_text())
    zero_shot = result["models"]["zero_shot"]
    assert 0 < zero_shot["summary"]["spearman"]["mean"] < 100
    assert "alignment" in zero_shot["summary"] and "uniformity" in zero_shot["summary"]  # the diagnostics suite
    assert not (checkout / "results").exists() and not (checkout / "artifacts").exists()  # all under .test/
