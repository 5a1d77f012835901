"""Every `mappa ...` command the docs show works: it parses with the real parser, and where it names a
config and settings, they validate. A renamed option, a config change or a validation rule that breaks a
documented command fails here, naming the file and line.

Where commands are read from: README.md and docs/**/*.md (fenced code blocks, and inline code spans),
examples/** (Markdown as above; `# ...` comments of YAML files), configs/*.yaml and deployments/*.yaml
(`# ...` comments) and scripts/*.sh (their lines). A command line starts with `mappa` or
`.venv/bin/mappa` (after `VAR=value` assignments only), or runs `python -m mappa.cli` (a Ray job's
entrypoint), then its arguments; `\\` continues a line, `# ...` ends it. A line that only mentions a
command further on (a file listing's note, "... mappa evaluate RUN --eval-data FILE") is not one.

What each is checked for (`check`):
- `train CONFIG [--set ...] [--iterations N]`: parsed, then validated as `mappa train` reads it
  (`mappa.cli.dry_run.train_config`: the file, its overrides; the validation of `mappa train --dry-run`
  without its pre-flight, which needs the data, models and machine).
- `coach-check RUN [--coach ...]`: parsed, then each coach's settings validated against the stand-in run.
- `rescore RUN --as NAME [--set ...]`: parsed, then checked as `mappa rescore` checks it before any work
  (`check_rescore`) against a stand-in run of configs/mathchat-cpu-demo.yaml (what scripts/demo.sh
  trains; the docs' RUN is a run of yours).
- `resume RUN --set ...`, `retry RUN --set ...`: parsed, then applied to the stand-in run as `mappa resume`
  does, and they must keep its config hash (a resume changes how a run executes, never its results).
- Only parsed, with the reason in `PARSED_ONLY`: evaluate (it needs a trained checkpoint, and `--eval-data`
  names a file of yours such as my-bench.jsonl), inspect (a run's files), serve and models (no config), and
  resume/retry without `--set` (nothing to validate).
- An inline span with nothing but options after its subcommand (`mappa train`, `mappa serve --cron`,
  `mappa inspect --iteration K`) is a reference to the command, not a command line: its subcommand and
  every `--option` it names must exist.

Placeholders are replaced before parsing (`PLACEHOLDERS`): RUN, RUN_ID, <run id>, $run_id, ... by a run id,
CONFIG by a shipped config, K and N by numbers, ROOT by runs; FILE and my-bench.jsonl stay (parse only).
"""

from __future__ import annotations

import argparse
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from mappa.blame.check import coach_configs
from mappa.cli.coach_check import parse_coaches
from mappa.cli.dry_run import train_config
from mappa.cli.parser import build_parser
from mappa.config import ConfigError, load_config, override_config
from mappa.stages.rescore import check_rescore
from mappa.storage.run import Run

REPO = Path(__file__).resolve().parents[2]
STAND_IN = "configs/mathchat-cpu-demo.yaml"
RUN_ID = "docs-run"
PLACEHOLDERS = {
    "RUN": RUN_ID,
    "RUN_ID": RUN_ID,
    "$run_id": RUN_ID,
    "ID": RUN_ID,
    "my-run": RUN_ID,
    "CONFIG": "configs/mathchat-cpu.yaml",
    "ROOT": "runs",
    "K": "1",
    "N": "8",
    "NAME": "judge",
}
TEXT_PLACEHOLDERS = {"<run id>": "RUN", "<flow run id>": "RUN", "<id>": "RUN"}
DROPPED = {"$@"}  # demo.sh's pass-through of its own arguments
PARSED_ONLY = {
    "evaluate": "needs a trained run's checkpoint (and --eval-data names a problem file of yours)",
    "inspect": "reads a run's files; no config or settings to validate",
    "runs": "lists a storage root's runs; no config or settings to validate",
    "export": "needs a trained run's checkpoint (and writes model folders)",
    "ask": "needs a trained run's checkpoint and loads its models",
    "serve": "no config or settings to validate",
    "models": "no config or settings to validate",
    "resume": "no --set: nothing to validate",
    "retry": "no --set: nothing to validate",
}
LAUNCHERS = ("mappa", ".venv/bin/mappa")


@dataclass(frozen=True)
class Documented:
    """A `mappa` command found in the docs: where, its text as written, its arguments (placeholders
    replaced), and whether it is a full command line or a reference to a command (an inline span)."""

    where: str
    text: str
    argv: tuple[str, ...]
    reference: bool = False


def mappa_argv(line: str) -> list[str] | None:
    """The arguments after `mappa` (or `.venv/bin/mappa`, `python -m mappa.cli`) in a shell line that
    runs it (a launcher first, after `VAR=value` assignments only), None for any other line."""
    for text, value in TEXT_PLACEHOLDERS.items():
        line = line.replace(text, value)
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:  # an unclosed quote: no shell line
        return None
    for i, token in enumerate(tokens):
        if token in LAUNCHERS and all(re.match(r"\w+=", before) for before in tokens[:i]):
            rest = tokens[i + 1 :]  # `mappa ...`, or `RAY_ADDRESS=HEAD:6379 mappa ...`
        elif token == "-m" and tokens[i + 1 : i + 2] == ["mappa.cli"] and i > 0 and "python" in tokens[i - 1]:
            rest = tokens[i + 2 :]  # `... -- python -m mappa.cli train ...` (a Ray job)
        else:
            continue
        return [PLACEHOLDERS.get(arg, arg) for arg in rest if arg not in DROPPED]
    return None


def joined_lines(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Lines with their `\\` continuations joined, each with the number of its first line."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, text in lines:
        if pending is not None:
            number, text = pending[0], pending[1] + " " + text.strip()
        pending = (number, text.rstrip()[:-1]) if text.rstrip().endswith("\\") else None
        if pending is None:
            out.append((number, text))
    return out


def commands_in_lines(path: Path, lines: list[tuple[int, str]]) -> list[Documented]:
    found = []
    for number, text in joined_lines(lines):
        argv = mappa_argv(text)
        if argv:
            found.append(Documented(f"{path.relative_to(REPO)}:{number}", text.strip(), tuple(argv)))
    return found


def commands_in_spans(path: Path, text: str, first_line: int = 1) -> list[Documented]:
    """Inline code spans that start with a mappa launcher; one with nothing but options after its
    subcommand is a reference (`mappa train`, `mappa serve --cron`, `mappa inspect --iteration K`)."""
    found = []
    for match in re.finditer(r"`([^`\n]+(?:\n[^`\n]+)?)`", text):
        span = " ".join(match.group(1).split())
        if not span.startswith(tuple(f"{launcher} " for launcher in LAUNCHERS)):
            continue
        argv = mappa_argv(span)
        if not argv:
            continue
        number = first_line + text.count("\n", 0, match.start())
        reference = len(argv) == 1 or argv[1].startswith("-")
        found.append(Documented(f"{path.relative_to(REPO)}:{number}", span, tuple(argv), reference))
    return found


def commands_in_markdown(path: Path) -> list[Documented]:
    """Fenced code blocks' lines, and inline spans in the prose between them."""
    fenced: list[tuple[int, str]] = []
    prose: list[str] = []
    in_fence = False
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            prose.append("")
        elif in_fence:
            fenced.append((number, line))
            prose.append("")
        else:
            prose.append(line)
    return commands_in_lines(path, fenced) + commands_in_spans(path, "\n".join(prose))


def commands_in_yaml(path: Path) -> list[Documented]:
    """Comment lines (`#   mappa train ...`, continued with `\\`) and inline spans in comments."""
    comments = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if "#" in line:
            comments.append((number, line[line.index("#") + 1 :]))
    bare = [(n, text) for n, text in comments if "`" not in text]
    spans = [c for n, text in comments for c in commands_in_spans(path, text, n)]
    return commands_in_lines(path, bare) + spans


def commands_in_script(path: Path) -> list[Documented]:
    return commands_in_lines(path, list(enumerate(path.read_text().splitlines(), start=1)))


def documented_commands() -> list[Documented]:
    markdown = [
        REPO / "README.md",
        *sorted((REPO / "docs").rglob("*.md")),
        *sorted(REPO.glob("examples/**/*.md")),
    ]
    yaml_files = sorted(
        [*REPO.glob("examples/**/*.yaml"), *REPO.glob("configs/*.yaml"), *REPO.glob("deployments/*.yaml")]
    )
    found = [c for path in markdown for c in commands_in_markdown(path)]
    found += [c for path in yaml_files for c in commands_in_yaml(path)]
    found += [c for path in sorted(REPO.glob("scripts/*.sh")) for c in commands_in_script(path)]
    return found


COMMANDS = documented_commands()
LINES = [c for c in COMMANDS if not c.reference]
REFERENCES = [c for c in COMMANDS if c.reference]


def parse(command: Documented) -> argparse.Namespace:
    try:
        return build_parser().parse_args(list(command.argv))
    except SystemExit:
        pytest.fail(f"{command.where}: `{command.text}` does not parse (argv {list(command.argv)})")


def check(command: Documented) -> str:
    """What the test does with a command line beyond parsing: `validate` or `parse only: why`."""
    name = command.argv[0]
    if name in ("train", "rescore", "coach-check") or (
        name in ("resume", "retry") and "--set" in command.argv
    ):
        return "validate"
    return f"parse only: {PARSED_ONLY[name]}"


@pytest.fixture(scope="module")
def stand_in_run(tmp_path_factory) -> Run:
    """A run of configs/mathchat-cpu-demo.yaml (a local coach scoring by criteria), stored but never run."""
    root = tmp_path_factory.mktemp("runs")
    return Run.create(load_config(STAND_IN, [f"storage.root={root}"]), RUN_ID)


def verify(command: Documented, run: Run) -> None:
    """Parse `command`, then validate it as its `check` says (a failure names the doc's file and line)."""
    args = parse(command)
    if check(command) != "validate":
        return
    if args.command == "train":
        train_config(args)
    elif args.command == "rescore":
        check_rescore(run, args.name, list(args.set or []), args.fallbacks_only)
    elif args.command == "coach-check":  # its coaches' settings, as the command checks them first
        coach_configs(run, parse_coaches(args.coach))
    else:  # resume, retry: execution settings only
        changed = override_config(run.config, list(args.set), "the stand-in run's config.yaml")
        assert changed.config_hash() == run.config.config_hash(), (
            f"{command.where}: `{command.text}` changes a setting a resume refuses (it changes results)"
        )


@pytest.mark.parametrize("command", LINES, ids=lambda c: f"{c.where} {c.argv[0]}")
def test_a_documented_command_parses_and_validates(command, stand_in_run):
    verify(command, stand_in_run)


def test_a_broken_command_is_caught(stand_in_run):
    """The check fails where it should: an option that does not exist, a setting that does not validate,
    a re-scoring without its name, a resume that would change results."""
    broken = [
        ("train", "configs/mathchat-cpu.yaml", "--sett", "algo.beta=0.1"),
        ("train", "configs/mathchat-cpu.yaml", "--set", "coach.scorng=expected"),
        (
            "train",
            "configs/mathchat-cpu.yaml",
            "--set",
            "coach.type=outcome",
            "--set",
            "coach.scoring=criteria",
        ),
        ("rescore", RUN_ID, "--fallbacks-only"),
        ("resume", RUN_ID, "--set", "algo.beta=0.5"),
    ]
    for argv in broken:
        with pytest.raises((pytest.fail.Exception, ConfigError, AssertionError)):
            verify(Documented("test", " ".join(argv), argv), stand_in_run)


@pytest.mark.parametrize("command", REFERENCES, ids=lambda c: f"{c.where} {c.argv[0]}")
def test_a_command_named_in_prose_exists_with_its_options(command):
    subcommands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert command.argv[0] in subcommands.choices, f"{command.where}: no command `mappa {command.argv[0]}`"
    known = subcommands.choices[command.argv[0]]._option_string_actions
    options = [arg.split("=")[0] for arg in command.argv[1:] if arg.startswith("--")]
    unknown = [option for option in options if option not in known]
    assert not unknown, f"{command.where}: `{command.text}` names options mappa has not: {unknown}"


def test_the_docs_commands_were_found_and_most_are_validated():
    """Not vacuous: the extraction finds the docs' commands (counts as of this test's writing, with room),
    every file kind contributes, and the placeholders leave nothing that only parses by accident."""
    validated = [c for c in LINES if check(c) == "validate"]
    assert len(LINES) >= 35 and len(validated) >= 15 and len(REFERENCES) >= 20, (
        len(LINES),
        len(validated),
        len(REFERENCES),
    )
    sources = {c.where.split(":")[0] for c in LINES}
    assert {"README.md", "scripts/demo.sh", "examples/mappa-codepair/codepair-cpu.yaml"} <= sources
    assert any(s.startswith("configs/") for s in sources)
    for command in LINES:
        assert not {"RUN", "RUN_ID", "CONFIG", "$run_id", "<run"} & set(command.argv), command
    commands = {c.argv[0] for c in validated}
    assert {"train", "rescore", "resume"} <= commands
    assert any("coach.type=outcome" in c.argv for c in validated if c.argv[0] == "train")
    assert any("coach.type=openai" in c.argv for c in validated if c.argv[0] == "rescore")
