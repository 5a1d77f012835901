"""The one plug-in lookup (`mappa.core.plugins`) behind `env.type`, `coach.type` and `algo.baseline`: for
each setting a misspelt name, a module that fails to import, and an attribute that holds something else
are one-line errors in that setting's own words (the texts the three registries gave before they shared
the lookup)."""

import re

import pytest

from mappa.config import ConfigError, load_config
from mappa.config.coach_registry import CoachNotFound, CoachPluginError, get_coach_spec
from mappa.core.baseline_registry import BaselineNotFound, BaselinePluginError, get_baseline
from mappa.envs.registry import EnvNotFound, EnvPluginError, get_env_spec

HERE = "test_plugin_lookup"  # pytest puts tests/unit on sys.path: this module's import name
NOT_A_PLUGIN = 42

SETTINGS = {
    "env": (get_env_spec, EnvNotFound, EnvPluginError, "mappa.envs.spec.EnvSpec", "EnvSpec", "SPEC"),
    "coach": (
        get_coach_spec,
        CoachNotFound,
        CoachPluginError,
        "mappa.config.coach_registry.CoachSpec",
        "CoachSpec",
        "COACH",
    ),
    "baseline": (
        get_baseline,
        BaselineNotFound,
        BaselinePluginError,
        "mappa.core.baselines.BaselineEstimator",
        "estimator",
        "BASELINE",
    ),
}
KNOWN = {  # an installed plug-in env (the codepair example) is listed too
    "env": r"envs are [\w, ]*dsbench, mathchat[\w, ]* \(registered by",
    "coach": r"coaches are local, openai, outcome, rubric \(built in, or registered by",
    "baseline": r"baselines are none, siblings \(built in, or registered by",
}


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_each_setting_says_what_failed_in_one_line_of_its_own(setting):
    get, not_found, plugin_error, holds, noun, attribute = SETTINGS[setting]
    with pytest.raises(not_found) as unknown:
        get("sideways")
    with pytest.raises(plugin_error) as broken:
        get("no_such_module:THING")
    with pytest.raises(plugin_error) as odd:
        get(f"{HERE}:NOT_A_PLUGIN")
    with pytest.raises(plugin_error) as missing:
        get(f"{HERE}:NOPE")
    what = "baseline" if setting == "baseline" else f"{setting} type"
    assert re.match(rf"unknown {what} 'sideways': {KNOWN[setting]} installed packages", str(unknown.value))
    assert str(unknown.value).endswith(
        f"or an import path `package.module:{attribute}`; check the spelling, or install the package that "
        "provides it (pip install -e path/to/it)"
    )
    assert str(broken.value) == (
        f"{setting} 'no_such_module:THING' (an import path): importing no_such_module failed: "
        "ModuleNotFoundError: No module named 'no_such_module'"
    )
    point = f"point it at the module's {noun}, as `package.module:{attribute}`"
    where = f"{setting} '{HERE}:NOT_A_PLUGIN' (an import path)"
    assert str(odd.value) == f"{where}: {HERE}:NOT_A_PLUGIN holds int, not a {holds}; {point}"
    assert f"{HERE}:NOPE holds nothing, not a {holds}; {point}" in str(missing.value)
    assert all("\n" not in str(e.value) for e in (unknown, broken, odd, missing))


@pytest.mark.parametrize(
    ("override", "line"),
    [
        ("env.type=mathchta", "env: unknown env type 'mathchta': envs are"),
        ("coach.type=judge", "coach.type: unknown coach type 'judge': coaches are local, openai, outcome"),
        ("algo.baseline=sideways", "algo.baseline: unknown baseline 'sideways': baselines are none"),
    ],
)
def test_a_config_naming_an_unknown_plugin_says_so_on_the_settings_line(override, line):
    with pytest.raises(ConfigError) as caught:
        load_config("configs/mathchat-cpu.yaml", [override])
    assert f"\n  - {line}" in str(caught.value)
