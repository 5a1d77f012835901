"""The coach: scores every action of a trajectory 0-10 (docs/architecture.md, docs/coaches.md).

A coach type is one module declaring a `CoachSpec` (`spec`: what it needs, how it is built), found by
`coach.type` in `registry` (built-ins, the entry-point group `mappa.coaches`, or an import path); `build`
builds the configured one. The built-ins: `local` (an engine of the run; `expected` and `criteria` score
from its token probabilities), `openai` (an endpoint; `outage` keeps its outage clock), `rubric` (the env's
rules) and `outcome`. `score` renders one request per action (`prompt`, templates in `templates/`), scores
them and checks alignment; `base` holds the ask / re-ask / fallback logic of the LLM coaches, `parse` the
score line, `cache` their answers; `score_agreement` says whether scores track outcomes.

Import from the modules; this package's `__init__` imports nothing, so that the config can look a coach
type up in the registry without loading the coaches.

Not covered here: writing score artifacts (the score stage).
"""
