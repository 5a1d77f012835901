"""How a sandbox result reads in an agent's next prompt: status, trimmed stdout and stderr.

Shared by the envs whose agents run code (MathChat's Code Executor, every DSBench seat). Not covered: what
the coach sees of a tool result (`mappa.coach.prompt.render_tool`, which states its trimming for the coach).
"""

from __future__ import annotations

from mappa.core.types import ToolResult


def describe_result(result: ToolResult | None, limit: int = 600) -> str:
    """A short text of a sandbox result for the next prompt."""
    if result is None:
        return "(no program was run: no ```python block found)"
    if result.timed_out:
        return "(the program timed out)"
    parts = []
    if result.stdout.strip():
        parts.append(f"stdout:\n{clip(result.stdout, limit)}")
    if result.stderr.strip():
        parts.append(f"stderr:\n{clip(result.stderr, limit)}")
    if result.error:
        parts.append(f"sandbox: {result.error}")
    parts.append(f"exit status: {result.exit_code}")
    return "\n".join(parts)


def clip(text: str, limit: int = 1200) -> str:
    """`text` cut to `limit` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... trimmed {len(text) - limit} chars]"
