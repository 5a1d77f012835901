"""Finding envs by `env.type` (`mappa.envs.registry`): plug-ins registered by installed packages (entry-point
group `mappa.envs`; mappa's own envs are registered so too), import paths, and the one-line errors of a
misspelt or broken one, or of a mappa whose own entry points are missing.

A plug-in here is a real installed distribution: a `*.dist-info` folder with `entry_points.txt` on
`sys.path`, which is what pip writes and what `importlib.metadata` reads."""

import sys
import textwrap

import pytest

from mappa.config import ConfigError, load_config
from mappa.core import plugins
from mappa.envs.registry import (
    EnvNotFound,
    EnvPluginError,
    get_env_spec,
    registered_envs,
    registering_package,
)

SEATS_YAML = ["agents.coder.model=smollm2", "agents.reviewer.model=smollm2"]


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Install a distribution `name` whose module `module` holds `source` and registers `entries`."""

    def install(name: str, module: str, source: str, entries: dict[str, str]) -> None:
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
        info = tmp_path / f"{name}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        lines = "".join(f"{key} = {value}\n" for key, value in entries.items())
        (info / "entry_points.txt").write_text(f"[mappa.envs]\n{lines}")
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.delitem(sys.modules, module, raising=False)
        get_env_spec.cache_clear()

    yield install
    get_env_spec.cache_clear()


GOOD_ENV = """
    from mappa.envs.spec import EnvSection, EnvSpec

    class EchoConfig(EnvSection):
        type: str = "echo"
        rounds: int = 1

    async def run(problems, agents, limits, env):
        return []

    SPEC = EnvSpec(
        type="echo", seats=("coder", "reviewer"), roles={"coder": "c", "reviewer": "r"},
        run=run, load_problems=lambda source: [], config=EchoConfig,
    )
"""


def test_mappa_envs_and_installed_plugins_are_found_by_name(installed):
    installed("echo-team", "echo_team", GOOD_ENV, {"echo": "echo_team:SPEC"})
    assert {"mathchat", "dsbench", "echo"} <= set(registered_envs())
    assert get_env_spec("mathchat").seats == ("solver", "executor", "verifier")
    spec = get_env_spec("echo")
    assert spec.seats == ("coder", "reviewer") and spec.rubric is None
    # the config validates `env:` with the plug-in's own section model
    config = load_config(None, ["env.type=echo", "env.rounds=3", "coach.type=outcome", *SEATS_YAML])
    assert type(config.env).__name__ == "EchoConfig" and config.env.rounds == 3
    with pytest.raises(ConfigError, match=r"env\.roundz: Extra inputs"):
        load_config(None, ["env.type=echo", "env.roundz=3", "coach.type=outcome", *SEATS_YAML])


def test_mappa_registers_its_own_envs_through_the_entry_point_group():
    registered = registered_envs()
    assert registered["mathchat"] == "mappa.envs.mathchat:SPEC"
    assert registered["dsbench"] == "mappa.envs.dsbench:SPEC"
    assert registering_package("mathchat") == registering_package("dsbench") == "mappa"
    assert get_env_spec("dsbench").seats == ("data_engineer", "modeler", "analyst")


def test_a_mappa_without_its_entry_points_says_to_install_it(monkeypatch):
    """A source tree on PYTHONPATH but not installed (or installed before its envs became entry points)."""
    monkeypatch.setattr(plugins, "entry_points", lambda **selection: ())
    get_env_spec.cache_clear()
    try:
        with pytest.raises(EnvNotFound) as caught:
            get_env_spec("mathchat")
    finally:
        get_env_spec.cache_clear()
    message = str(caught.value)
    assert "'mathchat'" in message and "pip install -e ." in message and "scripts/setup.sh" in message
    assert "\n" not in message


def test_an_import_path_needs_no_registration(installed):
    installed("other", "echo_direct", GOOD_ENV, {})
    assert get_env_spec("echo_direct:SPEC").seats == ("coder", "reviewer")


def test_a_misspelt_env_is_one_line_naming_the_known_ones():
    with pytest.raises(EnvNotFound) as caught:
        get_env_spec("mathchta")
    message = str(caught.value)
    assert "'mathchta'" in message and "mathchat" in message and "mappa.envs" in message
    assert "\n" not in message
    with pytest.raises(ConfigError, match=r"env: unknown env type 'mathchta'"):
        load_config(None, ["env.type=mathchta"])


def test_a_broken_plugin_names_the_env_the_package_and_what_failed(installed):
    installed("broken-team", "broken_team", "import not_a_module_anywhere\n", {"broken": "broken_team:SPEC"})
    with pytest.raises(EnvPluginError) as caught:
        get_env_spec("broken")
    message = str(caught.value)
    assert "'broken'" in message and "broken-team" in message
    assert "ModuleNotFoundError" in message and "not_a_module_anywhere" in message
    assert "\n" not in message


def test_a_plugin_pointing_at_something_else_than_a_spec_says_so(installed):
    installed("odd-team", "odd_team", "SPEC = 42\n", {"odd": "odd_team:SPEC", "gone": "odd_team:NOPE"})
    with pytest.raises(EnvPluginError, match=r"env 'odd' \(registered by package odd-team.*holds int, not"):
        get_env_spec("odd")
    with pytest.raises(EnvPluginError, match=r"odd_team:NOPE holds nothing"):
        get_env_spec("gone")


def test_an_env_without_a_rubric_refuses_the_rubric_coach_and_needs_a_template_for_an_llm_coach(installed):
    installed("echo-team", "echo_team", GOOD_ENV, {"echo": "echo_team:SPEC"})
    with pytest.raises(ConfigError, match="env `echo` has no rubric"):
        load_config(None, ["env.type=echo", "coach.type=rubric", *SEATS_YAML])
    with pytest.raises(ConfigError, match="env `echo` ships no coach template"):
        load_config(None, ["env.type=echo", "coach.type=local", *SEATS_YAML])
    config = load_config(None, ["env.type=echo", "coach.type=local", "coach.template=dsbench", *SEATS_YAML])
    assert config.coach.template == "dsbench"
