"""The coach: scores every action of a trajectory 0-10 (docs/architecture.md).

`build_coach(config)` gives a `Coach` (openai, local or rubric); `score_trajectories` renders one request
per action (`build_requests`, templates in `templates/`), scores them and checks alignment;
`coach_bias_report` says whether scores track outcomes. Files: prompt (templates, requests), parse (the
score line), base (ask / re-ask / fallback), openai, local, rubric (backends; a rubric's rules are its
env's), outage (an endpoint's outage clock), build, score, bias.

Not covered here: caching coach answers and writing score artifacts (the score stage).
"""

from mappa.coach.base import Coach, CoachError, CoachOutageError, CoachUnavailableError, LLMCoach
from mappa.coach.build import build_coach
from mappa.coach.local import LocalCoach
from mappa.coach.openai import OpenAICoach
from mappa.coach.parse import parse_score
from mappa.coach.prompt import (
    CoachRequest,
    PromptTemplate,
    available_templates,
    build_requests,
    load_template,
)
from mappa.coach.rubric import RubricCoach
from mappa.coach.score import build_all_requests, score_trajectories
from mappa.coach.score_agreement import coach_bias_report

__all__ = [
    "Coach",
    "CoachError",
    "CoachOutageError",
    "CoachRequest",
    "CoachUnavailableError",
    "LLMCoach",
    "LocalCoach",
    "OpenAICoach",
    "PromptTemplate",
    "RubricCoach",
    "available_templates",
    "build_all_requests",
    "build_coach",
    "build_requests",
    "coach_bias_report",
    "load_template",
    "parse_score",
    "score_trajectories",
]
