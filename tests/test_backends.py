"""The export backends are one registry (augsbert.export.backends.REGISTRY, issue 66): every other place that names
a backend names the same ones. The standalone scripts the deploy environment runs (deploy_convert.py: a converter
per exported backend, its file layout; deploy_speed.py: each backend's folder) cannot import augsbert, the schema
is a checked-in file and the docs are text: these tests read each and compare it with the registry, so a backend
named in one place and not the others fails here."""

from __future__ import annotations

import re
import runpy

import pytest
import yaml

from augsbert.export.backends import (BACKEND_TITLES, BACKEND_WILDCARD, BACKENDS, CONVERTER, EXPORTED, REGISTRY,
                                      backend_file)
from conftest import REPO

SPEED = CONVERTER.with_name("deploy_speed.py")


def test_the_registry_is_the_one_list():
    assert BACKENDS == tuple(REGISTRY) and set(BACKEND_TITLES) == set(BACKENDS)
    assert EXPORTED == tuple(name for name, backend in REGISTRY.items() if backend.converter)
    assert BACKEND_WILDCARD == "|".join(EXPORTED)
    for name, backend in REGISTRY.items():
        assert backend.name == name and backend.title
        if backend.exported:  # its files, in its own folder, and the card's words for how they were made
            assert backend.folder and backend.file.startswith(backend.folder + "/")
            assert backend.int8_file.startswith(backend.folder + "/") and backend.made_by and backend.int8


def test_the_converter_has_one_function_per_exported_backend_and_writes_the_registry_s_files():
    script = runpy.run_path(str(CONVERTER), run_name="deploy_convert")
    assert tuple(script["CONVERTERS"]) == EXPORTED
    for name in EXPORTED:
        backend = REGISTRY[name]
        assert callable(script.get(backend.converter)), f"deploy_convert.py has no {backend.converter}()"
        for quantize in (None, "int8"):
            for config in backend.configs or ("avx512_vnni",):
                assert script["backend_file"](name, quantize, config) == backend_file(name, quantize, config)
    onnx_configs = {config for backend in REGISTRY.values() for config in backend.configs}
    assert set(script["ONNX_QUANTIZATION"]) == onnx_configs


def test_the_speed_script_knows_each_backend_s_folder():
    script = runpy.run_path(str(SPEED), run_name="deploy_speed")
    assert script["FOLDERS"] == {name: backend.folder for name, backend in REGISTRY.items()}


def test_the_schema_lists_the_exported_backends():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    frontier = schema["$defs"]["grid"]["properties"]["frontier"]["properties"]["backends"]
    assert tuple(frontier["items"]["enum"]) == EXPORTED == tuple(frontier["default"])


def test_the_rules_read_the_registry_s_wildcard():
    """The export rules' {backend} constraint is BACKEND_WILDCARD (common.smk imports it), never a list of names."""
    rules = (REPO / "workflow" / "rules" / "export.smk").read_text()
    constraints = re.findall(r"^\s*backend=(.+),\s*$", rules, flags=re.M)
    assert constraints and set(constraints) == {"BACKEND_WILDCARD"}
    assert "from augsbert.export.backends import BACKEND_WILDCARD" in (REPO / "workflow" / "rules" /
                                                                     "common.smk").read_text()


def test_the_command_line_offers_the_registry_s_backends():
    from augsbert.face.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["export"]
    backend = next(a for a in sub._actions if a.dest == "backend")
    assert tuple(backend.choices) == BACKENDS


@pytest.mark.parametrize("page", ["docs/guide/compact.md", "docs/guide/export.md"])
def test_the_docs_name_the_registry_s_backends(page):
    """Every `--backend NAME` the pages write is a backend; the compact page shows each exported one."""
    text = (REPO / page).read_text()
    named = set(re.findall(r"--backend ([a-z0-9_]+)", text))
    assert named <= set(BACKENDS), sorted(named - set(BACKENDS))
    if page.endswith("compact.md"):
        assert set(EXPORTED) <= named, sorted(set(EXPORTED) - named)
