"""Env plug-ins import mappa through its public module alone (`mappa.envs.api`): the example under
`examples/` and the built-in envs, which may also import their own sub-package's modules. Every import
statement counts (module-level and inside functions), read with `ast`. And the public module documents
every name it exports."""

import ast
from pathlib import Path

import pytest

import mappa
import mappa.envs.api as api

PUBLIC = "mappa.envs.api"
ROOT = Path(mappa.__file__).parent.parent
BUILT_INS = ("mathchat", "dsbench")


def mappa_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every absolute import of mappa or a module under it in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return [(line, name) for line, name in found if name == "mappa" or name.startswith("mappa.")]


def outside_the_public_module(paths, own: str | None = None) -> list[str]:
    allowed = (PUBLIC,) if own is None else (PUBLIC, own)
    return [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in paths
        for line, name in mappa_imports(path)
        if not any(name == ok or name.startswith(ok + ".") for ok in allowed)
    ]


def test_examples_import_mappa_only_through_the_public_module():
    paths = sorted((ROOT / "examples").rglob("*.py"))
    assert paths, "no example found"
    assert outside_the_public_module(paths) == []


@pytest.mark.parametrize("env", BUILT_INS)
def test_a_built_in_env_imports_mappa_only_through_the_public_module_and_itself(env):
    package = f"mappa.envs.{env}"
    paths = sorted((ROOT / "mappa" / "envs" / env).rglob("*.py"))
    assert outside_the_public_module(paths, own=package) == []


def test_the_check_sees_imports_inside_functions(tmp_path):
    path = tmp_path / "env.py"
    path.write_text(
        "from mappa.envs.api import EnvSpec\n\ndef f():\n    from mappa.sandbox import run_python\n"
    )
    assert [name for _, name in mappa_imports(path)] == [PUBLIC, "mappa.sandbox"]


def test_every_public_name_exists_and_is_documented():
    for name in api.__all__:
        assert hasattr(api, name), name
        assert f"\n    {name} " in api.__doc__, f"{name} has no row in mappa.envs.api's docstring"
