"""The Snakemake-catalog layout: workflow/Snakefile, envs per rule group, lint and snakefmt clean, .test run."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from workflow_helpers import CHECKOUT, checkout as copy_checkout, snakemake

pytestmark = pytest.mark.workflow

CPU_RULES = {"data", "gold_subset", "collect_results", "grid_table", "active_label", "active_rounds", "active_curve"}

# Snakemake's own parse of the workflow: the stages' rules are made in a loop over the stage registry
# (workflow/rules/stages.smk), so the rule files' text does not list them. Rules without a command
# (`all`) have no environment to name.
RULES_AND_ENVS = """
import json
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import OutputSettings, ResourceSettings

with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(resource_settings=ResourceSettings(), snakefile=Path("workflow/Snakefile"))._workflow
    print(json.dumps({rule.name: rule.conda_env for rule in workflow.rules if rule.shellcmd}))
"""


def rules_and_envs(checkout: Path) -> dict[str, str | None]:
    """rule name -> the conda environment file it declares, as Snakemake reads the workflow.

    In a subprocess: parsing the workflow runs common.smk, which sets environment variables of the
    process that parses it.
    """
    proc = subprocess.run([sys.executable, "-c", RULES_AND_ENVS], cwd=checkout, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.fixture
def checkout(tmp_path) -> Path:
    return copy_checkout(tmp_path, (*CHECKOUT, ".test"))


def test_every_rule_names_its_group_environment_and_the_files_are_complete(checkout):
    envs = rules_and_envs(checkout)
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


def test_lint_and_snakefmt_are_clean(checkout):
    proc = snakemake(checkout, "--lint")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Lints for" not in out and "in a good condition" in out, out
    snakefmt = Path(sys.executable).with_name("snakefmt")
    proc = subprocess.run([str(snakefmt), "--config", str(REPO / "pyproject.toml"), "--check", "workflow"],
                          cwd=checkout, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_test_config_runs_from_the_repository_root(checkout):
    """`snakemake --cores 2 --directory .test`: the catalog's small real run (packaged MiniLM, Lee corpus).

    The packaged MiniLM is kept: the test runs .test/config as the catalog ships it, model included
    (a zero-shot evaluation, nothing is trained).
    """
    proc = snakemake(checkout, "--cores", "2", "--directory", ".test")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((checkout / ".test" / "results" / "demo_zeroshot.json").read_text())
    zero_shot = result["models"]["zero_shot"]
    assert 0 < zero_shot["summary"]["spearman"]["mean"] < 100
    assert "alignment" in zero_shot["summary"] and "uniformity" in zero_shot["summary"]  # the diagnostics suite
    assert not (checkout / "results").exists() and not (checkout / "artifacts").exists()  # all under .test/
