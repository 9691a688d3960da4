"""DABstep's leaderboard submission (`dabstep-submission`): JSON Lines `{task_id, agent_answer,
reasoning_trace?}`, our own DABstep lines (`reasoning_trace` ignored), so read line by line as ours."""

from __future__ import annotations

from ..core.published import PublishedFormat, Sample


def recognizes(sample: Sample) -> bool:
    lines = not sample.text_start.startswith("[")  # JSON Lines, not a list
    return lines and '"agent_answer"' in sample.first_line and '"task_id"' in sample.first_line


DABSTEP_SUBMISSION = PublishedFormat("dabstep-submission", recognizes)
