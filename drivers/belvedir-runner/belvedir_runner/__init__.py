"""The Belvedir Runner: a task list graded by an independent LLM judge, in one sandbox.

Standard library only (the sandbox is offline); the `belvedir` SDK traces it when installed.
See README.md and the platform's docs/tasks-format.md.
"""

__version__ = "1.0.0"
