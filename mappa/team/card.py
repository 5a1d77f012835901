"""The team card of an export: `team.json` (the facts) and `TEAM.md` (the same for people), and a short
model card (`README.md`, with the hub's metadata) in each agent's folder.

What a card states: the run, the checkpoint and the iterations trained; the env; the seats in acting order
with their role prompts, the model each started from and how it trained (full weights, LoRA, frozen); the
coach (type, model, template or schedule, scoring, whether it saw the ground truth); the run's held-out
evaluations, and for the exported checkpoint its change over the base team with the 95% interval over
problems, gained and lost (`mappa.stages.evaluate.evaluation_change`); and a licence note for each model.
Licences of the models mappa prepares come from `mappa.models.prepare.KNOWN_MODELS`; any other model
is named as one whose licence the user must check.

Not covered: evaluations on other problem files (`mappa evaluate --eval-data`; `mappa inspect RUN
--evaluations` shows them), and training curves (the run's `history.parquet`).
"""

from __future__ import annotations

import time
from typing import Any

import mappa
from mappa.storage.run import TIME_FORMAT, Run, iteration_label
from mappa.team.checkpoint import BASE, base_model_path, seats_in_order, trainable_seats

UNKNOWN_LICENCE = "not a model mappa prepares: check its own licence (its model card or folder)"


def licence_note(spec: str) -> str:
    """Where model `spec` (an agent's or the coach's `model`) comes from and under which licence."""
    from mappa.models.prepare import KNOWN_MODELS

    known = KNOWN_MODELS.get(spec)
    if known is None:
        return UNKNOWN_LICENCE
    return f"{known.description}, by mappa (`mappa models prepare {spec}`); licence: {known.license}"


def team_facts(run: Run, iteration: int, dtype: str) -> dict[str, Any]:
    """Everything `team.json` holds about the export of checkpoint `iteration` (-1: the base team)."""
    from mappa.stages.stage import completed_iterations

    config = run.config
    exported = set(trainable_seats(run))
    seats = [
        {
            "seat": name,
            "role": role_of(run, name),
            "folder": name if name in exported else None,
            "trained": training_of(agent, iteration),
            "base_model": agent.model,
            "base_model_path": base_model_path(agent),
            "max_new_tokens": agent.max_new_tokens or config.rollout.max_new_tokens,
        }
        for name, agent in ((name, config.agents[name]) for name in seats_in_order(run))
    ]
    return {
        "run_id": run.run_id,
        "run": run.store.url(run.run_id),
        "config_hash": config.config_hash(),
        "checkpoint": iteration_label(iteration),
        "iteration": iteration,
        "iterations_trained": iteration + 1,
        "iterations_finished": completed_iterations(run),
        "dtype": dtype,
        "exported_at": time.strftime(TIME_FORMAT, time.gmtime()),
        "mappa_version": mappa.__version__,
        "env": config.env.model_dump(mode="json"),
        "seats": seats,
        "coach": coach_facts(run),
        "held_out": held_out_facts(run, iteration),
        "licences": licence_facts(run),
    }


def role_of(run: Run, seat: str) -> str:
    return run.config.env_spec.roles[seat]


def training_of(agent, iteration: int) -> str:
    if not agent.trainable:
        return "frozen (not exported: it acts with its base model)"
    if iteration == BASE:
        return "not trained (the base team)"
    if agent.lora is not None:
        return f"LoRA rank {agent.lora.rank} (alpha {agent.lora.alpha:g}), merged into the base weights"
    return "full weights"


def coach_facts(run: Run) -> dict[str, Any]:
    coach = run.config.coach
    return {
        "type": coach.type,
        "model": coach.model if coach.is_llm else None,
        "template": coach.template if coach.reads_template else None,
        "schedule": [phase.model_dump() for phase in coach.schedule] if coach.reads_template else [],
        "scoring": coach.scoring if coach.runs_local_model else None,
        "use_ground_truth": coach.use_ground_truth,
    }


def held_out_facts(run: Run, iteration: int) -> dict[str, Any]:
    """The run's held-out evaluations, the exported checkpoint's and the base team's, and the change."""
    from mappa.stages.evaluate import evaluation_change, evaluation_summaries, finished_evaluations

    rows = evaluation_summaries(run)
    evaluated = finished_evaluations(run)
    by_label = {row["evaluation"]: row for row in rows}
    facts: dict[str, Any] = {
        "problems_from": run.config.env.eval_data,
        "evaluations": rows,
        "exported": by_label.get(iteration_label(iteration)),
        "base": by_label.get(iteration_label(BASE)),
        "change": None,
        "missing": [],
    }
    if iteration not in evaluated and iteration != BASE:
        facts["missing"].append(
            f"checkpoint {iteration_label(iteration)} was not evaluated: "
            f"mappa evaluate {run.run_id} --iteration {iteration}"
        )
    if BASE not in evaluated:
        facts["missing"].append(
            f"the base team was not evaluated: mappa evaluate {run.run_id} --iteration -1"
        )
    if iteration != BASE and {iteration, BASE} <= set(evaluated):
        facts["change"] = evaluation_change(run, BASE, iteration)
    return facts


def licence_facts(run: Run) -> list[dict[str, Any]]:
    """One note per model the team (and an LLM coach) uses, with who uses it."""
    users: dict[str, list[str]] = {}
    for name in seats_in_order(run):
        users.setdefault(run.config.agents[name].model, []).append(name)
    coach = run.config.coach
    if coach.is_llm:
        users.setdefault(coach.model, []).append("coach")
    return [{"model": spec, "used_by": who, "note": licence_note(spec)} for spec, who in users.items()]


def render_team_card(facts: dict[str, Any]) -> str:
    """TEAM.md: the facts of `team_facts` for people."""
    lines = [
        f"# Team of run {facts['run_id']}, checkpoint {facts['checkpoint']}",
        "",
        f"Exported by mappa {facts['mappa_version']} at {facts['exported_at']} from {facts['run']} "
        f"(config hash {facts['config_hash']}); weights in {facts['dtype']}, no optimizer state.",
        "",
        f"Iterations trained: {facts['iterations_trained']} (the run finished "
        f"{facts['iterations_finished']}). Env: `{facts['env']['type']}`, trained on "
        f"`{facts['env']['train_data']}`, held out `{facts['env']['eval_data']}`.",
        "",
        "## Seats, in acting order",
        "",
    ]
    for number, seat in enumerate(facts["seats"], start=1):
        folder = f"`{seat['folder']}/`" if seat["folder"] else "no folder"
        lines += [
            f"{number}. **{seat['seat']}** ({folder}): started from `{seat['base_model']}`; "
            f"{seat['trained']}; at most {seat['max_new_tokens']} new tokens per action.",
            f"   Role prompt: {seat['role']}",
        ]
    lines += ["", "## Coach", "", coach_line(facts["coach"]), "", "## Held-out results", ""]
    lines += held_out_lines(facts["held_out"])
    lines += ["", "## Licences", ""]
    lines += [
        f"- `{item['model']}` ({', '.join(item['used_by'])}): {item['note']}" for item in facts["licences"]
    ]
    lines += ["", "The exported weights are finetunes of these models and carry their licence terms."]
    return "\n".join(lines) + "\n"


def coach_line(coach: dict[str, Any]) -> str:
    parts = [f"type `{coach['type']}`"]
    if coach["model"]:
        parts.append(f"model `{coach['model']}`")
    if coach["template"]:
        parts.append(f"template `{coach['template']}`")
    if coach["schedule"]:
        phases = ", ".join(f"{p['template']} until {p['until']}" for p in coach["schedule"])
        parts.append(f"schedule {phases}")
    if coach["scoring"]:
        parts.append(f"scoring `{coach['scoring']}`")
    seen = (
        "saw the ground truth (reference answer)" if coach["use_ground_truth"] else "never saw ground truth"
    )
    return f"The coach scored every action 0-10: {', '.join(parts)}; it {seen}."


def held_out_lines(held_out: dict[str, Any]) -> list[str]:
    """The evaluations as a table, then the exported checkpoint's change over the base per kind."""
    lines = [f"Greedy, on the run's held-out problems (`{held_out['problems_from']}`).", ""]
    if held_out["evaluations"]:
        lines += ["| evaluation | problems | success |", "|---|---|---|"]
        lines += [
            f"| {row['evaluation']} | {row['problems']} | {row['success']:.1%} |"
            for row in held_out["evaluations"]
        ]
        lines.append("")
    else:
        lines.append("The run has no held-out evaluation.")
    for row in held_out["change"] or []:
        low, high = row["ci95"]
        lines.append(
            f"- {row['kind']}: base {row['before']}/{row['problems']} -> {row['after']}/{row['problems']} "
            f"right, change {100 * row['change']:+.1f} points [95% interval {100 * low:+.1f}, "
            f"{100 * high:+.1f}], gained {row['gained']}, lost {row['lost']}"
            + (" (significantly worse)" if row["worse"] else "")
        )
    lines += [f"- Not stated: {text}" for text in held_out["missing"]]
    return lines


def render_agent_readme(facts: dict[str, Any], seat: dict[str, Any]) -> str:
    """An agent folder's model card (README.md), with the metadata a model hub reads."""
    licence = next(item["note"] for item in facts["licences"] if seat["seat"] in item["used_by"])
    tag = "apache-2.0" if "licence: Apache-2.0" in licence else "other"
    return (
        f"---\nlicense: {tag}\nlibrary_name: transformers\npipeline_tag: text-generation\n"
        "tags: [mappa]\n---\n\n"
        f"# {facts['run_id']} / {seat['seat']} ({facts['checkpoint']})\n\n"
        f"The **{seat['seat']}** of a `{facts['env']['type']}` team trained by mappa: {seat['trained']}, "
        f"from `{seat['base_model']}`. Its role prompt (the system message it was trained with):\n\n"
        f"> {seat['role']}\n\nThe team, its coach and its held-out results: ../TEAM.md.\n\n"
        f"Licence: {licence}.\n"
    )
