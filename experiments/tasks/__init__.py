"""Tasks: what each benchmark task asks and how it is prompted, with specs and templates as data files."""
from experiments.tasks.prompts import PromptOptions, build_followup_request, build_prompt, build_request, fill_template
from experiments.tasks.specs import TASKS, TaskSpec, get_task

__all__ = ["PromptOptions", "build_followup_request", "TASKS", "TaskSpec", "build_prompt", "build_request", "fill_template", "get_task"]
